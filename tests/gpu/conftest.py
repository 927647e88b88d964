"""Fixtures of the GPU tests: the host (fake driver or real card), the image under test, and
the report (gpu-report.json at the checkout's root) that says which claim held, with figures.

Every test here is marked `docker` and `gpu` (collection adds both); those marked `real_gpu`
need what only a real card shows and are skipped, with that reason, on the fake driver."""

from __future__ import annotations

import platform
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.gpu import report as claims_report
from tests.gpu.harness import CARD, GpuHost, real_gpu_present
from tests.kit_images import KIT_GPU, KIT_OLDER

_claims: dict[str, dict[str, Any]] = {}
_context: dict[str, Any] = {}


# tryfirst: the `docker` mark is on the item before tests/conftest.py reads it (the test's group)
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if here in Path(str(item.path)).parents:
            item.add_marker(pytest.mark.docker)
            item.add_marker(pytest.mark.gpu)


@pytest.fixture(scope="session")
def real_gpu(request: pytest.FixtureRequest) -> bool:
    return bool(request.config.getoption("--real-gpu")) or real_gpu_present()


@pytest.fixture(autouse=True)
def _real_only(request: pytest.FixtureRequest, real_gpu: bool) -> None:
    if request.node.get_closest_marker("real_gpu") and not real_gpu:
        pytest.skip("needs a real GPU (run `./kit test -m gpu --real-gpu` on a host with one)")


@pytest.fixture(scope="session")
def gpu_host(
    docker_client: docker.DockerClient, real_gpu: bool, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[GpuHost]:
    host = GpuHost(docker_client, real=real_gpu, workdir=tmp_path_factory.mktemp("fakegpu"))
    _context.update(_describe_host(host))
    yield host
    host.remove_all()


def _remember_images(*names: str) -> None:
    known = _context.setdefault("images", [])
    known.extend(n for n in names if n not in known)


@pytest.fixture(scope="session", params=["gpu", "gpu-slim"])
def image(request: pytest.FixtureRequest) -> str:
    """The kit image under test, each test once per variant: the 2.21 gpu image (repaired, on the
    official base's stand-in) and the 2.21 slim one, built from the stand-ins; or
    --gpu-image / --gpu-slim-image (e.g. built by `./kit build` from the real bases)."""
    option = "--gpu-image" if request.param == "gpu" else "--gpu-slim-image"
    chosen = request.config.getoption(option)
    if not chosen and request.config.getoption("--gpu-image"):
        pytest.skip(f"--gpu-image names the image under test; {option} the slim one")
    if not chosen:
        chosen = (
            request.getfixturevalue("kit_images")["gpu"]
            if request.param == "gpu"
            else request.getfixturevalue("slim_image")
        )
    _remember_images(chosen)
    return str(chosen)


@pytest.fixture(scope="session")
def runtime_image(request: pytest.FixtureRequest) -> str:
    """For the runtime's own behaviour on a GPU (logical splits, recovery, metrics, show, the
    door's checks): the same tfgpu package, byte for byte, is in every variant, so these run once,
    on the repaired 2.21 image (or --gpu-image). What the variants change, the base and where CUDA
    comes from, the `image` tests (caps, growth, check's libraries) cover on both."""
    chosen = request.config.getoption("--gpu-image") or request.getfixturevalue("kit_images")["gpu"]
    _remember_images(chosen)
    return str(chosen)


@pytest.fixture(scope="session")
def images(request: pytest.FixtureRequest, gpu_host: GpuHost) -> dict[str, str]:
    """The two kit images the driver verdicts are checked against: 2.21 (CUDA 12.5) and 2.17.
    Fake driver only: a real card's driver version is what it is."""
    if gpu_host.real:
        pytest.skip("the fake driver's version is chosen per run; a real card's is what it is")
    kit_images = request.getfixturevalue("kit_images")
    _remember_images(KIT_GPU, KIT_OLDER)
    return {"2.21": kit_images["gpu"], "2.17": kit_images["older"]}


@pytest.fixture(autouse=True)
def _claim(request: pytest.FixtureRequest) -> dict[str, Any]:
    """Every GPU test is a claim in the report, named by its docstring's first line."""
    doc = (request.node.function.__doc__ or request.node.name).strip().splitlines()[0]
    entry: dict[str, Any] = {"claim": doc, "figures": {}}
    _claims[request.node.nodeid] = entry
    return entry


@pytest.fixture
def figures(_claim: dict[str, Any]) -> dict[str, Any]:
    """The test's figures, written to the report with its outcome."""
    return _claim["figures"]  # type: ignore[no-any-return]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    outcome = yield
    report = outcome.get_result()
    if item.nodeid in _claims and (report.when == "call" or report.outcome != "passed"):
        _claims[item.nodeid]["outcome"] = report.outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    if not _claims:
        return
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: the controller writes one report of all
        workeroutput[claims_report.KEY] = claims_report.handed_over(_context, _claims)
        return
    claims_report.write(_context, _claims)


def _run(*cmd: str) -> str:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=30, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _describe_host(host: GpuHost) -> dict[str, Any]:
    """Host, GPUs, driver and how containers get them, for the report."""
    described: dict[str, Any] = {"host": platform.node(), "mode": host.mode}
    if host.real:
        query = "name,memory.total,driver_version"
        rows = _run("nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader")
        described["gpus"] = [row.strip() for row in rows.splitlines()]
        config = Path("/etc/nvidia-container-runtime/config.toml")
        mode = "unknown"
        if config.is_file():
            for line in config.read_text().splitlines():
                if line.strip().startswith("mode") and "=" in line:
                    mode = line.split("=", 1)[1].strip().strip('"')
        described["toolkit"] = {"version": _run("nvidia-ctk", "--version"), "mode": mode}
    else:
        described["gpus"] = [f"{CARD.name}, {CARD.memory_mib} MiB (fake driver)"]
        described["driver"] = "fake libcuda/libcudart/NVML (fakegpu/), 560.35.03"
        described["toolkit"] = {"mode": "none: the fake driver is mounted, no NVIDIA runtime"}
    return described
