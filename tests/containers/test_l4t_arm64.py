"""The Jetson (L4T, arm64) image, built and run on arm64 — under QEMU where the host is x86 —
on the stand-in of its base (tests/base_standins/l4t.py: Debian 11 arm64, PyPI's aarch64
TensorFlow 2.11, no CUDA) and a fake AGX Xavier 16 GB (the stand-in's TEGRA_ROOT, given to the
runtime by TFGPU_SYSROOT).

Proved here, in containers of the image that `./kit test-images arm64` builds before the
tests (`build.py build 2.11.0-l4t-r35.2.1-arm64 --base-registry tfgpu-standin.local`): the hook
applies the configuration with real aarch64 TensorFlow (TF_CPU_VIRTUAL_DEVICES becomes TensorFlow's
logical CPUs), bad settings end in exit 78 before anything runs (the same refusal at `import
tensorflow` without the entrypoint is pure Python, proved on x86 by tests/containers/test_run.py:
not repeated here, where each TensorFlow start costs a minute or more), `tfgpu show` and `tfgpu
check` report the Jetson, its unified memory and the cap, `build.py verify` judges the image as far
as it can without CUDA, and the edge box (examples/compose.jetson.yaml: three models, 512 MiB caps,
growth on; its `plan` with the Jetson's reserve: tests/scale/test_plan_edge_box.py) starts. Not
proved: anything of the GPU (PyPI's aarch64 TensorFlow has no CUDA; no Jetson ran this).

Where the engine cannot run arm64 (no QEMU handler, not an arm64 host) every test here is
skipped with the reason, and under CI=true it fails instead (.ci/run registers QEMU's handler;
its no-emulation step runs this module with the handler off and checks the skips)."""

from __future__ import annotations

import json
import subprocess
import time
import urllib.request
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

from tests.base_standins import REGISTRY
from tests.base_standins.build import existing_key
from tests.base_standins.l4t import (
    ENV,
    PLATFORM,
    TEGRA_MODEL,
    TEGRA_ROOT,
    TEGRA_TOTAL_MIB,
    l4t_key,
    l4t_tag,
)
from tests.ci_policy import ci_or_skip
from tests.containers.tracked import Outcome, TrackedContainer
from tests.kit_images import (
    COMPOSE_MISSING,
    L4T,
    ROOT,
    build_py,
    compose_command,
    take,
    take_standin,
)
from tfgpu_kit.image import docker_engine

pytestmark = pytest.mark.docker

IMAGE = L4T
JETSON_ENV = {"TFGPU_SYSROOT": TEGRA_ROOT}
COMPOSE_FILE = ROOT / "examples" / "compose.jetson.yaml"
CAP_MIB = 512
# Emulated TensorFlow is slow to import (about 15 s of CPU on 2 cores, more under load)
TF_TIMEOUT = 600


def arm64_or_skip(client: docker.DockerClient) -> str:
    """How this engine runs arm64 ("native" or "emulated (…)"); otherwise skip (fail in CI)."""
    capability = docker_engine.arm64_capability(docker_engine.engine_arch(client))
    if not capability.can:
        ci_or_skip(
            f"arm64 images cannot run here: {capability.how}",
            in_ci_because="; .ci/run registers QEMU's qemu-aarch64 handler",
        )
    return capability.how


@pytest.fixture(scope="module")
def arm64(docker_client: docker.DockerClient) -> str:
    return arm64_or_skip(docker_client)


@pytest.fixture(scope="module")
def l4t_standin(arm64: str, request: pytest.FixtureRequest) -> str:
    tag = take_standin(request, l4t_tag(), "l4t")
    assert existing_key(tag) == l4t_key(), (
        f"{tag} is not the stand-in its recipe makes now: python -m tests.base_standins build l4t"
    )
    return tag


@pytest.fixture(scope="module")
def l4t_image(l4t_standin: str, request: pytest.FixtureRequest) -> str:
    return take(request, "l4t")


@pytest.fixture
def jetson(docker_client: docker.DockerClient, l4t_image: str) -> Iterator[TrackedContainer]:
    tracked = TrackedContainer(
        docker_client, l4t_image, defaults={"platform": PLATFORM, "environment": JETSON_ENV}
    )
    yield tracked
    tracked.remove_all()


def run(
    tracked: TrackedContainer,
    command: Sequence[str],
    env: dict[str, str] | None = None,
    **kwargs: Any,
) -> Outcome:
    """One container of the image on the fake Jetson."""
    kwargs.setdefault("timeout", TF_TIMEOUT)
    return tracked.run_and_wait(list(command), environment={**JETSON_ENV, **(env or {})}, **kwargs)


# --- the stand-in and the image ----------------------------------------------------------------


