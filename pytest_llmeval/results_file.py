"""results.json's text (indented, each row on one line of its own) and the atomic writes of the run's files.

Pure: no pytest, no torch.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pytest_llmeval.inputs import write_bytes_atomic

# One row of a `rows` list per line. Python's JSON writer has no C path for indented output (it fell back
# to the pure-Python encoder: about 1 s at 10,000 rows), while the compact writer is C; rows are also what a
# diff of two results.json files is read by, and a row on one line diffs as one line.
_ONE_LINE = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(", ", ": "))
_INDENT = "  "


def document_text(document: Mapping[str, Any]) -> str:
    """A results document as results.json holds it: UTF-8 JSON indented by two spaces, except that each
    element of a `rows` list is on one line of its own; one trailing newline.

    Strict JSON (allow_nan=False): NaN and Infinity are not JSON, and strict parsers (JavaScript's
    JSON.parse, jq) refuse a file holding them. A non-finite value that reaches here is a bug where it
    entered: the ValueError makes the end of the run save its rows and say so (hooks.reporting._rescue)."""
    parts: list[str] = []
    _write_indented(document, 0, parts, rows=False)
    parts.append("\n")
    return "".join(parts)


def _write_indented(value: Any, level: int, parts: list[str], *, rows: bool) -> None:
    """Append `value`'s text at indent `level`; `rows`: a list whose elements go one per line, compact."""
    if isinstance(value, Mapping) and value:
        inner = "\n" + _INDENT * (level + 1)
        parts.append("{")
        for index, (key, item) in enumerate(value.items()):
            # A key that is not a string is named as json.dumps names it (True -> "true", 1 -> "1").
            name = key if isinstance(key, str) else _ONE_LINE.encode(key)
            parts.append(("," if index else "") + inner + _ONE_LINE.encode(name) + ": ")
            _write_indented(item, level + 1, parts, rows=key == "rows")
        parts.append("\n" + _INDENT * level + "}")
    elif isinstance(value, list | tuple) and value:
        inner = "\n" + _INDENT * (level + 1)
        parts.append("[")
        for index, item in enumerate(value):
            parts.append(("," if index else "") + inner)
            if rows:
                parts.append(_ONE_LINE.encode(item))
            else:
                _write_indented(item, level + 1, parts, rows=False)
        parts.append("\n" + _INDENT * level + "]")
    else:
        parts.append(_ONE_LINE.encode(value))


def write_atomic(path: Path, document: Mapping[str, Any]) -> None:
    """Write JSON atomically (write_text_atomic)."""
    write_text_atomic(path, document_text(document))


def write_text_atomic(path: Path, text: str) -> None:
    """Write UTF-8 text atomically, with the mode a new or replaced file should have (write_bytes_atomic)."""
    write_bytes_atomic(path, text.encode("utf-8"))
