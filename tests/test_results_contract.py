"""One contract for results.json: the run reads back every document it writes with the reader every command
uses (results_reader.read_results). A document that reader refuses is a bug of ours: the file is kept (its
rows are the run's), one `ERROR: llmeval:` line names it and the problem, it stays out of the history, and
the run exits with pytest's internal-error status, serially and under xdist alike.

(Every end-to-end test's own documents are read back too: tests/conftest.py's autouse fixture.)
"""

from __future__ import annotations

import json

import pytest
from helpers import jsonl, row

from pytest_llmeval.cli import main as cli
from pytest_llmeval.history import HISTORY_DIR

# A conftest that makes the recorder build a document with a bug of ours in it: a row's tags a string, not
# a list (the LocoLLM schema does not look at rows; the reader does). Restored at unconfigure: pytester runs
# it in this process.
DAMAGING_CONFTEST = """
from pytest_llmeval.recorder import Recorder

_document = Recorder.document


def _damaged(self, **kwargs):
    document = _document(self, **kwargs)
    document["benchmarks"][0]["rows"][0]["tags"] = "edge"
    return document


def pytest_configure(config):
    Recorder.document = _damaged


def pytest_unconfigure(config):
    Recorder.document = _document
"""


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_document_the_reader_refuses_is_caught_when_it_is_written(
    pytester: pytest.Pytester, capsys: pytest.CaptureFixture[str], workers: list[str]
) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(DAMAGING_CONFTEST)
    pytester.makefile(".jsonl", bench=jsonl([row("r1", expected="a"), row("r2", expected="b")]))
    (pytester.path / "preds.txt").write_text(
        jsonl([{"id": "r1", "prediction": "a"}, {"id": "r2", "prediction": "b"}])
    )
    result = pytester.runpytest(
        "--llmeval-predictions=preds.txt", "-m", "not gate", "-p", "no:cacheprovider", *workers
    )
    path = pytester.path / "results.json"
    assert result.ret == pytest.ExitCode.INTERNAL_ERROR
    assert (
        f"ERROR: llmeval: results.json written to {path} is refused by pytest-llmeval's own reader: not a "
        'results.json (benchmarks[0].rows[0].tags is "edge", not a list of strings); the file is kept as '
        "written. This is a bug in pytest-llmeval: please report it"
    ) in result.outlines
    # Kept, every row in it: a bug of ours must not cost the run.
    document = json.loads(path.read_text(encoding="utf-8"))
    assert [r["id"] for r in document["benchmarks"][0]["rows"]] == ["r1", "r2"]
    # Out of the history: every later run would pass over it (baselines, `history`, `view`).
    assert not list((pytester.path / HISTORY_DIR).glob("*.json"))
    # What a user's next command says of it.
    capsys.readouterr()
    assert cli(["check", str(path)]) == 2
    assert "not a list of strings" in capsys.readouterr().err
    path.unlink()  # the conftest's read-back of every results.json left behind would refuse it too
