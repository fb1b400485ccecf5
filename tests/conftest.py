"""Shared fixtures: tiny random models and adapters, built once per test session; how the suite runs in
parallel (docs/development.md, "The test suite's time")."""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

# Under xdist, each worker gets its share of the cores for torch's threads, set before torch is imported
# (and inherited by every process a test starts: a subprocess run, a server, an inner run's workers). Two
# workers of two threads each on two cores spin against each other in OpenMP: the suite's CPU time doubled.
if os.environ.get("PYTEST_XDIST_WORKER"):
    _share = max(1, (os.cpu_count() or 1) // max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))
    for _name in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_name, str(_share))

import pytest
from helpers import REPO, build_tiny_adapter, build_tiny_model
from hypothesis import settings
from locollm import validate_locollm

from pytest_llmeval.models import CACHE_ENV, cache_dir
from pytest_llmeval.results_file import document_text
from pytest_llmeval.results_reader import ResultsFileError, read_results

# pytester points HOME at each test's own folder, and the embedded model's converted folder lives under HOME
# by default: every pytester run of the embedded model converted the GGUF again (a minute each, in a dozen
# tests). The whole session, and every process it starts, shares one converted folder, as a user's runs do
# (the cache's own behaviour is tested with folders of its own: tests/test_models.py, test_readme_claims.py).
os.environ.setdefault(CACHE_ENV, str(cache_dir()))

if TYPE_CHECKING:
    from pytest_llmeval.models import LoadedModel


# lm-eval tasks' data in their datasets' own schemas (tests/test_lm_eval_tasks.py reads them): JSONL files,
# but not benchmark files, so the plugin must not collect them as rows.
collect_ignore_glob = ["data/lm_eval/*"]


def pytest_configure(config: pytest.Config) -> None:
    """numpy, torch and what transformers and peft register in torch cannot be imported twice in one process
    ("bad call flags", "Only a single TORCH_LIBRARY"), and pytester's in-process runs forget the modules
    they imported: import them once, before any test runs, whichever test file runs first. Not in an xdist
    controller, which runs no test: its 7 s of imports would only delay the workers' start."""
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        import peft  # noqa: F401
        import torch  # noqa: F401
        from transformers import LlamaForCausalLM  # noqa: F401

        import pytest_llmeval.stats  # noqa: F401


@pytest.fixture(scope="session")
def real_model() -> LoadedModel:
    """The embedded SmolLM2-135M-Instruct in float32 on CPU, loaded once for every test that reads it."""
    from pytest_llmeval.models import ModelSpec, load

    return load(ModelSpec(dtype="float32", device="cpu"))


