"""apply.configure_tensorflow against a recording stand-in of tf.config (NOT TensorFlow).

The stand-in enforces TensorFlow 2.21's rules and messages (see tf_standin.py), and
test_standin_likeness.py checks it against real tensorflow-cpu 2.21; these tests show our call
sequence obeys them. No GPU was involved.
"""

from __future__ import annotations

import io

import pytest
from tfgpu.act.apply import configure_tensorflow
from tfgpu.contract.errors import ConfigError, GpuUnavailableError
from tfgpu.machine import nvml

from tests.pynvml_standin import standin_pynvml
from tests.runtime.tf_standin import LogicalDeviceConfiguration, standin_tf


def apply(tf: object, environ: dict[str, str], **kw: object) -> tuple[dict[str, str], str]:
    out: dict[str, str] = {}
    err = io.StringIO()
    configure_tensorflow(tf, environ, env_out=out, stderr=err, **kw)  # type: ignore[arg-type]
    return out, err.getvalue()


def test_standin_enforces_tensorflow_rules() -> None:
    """The stand-in itself must fail where TensorFlow fails, or the other tests prove nothing."""
    tf = standin_tf(gpus=2)
    cfg = tf.config
    g0, _g1 = cfg.list_physical_devices("GPU")
    with pytest.raises(
        ValueError, match=r"^Setting memory limit is required for GPU virtual devices$"
    ):
        cfg.set_logical_device_configuration(g0, [LogicalDeviceConfiguration()])
    cfg.set_logical_device_configuration(g0, [LogicalDeviceConfiguration(memory_limit=1024)])
    with pytest.raises(
        ValueError, match=r"^Cannot set memory growth on device when virtual devices configured$"
    ):
        cfg.experimental.set_memory_growth(g0, True)
    tf2 = standin_tf(gpus=2)
    a, _b = tf2.config.list_physical_devices("GPU")
    tf2.config.experimental.set_memory_growth(a, True)
    with pytest.raises(ValueError, match=r"^Memory growth cannot differ between GPU devices$"):
        tf2.config.list_logical_devices("GPU")
    tf3 = standin_tf(gpus=1)
    tf3.config.list_logical_devices()
    with pytest.raises(
        RuntimeError, match=r"^Physical devices cannot be modified after being initialized$"
    ):
        tf3.config.experimental.set_memory_growth(tf3.config.list_physical_devices("GPU")[0], True)
    with pytest.raises(
        RuntimeError, match=r"^Virtual devices cannot be modified after being initialized$"
    ):
        tf3.config.set_logical_device_configuration(
            tf3.config.list_physical_devices("GPU")[0], [LogicalDeviceConfiguration(memory_limit=5)]
        )


def test_mem_limit_makes_one_logical_gpu_each_and_growth_goes_native() -> None:
    tf = standin_tf(gpus=2)
    out, _ = apply(
        tf,
        {"TF_GPU_MEM_LIMIT": "4096", "TF_GPU_MEMORY_GROWTH": "true"},
        nvml_query=lambda: nvml.NvmlReport(),
    )
    assert out == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"}
    assert [c[0] for c in tf.config.calls] == [
        "set_logical_device_configuration"
    ] * 2  # no set_memory_growth
    names = [d.name for d in tf.config.list_logical_devices("GPU")]
    assert names == ["/device:GPU:0", "/device:GPU:1"]
    assert all(
        cfgs == [LogicalDeviceConfiguration(memory_limit=4096)]
        for cfgs in tf.config.logical.values()
    )


