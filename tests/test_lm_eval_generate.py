"""lm-eval's generate_until tasks as benchmark rows (GSM8K): `convert lm-eval gsm8k` writes the requests
lm-eval 0.4.13 builds, and a run of them on the embedded model generates, filters and scores as lm-eval does.

The oracle is lm-eval itself: `simple_evaluate` with its `hf` model on the same fp32 folder, the same task on
the same local data files (tests/data/lm_eval/gsm8k/, in openai/gsm8k's schema), `log_samples` on, as
`make lm-eval-logs` recorded it (batches of 8). Every row's prompt and stop strings, its generated text, each
filter's answer and exact match, and the task's aggregates must be identical. The filters and the metric are
also checked against lm-eval's own classes and function on many inputs, and the served path against a
vLLM-format server on 127.0.0.1.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from lm_eval_checks import convert, lm_eval_imported  # noqa: F401 (an autouse fixture)

from pytest_llmeval.cli import main as cli_main
from pytest_llmeval.results_reader import read_results
from pytest_llmeval.scorers import lm_eval_exact_match as scorer

pytestmark = pytest.mark.slow

DATA = Path(__file__).parent / "data" / "lm_eval" / "gsm8k"
GSM8K = [f"--data-files=test={DATA / 'test.jsonl'}", f"--data-files=train={DATA / 'train.jsonl'}"]
LOGS = DATA.parent / "logs"
DOCUMENTS = 25  # the test split's, every one compared
FILTERS = ("strict-match", "flexible-extract")
RUN = ("bench/gsm8k.jsonl", "-m", "not gate", "--llmeval-no-history", "-p", "no:randomly")


def rows_of(path: Path) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for b in read_results(path)["benchmarks"] for r in b["rows"]}


@pytest.fixture(scope="module")
def lm_eval_gsm8k() -> tuple[dict[tuple[int, str], dict[str, Any]], dict[str, Any]]:
    """lm-eval's own run of gsm8k, 5-shot, as `make lm-eval-logs` recorded it (tests/data/lm_eval/logs/;
    tests/test_lm_eval_tasks.py checks live that the recordings are what lm-eval does): {(doc_id, filter):
    its logged sample, its metrics beside}, and the task's aggregate results."""
    document = json.loads((LOGS / "gsm8k-5shot.json").read_text(encoding="utf-8"))
    samples = {
        (int(s["doc_id"]), str(s["filter"])): {**s, **s["metrics"]} for s in document["samples"]["gsm8k"]
    }
    return samples, document["results"]["gsm8k"]


def test_gsm8k_generates_filters_and_scores_as_lm_eval(
    pytester: pytest.Pytester, lm_eval_gsm8k: tuple[dict[tuple[int, str], dict[str, Any]], dict[str, Any]]
) -> None:
    samples, aggregate = lm_eval_gsm8k
    rows = convert(pytester.path / "bench", "gsm8k", *GSM8K, "--num-fewshot=5")
    assert len(rows) == DOCUMENTS == len({doc for doc, _ in samples})
    # The rows carry the very requests lm-eval sent: the context, its stop strings, its token limit.
    for row in rows:
        config = row["evaluation_config"]
        sample = samples[(config["lm_eval"]["doc_id"], FILTERS[0])]
        [(context, kwargs)] = sample["arguments"]
        assert context == row["input"]
        assert kwargs["until"] == config["until"] == ["Question:", "</s>", "<|im_end|>"]
        assert config["max_new_tokens"] == kwargs.get("max_gen_toks", 256) == 256
        assert row["expected_output"] == sample["target"]
    # Two workers: each row generated in its own worker's batches (the served test below runs serially).
    result = pytester.runpytest(*RUN, "-n", "2")
    assert result.ret in (0, 1), result.stdout.str()
    document = read_results(pytester.path / "results.json")
    ours = rows_of(pytester.path / "results.json")
    found: dict[str, list[float]] = {}
    for row in rows:
        doc_id = row["evaluation_config"]["lm_eval"]["doc_id"]
        base = ours[row["id"]]["models"]["base"]
        assert ours[row["id"]]["error"] is None, ours[row["id"]]["error"]
        assert base["output"] == samples[(doc_id, FILTERS[0])]["resps"][0][0], row["id"]
        for name in FILTERS:
            sample = samples[(doc_id, name)]
            key = f"exact_match,{name}"
            assert base["score"]["lm_eval"]["filtered_resps"][name] == sample["filtered_resps"][0], row["id"]
            assert base["score"]["lm_eval"][key] == sample["exact_match"], (row["id"], name)
            found.setdefault(key, []).append(base["score"]["lm_eval"][key])
        # The first filter passes or fails the row.
        assert base["score"]["value"] == base["score"]["lm_eval"]["exact_match,strict-match"]
    block = document["benchmarks"][0]["lm_eval"]
    assert block["task"] == "gsm8k" and block["num_fewshot"] == 5 and block["base"]["n"] == DOCUMENTS
    for key, values in found.items():
        assert sum(values) / len(values) == block["base"][key] == aggregate[key]
        metric, name = key.split(",")
        assert block["base"][f"{metric}_stderr,{name}"] == pytest.approx(
            aggregate[f"{metric}_stderr,{name}"], abs=1e-12
        )