def test_the_standin_is_an_arm64_image_with_the_real_bases_env(
    docker_client: docker.DockerClient, l4t_standin: str
) -> None:
    image = docker_client.images.get(l4t_standin)
    assert image.attrs["Architecture"] == "arm64" and image.attrs["Os"] == "linux"
    env = dict(item.split("=", 1) for item in image.attrs["Config"]["Env"])
    assert {k: env.get(k) for k in ENV} == ENV
    assert l4t_standin == l4t_tag() == f"{REGISTRY}/{IMAGE.base_ref}"


def test_the_image_is_built_for_arm64_from_the_standin(
    docker_client: docker.DockerClient, l4t_image: str, jetson: TrackedContainer
) -> None:
    image = docker_client.images.get(l4t_image)
    assert image.attrs["Architecture"] == "arm64"
    labels = image.attrs["Config"]["Labels"]
    assert labels["io.tfgpu.platform"] == "linux/arm64" and labels["io.tfgpu.l4t"] == "35.2.1"
    assert labels["org.opencontainers.image.base.name"] == f"{REGISTRY}/{IMAGE.base_ref}"
    assert set(IMAGE.tags()) <= set(image.tags)
    out = run(jetson, ["uname", "-m"])
    assert out.stdout.strip() == "aarch64"


# --- the runtime on the fake Jetson --------------------------------------------------------------


def test_show_reports_the_jetson_its_unified_memory_and_the_cap(jetson: TrackedContainer) -> None:
    out = run(jetson, ["tfgpu", "show", "--json"], {"TF_GPU_MEM_LIMIT": f"{CAP_MIB}MiB"})
    doc = json.loads(out.stdout)
    assert doc["ok"], doc
    tegra = doc["tegra"]
    assert tegra["model"] == TEGRA_MODEL and tegra["l4t_release"] == "35.2.1"
    assert tegra["unified_memory_total_mib"] == TEGRA_TOTAL_MIB
    assert doc["settings"]["TF_GPU_MEM_LIMIT"]["value"] == f"{CAP_MIB}MiB"


