"""The plugin over models served at OpenAI-compatible URLs (--llmeval-endpoint), against a local scriptable
server (tests/fault_server.py): which rows run, what a fault does to a run, what results.json records, where
the API key must never appear, and the generation cache of served outputs. The same against a real server
(`transformers serve` on the embedded model) is in tests/test_endpoint_e2e.py; the client alone in
tests/test_endpoint_client.py.

The fault server answers every prompt with the prompt reversed, so a row whose expected output is its
instruction reversed passes, and each answer can be traced to its request.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from fault_server import FaultServer, dead_url, status
from helpers import jsonl, row

from pytest_llmeval.logprobs import PROBE_PROMPT
from pytest_llmeval.models import embedded_gguf_path

pytest_plugins = ["pytester"]

KEY = "sk-sentinel-0123456789abcdef"  # the API key; must appear nowhere the plugin writes or prints
WORDS = [f"word{i}" for i in range(6)]


def rows() -> list[dict[str, Any]]:
    """Exact-match rows the fault server gets right: the expected output is the prompt reversed."""
    return [row(f"r{i}", instruction=w, expected=w[::-1]) for i, w in enumerate(WORDS)]


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultServer]:
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    with FaultServer(models=("base-id", "lora-id", "judge-id"), api_key=KEY) as s:
        yield s


def served_args(server: FaultServer, *more: str) -> list[str]:
    return [
        f"--llmeval-endpoint={server.url}",
        "--llmeval-api-key-env=LLMEVAL_TEST_KEY",
        "--base-model=base-id",
        "--adapter=lora-id",
        "-m",
        "not gate",
        "-p",
        "no:cacheprovider",
        "--llmeval-request-timeout=5",
        "--llmeval-retries=2",  # a failing row waits 0.5 + 1 s of backoff, not 15
        *more,
    ]


def generation_posts(server: FaultServer) -> list[Any]:
    """The requests that generated rows (the probe asks for one token)."""
    return [r for r in server.posts() if r.body.get("max_tokens") != 1]


def test_rows_run_on_the_served_models(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    result = pytester.runpytest(*served_args(server, "--llmeval-no-cache"), "bench.jsonl")
    result.assert_outcomes(passed=len(WORDS))
    posts = generation_posts(server)
    # Every row once per column, each request the row's prompt as the user message, greedy.
    assert sorted((p.body["model"], p.prompt) for p in posts) == sorted(
        (m, w) for m in ("base-id", "lora-id") for w in WORDS
    )
    for p in posts:
        assert p.path == "/v1/chat/completions"
        assert p.body["messages"] == [{"role": "user", "content": p.prompt}]
        assert p.body["temperature"] == 0.0 and p.body["top_p"] == 1.0
        assert p.body["max_tokens"] == 4  # the row's max_new_tokens
        assert p.body["seed"] == 0  # the server accepts seeds (the probe found out)
        assert p.headers["authorization"] == f"Bearer {KEY}"
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["base_model"] == "base-id"
    assert doc["adapter_path"] == "lora-id"
    endpoint = doc["inference_config"]["endpoint"]
    assert endpoint["urls"] == [server.url]
    assert endpoint["concurrency"] == 16
    served = endpoint["models"]
    assert served["base"]["model"] == "base-id"
    assert served["base"]["reported_model"] == "served/base-id"
    assert served["adapter"]["system_fingerprint"] == "fp_fault_server"
    assert served["adapter"]["settings"]["seed"] == 0
    assert served["base"]["date"]
    assert doc["hardware"].startswith("endpoint")
    rows_of = doc["benchmarks"][0]["rows"]
    assert {r["models"]["adapter"]["output"] for r in rows_of} == {w[::-1] for w in WORDS}


def test_the_key_is_nowhere(pytester: pytest.Pytester, server: FaultServer) -> None:
    """Not in the terminal, results.json, the HTML report, the JUnit XML or the generation cache: not even
    where the server itself echoes it back (a 401's message) or a row's request fails."""
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    server.fail("word0", *[status(500, f"internal error for key {KEY}")] * 10)
    args = served_args(
        server, "--llmeval-html=report.html", "--junitxml=junit.xml", "--llmeval-cache-dir=gen-cache"
    )
    result = pytester.runpytest(*args, "bench.jsonl")
    result.assert_outcomes(passed=len(WORDS) - 1, failed=1)
    seen = [result.stdout.str(), result.stderr.str()]
    for path in pytester.path.rglob("*"):
        if path.is_file():
            seen.append(path.read_bytes().decode("utf-8", "replace"))
    assert len(seen) > 5
    assert not [s for s in seen if KEY in s]
    # and a wrong key stops the run before any test, without printing the key it sent either
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    with FaultServer(models=("base-id", "lora-id"), api_key="sk-other") as other:
        refused = pytester.runpytest(*served_args(other), "bench.jsonl")
    assert refused.ret == pytest.ExitCode.USAGE_ERROR
    assert KEY not in refused.stdout.str() + refused.stderr.str()


def test_a_row_that_keeps_failing_is_its_own_error(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    # word2 fails for good; word3 fails twice and then is answered (retried); the rest are answered.
    server.fail("word2", *[status(503, "overloaded")] * 10)
    server.fail("word3", status(500), status(429, "slow down", {"Retry-After": "0"}))
    result = pytester.runpytest(*served_args(server, "--llmeval-no-cache"), "bench.jsonl")
    result.assert_outcomes(passed=len(WORDS) - 1, failed=1)
    result.stdout.fnmatch_lines(["*bench.jsonl:3: *(*-id) at the endpoint: *503*overloaded*"])
    doc = json.loads((pytester.path / "results.json").read_text())
    by_id = {r["id"]: r for r in doc["benchmarks"][0]["rows"]}
    assert by_id["r3"]["models"]["adapter"]["output"] == "3drow"
    assert doc["inference_config"]["endpoint"]["requests"]["retries"] >= 2


def test_unreachable_endpoint_stops_the_run_first(pytester: pytest.Pytester) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    url = dead_url()
    result = pytester.runpytest(
        f"--llmeval-endpoint={url}", "--base-model=base-id", "--llmeval-retries=1", "bench.jsonl"
    )
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    errors = [line for line in result.stderr.lines if line.startswith("ERROR: llmeval:")]
    assert len(errors) == 1 and url in errors[0] and "base-id" in errors[0]
    assert not (pytester.path / "results.json").exists()


def test_unknown_model_id_stops_the_run_first(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    args = [a if a != "--adapter=lora-id" else "--adapter=no-such-lora" for a in served_args(server)]
    result = pytester.runpytest(*args, "bench.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmeval: *no-such-lora*"])
    assert generation_posts(server) == []


def test_the_endpoint_needs_a_served_base_id(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    result = pytester.runpytest(f"--llmeval-endpoint={server.url}", "bench.jsonl")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["ERROR: llmeval: --llmeval-endpoint: name the served base model*"])


def test_log_likelihood_rows_skip_with_the_reason(pytester: pytest.Pytester, server: FaultServer) -> None:
    measured = [
        row(
            "p1",
            instruction="",
            input="Some text to measure.",
            expected="",
            evaluation_type="perplexity",
            evaluation_config={"threshold": 100.0},
        ),
        row(
            "m1",
            instruction="Pick one",
            expected="a",
            evaluation_type="multiple_choice",
            evaluation_config={"choices": ["a", "b"]},
        ),
    ]
    pytester.makefile(".jsonl", bench=jsonl(rows()[:2] + measured))
    result = pytester.runpytest(*served_args(server, "--llmeval-no-cache"), "-rs", "bench.jsonl")
    result.assert_outcomes(passed=2, skipped=2)
    # The probe's own finding on this server (it sends no logprobs), naming the column, its id and the URL.
    result.stdout.fnmatch_lines(
        [
            "*bench.jsonl:3: perplexity rows need the log-likelihoods of base (base-id): the server at "
            "http://127.0.0.1:*/v1 returns no log-probability for a generated token (logprobs is ignored)",
            "*bench.jsonl:4: multiple_choice rows need the log-likelihoods of base*",
        ]
    )


def test_served_outputs_are_cached(pytester: pytest.Pytester, server: FaultServer) -> None:
    """A re-run asks the server nothing but the probe: the outputs are in the cache, keyed by the model id,
    what the server reports of it (model, fingerprint) and the decoding settings."""
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    args = served_args(server, "--llmeval-cache-dir=gen-cache")
    pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
    first = len(generation_posts(server))
    assert first == 2 * len(WORDS)
    pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
    assert len(generation_posts(server)) == first  # nothing generated again
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["inference_config"]["cache"]["hits"]["base"] == 2 * len(WORDS)
    # The server now reports another fingerprint (a new build of the model): everything is asked again.
    with FaultServer(models=("base-id", "lora-id"), api_key=KEY, report_model_as="other-build") as moved:
        moved_args = [a.replace(server.url, moved.url) for a in args]
        pytester.runpytest(*moved_args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
        assert len(generation_posts(moved)) == 2 * len(WORDS)


def test_requests_spread_over_several_urls(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    with (
        FaultServer(models=("base-id", "lora-id"), api_key=KEY) as one,
        FaultServer(models=("base-id", "lora-id"), api_key=KEY) as two,
    ):
        args = served_args(one, "--llmeval-no-cache", f"--llmeval-endpoint={two.url}")
        pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
        assert generation_posts(one) and generation_posts(two)
        assert len(generation_posts(one)) + len(generation_posts(two)) == 2 * len(WORDS)
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["inference_config"]["endpoint"]["urls"] == [one.url, two.url]


def test_served_run_is_the_same_under_xdist(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    args = served_args(server, "--llmeval-no-cache")
    pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
    serial = json.loads((pytester.path / "results.json").read_text())
    asked = len(generation_posts(server))
    # Chunks of 3 rows (the concurrency, above the batch size): each worker asks for its own chunks only.
    more = ["--llmeval-batch-size=2", "--llmeval-concurrency=3", "-n", "2"]
    pytester.runpytest_subprocess(*args, *more, "bench.jsonl").assert_outcomes(passed=len(WORDS))
    assert len(generation_posts(server)) - asked == 2 * len(WORDS)
    parallel = json.loads((pytester.path / "results.json").read_text())

    def outputs(doc: dict[str, Any]) -> list[Any]:
        return sorted((r["id"], r["models"]) for r in doc["benchmarks"][0]["rows"])

    assert outputs(parallel) == outputs(serial)

    def served(doc: dict[str, Any]) -> dict[str, Any]:
        # Each process probes the models itself: when it did differs, what it found must not.
        models = doc["inference_config"]["endpoint"]["models"]
        return {c: {k: v for k, v in m.items() if k != "date"} for c, m in models.items()}

    assert served(parallel) == served(serial)
    assert parallel["inference_config"]["endpoint"]["requests"]["requests"] >= 2 * len(WORDS)


def test_llm_fixture_is_the_served_model(pytester: pytest.Pytester, server: FaultServer) -> None:
    pytester.makepyfile(
        """
        def test_generate(llm, llm_base, llm_models):
            assert llm.generate(["abc"]) == ["cba"]
            assert llm_base.generate(["xyz"], chat=False) == ["zyx"]
            assert set(llm_models) == {"base", "adapter"}
        """
    )
    result = pytester.runpytest(*served_args(server))
    result.assert_outcomes(passed=1)
    # Beside the probe's check of each column's log-probabilities (logprobs.PROBE_PROMPT), the one raw call.
    raw = [p for p in server.posts() if p.path == "/v1/completions" and p.body["prompt"] != PROBE_PROMPT]
    assert [(p.body["model"], p.body["prompt"]) for p in raw] == [("base-id", "xyz")]


def test_the_judge_is_served_too(pytester: pytest.Pytester, server: FaultServer) -> None:
    """llm_judge rows: the served judge grades each column's output in `runs` sampled requests (the row's
    temperature, seed + run). The fault server answers the judge's request reversed, so a rubric written
    backwards makes it answer 'Score: 8'."""
    judged = row(
        "j1",
        instruction="hello",
        expected="olleh",
        evaluation_type="llm_judge",
        evaluation_config={"rubric": "8 :erocS", "max_new_tokens": 4, "runs": 2, "temperature": 0.5},
    )
    pytester.makefile(".jsonl", bench=jsonl([judged]))
    args = served_args(server, "--llmeval-no-cache", "--llmeval-judge-model=judge-id")
    pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=1)
    asked = [p for p in generation_posts(server) if p.body["model"] == "judge-id"]
    assert sorted((p.body["temperature"], p.body["seed"]) for p in asked) == [
        (0.5, 0),
        (0.5, 0),
        (0.5, 1),
        (0.5, 1),
    ]
    assert all(p.prompt.startswith("8 :erocS") for p in asked)
    doc = json.loads((pytester.path / "results.json").read_text())
    score = doc["benchmarks"][0]["rows"][0]["models"]["adapter"]["score"]
    assert score["value"] == pytest.approx(0.8)


def test_a_served_reference_and_the_servers_quantization(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A frontier model is one more served id, marked the reference (reported, never gated); the
    quantization results.json states comes from the server's /v1/models where it says, else the option."""
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    with FaultServer(models=("base-id", "lora-id", "frontier"), api_key=KEY, quantization="Q4_K_M") as s:
        args = served_args(s, "--llmeval-no-cache", "--llmeval-model=gpt=frontier", "--llmeval-reference=gpt")
        pytester.runpytest(*args, "--llmeval-quantization=fp16", "bench.jsonl").assert_outcomes(
            passed=len(WORDS)
        )
        assert {p.body["model"] for p in generation_posts(s)} == {"base-id", "lora-id", "frontier"}
    doc = json.loads((pytester.path / "results.json").read_text())
    assert doc["quantization"] == "Q4_K_M"  # the server's word wins over --llmeval-quantization
    reference = next(m for m in doc["models"] if m["column"] == "gpt")
    assert reference["kind"] == "reference" and reference["source"] == "frontier"
    assert reference["served"]["model"] == "frontier" and reference["served"]["quantization"] == "Q4_K_M"
    assert {r["id"]: r["models"]["gpt"]["output"] for r in doc["benchmarks"][0]["rows"]}["r0"] == "0drow"
    with FaultServer(models=("base-id", "lora-id"), api_key=KEY) as plain:
        args = served_args(plain, "--llmeval-no-cache", "--llmeval-quantization=GGUF Q4_K_M")
        pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
        assert json.loads((pytester.path / "results.json").read_text())["quantization"] == "GGUF Q4_K_M"
        # The served .gguf file itself: its own header says what it is (general.file_type).
        gguf = f"--llmeval-quantization={embedded_gguf_path()}"
        pytester.runpytest(*served_args(plain, gguf), "bench.jsonl").assert_outcomes(passed=len(WORDS))
        assert json.loads((pytester.path / "results.json").read_text())["quantization"] == "GGUF Q4_1"
        (pytester.path / "broken.gguf").write_bytes(b"GGUF\x03\x00\x00\x00\x01")
        broken = pytester.runpytest(*served_args(plain, "--llmeval-quantization=broken.gguf"), "bench.jsonl")
        assert broken.ret == pytest.ExitCode.USAGE_ERROR
        broken.stderr.fnmatch_lines(
            ["ERROR: llmeval: --llmeval-quantization=broken.gguf: broken.gguf: the GGUF header ends early"]
        )


