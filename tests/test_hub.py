"""Hub ids are downloaded on first use, through the real huggingface_hub code, from a fake Hub (fake_hub.py).

The plugin runs in a subprocess (pytester.runpytest_subprocess): huggingface_hub reads HF_ENDPOINT,
HF_HUB_CACHE and HF_HUB_OFFLINE into module constants when it is imported, so only a fresh process sees
the environment each test sets. Every test gets an empty Hugging Face cache of its own and points
HF_ENDPOINT at a fake Hub, also the offline ones: a request that should not happen is then recorded
instead of going out to huggingface.co.

What must hold: a download is used for the run and lands in the Hugging Face cache; an offline run finds it
there without a single request; a model that cannot be had stops the run before any test with one
`ERROR: llmeval: ...` line (exit code 4), and the embedded SmolLM2 never stands in for it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fake_hub import FakeHub
from helpers import jsonl, row

from pytest_llmeval.models import downloads_off, looks_like_hub_id

ROWS = [row("r1"), row("r2", instruction="Count to three."), row("r3", instruction="Name a colour.")]
# Rows only (gates are tests/test_gate_items.py's), each run generating anew, with short outputs.
RUN = ["-p", "no:cacheprovider", "--llmeval-no-cache", "-m", "not gate", "--llmeval-max-new-tokens=4"]
# Files a model repository may hold that a snapshot for transformers must not fetch: other formats of the
# same weights (GGUF, ONNX) and the .bin copy of weights that are there as safetensors too.
NOT_FOR_TRANSFORMERS = ("model.gguf", "onnx/model.onnx", "pytorch_model.bin")


@pytest.fixture(autouse=True)
def _rootdir(pytester: pytest.Pytester) -> None:
    # Without an ini file, pytester's --basetemp argument would make the rootdir the parent folder.
    pytester.makeini("[pytest]\n")


@pytest.fixture(scope="module")
def repos(tiny_model: Path, tiny_adapter: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The fake Hub's repositories: the tiny model (with files a download must skip), its adapter, and a
    repository without weights."""
    root = tmp_path_factory.mktemp("hub-repos")
    model = shutil.copytree(tiny_model, root / "tiny")
    for name in NOT_FOR_TRANSFORMERS:
        (model / name).parent.mkdir(parents=True, exist_ok=True)
        # Not loadable: if one were downloaded and read, the run would fail loudly, not quietly.
        (model / name).write_bytes(b"not weights transformers should ever see\n" * 100)
    adapter = shutil.copytree(tiny_adapter, root / "tiny-adapter")
    _set_adapter_base(adapter, "org/tiny")  # as an adapter trained on a Hub model records its base
    no_weights = root / "no-weights"
    no_weights.mkdir()
    shutil.copy(tiny_model / "config.json", no_weights)
    return {"org/tiny": model, "org/tiny-adapter": adapter, "org/no-weights": no_weights}


@pytest.fixture
def hf_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty Hugging Face cache of this test's own, and no Hub setting inherited from the machine."""
    for name in (
        "HF_HUB_OFFLINE",
        "TRANSFORMERS_OFFLINE",
        "HF_TOKEN",
        "HUGGING_FACE_HUB_TOKEN",
        "HF_ENDPOINT",
        "HUGGINGFACE_HUB_CACHE",
        "TRANSFORMERS_CACHE",
    ):
        monkeypatch.delenv(name, raising=False)
    home = tmp_path / "hf-home"
    monkeypatch.setenv("HF_HOME", str(home))
    monkeypatch.setenv("HF_HUB_CACHE", str(home / "hub"))
    monkeypatch.setenv("HF_HUB_DISABLE_TELEMETRY", "1")
    # huggingface_hub's "Fetching N files" bars go to stderr, where a test counts the error's lines.
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    # A proxy set on the machine must not swallow the requests to 127.0.0.1.
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setenv("no_proxy", "127.0.0.1,localhost")
    return home / "hub"


