"""tfgpu.act.metrics: unit tests in-process, and end to end against real TensorFlow (CPU) in a
child process, where the hook starts the server and the test scrapes it over HTTP.

What the CPU run exercises honestly: the hook → start_from_environment path, the lazy
gate (no device figures and no runtime initialisation before the program's first op),
tf.config.experimental.get_memory_info on logical CPU devices, process figures, and port
conflicts. Whether TensorFlow's CPU allocator keeps statistics depends on the host, so each
run states which it needs and sets TensorFlow's own switch for it (tests/cpu_allocator.py):
with statistics, 'current' and 'peak' move with the program's tensors; without, the CPUs are
said to have none and nothing else is lost. GPU devices, logical-GPU caps and NVML card figures
are proved with real TensorFlow on the fake GPU (tests/gpu/test_metrics.py)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tfgpu.act import metrics, tf_memory
from tfgpu.machine import nvml

from tests import cpu_allocator
from tests.pynvml_standin import standin_pynvml
from tests.runtime.tf_standin import LogicalDeviceConfiguration, standin_tf

CHILD = Path(__file__).with_name("metrics_child.py")
MIB = 1 << 20


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def scrape(port: int) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return samples(response.read().decode())


@pytest.fixture
def fresh_state() -> Iterator[None]:
    saved = dict(metrics._state)
    metrics._state.update(attempted=False, server=None, port=None)
    yield
    server = metrics._state.get("server")
    if server not in (None, True):
        server.shutdown()
        server.server_close()
    metrics._state.clear()
    metrics._state.update(saved)


def test_import_is_stdlib_only() -> None:
    code = (
        "import sys, tfgpu.act.metrics; "
        "heavy = ('prometheus', 'tensorflow', 'pynvml'); "
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


@pytest.mark.parametrize("value", ["abc", "70000", "-1", "9401.5"])
def test_invalid_port_warns_and_returns(
    fresh_state: None, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": value}) is False
    err = capsys.readouterr().err
    assert (
        f"TF_GPU_METRICS_PORT={value!r} is not valid" in err
        and "example: TF_GPU_METRICS_PORT=9401" in err
    )
    assert "the program runs" in err


def test_unset_or_empty_does_nothing(fresh_state: None, capsys: pytest.CaptureFixture[str]) -> None:
    assert metrics.start_from_environment(None, {}) is False
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": " "}) is False
    # 0 turns the server off (what `build.py k8s --metrics-port 0` means), without a warning
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": "0"}) is False
    assert capsys.readouterr().err == ""
    assert metrics._state["attempted"] is False


def test_taken_port_warns_once(fresh_state: None, capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("0.0.0.0", 0))
        taken.listen()
        port = taken.getsockname()[1]
        env = {"TF_GPU_METRICS_PORT": str(port)}
        assert metrics.start_from_environment(None, env) is False
        assert metrics.start_from_environment(None, env) is False  # no retry, no second warning
    err = capsys.readouterr().err
    assert err.count("warning") == 1
    assert f"cannot listen on port {port}" in err and "not monitored" in err


def test_missing_prometheus_client_warns(
    fresh_state: None, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import raises ImportError
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": "9401"}) is False
    assert "prometheus-client is not installed" in capsys.readouterr().err


def test_serves_config_before_tensorflow(fresh_state: None) -> None:
    port = free_port()
    env = {"TF_GPU_METRICS_PORT": str(port), "TF_GPU_MEM_LIMIT": "4096"}
    assert metrics.start_from_environment(None, env) is True
    found = scrape(port)
    assert found[("tfgpu_tensorflow_initialized", ())] == 0
    info = [k for k in found if k[0] == "tfgpu_config_info"]
    assert dict(info[0][1])["memory_limit"] == "4096"
    assert not [k for k in found if k[0].startswith("tfgpu_device_")]
    assert ("process_resident_memory_bytes", ()) in found


def test_collector_without_tensorflow_reads_no_devices() -> None:
    registry = CollectorRegistry()
    registry.register(metrics.TensorFlowCollector({"pid": "1"}))
    text = generate_latest(registry).decode()
    assert "tfgpu_tensorflow_initialized 0.0" in text and "tfgpu_device_" not in text


class Child:
    def __init__(self, port: int, **env: str) -> None:
        environ = {
            **os.environ,
            "TF_GPU_METRICS_PORT": str(port),
            "TF_CPP_MIN_LOG_LEVEL": "2",
            **env,
        }
        self.proc = subprocess.Popen(
            [sys.executable, str(CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True, env=environ,
        )  # fmt: skip
        assert self.read() == "ready"

    def read(self) -> str:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line:
            raise AssertionError(
                f"child ended: {self.proc.stderr.read() if self.proc.stderr else ''}"
            )
        return line

    def send(self, command: str) -> str:
        assert self.proc.stdin is not None
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()
        return self.read()

    def close(self) -> tuple[int, str]:
        _, err = self.proc.communicate("exit\n", timeout=60)
        return self.proc.returncode, err


def in_use(found: dict[Any, float], device: str) -> float:
    return found[("tfgpu_device_memory_in_use_bytes", (("device", device), ("device_type", "CPU")))]


def peak(found: dict[Any, float], device: str) -> float:
    return found[("tfgpu_device_memory_peak_bytes", (("device", device), ("device_type", "CPU")))]


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_real_tensorflow_process_over_http() -> None:
    port = free_port()
    child = Child(
        port, TF_CPU_VIRTUAL_DEVICES="2", TF_GPU_MEMORY_GROWTH="true", **cpu_allocator.STATS
    )
    try:
        before = scrape(port)
        # Served from the hook, before the program's first op: configuration only, and the
        # scrape must not have initialised the runtime (else TF_CPU_VIRTUAL_DEVICES and any
        # GPU caps could no longer be applied by the user's own code).
        assert before[("tfgpu_tensorflow_initialized", ())] == 0
        assert not [k for k in before if k[0].startswith("tfgpu_device_")]
        assert before[("tfgpu_memory_growth_enabled", ())] == 1
        assert child.send("status") == "initialized False"

        assert child.send("alloc 64") == "done"
        first = scrape(port)
        assert first[("tfgpu_tensorflow_initialized", ())] == 1
        # The runtime applied the kit's split: two logical CPUs, both reported.
        assert (
            "tfgpu_device_memory_in_use_bytes",
            (("device", "/device:CPU:1"), ("device_type", "CPU")),
        ) in first
        assert in_use(first, "/device:CPU:0") >= 64 * MIB

        assert child.send("alloc 128") == "done"
        second = scrape(port)
        assert in_use(second, "/device:CPU:0") >= in_use(first, "/device:CPU:0") + 128 * MIB
        assert peak(second, "/device:CPU:0") >= in_use(second, "/device:CPU:0")
        assert (
            second[("process_resident_memory_bytes", ())]
            > before[("process_resident_memory_bytes", ())]
        )

        assert child.send("free") == "done"
        time.sleep(0.2)
        third = scrape(port)
        assert in_use(third, "/device:CPU:0") < 64 * MIB
        assert peak(third, "/device:CPU:0") == peak(second, "/device:CPU:0")  # peak is kept

        # A second TensorFlow process on the same port: one warning, and its program runs.
        other = Child(port)
        assert other.send("alloc 1") == "done"
        code, err = other.close()
        assert code == 0
        assert err.count("tfgpu: warning: metrics:") == 1 and f"cannot listen on port {port}" in err
    finally:
        code, err = child.close()
    assert code == 0, err


@pytest.mark.slow
@pytest.mark.timeout(180)
def test_real_tensorflow_whose_cpu_allocator_keeps_no_statistics() -> None:
    """Such a host (e.g. an AMD EPYC without AVX-512 VNNI): both logical CPUs are said to have
    no figures, the rest of the scrape is whole, and nothing warns (it is normal there)."""
    port = free_port()
    child = Child(port, TF_CPU_VIRTUAL_DEVICES="2", **cpu_allocator.NO_STATS)
    try:
        assert child.send("alloc 64") == "done"
        found = scrape(port)
        assert found[("tfgpu_tensorflow_initialized", ())] == 1
        for cpu in ("/device:CPU:0", "/device:CPU:1"):
            key = (("device", cpu), ("device_type", "CPU"))
            assert found[("tfgpu_device_memory_stats_available", key)] == 0
            assert ("tfgpu_device_memory_in_use_bytes", key) not in found
        assert ("process_resident_memory_bytes", ()) in found
        assert [k for k in found if k[0] == "tfgpu_config_info"]
    finally:
        code, err = child.close()
    assert code == 0, err
    assert "tfgpu: warning: metrics" not in err, err


# --- the GPU code paths, against the stand-ins of tf.config and pynvml (NOT a GPU) ------------


def test_logical_gpu_limits_number_logical_gpus_across_cards() -> None:
    """Caps come from the configuration TensorFlow holds; logical GPUs are numbered across the
    physical GPUs in order, a card without a configuration counting as one (uncapped) GPU."""
    tf = standin_tf(gpus=3)
    g0, _g1, g2 = tf.config.list_physical_devices("GPU")
    tf.config.set_logical_device_configuration(
        g0, [LogicalDeviceConfiguration(memory_limit=1024), LogicalDeviceConfiguration(2048.5)]
    )
    tf.config.set_logical_device_configuration(g2, [LogicalDeviceConfiguration(4096)])
    limits = tf_memory.logical_gpu_limits(tf)
    assert limits == [
        ("/device:GPU:0", 1024.0),
        ("/device:GPU:1", 2048.5),
        ("/device:GPU:3", 4096.0),
    ]
    assert tf.config.initialized is False  # reading the configuration initialises nothing
    # the names are the ones TensorFlow gives the logical devices
    names = [d.name for d in tf.config.list_logical_devices("GPU")]
    assert names == [f"/device:GPU:{i}" for i in range(4)]
    assert set(dict(limits)) <= set(names)


def test_logical_gpu_limits_without_gpus_or_caps() -> None:
    assert tf_memory.logical_gpu_limits(standin_tf(gpus=0)) == []
    assert tf_memory.logical_gpu_limits(standin_tf(gpus=2)) == []


def card_samples(
    collector: metrics.TensorFlowCollector,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    registry = CollectorRegistry()
    registry.register(collector)
    return {
        k: v for k, v in samples(generate_latest(registry).decode()).items() if "gpu_memory" in k[0]
    }


def test_cards_report_every_gpu_nvml_sees(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = standin_pynvml([("NVIDIA A10", "GPU-aaaa", 24576), ("Tesla T4", "GPU-bbbb", 15360)])
    real_query = nvml.query
    monkeypatch.setattr(nvml, "query", lambda: real_query(fake))
    found = card_samples(metrics.TensorFlowCollector({"pid": "1"}))
    a10 = (("gpu", "0"), ("name", "NVIDIA A10"), ("uuid", "GPU-aaaa"))
    t4 = (("gpu", "1"), ("name", "Tesla T4"), ("uuid", "GPU-bbbb"))
    assert found == {
        ("tfgpu_gpu_memory_total_bytes", a10): 24576 * MIB,
        ("tfgpu_gpu_memory_total_bytes", t4): 15360 * MIB,
        ("tfgpu_gpu_memory_used_bytes", a10): 300 * MIB,  # the stand-in's "used"
        ("tfgpu_gpu_memory_used_bytes", t4): 300 * MIB,
    }
    assert fake.state["init"] == 0  # every scrape shuts NVML down again


def test_cards_without_a_driver_stop_asking(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[int] = []
    missing, real_query = standin_pynvml([], missing=True), nvml.query

    def query() -> nvml.NvmlReport:
        calls.append(1)
        return real_query(missing)

    monkeypatch.setattr(nvml, "query", query)
    collector = metrics.TensorFlowCollector({"pid": "1"})
    assert card_samples(collector) == {} and card_samples(collector) == {}
    assert len(calls) == 1  # a driver does not appear later: NVML is not asked again


def test_cards_with_nvml_unknown_ask_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """nvidia-ml-py missing or NVML failing is not 'no driver': no figures, but no giving up."""
    calls: list[int] = []

    def query() -> nvml.NvmlReport:
        calls.append(1)
        report = nvml.NvmlReport()
        report.error = "NVML could not start: NVMLError_NoPermission"
        return report

    monkeypatch.setattr(nvml, "query", query)
    collector = metrics.TensorFlowCollector({"pid": "1"})
    assert card_samples(collector) == {} and card_samples(collector) == {}
    assert len(calls) == 2