def test_a_served_model_gets_the_stop_strings_and_gives_the_local_outputs(pytester: pytest.Pytester) -> None:
    """The converted rows over a vLLM-format server on 127.0.0.1 (the embedded model's own greedy text):
    every request carries the row's stop strings, and the outputs and scores are the in-process ones."""
    from vllm_format import serve_vllm_format

    from pytest_llmeval.models import embedded_model_dir

    rows = convert(pytester.path / "bench", "gsm8k", *GSM8K, "--num-fewshot=2", "--limit=4")
    result = pytester.runpytest(*RUN, "--llmeval-no-cache")
    assert result.ret in (0, 1), result.stdout.str()
    local = rows_of(pytester.path / "results.json")
    with serve_vllm_format(embedded_model_dir()) as server:
        result = pytester.runpytest(*RUN, f"--llmeval-endpoint={server.base_url}", "--base-model=smol")
        asked = [r for r in server.requests if r.get("prompt") in {row["input"] for row in rows}]
    assert result.ret in (0, 1), result.stdout.str()
    assert len(asked) == len(rows)
    assert all(r["stop"] == ["Question:", "</s>", "<|im_end|>"] and r["max_tokens"] == 256 for r in asked)
    served = rows_of(pytester.path / "results.json")
    assert set(served) == set(local) == {r["id"] for r in rows}
    for row_id, row in served.items():
        assert row["error"] is None, row["error"]
        assert row["models"]["base"]["output"] == local[row_id]["models"]["base"]["output"], row_id
        assert (
            row["models"]["base"]["score"]["lm_eval"] == local[row_id]["models"]["base"]["score"]["lm_eval"]
        )


# --- generation: lm-eval's hf stopping and cutting ---------------------------------------------------------


def test_generation_stops_and_cuts_as_lm_eval_hf_does_in_any_batch(real_model: Any) -> None:
    """generation.generate with stop strings against transformers' generate with lm-eval's own stopping
    criteria and cut (its hf model's generate_until, batch size 1): the same text, alone or batched, and
    without stop strings the text runs on past them."""
    import torch
    from lm_eval.models.utils import postprocess_generated_text
    from lm_eval.models.utils_hf import stop_sequences_criteria

    from pytest_llmeval.generation import Tokens, generate

    model, tokenizer = real_model.model, real_model.tokenizer
    prompts = [
        "Question: Tom has 3 apples and buys 4 more. How many apples does he have?\nAnswer:",
        "Question: What is 12 times 3?\nAnswer: 36\n\nQuestion: What is 7 plus 8?\nAnswer:",
        "List three colours:\n1.",
    ]
    until = ["Question:", "\n\n"]
    eos = tokenizer.decode([tokenizer.eos_token_id], skip_special_tokens=False)
    theirs: list[str] = []
    spent: list[int] = []
    for prompt in prompts:
        ids = torch.tensor([tokenizer(prompt)["input_ids"]])  # (1, T)
        stops = [*until, eos]
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            max_length=ids.shape[1] + 40,
            stopping_criteria=stop_sequences_criteria(tokenizer, stops, ids.shape[1], 1),
            pad_token_id=tokenizer.pad_token_id,
            do_sample=False,
        )
        text = tokenizer.decode(out[0, ids.shape[1] :].tolist(), skip_special_tokens=True)
        theirs.append(postprocess_generated_text(text, stops, None))
        spent.append(out.shape[1] - ids.shape[1])  # ended where lm-eval ends: not run on to the limit
    for batch_size in (1, 3):
        counts = Tokens()
        ours = generate(
            model,
            tokenizer,
            prompts,
            max_new_tokens=40,
            batch_size=batch_size,
            strip=False,
            stops=[until] * 3,
            counts=counts,
        )
        assert ours == theirs, batch_size
        assert counts.generated == spent, batch_size
    plain = generate(model, tokenizer, prompts, max_new_tokens=40, batch_size=3, strip=False)
    assert any(p != t and p.startswith(t) for p, t in zip(plain, theirs, strict=True))