@pytest.fixture
def hub(repos: dict[str, Path], hf_cache: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake Hub, running, with HF_ENDPOINT pointing at it for every run the test starts."""
    with FakeHub(repos) as running:
        monkeypatch.setenv("HF_ENDPOINT", running.url)
        yield running


def _set_adapter_base(adapter: Path, base: str) -> None:
    path = adapter / "adapter_config.json"
    config: dict[str, Any] = json.loads(path.read_text())
    config["base_model_name_or_path"] = base
    path.write_text(json.dumps(config, indent=2))


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makefile(".jsonl", bench=jsonl(ROWS))
    return pytester.runpytest_subprocess(*RUN, *args, timeout=300)


def _results(pytester: pytest.Pytester) -> dict[str, Any]:
    document: dict[str, Any] = json.loads((pytester.path / "results.json").read_text())
    return document


def _rows(pytester: pytest.Pytester) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = _results(pytester)["benchmarks"][0]["rows"]
    return rows


def _assert_stopped(result: pytest.RunResult, pytester: pytest.Pytester, *parts: str) -> str:
    """The run stopped before any test with exactly one error line containing every part; returns it."""
    output = result.stdout.str() + result.stderr.str()
    assert result.ret == pytest.ExitCode.USAGE_ERROR, output
    # One line: no traceback, no second message (a multi-line exception text would show up here).
    lines = [line for line in result.stderr.lines if line.strip()]
    assert len(lines) == 1, output
    (line,) = lines
    assert line.startswith("ERROR: llmeval: "), line
    for part in parts:
        assert part in line, f"{part!r} not in {line!r}"
    # The embedded default never stands in for the model that is missing, not even as a mention.
    assert "SmolLM2" not in output
    assert not (pytester.path / "results.json").exists()
    return line


def _model_files(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())


# --- a download used for the run, then found in the cache offline ------------------------------------


def test_base_model_id_is_downloaded_then_used_offline_from_the_cache(
    pytester: pytest.Pytester,
    hub: FakeHub,
    hf_cache: Path,
    tiny_model: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    result = _run(pytester, "--base-model=org/tiny")
    result.assert_outcomes(failed=len(ROWS))  # a random model answers none: every row ran and was scored
    assert _results(pytester)["base_model"] == "org/tiny"
    assert all(r["models"]["base"]["output"] for r in _rows(pytester))
    # Exactly the tiny model's own files (config, tokenizer, chat template, safetensors weights): neither
    # the GGUF and ONNX copies nor the .bin duplicate of the weights.
    assert hub.downloaded("org/tiny") == _model_files(tiny_model)
    # Into the Hugging Face cache (the one transformers shares), under the commit the Hub named.
    snapshot = hf_cache / "models--org--tiny" / "snapshots" / hub.commit("org/tiny")
    assert _model_files(snapshot) == _model_files(tiny_model)
    assert "SmolLM2" not in result.stdout.str() + result.stderr.str()
    first = _rows(pytester)

    hub.forget()
    (pytester.path / "results.json").unlink()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    again = _run(pytester, "--base-model=org/tiny")
    again.assert_outcomes(failed=len(ROWS))
    assert hub.requests == []  # not even a metadata request: offline means offline
    assert _results(pytester)["base_model"] == "org/tiny"
    # The same weights: the cached copy is the model downloaded before, not some other one.
    assert [r["models"]["base"]["output"] for r in _rows(pytester)] == [
        r["models"]["base"]["output"] for r in first
    ]


@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_adapter_id_is_downloaded_with_the_base_it_names(
    pytester: pytest.Pytester, hub: FakeHub, tiny_model: Path, workers: list[str]
) -> None:
    # The adapter's adapter_config.json names org/tiny as its base: no --base-model, both come from the Hub.
    # Under xdist every worker resolves both ids again: they must find them in the cache, not download again.
    result = _run(pytester, "--adapter=org/tiny-adapter", *workers)
    result.assert_outcomes(failed=len(ROWS))
    document = _results(pytester)
    assert document["base_model"] == "org/tiny"
    assert document["adapter_name"] == "tiny-adapter"  # its metadata.json came with it
    # What peft loads and the adapter's metadata; its README is not for the run.
    assert hub.downloaded("org/tiny-adapter") == [
        "adapter_config.json",
        "adapter_model.safetensors",
        "metadata.json",
    ]
    assert hub.downloaded("org/tiny") == _model_files(tiny_model)
    rows = _rows(pytester)
    assert all(r["models"]["adapter"]["output"] and r["models"]["base"]["output"] for r in rows)
    # The random adapter changes what the model says: it was loaded onto the downloaded base.
    assert any(r["models"]["base"]["output"] != r["models"]["adapter"]["output"] for r in rows)


# --- what cannot be had stops the run, in one line ----------------------------------------------------


@pytest.mark.parametrize(
    ("offline", "how"),
    [({"HF_HUB_OFFLINE": "1"}, []), ({}, ["--llmeval-offline"])],
    ids=["HF_HUB_OFFLINE", "--llmeval-offline"],
)
def test_offline_base_model_not_in_the_cache_stops_the_run(
    pytester: pytest.Pytester,
    hub: FakeHub,
    monkeypatch: pytest.MonkeyPatch,
    offline: dict[str, str],
    how: list[str],
) -> None:
    for name, value in offline.items():
        monkeypatch.setenv(name, value)
    # org/tiny is on the (fake) Hub: only the offline setting keeps it from being downloaded.
    result = _run(pytester, "--base-model=org/tiny", *how)
    _assert_stopped(
        result, pytester, "--base-model 'org/tiny'", "is not in the Hugging Face cache", "downloads are off"
    )
    assert hub.requests == []


@pytest.mark.parametrize(
    ("option", "named"),
    [
        ("--base-model=org/missing", "--base-model 'org/missing'"),
        ("--llmeval-judge-model=org/missing", "--llmeval-judge-model 'org/missing'"),
        ("--llmeval-ppl-model=org/missing", "--llmeval-ppl-model 'org/missing'"),
        ("--llmeval-model=other=org/missing", "--llmeval-model other 'org/missing'"),
    ],
)
def test_model_not_on_the_hub_stops_the_run(
    pytester: pytest.Pytester, hub: FakeHub, option: str, named: str
) -> None:
    result = _run(pytester, option)
    line = _assert_stopped(
        result, pytester, named, "could not be downloaded from the Hugging Face Hub", "check the id"
    )
    # The reason is the Hub's own answer, not a guess.
    assert "RepositoryNotFoundError" in line and "Repository Not Found" in line
    assert any(r.path.startswith("/api/models/org/missing") for r in hub.requests)  # the Hub was asked


def test_repository_without_weights_stops_the_run(pytester: pytest.Pytester, hub: FakeHub) -> None:
    result = _run(pytester, "--base-model=org/no-weights")
    _assert_stopped(
        result,
        pytester,
        "--base-model 'org/no-weights'",
        "could not be downloaded from the Hugging Face Hub (no weights files in the repository)",
    )


@pytest.mark.parametrize("offline", [False, True], ids=["online", "offline"])
def test_adapter_whose_base_cannot_be_had_stops_the_run(
    pytester: pytest.Pytester,
    hub: FakeHub,
    tiny_adapter: Path,
    monkeypatch: pytest.MonkeyPatch,
    offline: bool,
) -> None:
    # Earlier the plugin quietly evaluated the embedded model in place of such a base.
    adapter = shutil.copytree(tiny_adapter, pytester.path / "adapter")
    _set_adapter_base(adapter, "org/gone")
    if offline:
        monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    result = _run(pytester, f"--adapter={adapter}")
    _assert_stopped(
        result,
        pytester,
        "'org/gone'",
        "base_model_name_or_path",
        "--base-model overrides it",
        "downloads are off" if offline else "could not be downloaded from the Hugging Face Hub",
        *([] if offline else ["RepositoryNotFoundError"]),
    )
    if offline:
        assert hub.requests == []


def test_adapter_id_not_on_the_hub_stops_the_run(pytester: pytest.Pytester, hub: FakeHub) -> None:
    result = _run(pytester, "--adapter=org/no-such-adapter")
    _assert_stopped(
        result,
        pytester,
        "--adapter org/no-such-adapter: no such folder",
        "could not be downloaded from the Hugging Face Hub",
        "RepositoryNotFoundError",
    )


# --- fetch_snapshot itself: the allow patterns, the cache when the Hub fails -------------------------


def _fetch(repo_id: str, where: Path) -> tuple[list[str], str | None]:
    """models.fetch_snapshot(repo_id, ..., MODEL_PATTERNS) in a fresh process (it reads HF_ENDPOINT and
    the cache from the environment): the snapshot's files and the note fetch_snapshot returned."""
    code = (
        "import json, sys; from pytest_llmeval.models import fetch_snapshot, MODEL_PATTERNS\n"
        "folder, note = fetch_snapshot(sys.argv[1], 'test', MODEL_PATTERNS)\n"
        "print(json.dumps([str(folder), note]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, repo_id],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
        cwd=where,  # not the repository: `python -c` imports from its working folder first
    )
    assert done.returncode == 0, done.stderr
    folder, note = json.loads(done.stdout.strip().splitlines()[-1])
    return _model_files(Path(folder)), note


def _repo(folder: Path, *files: str) -> Path:
    for name in files:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(name)
    return folder


def test_safetensors_are_preferred_and_bin_weights_are_the_fallback(
    hf_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tokenizer = ["config.json", "merges.txt", "tokenizer.json", "tokenizer.model"]
    others = ["model.gguf", "onnx/model.onnx"]
    both = _repo(tmp_path / "both", *tokenizer, *others, "model.safetensors", "pytorch_model.bin")
    only_bin = _repo(tmp_path / "only-bin", *tokenizer, *others, "pytorch_model.bin")
    with FakeHub({"org/both": both, "org/only-bin": only_bin}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        # Safetensors first: a repository with both formats is not downloaded twice.
        assert _fetch("org/both", tmp_path) == (sorted([*tokenizer, "model.safetensors"]), None)
        assert fake.downloaded("org/both") == sorted([*tokenizer, "model.safetensors"])
        assert _fetch("org/only-bin", tmp_path) == (sorted([*tokenizer, "pytorch_model.bin"]), None)
        assert fake.downloaded("org/only-bin") == sorted([*tokenizer, "pytorch_model.bin"])


@pytest.fixture
def cached_repo(hf_cache: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """org/x downloaded once into this test's cache, from a fake Hub that is gone afterwards: its files."""
    repo = _repo(tmp_path / "repo", "config.json", "tokenizer.json", "model.safetensors")
    with FakeHub({"org/x": repo}) as fake:
        monkeypatch.setenv("HF_ENDPOINT", fake.url)
        files, note = _fetch("org/x", tmp_path)
    assert files == ["config.json", "model.safetensors", "tokenizer.json"] and note is None
    return files


def test_a_cached_copy_stands_in_when_the_hub_fails(
    cached_repo: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Nothing listens at that address any more (no network): the cached copy, as every HF tool does.
    assert _fetch("org/x", tmp_path)[0] == cached_repo
    # A Hub that no longer has the repository (deleted, made private): the cached copy too.
    with FakeHub({}) as empty:
        monkeypatch.setenv("HF_ENDPOINT", empty.url)
        assert _fetch("org/x", tmp_path)[0] == cached_repo
        assert empty.requests  # it was asked: the copy stood in for a failed download, not for no download


@pytest.mark.parametrize("hub_answers", [False, True], ids=["unreachable", "repo-not-found"])
def test_a_cached_copy_that_stood_in_is_noted(
    cached_repo: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, hub_answers: bool
) -> None:
    if hub_answers:
        with FakeHub({}) as empty:
            monkeypatch.setenv("HF_ENDPOINT", empty.url)
            files, note = _fetch("org/x", tmp_path)
    else:  # HF_ENDPOINT still names the address of the fake Hub that is gone
        files, note = _fetch("org/x", tmp_path)
    assert files == cached_repo
    # What the report says about the weights it evaluated: not the Hub's current copy, and why.
    assert note is not None and "the Hub could not be reached" in note


# --- unit level ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("org/name", True),
        ("HuggingFaceTB/SmolLM2-135M-Instruct", True),
        ("gpt2", True),  # a repository without an organisation, as the Hub still serves some
        ("org/name.v1_2-x", True),
        ("./x", False),  # a relative path is written with ./ to be taken as one
        ("../x", False),
        ("/abs/path", False),
        ("~/x", False),
        ("a/b/c", False),  # a Hub id has at most one slash: a deeper name is a path
        ("org/", False),
        ("/org", False),
        ("", False),
        ("org name/x", False),
        (".hidden", False),
    ],
)
def test_looks_like_hub_id(name: str, expected: bool) -> None:
    assert looks_like_hub_id(name) is expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("1", True),
        ("true", True),
        ("TRUE", True),
        ("yes", True),
        ("on", True),
        (" 1 ", True),
        ("0", False),
        ("false", False),
        ("no", False),
        ("", False),
        (None, False),
    ],
)
def test_downloads_off(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: bool) -> None:
    if value is None:
        monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    else:
        monkeypatch.setenv("HF_HUB_OFFLINE", value)
    assert downloads_off() is expected
