"""TF_GPU_METRICS_PORT: the Prometheus endpoint of a user's process reports the card (NVML)
and TensorFlow's allocator (get_memory_info), scraped from inside the container."""

from __future__ import annotations

import time
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

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


def test_metrics_report_the_card_and_the_allocator(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """Metrics: NVML total/used per card, TensorFlow's limit and peak per logical GPU"""
    cap = 4096
    env = {"TF_GPU_MEM_LIMIT": str(cap), "TF_GPU_METRICS_PORT": str(PORT)}
    container, _ = gpu_host.start(image, ["python", f"{PROBE_MOUNT}/probe.py", "serve", "120"], env)
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
    assert "tfgpu_device_memory_peak_bytes" in metrics, container.logs().decode()[-3000:]
    container.kill()

    [(_, total)] = metrics["tfgpu_gpu_memory_total_bytes"]
    [(_, used)] = metrics["tfgpu_gpu_memory_used_bytes"]
    limits = {labels["device"]: v for labels, v in metrics["tfgpu_device_memory_limit_bytes"]}
    peaks = {labels["device"]: v for labels, v in metrics["tfgpu_device_memory_peak_bytes"]}
    gpu0 = next(name for name in limits if name.endswith("GPU:0"))
    assert limits[gpu0] == cap * MIB
    assert 64 * MIB <= peaks[gpu0] <= cap * MIB  # the probe's 64 MiB tensor, within the cap
    if not gpu_host.real:
        assert total == CARD.memory_mib * MIB
        # NVML's "used" is what the driver handed out: TensorFlow's allocations (growth on)
        assert 64 * MIB <= used <= cap * MIB
    figures.update(total_bytes=total, used_bytes=used, limit_bytes=limits[gpu0], peak=peaks[gpu0])