@given(
    st.text(alphabet="ab\nQ:", max_size=30),
    st.lists(st.sampled_from(["a", "ab", "\n", "Q:", "ba"]), max_size=3),
)
def test_the_cut_is_lm_eval_s(text: str, stops: list[str]) -> None:
    from lm_eval.models.utils import postprocess_generated_text

    from pytest_llmeval.generation import cut_at_stops

    assert cut_at_stops(text, stops) == postprocess_generated_text(text, list(stops), None)


def test_the_stop_window_is_lm_eval_s(real_model: Any) -> None:
    """StopStrings.ended against lm-eval's MultiTokenEOSCriteria on every prefix of real generations'
    tokens (the window it decodes, the EOS text it adds)."""
    import torch
    from lm_eval.models.utils_hf import MultiTokenEOSCriteria

    from pytest_llmeval.generation import StopStrings

    tokenizer = real_model.tokenizer
    until = ["Question:", "\n\n", " 4"]
    stops = StopStrings.of(tokenizer, until)
    assert stops.strings == (*until, tokenizer.decode([tokenizer.eos_token_id]))
    text = "Answer: 4 apples.\n\nQuestion: and then<|im_end|> more Question text 44"
    ids = tokenizer(text)["input_ids"]
    for end in range(1, len(ids) + 1):
        criteria = [MultiTokenEOSCriteria(s, tokenizer, 0, 1) for s in stops.strings]
        theirs = any(c(torch.tensor([ids[:end]]), None) for c in criteria)
        assert stops.ended(tokenizer, ids[:end]) == theirs, end


# --- the filters and the metric against lm-eval's own ------------------------------------------------------

PATTERNS = [
    scorer.REGEX_PATTERN,
    r"(-?[$0-9.,]{2,})|(-?[0-9]+)",
    r"The answer is (\-?[0-9\.\,]+).",
    r"\d+",
    r"(a)|(b)|()",
    r"x*",
]
TEXTS = st.text(alphabet=string.digits + "ab$.,-#: \n\t\x00XÉß" + "٣", max_size=40)


@settings(max_examples=300)
@given(
    TEXTS,
    st.sampled_from(PATTERNS),
    st.integers(min_value=-3, max_value=2),
    st.sampled_from(["[invalid]", " fallback "]),
)
def test_the_regex_filter_is_lm_eval_s(text: str, pattern: str, group: int, fallback: str) -> None:
    from lm_eval.filters.extraction import RegexFilter

    try:
        [[theirs]] = RegexFilter(regex_pattern=pattern, group_select=group, fallback=fallback).apply(
            [[text]], [{}]
        )
    except IndexError:  # group_select past the matches: lm-eval stops; the row is an error here
        with pytest.raises(ValueError, match="group_select"):
            scorer.regex_filter(text, pattern, group, fallback)
        return
    assert scorer.regex_filter(text, pattern, group, fallback) == theirs


@given(TEXTS, st.lists(st.sampled_from(["lowercase", "uppercase", "remove_whitespace"]), max_size=3))
def test_the_pipelines_are_lm_eval_s(text: str, functions: list[str]) -> None:
    from lm_eval.api.instance import Instance
    from lm_eval.filters import build_filter_ensemble

    steps = [{"function": f} for f in [*functions, "take_first"]]
    ensemble = build_filter_ensemble("f", [(s["function"], None) for s in steps])
    instance = Instance(request_type="generate_until", doc={}, arguments=("", {}), idx=0)
    instance.resps = [text]
    ensemble.apply([instance])
    assert scorer.apply_pipeline(text, steps) == instance.filtered_resps["f"]


