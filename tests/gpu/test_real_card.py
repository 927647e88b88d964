"""What only a real card shows: the memory a process really holds on it (NVML, including the
CUDA context TensorFlow's allocator does not count), two capped containers side by side within
what `build.py plan` budgets, and whether the NVIDIA runtime checks NVIDIA_REQUIRE_CUDA.

Skipped with the reason on the fake driver. Not yet run on a GPU by the kit's developers: the
first `./kit test -m gpu --real-gpu` on a card writes the first report (docs/gpu-reports/)."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import yaml

from tests.gpu.harness import PROBE_MOUNT, GpuHost, GpuRun
from tests.kit_images import build_py

pytestmark = pytest.mark.real_gpu
CAP = 2048
HOLD = 40


def _card_mib(field: str, index: int) -> int:
    """nvidia-smi's memory.used or memory.total of one card, in MiB."""
    out = subprocess.run(
        ["nvidia-smi", "-i", str(index), f"--query-gpu={field}", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    return int(out.strip().splitlines()[0])


def card_used_mib(index: int = 0) -> int:
    return _card_mib("memory.used", index)


def card_total_mib(index: int = 0) -> int:
    return _card_mib("memory.total", index)


def hold_cap(gpu_host: GpuHost, image: str, count: int) -> tuple[list[Any], int]:
    """`count` containers that fill their cap (growth off) and hold it; the card's used MiB
    while all of them hold."""
    fill = ["python", f"{PROBE_MOUNT}/probe.py", "fill", "64", str(HOLD)]
    env = {
        "TF_GPU_MEM_LIMIT": str(CAP),
        "TF_GPU_MEMORY_GROWTH": "false",
        "CUDA_VISIBLE_DEVICES": "0",
    }
    containers = [gpu_host.start(image, fill, env)[0] for _ in range(count)]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        if all("PROBE-JSON" in c.logs(stderr=False).decode(errors="replace") for c in containers):
            return containers, card_used_mib(0)
        time.sleep(2)
    pytest.fail("the filling containers did not all report within 240 s")


def test_a_process_holds_its_cap_plus_the_cuda_context(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """Real card: NVML's used memory of one capped process is the cap plus its CUDA context"""
    before = card_used_mib(0)
    containers, during = hold_cap(gpu_host, image, 1)
    run = GpuRun(0, containers[0].logs(stderr=False).decode(errors="replace"), "")
    peak_mib = run.probe["memory"]["peak"] / (1 << 20)
    held = during - before
    overhead = held - CAP
    figures.update(
        before_mib=before,
        during_mib=during,
        held_mib=held,
        tf_peak_mib=peak_mib,
        context_overhead_mib=overhead,
        plan_default_overhead_mib=500,
    )
    assert peak_mib <= CAP
    assert CAP <= held <= CAP + 2048, "the cap, plus a CUDA context of at most 2 GiB"


def test_two_capped_containers_stay_within_the_plan(
    gpu_host: GpuHost, image: str, figures: dict[str, Any], tmp_path: Path
) -> None:
    """Real card: two capped containers side by side hold no more than `build.py plan` budgets"""
    service = {
        "image": image,
        "environment": {"TF_GPU_MEM_LIMIT": str(CAP)},
        "deploy": {
            "resources": {
                "reservations": {
                    "devices": [{"driver": "nvidia", "device_ids": ["0"], "capabilities": ["gpu"]}]
                }
            }
        },
    }
    compose = tmp_path / "compose.yaml"
    compose.write_text(yaml.safe_dump({"services": {"a": service, "b": service}}))
    plan = build_py("plan", str(compose), "--gpu-memory", f"{card_total_mib(0)}MiB", "--json")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    committed = json.loads(plan.stdout)["gpus"][0]["committed_mib"]
    before = card_used_mib(0)
    _, during = hold_cap(gpu_host, image, 2)
    figures.update(before_mib=before, during_mib=during, planned_mib=committed)
    assert during - before <= committed


def test_nvidia_require_cuda_is_checked_only_in_legacy_mode(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """Real card: NVIDIA_REQUIRE_CUDA=cuda>=99.0 refused by the legacy hook, not under CDI"""
    config = Path("/etc/nvidia-container-runtime/config.toml")
    mode = "unknown"
    if config.is_file():
        for line in config.read_text().splitlines():
            if line.strip().startswith("mode") and "=" in line:
                mode = line.split("=", 1)[1].strip().strip('"')
    options = gpu_host.options({"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"})
    try:
        gpu_host.client.containers.run(image, ["true"], remove=True, **options)
        outcome = "started"
    except docker.errors.APIError as exc:
        outcome = str(exc)
    except docker.errors.ContainerError as exc:
        outcome = f"exited {exc.exit_status}"
    figures.update(toolkit_mode=mode, outcome=outcome[:500])
    refused = "unsatisfied condition: cuda>=99.0" in outcome
    if mode in ("legacy", "csv"):  # the legacy hook (dsl.c) and CSV mode (Go parser) check
        assert refused, outcome
    elif mode in ("cdi", "jit-cdi"):  # CDI injects devices and checks no requirement
        assert outcome == "started", outcome
    else:  # auto: the toolkit picks; record which, and require one of the two clean answers
        assert refused or outcome == "started", outcome
