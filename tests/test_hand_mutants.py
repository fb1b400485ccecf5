"""The hand-made mutants stay true: each one's text is still in its file exactly once.

`tools/hand_mutants.py` refuses a mutant whose text is missing, but only when someone runs it: a refactor
that moves the text would retire the mutant silently (the `sides-swapped` mutant did, for an issue's worth
of commits). This fast check fails the suite instead, and names the mutant to re-anchor.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import REPO, load_script

MUTANTS = load_script(REPO / "tools" / "hand_mutants.py", "hand_mutants").MUTANTS


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_text_occurs_exactly_once(mutant: Any) -> None:
    found = (REPO / mutant.file).read_text(encoding="utf-8").count(mutant.old)
    assert found == 1, (
        f"{mutant.name}: its text is in {mutant.file} {found} times, not once: "
        "re-anchor it in tools/hand_mutants.py"
    )
    assert mutant.old != mutant.new


@pytest.mark.parametrize("mutant", MUTANTS, ids=[m.name for m in MUTANTS])
def test_each_mutant_names_tests_that_exist(mutant: Any) -> None:
    for test in mutant.tests:  # type: ignore[attr-defined]
        path, _, name = test.partition("::")
        assert (REPO / path).is_file(), f"{mutant.name}: {path} does not exist"
        if name:
            assert f"def {name}(" in (REPO / path).read_text(encoding="utf-8"), (
                f"{mutant.name}: no test {name} in {path}"
            )