@settings(max_examples=400)
@example("Straße", "STRASSE", [], True, False, False)  # str.lower, not casefold: lm-eval's numpy lower
@example("a\x00", "a", [], False, False, False)  # numpy's str arrays drop trailing NULs
@given(
    TEXTS,
    TEXTS,
    st.lists(st.sampled_from([",", "\\$", "(?s).*#### ", "\\.$", "a+", "\x00"]), max_size=3),
    st.booleans(),
    st.booleans(),
    st.booleans(),
)
def test_exact_match_is_lm_eval_s(
    prediction: str, reference: str, ignore: list[str], case: bool, punctuation: bool, numbers: bool
) -> None:
    from lm_eval.api.metrics import exact_match_hf_evaluate

    theirs = exact_match_hf_evaluate(
        predictions=[prediction],
        references=[reference],
        regexes_to_ignore=ignore or None,
        ignore_case=case,
        ignore_punctuation=punctuation,
        ignore_numbers=numbers,
    )["exact_match"]
    ours = scorer.exact_match(
        prediction,
        reference,
        regexes_to_ignore=ignore,
        ignore_case=case,
        ignore_punctuation=punctuation,
        ignore_numbers=numbers,
    )
    assert ours == theirs
    assert scorer.exact_match(prediction, prediction) == 1.0


def test_a_row_scores_every_filter_and_passes_on_the_first() -> None:
    config = {
        "filter_list": [
            {"name": "strict-match", "filter": [{"function": "regex"}, {"function": "take_first"}]},
            {
                "name": "flexible-extract",
                "filter": [
                    {
                        "function": "regex",
                        "group_select": -1,
                        "regex_pattern": r"(-?[$0-9.,]{2,})|(-?[0-9]+)",
                    },
                    {"function": "take_first"},
                ],
            },
        ],
        "regexes_to_ignore": [",", "\\$", "(?s).*#### ", "\\.$"],
        "ignore_case": True,
    }
    got = scorer.score(" She has 1,200 dollars, so 12 left.", "Steps...\n#### 12", config)
    assert got.value == 0.0 and not got.passed
    assert got.details["lm_eval"] == {
        "exact_match,strict-match": 0.0,
        "exact_match,flexible-extract": 1.0,
        "filtered_resps": {"strict-match": "[invalid]", "flexible-extract": "12"},
    }
    assert scorer.score("so #### 1,200.", "#### 1200", config).passed
    default = scorer.score("  Paris", "  Paris", {})
    assert default.passed and default.details["lm_eval"] == {
        "exact_match,none": 1.0,
        "filtered_resps": {"none": "  Paris"},
    }


@pytest.mark.parametrize(
    ("config", "said"),
    [
        ({"until": ["x", ""]}, "until must be a list of non-empty strings"),
        (
            {"filter_list": [{"name": "a", "filter": [{"function": "majority_vote"}]}]},
            "'majority_vote' is not",
        ),
        ({"filter_list": [{"name": "a", "filter": [{"function": "regex"}]}]}, "take_first must be its last"),
        (
            {
                "filter_list": [
                    {"name": "a", "filter": [{"function": "take_first"}, {"function": "lowercase"}]}
                ]
            },
            "take_first must be its last",
        ),
        (
            {
                "filter_list": [
                    {
                        "name": "a",
                        "filter": [{"function": "regex", "regex_pattern": "("}, {"function": "take_first"}],
                    }
                ]
            },
            "invalid regex",
        ),
        (
            {
                "filter_list": [
                    {"name": "a", "filter": [{"function": "regex", "group": 1}, {"function": "take_first"}]}
                ]
            },
            "unknown key 'group'",
        ),
        ({"ignore_case": "yes"}, "ignore_case must be true or false"),
        ({"regexes_to_ignore": "x"}, "regexes_to_ignore must be a list"),
        ({"normalize": True}, "unknown key 'normalize'"),
    ],
)
def test_a_bad_config_is_refused_in_one_line(config: dict[str, Any], said: str) -> None:
    with pytest.raises(ValueError, match=None) as caught:
        scorer.validate_config(config)
    assert said in str(caught.value) and "\n" not in str(caught.value)


# --- what the cache keys -----------------------------------------------------------------------------------