def test_completion_rows_and_samples_at_the_endpoint(pytester: pytest.Pytester, server: FaultServer) -> None:
    """A completion-style code row goes to /v1/completions with its input as written; a sampled row sends n
    requests at the row's temperature, each with its own seed (the same seeds on every run); a rerun asks
    nothing again. (The fault server's answer, the prompt reversed, is no code: the row fails.)"""
    prefix = 'def add(a, b):\n    """Add."""\n'
    code_row = row(
        "add",
        instruction="Complete the function.",
        input=prefix,
        expected="",
        evaluation_type="code_execution",
        evaluation_config={
            "language": "python",
            "prompt_mode": "completion",
            "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n",
            "entry_point": "add",
            "samples": 3,
            "k": [1, 3],
            "temperature": 0.7,
        },
    )
    pytester.makefile(".jsonl", code=jsonl([code_row]))
    args = [a for a in served_args(server) if a != "--adapter=lora-id"]
    pytester.runpytest(*args, "code.jsonl", "--llmeval-cache-dir=gen-cache").assert_outcomes(failed=1)
    posts = generation_posts(server)
    assert {p.path for p in posts} == {"/v1/completions"}
    assert [p.body["prompt"] for p in posts] == [prefix] * 3
    assert {p.body["temperature"] for p in posts} == {0.7}
    seeds = [p.body["seed"] for p in posts]
    assert len(set(seeds)) == 3
    doc = json.loads((pytester.path / "results.json").read_text())
    score = doc["benchmarks"][0]["rows"][0]["models"]["base"]["score"]
    assert score["samples"] == 3 and set(score["pass_at_k"]) == {"1", "3"}
    # Every sample's program begins with the prompt as written, followed by the answer unstripped.
    assert all(s["code"] == prefix + prefix[::-1] for s in score["per_sample"])
    pytester.runpytest(*args, "code.jsonl", "--llmeval-cache-dir=gen-cache")
    assert len(generation_posts(server)) == 3  # all three from the cache
    pytester.runpytest(*args, "code.jsonl", "--llmeval-cache-dir=another-cache")
    # The same seeds again (requests are in flight together: they may arrive in another order).
    assert sorted(p.body["seed"] for p in generation_posts(server)[3:]) == sorted(seeds)