@pytest.mark.parametrize(
    "environ",
    [
        {},
        {"TF_GPU_MEMORY_GROWTH": "1"},
        {"TF_GPU_MEMORY_GROWTH": "false"},
        {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        {"TF_GPU_MEMORY_GROWTH": "true", "TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true"},
        {"TF_GPU_MEMORY_GROWTH": "true", "TF_MIXED_PRECISION": "mixed_float16"},
    ],
)
def test_growth_alone_lists_no_device(environ: dict[str, str]) -> None:
    """Listing devices runs cuInit, after which forked children (pre-fork servers, fork
    pools) cannot use CUDA. Growth is the native variable alone, which TensorFlow applies to
    every GPU alike; nothing else here needs a device, so tf.config is not called at all."""
    tf = standin_tf(gpus=3)
    out, err = apply(tf, environ)
    assert tf.config.queries == [] and tf.config.calls == [] and err == ""
    growth = {"1": "true", "true": "true", "false": "false"}
    want = environ.get("TF_GPU_MEMORY_GROWTH") or environ.get("TF_FORCE_GPU_ALLOW_GROWTH")
    assert out == ({"TF_FORCE_GPU_ALLOW_GROWTH": growth[want]} if want else {})
    assert len(tf.config.list_logical_devices("GPU")) == 3  # initialisation accepts it


@pytest.mark.parametrize(
    ("environ", "queries"),
    [
        (
            {"TF_GPU_MEM_LIMIT": "4096", "TF_GPU_MEMORY_GROWTH": "true"},
            [("list_physical_devices", "GPU")],
        ),
        ({"TF_GPU_VIRTUAL_DEVICES": "1024,1024"}, [("list_physical_devices", "GPU")]),
        ({"TF_CPU_VIRTUAL_DEVICES": "2"}, [("list_physical_devices", "CPU")]),
        (
            {"TF_GPU_REQUIRED": "true", "TF_GPU_MEMORY_GROWTH": "true"},
            [("list_physical_devices", "GPU")],
        ),
    ],
)
def test_devices_are_listed_when_something_needs_them(
    environ: dict[str, str], queries: list[tuple[str, str]]
) -> None:
    tf = standin_tf(gpus=2)
    apply(tf, environ, nvml_query=lambda: nvml.NvmlReport())
    assert tf.config.queries == queries
    assert not any(c[0] == "set_memory_growth" for c in tf.config.calls)


def test_virtual_devices_per_gpu_syntax() -> None:
    tf = standin_tf(gpus=2)
    apply(tf, {"TF_GPU_VIRTUAL_DEVICES": "6144,8192;4096"}, nvml_query=lambda: nvml.NvmlReport())
    assert [d.name for d in tf.config.list_logical_devices("GPU")] == [
        f"/device:GPU:{i}" for i in range(3)
    ]


def test_percent_uses_nvml_sizes_from_the_standin() -> None:
    tf = standin_tf(gpus=1)
    fake = standin_pynvml([("NVIDIA A10", "GPU-aaaa", 24576)])
    apply(tf, {"TF_GPU_MEM_LIMIT": "25%"}, nvml_query=lambda: nvml.query(fake))
    [configs] = tf.config.logical.values()
    assert configs == [LogicalDeviceConfiguration(memory_limit=6144.0)]


def test_cap_larger_than_the_card_fails() -> None:
    tf = standin_tf(gpus=1)
    fake = standin_pynvml([("NVIDIA T4", "GPU-bbbb", 15360)])
    with pytest.raises(ConfigError, match="more than GPU 0 \\(NVIDIA T4, 15360 MiB\\)"):
        apply(tf, {"TF_GPU_MEM_LIMIT": "16GiB"}, nvml_query=lambda: nvml.query(fake))
    assert tf.config.calls == []  # nothing half-applied


def test_cpu_split_and_mixed_precision() -> None:
    tf = standin_tf(gpus=0)
    apply(tf, {"TF_CPU_VIRTUAL_DEVICES": "3", "TF_MIXED_PRECISION": "mixed_bfloat16"})
    assert len(tf.config.list_logical_devices("CPU")) == 3
    assert tf.policy["name"] == "mixed_bfloat16"


def test_required_without_gpu_or_with_cpu_build_fails() -> None:
    with pytest.raises(GpuUnavailableError, match="sees no GPU"):
        apply(standin_tf(gpus=0), {"TF_GPU_REQUIRED": "true"})
    with pytest.raises(GpuUnavailableError, match="CPU-only build"):
        apply(standin_tf(gpus=1, cuda_build=False), {"TF_GPU_REQUIRED": "true"})


def test_no_gpu_warns_once_unless_run_already_did() -> None:
    _, err = apply(standin_tf(gpus=0), {"TF_GPU_MEM_LIMIT": "4096"})
    assert err.count("tfgpu: warning:") == 1 and "not applied" in err
    _, err = apply(standin_tf(gpus=0), {"TF_GPU_MEM_LIMIT": "4096", "TFGPU_RUN_PREFLIGHT": "1"})
    assert err == ""


def test_off_touches_nothing() -> None:
    tf = standin_tf(gpus=1)
    out, err = apply(tf, {"TF_GPU_CONFIG": "off", "TF_GPU_MEM_LIMIT": "nonsense"})
    assert tf.config.calls == [] and out == {} and err == ""