def test_the_cache_key_holds_the_stop_strings_and_the_token_budget() -> None:
    from pytest_llmeval.cache import ModelIdentity, batch_digest, key_material

    identity = ModelIdentity(
        base="b",
        adapter=None,
        tokenizer="t",
        dtype="float32",
        device="cpu",
        software={},
        batch_invariant=True,
    )
    plain = key_material(identity, "base", "p", 256)
    assert "until" not in plain["decoding"]  # rows without stop strings keep the keys they had
    stopped = key_material(identity, "base", "p", 256, stop=("Question:",))
    assert stopped["decoding"]["until"] == ["Question:"]
    assert (
        len(
            {
                json.dumps(m, sort_keys=True)
                for m in (
                    plain,
                    stopped,
                    key_material(identity, "base", "p", 256, stop=("Question:", "\n\n")),
                    key_material(identity, "base", "p", 256, stop=("\n\n", "Question:")),
                    key_material(identity, "base", "p", 128, stop=("Question:",)),
                )
            }
        )
        == 5
    )
    assert batch_digest(["p"], [8]) == batch_digest(["p"], [8], [None])
    assert batch_digest(["p"], [8], [("x",)]) != batch_digest(["p"], [8], [None])


# --- refusals: one line, nothing written --------------------------------------------------------------------


def test_a_task_with_a_filter_not_computed_here_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    argv = ["convert", "lm-eval", "gsm8k_cot_self_consistency", *GSM8K, "--limit=2", f"--out={out}"]
    assert cli_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "lm-eval task gsm8k_cot_self_consistency" in err[0], err
    assert "majority_vote" in err[0] or "do_sample" in err[0] or "repeats" in err[0], err
    assert not out.exists()


@pytest.fixture(scope="module")
def gsm8k_task() -> Any:
    """gsm8k loaded from the test data and its requests built (2 documents), for the builder's refusals."""
    from pytest_llmeval import lm_eval_tasks

    files = lm_eval_tasks.parse_data_files([a.split("=", 1)[1] for a in GSM8K])
    [task] = lm_eval_tasks._load(
        ["gsm8k"], files, lm_eval_tasks._task_manager(lm_eval_tasks._lm_eval()[1])
    ).values()
    task.set_config(key="num_fewshot", value=0)
    task.build_all_requests(limit=2, rank=0, world_size=1)
    return task


def _config(**changes: Any) -> Any:
    def change(task: Any) -> None:
        for key, value in changes.items():
            setattr(task.config, key, value)

    return change


def _kwargs(**changes: Any) -> Any:
    def change(task: Any) -> None:
        for instance in task.instances:
            instance.arguments = (instance.arguments[0], {**instance.arguments[1], **changes})

    return change


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (_kwargs(do_sample=True, temperature=0.7), "do_sample is true"),
        (_kwargs(temperature=0.5), "temperature 0.5"),
        (_kwargs(top_p=0.9), "generation_kwargs has 'top_p'"),
        (_kwargs(until=["Question:", ""]), "until has an empty string"),
        (_config(repeats=4), "repeats 4"),
        (_config(process_results=lambda doc, results: {}), "process_results"),
        (_config(metric_list=[{"metric": "bleu"}]), "metric_list has 'bleu'"),
        (_config(metric_list=[{"metric": "exact_match", "aggregation": "median"}]), "aggregation 'median'"),
        (_config(metric_list=[{"metric": "exact_match", "ignore_spaces": True}]), "has 'ignore_spaces'"),
        (
            _config(
                filter_list=[
                    {"name": "vote", "filter": [{"function": "majority_vote"}, {"function": "take_first"}]}
                ]
            ),
            "uses the filter 'majority_vote'",
        ),
        (
            _config(filter_list=[{"name": "x", "filter": [{"function": "regex"}]}]),
            "take_first must be its last",
        ),
        (_config(doc_to_target="{{[answer, question]}}"), "several gold answers"),
    ],
)
def test_what_a_row_cannot_reproduce_is_refused(gsm8k_task: Any, change: Any, said: str) -> None:
    import copy

    from pytest_llmeval.lm_eval_generate import generate_rows
    from pytest_llmeval.lm_eval_requests import LmEvalError

    task = copy.copy(gsm8k_task)
    task._config = copy.deepcopy(gsm8k_task._config)
    task._instances = [copy.copy(i) for i in gsm8k_task.instances]
    change(task)
    if said == "several gold answers":
        task.multiple_target = True
    with pytest.raises(LmEvalError) as caught:
        generate_rows("gsm8k", task, {"task": "gsm8k"})
    message = str(caught.value)
    assert message.startswith("lm-eval task gsm8k") and said in message and "\n" not in message, message