def test_check_reports_the_jetson_and_the_cap_it_would_apply(jetson: TrackedContainer) -> None:
    out = run(jetson, ["tfgpu", "check", "--json"], {"TF_GPU_MEM_LIMIT": "25%"}, expect_exit=None)
    doc = json.loads(out.stdout)
    assert doc["tegra"]["model"] == TEGRA_MODEL
    assert doc["tegra"]["unified_memory_total_mib"] == TEGRA_TOTAL_MIB
    # 25 % is of the unified memory, as on a card it is of the card's
    assert doc["plan"]["gpu_limits_mib"] == [[float(TEGRA_TOTAL_MIB // 4)]]
    assert doc["tensorflow"]["importable"] and doc["tensorflow"]["version"] == "2.11.0"
    assert not [p for p in doc["problems"] if "NVML" in p["what"]], doc["problems"]


# The hook's work, observed inside TensorFlow: the logical CPUs TF_CPU_VIRTUAL_DEVICES asked for,
# and what the runtime put in the environment before TensorFlow read it.
HOOKED = """
import json, os
import tensorflow as tf
print(json.dumps({
    "tf": tf.__version__,
    "cpus": [d.name for d in tf.config.list_logical_devices("CPU")],
    "gpus": [d.name for d in tf.config.list_physical_devices("GPU")],
    "allow_growth": os.environ.get("TF_FORCE_GPU_ALLOW_GROWTH"),
}))
"""


def test_the_hook_applies_the_configuration_in_aarch64_tensorflow(
    jetson: TrackedContainer,
) -> None:
    out = run(
        jetson,
        ["python3", "-c", HOOKED],
        {"TF_CPU_VIRTUAL_DEVICES": "2", "TF_GPU_MEM_LIMIT": f"{CAP_MIB}MiB"},
    )
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["tf"] == "2.11.0"
    assert doc["cpus"] == ["/device:CPU:0", "/device:CPU:1"]
    assert doc["gpus"] == []  # PyPI's aarch64 build has no CUDA
    assert doc["allow_growth"] == "true"  # the image's TF_GPU_MEMORY_GROWTH=true, applied
    # tfgpu run's summary: the Jetson, and no NVML warning
    assert "shared with the CPU" in out.stderr and "L4T R35.2.1" in out.stderr, out.stderr
    assert "NVML" not in out.stderr


@pytest.mark.parametrize(
    ("env", "said"),
    [
        ({"TF_GPU_MEM_LIMIT": "lots"}, "TF_GPU_MEM_LIMIT='lots' is not valid"),
        # above the unified memory: refused on a Jetson as above a card's memory elsewhere
        ({"TF_GPU_MEM_LIMIT": "16GiB"}, f"{TEGRA_TOTAL_MIB} MiB"),
    ],
    ids=["not-a-size", "above-the-unified-memory"],
)
def test_bad_settings_exit_78_and_run_nothing(
    jetson: TrackedContainer, env: dict[str, str], said: str
) -> None:
    out = run(jetson, ["sh", "-c", "echo RAN"], env, expect_exit=78, no_errors=False)
    assert "RAN" not in out.stdout
    assert said in out.stderr, out.stderr


# --- verify --------------------------------------------------------------------------------------


def test_verify_judges_the_l4t_image_and_says_what_it_could_not_check(l4t_image: str) -> None:
    proc = build_py("verify", l4t_image, "--json", timeout=TF_TIMEOUT)
    checks = {c["name"]: c for c in json.loads(proc.stdout)[l4t_image]}
    failed = {name for name, c in checks.items() if c["ok"] is False}
    not_checked = {name for name, c in checks.items() if c["ok"] is None}
    # what the stand-in is not (tests/base_standins/l4t.py, DIFFERENCES): found and named
    assert failed == {"python", "cuda build"}, checks
    assert "3.9" in checks["python"]["detail"] and "3.8" in checks["python"]["detail"]
    assert proc.returncode == 1
    # what cannot be known without a Jetson's CUDA: said, not passed
    assert {"CUDA libraries", "TensorFlow registers a GPU"} <= not_checked
    for name in ("tensorflow version", "runtime hook", "settings applied", "runtime self-check"):
        assert checks[name]["ok"] is True, checks[name]
    assert checks["label io.tfgpu.l4t"]["ok"] and checks["env NVIDIA_REQUIRE_CUDA"]["ok"]


# --- the edge box: examples/compose.jetson.yaml (its plan: tests/scale/test_plan_edge_box.py) ---


def on_the_standin(compose: dict[str, Any]) -> dict[str, Any]:
    """The same services without the nvidia runtime (none here), on the fake Jetson
    (TFGPU_SYSROOT), publishing on free loopback ports, the examples mounted by absolute path."""
    derived: dict[str, Any] = json.loads(json.dumps(compose))
    for service in derived["services"].values():
        assert service.pop("runtime") == "nvidia"
        service["environment"] = {**service["environment"], **JETSON_ENV}
        service["ports"] = [f"127.0.0.1::{str(p).split(':')[-1]}" for p in service["ports"]]
        service["volumes"] = [f"{ROOT / 'examples'}:/srv/examples:ro"]
    derived.pop("x-model", None)
    return derived


PREDICT = {"text": {"text": "a great film"}, "image": {"pixels": [[0.5] * 28] * 28}}


def _health(compose: list[str], project: str, path: Path, service: str) -> tuple[str, str]:
    cid = subprocess.run(
        [*compose, "-p", project, "-f", str(path), "ps", "-q", service],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    state = subprocess.run(
        ["docker", "inspect", "-f", "{{.State.Health.Status}}", cid],
        capture_output=True, text=True, check=False,
    ).stdout.strip()  # fmt: skip
    return cid, state


def test_the_edge_box_starts_on_the_standin(
    docker_client: docker.DockerClient, l4t_image: str, tmp_path: Path
) -> None:
    compose = compose_command()
    if compose is None:
        pytest.fail(COMPOSE_MISSING)
    path = tmp_path / "compose.yaml"
    data = on_the_standin(yaml.safe_load(COMPOSE_FILE.read_text()))
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    project = f"tfgpu-l4t-{int(time.time())}"
    up = subprocess.run(
        [*compose, "-p", project, "-f", str(path), "up", "-d"], capture_output=True, text=True
    )
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        states: dict[str, str] = {}
        deadline = time.monotonic() + TF_TIMEOUT
        while time.monotonic() < deadline:
            states = {s: _health(compose, project, path, s)[1] for s in data["services"]}
            if (
                all(state == "healthy" for state in states.values())
                or "unhealthy" in states.values()
            ):
                break
            time.sleep(5)
        assert set(states.values()) == {"healthy"}, states
        for name in data["services"]:
            cid, _ = _health(compose, project, path, name)
            container = docker_client.containers.get(cid)
            port = data["services"][name]["ports"][0].split(":")[-1]
            host = container.ports[f"{port}/tcp"][0]["HostPort"]
            with urllib.request.urlopen(f"http://127.0.0.1:{host}/healthz", timeout=10) as r:
                health = json.loads(r.read())
            memory = health["memory"]
            # the cap and growth this very process resolved, on the Jetson's unified memory
            assert memory["requested"] == {"memory_limit": f"{CAP_MIB}MiB", "memory_growth": "true"}
            assert memory["applied"]["TF_FORCE_GPU_ALLOW_GROWTH"] == "true", memory
            tegra = memory["tfgpu_show"]["tegra"]
            assert tegra["unified_memory_total_mib"] == TEGRA_TOTAL_MIB, memory
            request = urllib.request.Request(
                f"http://127.0.0.1:{host}/predict",
                data=json.dumps(PREDICT[health["model"]]).encode(),
            )
            with urllib.request.urlopen(request, timeout=60) as r:
                answer = json.loads(r.read())
            assert abs(sum(answer["probabilities"]) - 1) < 1e-3, answer
    finally:
        subprocess.run(
            [*compose, "-p", project, "-f", str(path), "down", "-v", "-t", "5"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