def test_a_served_reasoning_block_is_cut_off_before_scoring(
    pytester: pytest.Pytester, server: FaultServer
) -> None:
    """Generated outputs go through the same cut as saved ones: the server answers "<think>...</think>yes"
    (the prompt reversed), the row is scored on "yes", and results.json keeps the raw answer."""
    answer = "<think>the user wants a yes</think> yes"
    pytester.makefile(".jsonl", bench=jsonl([row("r", instruction=answer[::-1], expected="yes")]))
    args = [a for a in served_args(server) if a != "--adapter=lora-id"]
    pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=1)
    side = json.loads((pytester.path / "results.json").read_text())["benchmarks"][0]["rows"][0]["models"][
        "base"
    ]
    assert (side["output"], side["scored_output"]) == (answer, "yes")


@pytest.mark.parametrize("workers", [(), ("-n", "2")], ids=["serial", "xdist"])
def test_a_server_failing_every_adapter_row_fails_the_gate_not_skips_it(
    pytester: pytest.Pytester,
    server: FaultServer,
    workers: tuple[str, ...],
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The case that went green on nothing: the probe answered, then HTTP 500 for every adapter generation."""
    from pytest_llmeval.cli import main as cli

    pytester.makefile(".jsonl", bench=jsonl(rows()))
    server.fail_every_generation("lora-id", status(500, "the adapter is not loaded"))
    args = [
        a
        for a in served_args(server, "--llmeval-no-cache", "--llmeval-retries=0")
        if a not in ("-m", "not gate")
    ]
    result = pytester.runpytest(
        *args, "--llmeval-domain=bench*", "--llmeval-min-rows=6", *workers, "bench.jsonl"
    )
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    doc = json.loads((pytester.path / "results.json").read_text())
    verdict = (
        doc["benchmarks"][0]["gates"]["better_than_base[lora-id]"]
        if "better_than_base[lora-id]" in doc["benchmarks"][0]["gates"]
        else doc["benchmarks"][0]["gates"]["better_than_base"]
    )
    assert verdict["status"] == "fail", verdict
    assert "0 of 6 rows scored against base (6 errored)" in verdict["message"]
    assert doc["complete"] is False and "6 of 6 rows errored" in doc["incomplete_reason"]
    capsys.readouterr()
    assert cli(["check", str(pytester.path / "results.json")]) == 1


def test_a_key_echoed_on_the_success_path_is_scrubbed_everywhere(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server (or proxy) that repeats the Authorization header in every answer's text, model and
    system_fingerprint: the key must reach no file the run writes, and not the terminal."""
    monkeypatch.setenv("LLMEVAL_TEST_KEY", KEY)
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    with FaultServer(models=("base-id", "lora-id"), api_key=KEY, echo_key=True) as echoing:
        args = served_args(echoing, "--llmeval-cache-dir=gen-cache", "--llmeval-html=report.html")
        result = pytester.runpytest(*args, "--junitxml=junit.xml", "bench.jsonl")
    # The server did echo (its answers carry the header, the key masked), and nothing kept the key.
    assert "Bearer ***" in (pytester.path / "results.json").read_text()
    assert KEY not in result.stdout.str() + result.stderr.str()
    written = [p for p in pytester.path.rglob("*") if p.is_file()]
    assert any(p.parent.name == "history" for p in written) and any("gen-cache" in str(p) for p in written)
    leaked = [str(p) for p in written if KEY.encode() in p.read_bytes()]
    assert not leaked, leaked


def test_a_column_served_at_its_own_url(pytester: pytest.Pytester, server: FaultServer) -> None:
    """`--llmeval-model=NAME=ID@URL` under --llmeval-endpoint: that column's requests go to its own server
    (probed there), the others' to the endpoint; results.json records each column's URL."""
    pytester.makefile(".jsonl", bench=jsonl(rows()))
    with FaultServer(models=("elsewhere",)) as other:
        args = served_args(server, "--llmeval-no-cache", f"--llmeval-model=far=elsewhere@{other.url}")
        pytester.runpytest(*args, "bench.jsonl").assert_outcomes(passed=len(WORDS))
        assert {p.body["model"] for p in generation_posts(other)} == {"elsewhere"}
    assert {p.body["model"] for p in generation_posts(server)} == {"base-id", "lora-id"}
    doc = json.loads((pytester.path / "results.json").read_text())
    models = doc["inference_config"]["endpoint"]["models"]
    assert models["far"]["urls"] == [other.url] and models["base"]["urls"] == [server.url]
    assert {r["id"]: r["models"]["far"]["output"] for r in doc["benchmarks"][0]["rows"]}["r1"] == "1drow"
