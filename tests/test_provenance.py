"""Provenance: per model, the backend, the tokenizer's BOS/EOS handling and chat template hash, and the Hub
revision; comparing runs made on different backends carries a warning."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path

import pytest
from helpers import jsonl, row

from pytest_llmeval import history
from pytest_llmeval.models import revision_of

pytest_plugins = ["pytester"]


def test_the_hub_revision_is_read_from_the_snapshot_folder(tmp_path: Path) -> None:
    commit = "0123456789abcdef0123456789abcdef01234567"
    folder = tmp_path / "models--org--name" / "snapshots" / commit
    folder.mkdir(parents=True)
    assert revision_of(folder) == commit
    assert revision_of(tmp_path) is None
    (tmp_path / "snapshots" / "not-a-commit").mkdir(parents=True)
    assert revision_of(tmp_path / "snapshots" / "not-a-commit") is None


def test_models_say_how_they_were_prompted(
    pytester: pytest.Pytester, tiny_model: Path, tiny_adapter: Path
) -> None:
    from transformers import AutoTokenizer

    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row("r", evaluation_config={"max_new_tokens": 2})]))
    pytester.runpytest(
        f"--base-model={tiny_model}", f"--adapter={tiny_adapter}", "bench.jsonl", "-m", "not gate"
    )
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["inference_config"]["backend"] == "transformers"
    tokenizer = AutoTokenizer.from_pretrained(tiny_model)
    template = hashlib.sha256(str(tokenizer.chat_template).encode()).hexdigest()
    for entry in doc["models"]:
        assert entry["backend"] == "transformers"
        assert entry["revision"] is None  # a folder of our own, not a Hub download
        assert entry["tokenizer"] == {
            "adds_bos": False,  # SmolLM2's tokenizer starts no encoding with a BOS token
            "bos_token": tokenizer.bos_token,
            "eos_token": "<|im_end|>",
            "pad_token": tokenizer.pad_token,
            "chat_template_sha256": template,
            "vocab_size": len(tokenizer),
            "source": "model",  # the adapter ships no tokenizer: both columns use the base's
        }


def test_comparing_runs_of_two_backends_warns(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makeini("[pytest]\n")
    pytester.makefile(".jsonl", bench=jsonl([row("r")]))
    pytester.makefile(".jsonl", preds=json.dumps({"id": "r", "prediction": "hello"}))
    pytester.runpytest("--llmeval-predictions=preds.jsonl", "bench.jsonl", "-m", "not gate")
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["inference_config"]["backend"] == "predictions"
    served = copy.deepcopy(doc)
    served["inference_config"]["backend"] = "endpoint"
    a, b = history.Run(1, tmp_path / "a.json", doc), history.Run(2, tmp_path / "b.json", served)
    assert any(
        line.startswith("warning: A ran on backend predictions, B on endpoint")
        for line in history.diff_lines(a, b)
    )
    assert not any(line.startswith("warning:") for line in history.diff_lines(a, history.Run(2, b.path, doc)))
