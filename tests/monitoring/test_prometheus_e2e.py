"""End to end: a real Prometheus (Debian's package) scrapes real kit containers and evaluates
the kit's rules; the alerts are read back through its HTTP API (/api/v1/alerts).

Two containers of the kit's gpu image run on one fake 16 GiB card (the fake NVIDIA driver,
fakegpu/README.md: the same FAKEGPU_* card, so the same UUID, and one ledger): `capped` with
TF_GPU_MEM_LIMIT, `uncapped` without. Each serves TF_GPU_METRICS_PORT, published on
127.0.0.1 at a free host port. A third target points at a port nothing listens on.
Expected: TfgpuUncappedOnSharedGpu fires for `uncapped`, TfgpuMetricsEndpointDown for the
dead target, and no alert at all names the healthy, capped process.

Both containers run with TensorFlow's CPU allocator keeping no statistics (TensorFlow's own
switch, tests/cpu_allocator.py), as on hosts like an AMD EPYC without AVX-512 VNNI: the alerts
rest on the GPU's figures alone, which must not depend on the CPU's."""

from __future__ import annotations

import contextlib
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests import cpu_allocator
from tests.gpu.harness import PROBE_MOUNT, GpuHost
from tests.kit_images import ROOT
from tests.monitoring import prometheus_server

pytestmark = pytest.mark.docker

RULES = ROOT / "monitoring" / "tfgpu-alerts.rules.yaml"
METRICS_PORT = 9401
CAP_MIB = 1024
SHORT_FOR = "2s"  # the test copy's `for:`; the shipped rules wait minutes


def _metric_names(url: str) -> set[str]:
    try:
        with urllib.request.urlopen(url, timeout=3) as response:
            text = response.read().decode()
    except (OSError, urllib.error.URLError):
        return set()
    return {s.name for f in text_string_to_metric_families(text) for s in f.samples}


def _start(
    host: GpuHost, client: docker.DockerClient, image: str, env: dict[str, str], log_dir: Path
) -> tuple[Any, str]:
    """A kit container serving metrics; (container, its metrics URL on the host) once its
    TensorFlow is up (device figures appear then)."""
    env = {**env, **cpu_allocator.NO_STATS, "TF_GPU_METRICS_PORT": str(METRICS_PORT)}
    options = host.options(env, log_dir=log_dir)
    options["network_disabled"] = False  # the harness's default: its tests need no network
    container = client.containers.run(
        image,
        ["python", f"{PROBE_MOUNT}/probe.py", "serve", "600"],
        detach=True,
        ports={f"{METRICS_PORT}/tcp": ("127.0.0.1", None)},  # a free host port on loopback
        **options,
    )
    container.reload()
    host_port = container.ports[f"{METRICS_PORT}/tcp"][0]["HostPort"]
    url = f"http://127.0.0.1:{host_port}/metrics"
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        container.reload()
        assert container.status in ("created", "running"), container.logs().decode()[-3000:]
        if "tfgpu_device_memory_peak_bytes" in _metric_names(url):
            return container, f"127.0.0.1:{host_port}"
        time.sleep(2)
    raise AssertionError(f"no device metrics at {url}:\n{container.logs().decode()[-3000:]}")


@pytest.fixture(scope="module")
def targets(
    kit_images: dict[str, str],
    docker_client: docker.DockerClient,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, str]]:
    """{"capped": host:port, "uncapped": host:port, "gone": host:port (nothing listens)}."""
    work = tmp_path_factory.mktemp("e2e-fakegpu")
    host = GpuHost(docker_client, real=False, workdir=work)
    shared = work / "card"  # one ledger: both processes count on the same fake card
    shared.mkdir()
    shared.chmod(0o777)  # the image's user (uid 1000) writes the fake's ledger
    started: list[Any] = []
    try:
        # The capped process first: the uncapped one then takes what is left, not all.
        capped, capped_at = _start(
            host, docker_client, kit_images["gpu"], {"TF_GPU_MEM_LIMIT": str(CAP_MIB)}, shared
        )
        started.append(capped)
        uncapped, uncapped_at = _start(host, docker_client, kit_images["gpu"], {}, shared)
        started.append(uncapped)
        yield {
            "capped": capped_at,
            "uncapped": uncapped_at,
            "gone": f"127.0.0.1:{prometheus_server.free_port()}",
        }
    finally:
        for container in started:
            with contextlib.suppress(docker.errors.DockerException):
                container.remove(force=True)


def _by_container(alerts: list[dict[str, Any]], state: str = "firing") -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for alert in alerts:
        if alert["state"] == state:
            out.setdefault(alert["labels"].get("container", ""), set()).add(
                alert["labels"]["alertname"]
            )
    return out


def test_prometheus_fires_the_kits_alerts_for_real_containers(
    targets: dict[str, str], prometheus_server_binary: Path, tmp_path: Path
) -> None:
    rules = tmp_path / "tfgpu-alerts.short.rules.yaml"
    prometheus_server.rules_with_short_for(RULES, rules, SHORT_FOR)
    scrape = {
        "job_name": "tfgpu",
        "scrape_timeout": prometheus_server.INTERVAL,
        "static_configs": [
            {"targets": [address], "labels": {"container": name}}
            for name, address in targets.items()
        ],
    }
    with prometheus_server.running(prometheus_server_binary, tmp_path, [scrape], [rules]) as prom:
        expected = {"uncapped": {"TfgpuUncappedOnSharedGpu"}, "gone": {"TfgpuMetricsEndpointDown"}}
        firing: dict[str, set[str]] = {}
        alerts: list[dict[str, Any]] = []
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            alerts = prom.alerts()
            firing = _by_container(alerts)
            if all(firing.get(name, set()) >= names for name, names in expected.items()):
                break
            time.sleep(1)
        assert firing == expected, f"alerts: {alerts}\n{prom.log_tail()}"
        # The healthy, capped process: scraped (up == 1), no alert pending or firing for it.
        health = {
            t["labels"]["container"]: t["health"] for t in prom.api("targets")["activeTargets"]
        }
        assert health == {"capped": "up", "uncapped": "up", "gone": "down"}
        assert not [a for a in alerts if a["labels"].get("container") == "capped"], alerts
        shared = next(a for a in alerts if a["labels"]["alertname"] == "TfgpuUncappedOnSharedGpu")
        # both processes report the same card: the count is 2, and the summary names the
        # container from the scrape's labels and the variable to set
        assert float(shared["value"]) == 2
        assert shared["annotations"]["summary"].startswith("container uncapped: no memory cap")
        assert "TF_GPU_MEM_LIMIT" in shared["annotations"]["description"]
