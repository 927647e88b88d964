"""The recovery rule (TF_GPU_RECOVER_*) with real TensorFlow on the fake GPU, restarted by
Docker's own restart policy: a process stuck at its cap ends itself with exit code 75 within
the rule's period plus a bounded delay, Docker restarts the container, the card gets the first
process's memory back, and the restarted process counts the recovery; a process that only
peaks at its cap is left alone; a bad rule value stops at the door with 78."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

import fakegpu
from tests.gpu.harness import MIB, PROBE_MOUNT, GpuHost
from tests.gpu.test_metrics import _scrape

CAP_MIB = 1024
AFTER_S = 4
RULE = {
    "TF_GPU_MEM_LIMIT": str(CAP_MIB),
    "TF_GPU_RECOVER_AT": "90%",
    "TF_GPU_RECOVER_AFTER": f"{AFTER_S}s",
    "TF_GPU_RECOVER_ACTION": "exit",
    "TF_GPU_METRICS_PORT": "9400",  # tests.gpu.test_metrics scrapes this port
}
# Docker restarts an `on-failure` container after 100 ms, doubling per restart; TensorFlow's
# start on the fake driver takes seconds. The bound on "period plus a delay":
DELAY_S = 20


def _probes(container: Any) -> list[dict[str, Any]]:
    out = container.logs(stdout=True, stderr=False).decode(errors="replace")
    return [
        json.loads(line.split(" ", 1)[1])
        for line in out.splitlines()
        if line.startswith("PROBE-JSON ")
    ]


def _wait(container: Any, done: Any, seconds: float, what: str) -> float:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        container.reload()
        if done(container):
            return time.monotonic()
        time.sleep(0.5)
    raise AssertionError(f"{what} not within {seconds:.0f} s:\n{container.logs().decode()[-4000:]}")


def _run(host: GpuHost, image: str, args: list[str]) -> tuple[Any, Path]:
    """The probe in a kit container with the rule and Docker's `on-failure:3` restart policy;
    (container, the fake driver's log folder, shared by its restarts)."""
    container, log_dir = host.start(
        image,
        ["python", f"{PROBE_MOUNT}/probe.py", *args],
        RULE,
        run_options={"restart_policy": {"Name": "on-failure", "MaximumRetryCount": 3}},
    )
    assert log_dir is not None  # the fake driver's log: these tests run on the fake GPU
    return container, log_dir


def _reached_share(log_dir: Path, share: float) -> float:
    """When the first process on the fake card first held `share` of the cap (the fake
    driver's allocation log, wall-clock seconds): the rule's period starts no earlier."""
    events = fakegpu.read_log(log_dir / "log.jsonl")
    first = events[0]["token"]
    return min(
        float(e["time"])
        for e in events
        if e["token"] == first and int(e.get("device_live", 0)) >= share * CAP_MIB * MIB
    )


def test_a_process_stuck_at_its_cap_is_restarted_and_counted(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any]
) -> None:
    container, log_dir = _run(gpu_host, runtime_image, ["recover", "16", "600"])
    _wait(container, lambda c: _probes(c), 180, "the probe starting to fill its cap")
    assert _probes(container)[0]["phase"] == "filling"
    _wait(container, lambda c: c.attrs["RestartCount"] >= 1, 180, "a restart")
    restarted_at = time.time()
    logs = container.logs().decode(errors="replace")
    lines = [x for x in logs.splitlines() if x.startswith("tfgpu: recovery: ")]
    assert len(lines) == 1, logs[-4000:]
    assert "/device:GPU:0 has held" in lines[0] and f"of its {CAP_MIB} MiB cap" in lines[0]
    assert "exiting with 75" in lines[0] and "recovery 1 of this container" in lines[0]
    assert "TF_GPU_RECOVER_AT=90% TF_GPU_RECOVER_AFTER=4s" in lines[0]
    # within the period plus a bounded delay of the moment the card held the share
    held_from = _reached_share(log_dir, 0.9)
    assert AFTER_S <= restarted_at - held_from <= AFTER_S + DELAY_S, restarted_at - held_from

    # The restarted process: healthy, its own 64 MiB, the first one's memory back on the card.
    def restarted(c: Any) -> bool:
        return any(probe["phase"] == "after-restart" for probe in _probes(c))

    _wait(container, restarted, 180, "the restarted probe")
    metrics: dict[str, Any] = {}
    deadline = time.monotonic() + 60
    while "tfgpu_recoveries_total" not in metrics and time.monotonic() < deadline:
        metrics = _scrape(container)
        time.sleep(1)
    assert [v for _, v in metrics["tfgpu_recoveries_total"]] == [1.0], metrics.keys()
    assert [v for _, v in metrics["tfgpu_recovery_stuck"]] == [0.0]
    [(_, used)] = metrics["tfgpu_gpu_memory_used_bytes"]  # the fake card, all processes
    assert used < 0.5 * CAP_MIB * MIB, used  # the stuck process's ~1 GiB is gone
    # and it is not restarted again: the rule sees a healthy process
    time.sleep(AFTER_S + 2)
    container.reload()
    assert container.attrs["RestartCount"] == 1 and container.status == "running"
    figures.update(
        seconds_from_share_to_restart=round(restarted_at - held_from, 1),
        rule_period_s=AFTER_S,
        card_used_bytes_after_restart=used,
    )


def test_a_process_that_only_peaks_at_its_cap_is_left_alone(
    gpu_host: GpuHost, runtime_image: str
) -> None:
    container, _ = _run(gpu_host, runtime_image, ["peak", "16", "60", "600"])
    _wait(container, lambda c: _probes(c), 180, "the probe's peak")
    [result] = _probes(container)
    assert result["phase"] == "let-go" and result["peak"]["current"] >= 0.9 * CAP_MIB * MIB
    time.sleep(AFTER_S * 2 + 2)
    container.reload()
    logs = container.logs().decode(errors="replace")
    assert container.attrs["RestartCount"] == 0 and container.status == "running", logs[-3000:]
    assert "tfgpu: recovery:" not in logs


@pytest.mark.parametrize(
    ("variable", "value"), [("TF_GPU_RECOVER_AT", "90"), ("TF_GPU_RECOVER_AFTER", "soon")]
)
def test_a_bad_rule_stops_at_the_door(
    gpu_host: GpuHost, runtime_image: str, variable: str, value: str
) -> None:
    result = gpu_host.probe(runtime_image, "devices", env={**RULE, variable: value})
    assert result.exit_code == 78, result.stderr
    assert f"{variable}={value!r} is not valid" in result.stderr
    assert "PROBE-JSON" not in result.stdout  # nothing started
