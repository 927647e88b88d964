"""compose.yaml's stack on one (fake) 16 GiB card: every service's TensorFlow creates its own
capped device, and together they stay within the caps `build.py plan` adds up.

The services are compose.yaml's, changed only where the fake driver needs it: the GPU
reservation becomes the fake driver's mount (as in tests/containers/test_compose.py, compose v1
cannot remove a list item with an override file), all three share one fake card (one ledger),
and the model servers compute on the CPU (`MODEL_DEVICE=/CPU:0`: the fake computes nothing,
and has no cuBLAS for their dense layers) while their TensorFlow still creates its GPU."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import docker
import pytest
import yaml

import fakegpu
from tests.containers.test_compose import COMPOSE_FILE, cpu_only
from tests.gpu.harness import (
    CARD,
    FAKE_DRIVER_MOUNT,
    HERE,
    LOG_MOUNT,
    MIB,
    PROBE_MOUNT,
    GpuHost,
    GpuRun,
)
from tests.kit_images import COMPOSE_MISSING, ROOT, build_py, compose_command

CAPS = {"text-model": 6144, "image-model": 8192, "jupyter": 512}


def compose_or_fail() -> list[str]:
    command = compose_command()
    if command is None:
        pytest.fail(COMPOSE_MISSING, pytrace=False)
    return command


def on_fake_card(compose: dict[str, Any], driver_dir: Path, log_dir: Path) -> dict[str, Any]:
    """compose.yaml with every service on the same fake 16 GiB card."""
    derived = cpu_only(compose, project_dir=ROOT)
    for name, service in derived["services"].items():
        service["volumes"] += [
            f"{driver_dir}:{FAKE_DRIVER_MOUNT}:ro",
            f"{log_dir}:{LOG_MOUNT}",
            f"{HERE}:{PROBE_MOUNT}:ro",
        ]
        service["devices"] = ["/dev/null:/dev/nvidiactl"]
        env = fakegpu.environment(
            [CARD], log=f"{LOG_MOUNT}/{name}.jsonl", ledger=f"{LOG_MOUNT}/ledger"
        )
        service["environment"] = {**service.get("environment", {}), **env}
        if name != "jupyter":
            service["environment"]["MODEL_DEVICE"] = "/CPU:0"
    return derived


@pytest.fixture(scope="module")
def stack(
    gpu_host: GpuHost, request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[dict[str, Any], Path]]:
    if gpu_host.real:
        pytest.skip("on a real card, `docker compose up` of compose.yaml itself is the test")
    request.getfixturevalue("kit_images")  # the images compose.yaml names
    work = tmp_path_factory.mktemp("stack")
    log_dir = work / "fakegpu"
    log_dir.mkdir()
    log_dir.chmod(0o777)
    path = work / "compose.fakegpu.yaml"
    assert gpu_host.fake_driver is not None
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    derived = on_fake_card(compose, gpu_host.fake_driver, log_dir)
    path.write_text(yaml.safe_dump(derived, sort_keys=False))
    command = [*compose_or_fail(), "-p", f"tfgpufake{os.getpid()}", "-f", str(path)]
    subprocess.run([*command, "up", "-d"], check=True, capture_output=True, timeout=300)
    client = docker.from_env()
    try:
        containers = {
            c.labels["com.docker.compose.service"]: c
            for c in client.containers.list(
                all=True, filters={"label": f"com.docker.compose.project=tfgpufake{os.getpid()}"}
            )
        }
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            health = {}
            for name, container in containers.items():
                container.reload()
                assert container.status == "running", container.logs().decode()[-3000:]
                health[name] = container.attrs["State"].get("Health", {}).get("Status")
            if all(h == "healthy" for h in health.values()):
                break
            time.sleep(3)
        else:
            pytest.fail(f"the stack did not become healthy: {health}")
        yield containers, log_dir
    finally:
        subprocess.run([*command, "down", "-v", "--timeout", "10"], capture_output=True)
        client.close()


def _logs(container: Any) -> GpuRun:
    stdout = container.logs(stdout=True, stderr=False).decode(errors="replace")
    return GpuRun(0, stdout, container.logs(stdout=False, stderr=True).decode(errors="replace"))


def test_every_service_gets_its_own_capped_device(
    stack: tuple[dict[str, Any], Path], figures: dict[str, Any]
) -> None:
    """compose stack: each service's TensorFlow creates its GPU with the service's cap"""
    containers, _ = stack
    for name in ("text-model", "image-model"):
        run = _logs(containers[name])
        assert [(c.logical, c.mb) for c in run.created] == [(0, CAPS[name])], run.tail()
        figures[name] = run.created[0].mb
    # A notebook kernel is a process of its own; one started in the jupyter container
    # (as the kernel would be) gets the jupyter service's cap.
    code, out = containers["jupyter"].exec_run(
        ["python", "-c", "import tensorflow as tf; print(tf.config.list_logical_devices('GPU'))"]
    )
    kernel = GpuRun(code, out.decode(errors="replace"), "")
    assert code == 0, kernel.tail()
    assert [(c.logical, c.mb) for c in kernel.created] == [(0, CAPS["jupyter"])], kernel.tail()
    figures["jupyter"] = kernel.created[0].mb


def test_the_card_holds_no_more_than_the_caps(
    stack: tuple[dict[str, Any], Path], figures: dict[str, Any]
) -> None:
    """compose stack: every service fills its cap at once, and the card holds their sum"""
    containers, log_dir = stack
    plan = build_py("plan", str(COMPOSE_FILE), "--gpu-memory", f"{CARD.memory_mib}MiB", "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    [gpu0] = json.loads(plan.stdout)["gpus"]
    planned_caps = {e["who"]: e["cap_mib"] for e in gpu0["entries"]}
    assert planned_caps == CAPS
    # One more TensorFlow process in each service (as a second worker or a notebook kernel
    # would be), all filling their cap at the same time and holding it for a while.
    fill = ["python", f"{PROBE_MOUNT}/probe.py", "fill", "64", "20"]
    with ThreadPoolExecutor(len(CAPS)) as pool:
        runs = dict(zip(CAPS, pool.map(lambda n: containers[n].exec_run(fill), CAPS), strict=True))
    for name, (code, out) in runs.items():
        run = GpuRun(code, out.decode(errors="replace"), "")
        assert code == 0, run.tail()
        result = run.probe
        assert result["error"] == "ResourceExhaustedError", (name, result)
        assert 0 < result["memory"]["peak"] <= CAPS[name] * MIB, (name, result)
        figures[f"{name}_peak_bytes"] = result["memory"]["peak"]
    events = [e for f in sorted(log_dir.glob("*.jsonl")) for e in fakegpu.read_log(f)]
    # device_live counts every process on the card (the fake's shared ledger)
    card_peak = max(int(e["device_live"]) for e in events)
    total_caps = sum(planned_caps.values()) * MIB
    assert 0.8 * total_caps < card_peak <= total_caps
    assert not [e for e in events if e["event"] == "oom"], "the card itself never ran out"
    figures.update(
        card_peak_bytes=card_peak,
        planned_caps_mib=planned_caps,
        planned_committed_mib=gpu0["committed_mib"],
    )
