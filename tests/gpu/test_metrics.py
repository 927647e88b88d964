"""TF_GPU_METRICS_PORT: the Prometheus endpoint of a user's process reports the card (NVML)
and TensorFlow's allocator (get_memory_info), scraped from inside the container.

Run twice, with TensorFlow's CPU allocator keeping statistics and keeping none (TensorFlow's own
switches, tests/cpu_allocator.py), so that the GPU figures are proved on both kinds of host
whatever this host's CPU is: on a host without CPU statistics they once vanished with the CPU's."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import cpu_allocator
from tests.gpu.harness import CARD, MIB, PROBE_MOUNT, GpuHost

PORT = 9400
SCRAPE = (
    "import urllib.request; "
    f"print(urllib.request.urlopen('http://127.0.0.1:{PORT}/metrics', timeout=5).read().decode())"
)


def _scrape(container: Any) -> dict[str, list[tuple[dict[str, str], float]]]:
    code, out = container.exec_run(["python", "-c", SCRAPE], user="1000")
    if code != 0:
        return {}
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(out.decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return found


@pytest.mark.parametrize("cpu_stats", list(cpu_allocator.KINDS))
def test_metrics_report_the_card_and_the_allocator(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any], cpu_stats: str
) -> None:
    """Metrics: NVML total/used per card, TensorFlow's limit and peak per logical GPU, whether
    or not the CPU's allocator keeps statistics"""
    cap = 4096
    env = {
        "TF_GPU_MEM_LIMIT": str(cap),
        "TF_GPU_METRICS_PORT": str(PORT),
        **cpu_allocator.KINDS[cpu_stats],
    }
    container, _ = gpu_host.start(
        runtime_image, ["python", f"{PROBE_MOUNT}/probe.py", "serve", "120"], env
    )
    metrics: dict[str, list[tuple[dict[str, str], float]]] = {}
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        container.reload()
        assert container.status in ("created", "running"), container.logs().decode()[-3000:]
        # The endpoint comes up with TensorFlow's runtime, before the probe's 64 MiB tensor
        # exists: scrape only once the probe has said (PROBE-JSON) that it holds the tensor.
        if b"PROBE-JSON" in container.logs(stderr=False):
            metrics = _scrape(container)
            if "tfgpu_device_memory_peak_bytes" in metrics:
                break
        time.sleep(2)
    logs = container.logs().decode(errors="replace")
    assert "tfgpu_device_memory_peak_bytes" in metrics, logs[-3000:]
    container.kill()

    available = {
        labels["device"]: v for labels, v in metrics["tfgpu_device_memory_stats_available"]
    }
    # The switch gave the CPU allocator it claims, and the CPU's figures follow it, alone.
    assert available["/device:CPU:0"] == (1 if cpu_stats == "stats" else 0), available
    cpu_peaks = [
        lb for lb, _ in metrics["tfgpu_device_memory_peak_bytes"] if lb["device_type"] == "CPU"
    ]
    assert bool(cpu_peaks) == (cpu_stats == "stats"), cpu_peaks
    assert "tfgpu: warning: metrics:" not in logs, logs[-3000:]  # a CPU without figures is normal

    [(_, total)] = metrics["tfgpu_gpu_memory_total_bytes"]
    [(_, used)] = metrics["tfgpu_gpu_memory_used_bytes"]
    limits = {labels["device"]: v for labels, v in metrics["tfgpu_device_memory_limit_bytes"]}
    peaks = {labels["device"]: v for labels, v in metrics["tfgpu_device_memory_peak_bytes"]}
    gpu0 = next(name for name in limits if name.endswith("GPU:0"))
    assert available[gpu0] == 1
    assert limits[gpu0] == cap * MIB
    assert 64 * MIB <= peaks[gpu0] <= cap * MIB  # the probe's 64 MiB tensor, within the cap
    if not gpu_host.real:
        assert total == CARD.memory_mib * MIB
        # NVML's "used" is what the driver handed out: TensorFlow's allocations (growth on)
        assert 64 * MIB <= used <= cap * MIB
    figures.update(
        cpu_allocator=cpu_stats,
        total_bytes=total,
        used_bytes=used,
        limit_bytes=limits[gpu0],
        peak=peaks[gpu0],
    )
