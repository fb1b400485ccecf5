"""Prompts in whole runs: a system prompt, few-shot examples and templates from the row, the benchmark's
sidecar, the adapter's metadata and the command line; recorded in results.json and in the cache's keys.

The real embedded SmolLM2-135M-Instruct end to end (issue: prompts as the adapter was trained); the
adapter's declared prompt and the fair-comparison rule on tiny random models (tests/helpers.py), the served
path on the local scriptable server (tests/fault_server.py), which records every request it gets.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fault_server import FaultServer
from helpers import REPO, build_tiny_adapter, build_tiny_model, jsonl, model_args, row

from pytest_llmeval.models import embedded_model_dir

pytest_plugins = ["pytester"]

SYSTEM = "You are a date converter. Reply with the date only."
# The embedded model's converted folder, named: pytester's runs have a HOME of their own, where the
# default would convert the GGUF file again for every run.
REAL = ["-p", "no:cacheprovider", "-m", "not gate", f"--base-model={embedded_model_dir()}"]


def date_rows(n: int = 5) -> list[dict[str, Any]]:
    """The first n rows of the shipped dates benchmark, generating at most 12 tokens."""
    lines = (REPO / "benchmarks" / "dates.jsonl").read_text(encoding="utf-8").splitlines()[:n]
    rows = [json.loads(line) for line in lines]
    for r in rows:
        r["evaluation_config"] = {**r.get("evaluation_config", {}), "max_new_tokens": 12}
    return rows


def run(pytester: pytest.Pytester, *args: str, results: str = "results.json") -> dict[str, Any]:
    """The plugin on the embedded model over dates.jsonl in the pytester folder: results.json's rows by id
    and its inference_config."""
    outcome = pytester.runpytest(*REAL, f"--llmeval-results={results}", *args)
    assert outcome.ret in (0, 1), outcome.stdout.str()[-3000:]
    document = json.loads((pytester.path / results).read_text(encoding="utf-8"))
    rows = {r["id"]: r for b in document["benchmarks"] for r in b["rows"]}
    return {"rows": rows, "inference": document["inference_config"], "document": document}


def prompts_of(found: dict[str, Any]) -> dict[str, str]:
    return {i: r["prompt"] for i, r in found["rows"].items()}


def outputs_of(found: dict[str, Any], side: str = "base") -> dict[str, str]:
    return {i: r["models"][side]["output"] for i, r in found["rows"].items()}


# ---------------------------------------------------------------------------------------------------------
# The real model, end to end


def test_a_system_prompt_changes_the_prompt_and_the_cache_entries(
    pytester: pytest.Pytester, tmp_path: Path
) -> None:
    pytester.makefile(".jsonl", dates=jsonl(date_rows()))
    cache = f"--llmeval-cache-dir={tmp_path / 'cache'}"
    plain = run(pytester, cache, results="plain.json")
    assert plain["inference"]["cache"]["misses"]["base"] == 5
    assert all(SYSTEM not in p for p in prompts_of(plain).values())

    told = run(pytester, cache, f"--llmeval-system-prompt={SYSTEM}", results="told.json")
    # The system turn is in every recorded prompt, ahead of the row's user turn, and nothing came from
    # the cache: the plain run's outputs are not this run's.
    for rid, prompt in prompts_of(told).items():
        assert prompt.startswith(f"<|im_start|>system\n{SYSTEM}<|im_end|>\n<|im_start|>user\n")
        assert prompt != prompts_of(plain)[rid]
    assert told["inference"]["cache"]["misses"]["base"] == 5
    assert told["inference"]["cache"]["hits"]["base"] == 0
    assert told["inference"]["prompt"]["command_line"]["system"] == SYSTEM
    spec = told["inference"]["prompt"]["benchmarks"]["dates.jsonl"]["columns"]["base"]
    assert spec["system"] == SYSTEM and spec["sources"] == {"system": "command line"}

    # The same system prompt from the benchmark's sidecar renders the same prompts: served from the cache.
    pytester.makefile(".llmeval.toml", dates=f'[prompt]\nsystem = "{SYSTEM}"\n')
    sidecar = run(pytester, cache, results="sidecar.json")
    assert prompts_of(sidecar) == prompts_of(told)
    assert outputs_of(sidecar) == outputs_of(told)
    assert sidecar["inference"]["cache"]["hits"]["base"] == 5
    spec = sidecar["inference"]["prompt"]["benchmarks"]["dates.jsonl"]
    assert spec["sidecar"] == "dates.llmeval.toml"
    assert spec["columns"]["base"]["sources"] == {"system": "benchmark"}

    # The row's own system prompt is the most specific: it wins over the sidecar's.
    rows = date_rows()
    rows[0]["system"] = "Answer in French."
    pytester.makefile(".jsonl", dates=jsonl(rows))
    mixed = run(pytester, cache, results="mixed.json")
    first = rows[0]["id"]
    assert (
        "Answer in French." in mixed["rows"][first]["prompt"] and SYSTEM not in mixed["rows"][first]["prompt"]
    )
    assert mixed["rows"][first]["system"] == "Answer in French."
    assert all(SYSTEM in p for i, p in prompts_of(mixed).items() if i != first)


def fewshot_turns(prompt: str) -> list[str]:
    """The assistant turns before the last user turn of a ChatML prompt: the few-shot answers."""
    return re.findall(r"<\|im_start\|>assistant\n(.*?)<\|im_end\|>", prompt, flags=re.S)


def test_fewshot_examples_are_other_rows_the_same_on_every_run_serial_and_xdist(
    pytester: pytest.Pytester,
) -> None:
    rows = date_rows(6)
    pytester.makefile(".jsonl", dates=jsonl(rows))
    pytester.makefile(".llmeval.toml", dates="[prompt]\nfewshot = 2\n")
    expected = {r["id"]: r["expected_output"] for r in rows}
    serial = run(pytester, "--llmeval-no-cache", results="serial.json")
    for rid, prompt in prompts_of(serial).items():
        answers = fewshot_turns(prompt)
        others = {v for k, v in expected.items() if k != rid}
        assert len(answers) == 2 and set(answers) <= others, (rid, answers)
        assert expected[rid] not in answers
        # Each example's question is in the prompt before its answer, and the row's own question last.
        own_input = next(r["input"] for r in rows if r["id"] == rid)
        assert prompt.rstrip().endswith(f"{own_input}<|im_end|>\n<|im_start|>assistant")
    # Not one fixed pair for every row: the draw depends on the row.
    assert len({tuple(fewshot_turns(p)) for p in prompts_of(serial).values()}) > 1
    again = run(pytester, "--llmeval-no-cache", results="again.json")
    parallel = run(pytester, "--llmeval-no-cache", "-n", "2", results="parallel.json")
    assert prompts_of(again) == prompts_of(serial) == prompts_of(parallel)
    assert outputs_of(parallel) == outputs_of(serial)
    columns = serial["inference"]["prompt"]["benchmarks"]["dates.jsonl"]
    assert columns["columns"]["base"]["fewshot"] == 2
    assert columns["fewshot_pool"] == "the benchmark's other rows"

    # --llmeval-fewshot overrides the benchmark's default; a few-shot file beside it is the pool.
    pool = [
        {
            "id": f"shot-{i}",
            "instruction": rows[0]["instruction"],
            "input": f"{i} March 1999",
            "expected_output": f"1999-03-{i:02d}",
        }
        for i in (1, 2, 3)
    ]
    pytester.makefile(".fewshot.jsonl", dates=jsonl(pool))
    three = run(pytester, "--llmeval-no-cache", "--llmeval-fewshot=3", results="three.json")
    for prompt in prompts_of(three).values():
        # The whole pool in its order: every row shares this prefix.
        assert fewshot_turns(prompt) == ["1999-03-01", "1999-03-02", "1999-03-03"]
    assert three["inference"]["prompt"]["benchmarks"]["dates.jsonl"]["columns"]["base"]["sources"] == {
        "fewshot": "command line"
    }


def test_a_template_that_does_not_render_fails_its_own_collection(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", dates=jsonl(date_rows(2)))
    # A syntax error on the template's second line, in the sidecar of one benchmark.
    pytester.makefile(".jsonl", broken=jsonl(date_rows(2)))
    pytester.makefile(
        ".llmeval.toml", broken='[prompt]\ntemplate = """{{ instruction }}\n{% if input %}"""\n'
    )
    # An undefined variable in one row's own template: that row's line.
    rows = date_rows(3)
    rows[2]["evaluation_config"]["prompt_template"] = "{{ instruction }} {{ question }}"
    pytester.makefile(".jsonl", undefined=jsonl(rows))
    result = pytester.runpytest(*REAL, "--llmeval-no-cache", "--continue-on-collection-errors")
    result.stdout.fnmatch_lines(
        [
            "*ERROR collecting broken.jsonl*",
            "*broken.jsonl:1: prompt template broken.llmeval.toml, line 2: Unexpected end of template*",
            "*ERROR collecting undefined.jsonl*",
            "*undefined.jsonl:3: prompt template undefined.jsonl:3 does not render: 'question' is undefined*",
        ]
    )
    # The other benchmark ran (pytest's --continue-on-collection-errors): its two rows, none of the others.
    outcomes = result.parseoutcomes()
    assert outcomes["errors"] == 2 and outcomes.get("passed", 0) + outcomes.get("failed", 0) == 2


def test_a_jinja_template_renders_the_whole_prompt(pytester: pytest.Pytester, tmp_path: Path) -> None:
    template = tmp_path / "alpaca.jinja"
    template.write_text(
        "{% if system %}{{ system }}\n\n{% endif %}"
        "{% for e in examples %}### Instruction:\n{{ e.instruction }}\n\n### Input:\n{{ e.input }}\n\n"
        "### Response:\n{{ e.output }}{{ eos_token }}\n\n{% endfor %}"
        "### Instruction:\n{{ instruction }}\n\n### Input:\n{{ input }}\n\n### Response:\n",
        encoding="utf-8",
    )
    rows = date_rows(3)
    pytester.makefile(".jsonl", dates=jsonl(rows))
    found = run(
        pytester,
        "--llmeval-no-cache",
        f"--llmeval-prompt-template={template}",
        "--llmeval-fewshot=1",
        f"--llmeval-system-prompt={SYSTEM}",
    )
    for r in rows:
        prompt = found["rows"][r["id"]]["prompt"]
        assert prompt.startswith(f"{SYSTEM}\n\n### Instruction:\n")
        assert prompt.endswith(f"### Input:\n{r['input']}\n\n### Response:\n")
        assert prompt.count("<|im_end|>") == 1  # the one example's end, as the template writes it
        assert "<|im_start|>" not in prompt  # no chat template around it
    recorded = found["inference"]["prompt"]["command_line"]["template"]
    assert recorded["origin"] == str(template) and len(recorded["sha256"]) == 64
    assert recorded["source"] == template.read_text(encoding="utf-8")


def test_a_bad_template_option_is_a_usage_error(pytester: pytest.Pytester, tmp_path: Path) -> None:
    pytester.makefile(".jsonl", dates=jsonl(date_rows(1)))
    bad = tmp_path / "bad.jinja"
    bad.write_text("{{ instruction }\n", encoding="utf-8")
    result = pytester.runpytest("-p", "no:cacheprovider", f"--llmeval-prompt-template={bad}")
    result.stderr.fnmatch_lines([f"*--llmeval-prompt-template: prompt template {bad}, line 1: *"])
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    missing = pytester.runpytest("-p", "no:cacheprovider", f"--llmeval-prompt-template={tmp_path / 'nope'}")
    missing.stderr.fnmatch_lines(["*--llmeval-prompt-template: *nope is not a file*"])


# ---------------------------------------------------------------------------------------------------------
# The adapter's declared prompt, and comparisons that prompt both sides alike


@pytest.fixture(scope="module")
def declared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("declared")
    model = build_tiny_model(root / "model")
    adapter = build_tiny_adapter(model, root / "adapter")
    meta = json.loads((adapter / "metadata.json").read_text())
    meta["prompt"] = {"system": "You are a tiny adapter."}
    (adapter / "metadata.json").write_text(json.dumps(meta))
    return {"model": model, "adapter": adapter}


def test_the_adapters_prompt_is_given_to_both_sides_unless_per_model(
    pytester: pytest.Pytester, declared: dict[str, Path]
) -> None:
    pytester.makefile(".jsonl", bench=jsonl([row("r1"), row("r2", instruction="Say bye.")]))
    args = [*model_args(declared["model"], declared["adapter"]), "--llmeval-results=fair.json"]
    pytester.runpytest(*args).assert_outcomes(failed=2)
    fair = json.loads((pytester.path / "fair.json").read_text())
    for r in fair["benchmarks"][0]["rows"]:
        assert "You are a tiny adapter." in r["prompt"]
        assert all("prompt" not in side for side in r["models"].values())  # one prompt for both
    assert fair["inference_config"]["prompt"]["mode"] == "shared"
    said = {"adapter": {"system": "You are a tiny adapter.", "template": None}}
    assert fair["inference_config"]["prompt"]["adapters"] == said
    columns = fair["inference_config"]["prompt"]["benchmarks"]["bench.jsonl"]["columns"]
    assert columns["base"]["sources"] == columns["adapter"]["sources"] == {"system": "adapter"}

    args = [*model_args(declared["model"], declared["adapter"]), "--llmeval-prompt-per-model"]
    pytester.runpytest(*args, "--llmeval-results=own.json").assert_outcomes(failed=2)
    own = json.loads((pytester.path / "own.json").read_text())
    assert own["inference_config"]["prompt"]["mode"] == "per_model"
    for r in own["benchmarks"][0]["rows"]:
        assert "You are a tiny adapter." not in r["prompt"]  # the base's, as it would be without it
        assert "You are a tiny adapter." in r["models"]["adapter"]["prompt"]
        assert "prompt" not in r["models"]["base"]


def test_an_unusable_declared_prompt_stops_the_run(
    pytester: pytest.Pytester, declared: dict[str, Path]
) -> None:
    adapter = pytester.path / "adapter"
    adapter.mkdir()
    for f in declared["adapter"].iterdir():
        (adapter / f.name).write_bytes(f.read_bytes())
    meta = json.loads((adapter / "metadata.json").read_text())
    meta["prompt"] = {"system": 3}
    (adapter / "metadata.json").write_text(json.dumps(meta))
    pytester.makefile(".jsonl", bench=jsonl([row("r1")]))
    result = pytester.runpytest(*model_args(declared["model"], adapter))
    result.stderr.fnmatch_lines(["*--adapter: *metadata.json: prompt system must be a string*"])


# ---------------------------------------------------------------------------------------------------------
# Served models: the conversation goes as chat messages


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer(models=("base-id", "lora-id")) as s:
        yield s


def test_served_rows_are_sent_the_system_prompt_and_the_examples_as_turns(
    pytester: pytest.Pytester, server: FaultServer
) -> None:
    rows = [row(f"r{i}", input=f"question {i}", expected=f"answer {i}") for i in range(4)]
    pytester.makefile(".jsonl", bench=jsonl(rows))
    args = [
        f"--llmeval-endpoint={server.url}",
        "--base-model=base-id",
        "--adapter=lora-id",
        "-m",
        "not gate",
        "-p",
        "no:cacheprovider",
        "--llmeval-no-cache",
        "--llmeval-fewshot=2",
        f"--llmeval-system-prompt={SYSTEM}",
        "--llmeval-results=served.json",
    ]
    pytester.runpytest(*args)
    posts = [p for p in server.posts() if p.path.endswith("/chat/completions") and p.body["max_tokens"] > 1]
    assert len(posts) == 8  # four rows, two models
    for post in posts:
        messages = post.body["messages"]
        assert messages[0] == {"role": "system", "content": SYSTEM}
        roles = [m["role"] for m in messages[1:]]
        assert roles == ["user", "assistant", "user", "assistant", "user"]
        own = messages[-1]["content"]
        answers = {m["content"] for m in messages if m["role"] == "assistant"}
        assert own.endswith(f"question {own[-1]}") and f"answer {own[-1]}" not in answers
    document = json.loads((pytester.path / "served.json").read_text())
    recorded = json.loads(document["benchmarks"][0]["rows"][0]["prompt"])
    assert recorded[0] == {"role": "system", "content": SYSTEM} and len(recorded) == 6


def copy_adapter(source: Path, folder: Path, name: str, prompt: dict[str, Any] | None) -> Path:
    folder.mkdir()
    for f in source.iterdir():
        (folder / f.name).write_bytes(f.read_bytes())
    meta = {"name": name, "version": "1.0.0"}
    if prompt is not None:
        meta["prompt"] = prompt
    (folder / "metadata.json").write_text(json.dumps(meta))
    return folder


def test_the_base_is_generated_once_per_distinct_declared_prompt(
    pytester: pytest.Pytester, declared: dict[str, Path]
) -> None:
    first = copy_adapter(declared["adapter"], pytester.path / "one", "one", {"system": "First."})
    same = copy_adapter(declared["adapter"], pytester.path / "two", "two", {"system": "First."})
    other = copy_adapter(declared["adapter"], pytester.path / "three", "three", {"system": "Third."})
    pytester.makefile(".jsonl", bench=jsonl([row("r1"), row("r2", instruction="Say bye.")]))
    args = [*model_args(declared["model"]), f"--adapter={first}", f"--adapter={same}", f"--adapter={other}"]
    pytester.runpytest(*args, "--llmeval-results=fair.json")
    document = json.loads((pytester.path / "fair.json").read_text())
    rows = document["benchmarks"][0]["rows"]
    for r in rows:
        # One more base column, prompted as `three` declares; `two` shares the first's prompt and base.
        assert list(r["models"]) == ["base", "base@three", "one", "two", "three"]
        assert r["baselines"] == {"three": "base@three"}
        assert "First." in r["prompt"] and "Third." in r["models"]["base@three"]["prompt"]
        assert "prompt" not in r["models"]["two"] and "Third." in r["models"]["three"]["prompt"]
    against = {(c["model"], c["against"]) for c in document["comparisons"]}
    assert against == {("one", "base"), ("two", "base"), ("three", "base@three")}
    matrix = {m["column"]: m["against"] for m in document["matrix"]["models"]}
    assert matrix == {"one": "base", "two": "base", "three": "base@three"}
    # The variant is the base itself, prompted otherwise: run alone with `three`, the base says the same.
    alone = [*model_args(declared["model"]), f"--adapter={other}", "--llmeval-results=alone.json"]
    pytester.runpytest(*alone)
    single = {
        r["id"]: r for r in json.loads((pytester.path / "alone.json").read_text())["benchmarks"][0]["rows"]
    }
    for r in rows:
        assert r["models"]["base@three"]["output"] == single[r["id"]]["models"]["base"]["output"]
        assert r["models"]["base@three"]["prompt"] == single[r["id"]]["prompt"]
    # Each as it declares: no variant, the base prompted as none declares.
    pytester.runpytest(*args, "--llmeval-prompt-per-model", "--llmeval-results=own.json")
    own = json.loads((pytester.path / "own.json").read_text())["benchmarks"][0]["rows"]
    assert all(list(r["models"]) == ["base", "one", "two", "three"] and "baselines" not in r for r in own)


def test_an_adapters_own_document_compares_it_with_its_own_base() -> None:
    from pytest_llmeval.records import partner
    from pytest_llmeval.results import project

    base, variant, three = (
        {"output": o, "score": {"value": v}} for o, v in (("b", 0.0), ("v", 0.5), ("t", 1.0))
    )
    record: Any = {"models": {"base": base, "base@three": variant, "three": three}, "benchmark": {}}
    record.update(baselines={"three": "base@three"}, passed=True)
    assert partner(record, "three") == "base@three" and partner(record, "one") == "base"
    own = project(record, "three")
    assert own["models"] == {"base": variant, "adapter": three} and "baselines" not in own
