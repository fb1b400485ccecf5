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


def validate_locollm(document: Mapping[str, Any]) -> None:
    """Raise AssertionError listing every way `document` breaks the LocoLLM results.json schema."""
    errors = sorted(_VALIDATOR.iter_errors(document), key=lambda e: list(map(str, e.absolute_path)))
    if errors:
        lines = [f"  {'/'.join(map(str, e.absolute_path)) or '(top)'}: {e.message}" for e in errors]
        raise AssertionError(f"{len(errors)} LocoLLM schema violation(s):\n" + "\n".join(lines))
