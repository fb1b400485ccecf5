"""An adapter that ships its own tokenizer is evaluated with it, as it was trained: an adapter that added a
token gets embeddings grown to its tokenizer (peft's AutoPeftModelForCausalLM does the same), one with its
own chat template gets its prompts built with that template, and every other column keeps the base's.

The reference is peft's own loader with the adapter's tokenizer (own_tokenizer.reference_outputs): a run
whose adapter column equals it, while the base column equals the plain base, used each tokenizer where it
belongs. Prompting either adapter with the base's tokenizer gives other outputs (own_tokenizer's checks)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from helpers import jsonl, model_args, row
from own_tokenizer import (
    ADDED_TOKEN,
    TEMPLATE_NO_TOKEN,
    base_outputs,
    build_token_adapter,
    reference_outputs,
)

pytest_plugins = ["pytester"]

QUESTIONS = ["What is 2+3?", "What is 7*6?", "Name a colour."]
TOKENS = 6


@pytest.fixture(scope="module")
def calc(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA that added ADDED_TOKEN (its tokenizer has one token more than the base's embeddings)."""
    return build_token_adapter(tiny_model, tmp_path_factory.mktemp("calc") / "calc")


@pytest.fixture(scope="module")
def plain(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A LoRA with the base's vocabulary and a chat template of its own."""
    return build_token_adapter(
        tiny_model,
        tmp_path_factory.mktemp("plain") / "plain",
        add_token=False,
        template=TEMPLATE_NO_TOKEN,
        name="plain",
    )


def rows_file(pytester: pytest.Pytester) -> None:
    config = {"max_new_tokens": TOKENS}
    pytester.makefile(
        ".jsonl",
        bench=jsonl([row(f"q{i}", instruction=q, evaluation_config=config) for i, q in enumerate(QUESTIONS)]),
    )


def outputs(doc: dict[str, Any], column: str) -> list[str]:
    rows = sorted(doc["benchmarks"][0]["rows"], key=lambda r: r["id"])
    return [r["models"][column]["output"] for r in rows]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_each_column_is_prompted_with_its_own_tokenizer(
    pytester: pytest.Pytester, tiny_model: Path, calc: Path, plain: Path, workers: list[str]
) -> None:
    rows_file(pytester)
    result = pytester.runpytest(
        *model_args(tiny_model), f"--adapter={calc}", f"--adapter={plain}", "--llmeval-batch-size=2", *workers
    )
    result.assert_outcomes(failed=len(QUESTIONS))  # a random model answers nothing right
    doc = json.loads((pytester.path / "results.json").read_text())
    assert outputs(doc, "calc") == reference_outputs(calc, QUESTIONS, TOKENS)
    assert outputs(doc, "plain") == reference_outputs(plain, QUESTIONS, TOKENS)
    assert outputs(doc, "base") == base_outputs(tiny_model, QUESTIONS, TOKENS)
    tokenizers = {m["column"]: m["tokenizer"] for m in doc["models"]}
    assert tokenizers["base"]["source"] == "model" and tokenizers["base"]["vocab_size"] == 49152
    assert tokenizers["calc"]["source"] == "adapter" and tokenizers["calc"]["vocab_size"] == 49153
    assert tokenizers["plain"]["source"] == "adapter" and tokenizers["plain"]["vocab_size"] == 49152
    # Three templates, three hashes: results.json says which prompts each column was given.
    assert len({t["chat_template_sha256"] for t in tokenizers.values()}) == 3


def test_measured_rows_use_the_adapters_tokenizer_too(
    pytester: pytest.Pytester, tiny_model: Path, calc: Path, plain: Path
) -> None:
    """Multiple-choice rows are scored after the prompt each column was trained with: the adapter with its
    own template reads different log-likelihoods than the same weights prompted with the base's."""
    choice = {"choices": ["red", "blue", "five"]}
    pytester.makefile(
        ".jsonl",
        bench=jsonl(
            [
                row(
                    f"c{i}",
                    instruction=q,
                    expected="five",
                    evaluation_type="multiple_choice",
                    evaluation_config=choice,
                )
                for i, q in enumerate(QUESTIONS)
            ]
        ),
    )
    args = [*model_args(tiny_model), "--llmeval-results=own.json"]
    pytester.runpytest(*args, f"--adapter={calc}", f"--adapter={plain}")
    own = json.loads((pytester.path / "own.json").read_text())
    # The same LoRA weights without its tokenizer files: prompted with the base's template.
    bare = pytester.path / "bare"
    bare.mkdir()
    for name in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy(plain / name, bare / name)
    (bare / "metadata.json").write_text(json.dumps({"name": "plain"}))
    pytester.runpytest(*model_args(tiny_model), "--llmeval-results=bare.json", f"--adapter={bare}")
    bare_doc = json.loads((pytester.path / "bare.json").read_text())

    def likelihoods(doc: dict[str, Any], column: str) -> list[Any]:
        rows = sorted(doc["benchmarks"][0]["rows"], key=lambda r: r["id"])
        assert all(r["error"] is None for r in rows), [r["error"] for r in rows]
        return [r["models"][column]["score"]["scores"] for r in rows]

    assert likelihoods(own, "plain") != likelihoods(bare_doc, "adapter")
    assert likelihoods(own, "base") == likelihoods(bare_doc, "base")  # the base's prompts did not change
    assert likelihoods(own, "calc") != likelihoods(own, "base")


def test_the_llm_fixture_generates_with_the_adapters_tokenizer(
    pytester: pytest.Pytester, tiny_model: Path, calc: Path
) -> None:
    (pytester.path / "expected.json").write_text(json.dumps(reference_outputs(calc, QUESTIONS, TOKENS)))
    pytester.makepyfile(
        f"""
        import json

        def test_generate(llm, llm_base):
            expected = json.load(open("expected.json"))
            assert llm.generate({QUESTIONS!r}, max_new_tokens={TOKENS}) == expected
            assert llm_base.generate({QUESTIONS!r}, max_new_tokens={TOKENS}) != expected
            assert len(llm.loaded.tokenizer) == len(llm_base.loaded.tokenizer) + 1
        """
    )
    pytester.runpytest(*model_args(tiny_model), f"--adapter={calc}", "-p", "no:randomly").assert_outcomes(
        passed=1
    )


def test_a_copy_of_the_base_tokenizer_changes_nothing(
    tiny_model: Path, tiny_adapter: Path, tmp_path: Path
) -> None:
    """Trainers save the tokenizer beside every adapter: a copy of the base's is no tokenizer of its own."""
    from pytest_llmeval.models import adapter_tokenizer, load_tokenizer

    adapter = tmp_path / "adapter"
    shutil.copytree(tiny_adapter, adapter)
    base = load_tokenizer(tiny_model)
    assert adapter_tokenizer(adapter, base) is None
    base.save_pretrained(adapter)
    assert adapter_tokenizer(adapter, base) is None
    # A chat template alone, without tokenizer files: the base's tokenizer with that template.
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (adapter / name).unlink()
    (adapter / "chat_template.jinja").write_text(TEMPLATE_NO_TOKEN)
    own = adapter_tokenizer(adapter, base)
    assert own is not None and own.chat_template == TEMPLATE_NO_TOKEN and len(own) == len(base)
    assert base.chat_template != TEMPLATE_NO_TOKEN  # the base's own tokenizer is left alone


def test_an_added_token_adapter_passes_the_architecture_check(tiny_model: Path, calc: Path) -> None:
    from pytest_llmeval.models import check_adapter_fits, load_tokenizer

    check_adapter_fits(calc, str(tiny_model))  # trainable_token_indices rows are no foreign module
    assert load_tokenizer(calc)(ADDED_TOKEN, add_special_tokens=False)["input_ids"] == [49152]


def test_a_changed_template_regenerates_that_adapter_only(
    pytester: pytest.Pytester, tiny_model: Path, plain: Path, tmp_path: Path
) -> None:
    """The generation cache keys an adapter by its tokenizer files too: edit its template, and its column
    is generated again while the base's outputs are served."""
    adapter = tmp_path / "plain"
    shutil.copytree(plain, adapter)
    rows_file(pytester)
    args = model_args(tiny_model, adapter, cache=tmp_path / "cache")
    pytester.runpytest(*args, "--llmeval-results=first.json")
    (adapter / "chat_template.jinja").write_text(TEMPLATE_NO_TOKEN.replace("short number", "word"))
    pytester.runpytest(*args, "--llmeval-results=second.json")
    first, second = (json.loads((pytester.path / n).read_text()) for n in ("first.json", "second.json"))
    cache = second["inference_config"]["cache"]
    assert (cache["hits"], cache["misses"]) == ({"base": 3, "adapter": 0}, {"base": 0, "adapter": 3})
    assert outputs(first, "base") == outputs(second, "base")
    assert outputs(first, "adapter") != outputs(second, "adapter")


@pytest.mark.slow
def test_real_smollm2_with_an_added_token_matches_peft(pytester: pytest.Pytester, tmp_path: Path) -> None:
    """End to end on the embedded SmolLM2-135M-Instruct: an adapter that added a token and ships its
    tokenizer and template generates exactly what peft's AutoPeftModelForCausalLM generates with it."""
    from pytest_llmeval.models import embedded_model_dir

    base = embedded_model_dir()
    adapter = build_token_adapter(base, tmp_path / "calc")
    rows_file(pytester)
    result = pytester.runpytest(
        "-p", "no:cacheprovider", "--llmeval-no-cache", "-m", "not gate", f"--adapter={adapter}"
    )
    assert result.ret in (0, 1)
    doc = json.loads((pytester.path / "results.json").read_text())
    assert outputs(doc, "adapter") == reference_outputs(adapter, QUESTIONS, TOKENS)
    assert outputs(doc, "base") == base_outputs(base, QUESTIONS, TOKENS)
    assert outputs(doc, "adapter") != outputs(doc, "base")