@pytest.fixture(scope="session")
def merged_date_iso(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The demo adapter date-iso merged into the embedded base (peft's merge_and_unload), saved once as a
    full float32 model folder: a full model whose answers to dates differ from the base's."""
    from serving import merge_adapter

    from pytest_llmeval.models import embedded_model_dir

    folder = tmp_path_factory.mktemp("merged-date-iso")
    return merge_adapter(embedded_model_dir(), REPO / "adapters/date-iso", folder)


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture(scope="session")
def tiny_adapter(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_adapter(tiny_model, tmp_path_factory.mktemp("tiny-adapter"))


@pytest.fixture(scope="session")
def other_arch_adapter(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An adapter made for a model of another hidden size: must be refused for tiny_model."""
    other = build_tiny_model(tmp_path_factory.mktemp("other-model"), hidden=48)
    adapter = build_tiny_adapter(other, tmp_path_factory.mktemp("other-adapter"))
    shutil.rmtree(other)  # its base is gone too: only --base-model tiny_model can be tried
    return adapter


@pytest.fixture(autouse=True)
def _every_results_json_follows_locollm(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every results.json a test makes the plugin write is checked against the LocoLLM schema, and read
    back by the plugin's own reader (read_results: what every command, baseline and history entry goes
    through), so that no end-to-end test passes on a document a user's next command would refuse."""
    # Taken before the test: after it, the fixtures may already be torn down.
    folders = [
        request.getfixturevalue(name).path if name == "pytester" else request.getfixturevalue(name)
        for name in ("pytester", "tmp_path")
        if name in request.fixturenames
    ]
    yield
    for folder in folders:
        for path in sorted(Path(folder).rglob("*.json")):
            try:
                text = path.read_text(encoding="utf-8")
                document = json.loads(text)
            except (OSError, ValueError):
                continue
            if isinstance(document, dict) and "schema_version" in document and "benchmarks" in document:
                try:
                    # History entries keep every run, also one whose rows all failed or were skipped.
                    validate_locollm(document, unscored_top_level=True)
                except AssertionError as exc:
                    raise AssertionError(f"{path}: {exc}") from None
                try:
                    # The plugin writes every document with document_text, byte for byte; a test that
                    # damages a document on purpose (to see the reader refuse it) writes it otherwise.
                    written_by_the_plugin = text == document_text(document)
                except ValueError:  # NaN: json.dumps writes it, document_text never does
                    written_by_the_plugin = False
                if written_by_the_plugin:
                    try:
                        read_results(path)
                    except ResultsFileError as exc:
                        raise AssertionError(f"the plugin wrote what its own reader refuses: {exc}") from None


@pytest.fixture(autouse=True)
def _no_outer_xdist_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A test sees the same environment whether this suite runs serially or under xdist: the runs it
    starts (in process, or as subprocesses) must not take themselves for workers of the outer run."""
    for name in ("PYTEST_XDIST_WORKER", "PYTEST_XDIST_WORKER_COUNT", "PYTEST_XDIST_TESTRUNUID"):
        monkeypatch.delenv(name, raising=False)


# ---------------------------------------------------------------------------------------------------------
# The suite under xdist (make test, make test-fast): whole files per worker, the longest files first.

# The last profile (`make test-profile` writes it): seconds by test file, the schedule's order, and the tests
# that took 1.5 s or more, which are marked slow so that make test-fast stays a quick loop.
DURATIONS = Path(__file__).with_name("durations.json")


def _profile() -> tuple[dict[str, float], set[str]]:
    try:
        found = json.loads(DURATIONS.read_text(encoding="utf-8"))
        return {str(k): float(v) for k, v in found["files"].items()}, set(found["slow_tests"])
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return {}, set()


@pytest.hookimpl(tryfirst=True)  # before -m deselects by these marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Tests that took 1.5 s or more in the last profile are `slow` too (beside those marked so in the code:
    the real model, the browser). Under xdist, the files that took longest go first, so the long ones do not
    start last and run alone at the end (longest-processing-time-first); tests keep their order in a file,
    and a serial run keeps pytest's order."""
    weights, slow = _profile()
    for item in items:
        if item.nodeid in slow:
            item.add_marker(pytest.mark.slow)
    if hasattr(config, "workerinput"):
        items.sort(key=lambda item: -weights.get(item.nodeid.split("::", 1)[0], 0.0))


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`--dist loadgroup` for this suite: a file's tests stay on one worker (its module fixtures, such as a
    real-model run that several tests read, are built once), tests marked `xdist_group(name)` share one
    worker across files, and the files go out in collection order (the order above)."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FileOrGroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            if nodeid.rfind("@") > nodeid.rfind("]"):  # xdist appends @name for xdist_group
                return nodeid.rsplit("@", 1)[1]
            return nodeid.split("::", 1)[0]

    config.option.loadscopereorder = False  # keep the order above, not "most tests first"
    return FileOrGroupScheduling(config, log)


# `--fixture-durations=PATH`: seconds spent setting up each fixture, summed by name, written as JSON (a
# worker appends its id to the name). tools/test_profile.py reads it beside the JUnit XML.
_FIXTURE_SECONDS: dict[str, float] = {}


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--fixture-durations", default=None, help="write fixture set-up seconds to this file")


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[Any], request: pytest.FixtureRequest) -> Any:
    started = time.perf_counter()
    try:
        return (yield)
    finally:
        key = f"{fixturedef.argname} ({fixturedef.scope})"
        _FIXTURE_SECONDS[key] = _FIXTURE_SECONDS.get(key, 0.0) + time.perf_counter() - started


def pytest_sessionfinish(session: pytest.Session) -> None:
    target = session.config.getoption("fixture_durations")
    if target:
        worker = os.environ.get("PYTEST_XDIST_WORKER")
        path = Path(f"{target}.{worker}" if worker else target)
        path.write_text(json.dumps(_FIXTURE_SECONDS, indent=1, sort_keys=True), encoding="utf-8")


# Hypothesis's 200 ms deadline per example measures the machine, not the code: beside a busy xdist worker a
# correct example can take longer. Examples and shrinking are unchanged (`@settings` in a test still wins).
settings.register_profile("suite", deadline=None)
settings.load_profile("suite")
