"""tfgpu.act.metrics reads each device's memory figures on its own: a device whose allocator keeps
no statistics is left out alone, never another. Against the tf.config stand-in, whose
get_memory_info answers as real TensorFlow does with the CPU allocator's statistics kept and
not kept (tests/runtime/test_standin_likeness.py checks both against real TensorFlow). The same
claim with real TensorFlow on the fake GPU: tests/gpu/test_metrics.py."""

from __future__ import annotations

from typing import Any

import pytest
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from tfgpu.act import metrics

from tests.runtime.tf_standin import LogicalDeviceConfiguration, standin_tf

MIB = 1 << 20
Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(collector: metrics.TensorFlowCollector) -> Samples:
    registry = CollectorRegistry()
    registry.register(collector)
    out: Samples = {}
    for family in text_string_to_metric_families(generate_latest(registry).decode()):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def device(name: str, kind: str) -> tuple[tuple[str, str], ...]:
    return (("device", name), ("device_type", kind))


@pytest.fixture
def tensorflow_up(monkeypatch: pytest.MonkeyPatch) -> Any:
    """Install a stand-in `tensorflow` whose runtime is up; returns a function that builds it."""

    def install(gpus: int, *, cpu_stats: bool) -> Any:
        tf = standin_tf(gpus=gpus, cpu_stats=cpu_stats)
        monkeypatch.setitem(__import__("sys").modules, "tensorflow", tf)
        monkeypatch.setattr(metrics, "runtime_initialized", lambda: True)
        monkeypatch.setattr(metrics.TensorFlowCollector, "_cards", lambda self, family: iter(()))
        return tf

    return install


def test_gpu_figures_stay_when_the_cpu_keeps_none(
    tensorflow_up: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    tf = tensorflow_up(2, cpu_stats=False)
    g0, _ = tf.config.list_physical_devices("GPU")
    tf.config.set_logical_device_configuration(g0, [LogicalDeviceConfiguration(4096)])
    tf.config.list_logical_devices()  # the runtime starts
    tf.config.memory["/device:GPU:0"] = (64 * MIB, 96 * MIB)
    found = scrape(metrics.TensorFlowCollector({}))

    assert found[("tfgpu_device_memory_in_use_bytes", device("/device:GPU:0", "GPU"))] == 64 * MIB
    assert found[("tfgpu_device_memory_peak_bytes", device("/device:GPU:0", "GPU"))] == 96 * MIB
    assert ("tfgpu_device_memory_peak_bytes", device("/device:GPU:1", "GPU")) in found
    assert found[("tfgpu_device_memory_limit_bytes", (("device", "/device:GPU:0"),))] == 4096 * MIB
    # The CPU: said to have no figures, and none made up.
    cpu = device("/device:CPU:0", "CPU")
    assert found[("tfgpu_device_memory_stats_available", cpu)] == 0
    assert found[("tfgpu_device_memory_stats_available", device("/device:GPU:1", "GPU"))] == 1
    assert not [k for k in found if k[1] == cpu and k[0] != "tfgpu_device_memory_stats_available"]
    assert capsys.readouterr().err == ""  # normal on such a host: no warning


def test_cpu_figures_are_served_where_its_allocator_keeps_them(tensorflow_up: Any) -> None:
    tf = tensorflow_up(1, cpu_stats=True)
    tf.config.list_logical_devices()
    tf.config.memory["/device:CPU:0"] = (5 * MIB, 7 * MIB)
    found = scrape(metrics.TensorFlowCollector({}))
    cpu = device("/device:CPU:0", "CPU")
    assert found[("tfgpu_device_memory_stats_available", cpu)] == 1
    assert found[("tfgpu_device_memory_in_use_bytes", cpu)] == 5 * MIB
    assert found[("tfgpu_device_memory_peak_bytes", cpu)] == 7 * MIB


def test_a_gpu_without_figures_warns_once_and_leaves_out_only_itself(
    tensorflow_up: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    tf = tensorflow_up(2, cpu_stats=False)
    real = tf.config.get_memory_info

    def broken_gpu1(name: str) -> dict[str, int]:
        if name == "/device:GPU:1":
            raise ValueError(f"Allocator stats not available for device '{name}'")
        return real(name)

    monkeypatch.setattr(tf.config.experimental, "get_memory_info", broken_gpu1)
    collector = metrics.TensorFlowCollector({})
    first, second = scrape(collector), scrape(collector)
    for found in (first, second):
        assert ("tfgpu_device_memory_in_use_bytes", device("/device:GPU:0", "GPU")) in found
        assert ("tfgpu_device_memory_in_use_bytes", device("/device:GPU:1", "GPU")) not in found
        assert found[("tfgpu_device_memory_stats_available", device("/device:GPU:1", "GPU"))] == 0
    err = capsys.readouterr().err
    assert err.count("tfgpu: warning: metrics:") == 1, err
    assert "/device:GPU:1" in err and "Allocator stats not available" in err
    assert "/device:GPU:0" not in err
