"""Validating a results.json document against the LocoLLM standard's schema (copied into tests/schemas)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

# A copy, so that neither the project nor its tests read anything outside the repository.
SCHEMA_PATH = Path(__file__).resolve().parent / "schemas" / "locollm-results.schema.json"
_SCHEMA: dict[str, Any] = json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))
Draft202012Validator.check_schema(_SCHEMA)
_VALIDATOR = Draft202012Validator(_SCHEMA)


# README: "A run in which the in-domain benchmark has no scored row at all (every row errored or skipped)
# cannot [conform]: the standard needs the base's score." These are the violations such a run makes.
UNSCORED = {
    f"{block}/{score}"
    for block in ("results", "current_version")
    for score in ("adapter_score", "base_model_score")
}


def validate_locollm(document: Mapping[str, Any], *, unscored_top_level: bool = False) -> None:
    """Raise AssertionError listing every way `document` breaks the LocoLLM results.json schema.

    unscored_top_level: a document whose top-level benchmark has no scored row may leave exactly the
    UNSCORED scores null (the documented limitation), and nothing else.
    """
    errors = sorted(_VALIDATOR.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if unscored_top_level and _unscored(document):
        errors = [
            e for e in errors if not ("/".join(map(str, e.absolute_path)) in UNSCORED and e.instance is None)
        ]
    if errors:
        lines = [f"  {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
        raise AssertionError(f"{len(errors)} LocoLLM schema violation(s):\n" + "\n".join(lines))


def _unscored(document: Mapping[str, Any]) -> bool:
    """Whether the document's top-level benchmark has rows and not one of them was scored."""
    results = document.get("results") or {}
    n = document.get("n_examples") or 0
    return n > 0 and results.get("n_errors", 0) + results.get("n_skipped", 0) == n
