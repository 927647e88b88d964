"""Every GPU generation told the truth inside the image, on the fake NVIDIA driver (it reports any
compute capability: FAKEGPU_CC) with real TensorFlow: Hopper (9.0) gets the PTX JIT and the kernel
cache, Blackwell (12.0) a known failure with 2.17 and XLA's with 2.21, Maxwell (5.2) no kernels,
Ampere (8.0) nothing extra; TF_GPU_REQUIRED=true exits 69 where the kernels cannot run, at the door
(`tfgpu run`) and in the hook (a Kubernetes `command:`). The fake driver compiles nothing: what is
proved here is what the runtime says and decides, and that TensorFlow itself sees the capability
the verdict is about; no kernel ran on a real Hopper or Blackwell GPU."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import docker
import pytest

import fakegpu
from tests.gpu.harness import GpuHost

CACHE = "/var/cache/tfgpu/cuda"
H100 = fakegpu.FakeCard("Fake H100-SXM5-80GB", 16384, cc="9.0")
RTX_5090 = fakegpu.FakeCard("Fake RTX 5090", 16384, cc="12.0")
M60 = fakegpu.FakeCard("Fake Tesla M60", 8192, cc="5.2")
A100 = fakegpu.FakeCard("Fake A100-SXM4-16GB", 16384, cc="8.0")
ENTRYPOINT_BYPASSED = {"entrypoint": []}  # a Kubernetes `command:`: only the hook runs


@pytest.fixture(autouse=True)
def _fake_only(gpu_host: GpuHost) -> None:
    if gpu_host.real:
        pytest.skip("the fake driver chooses the GPU's compute capability; a real card's is fixed")


@pytest.fixture
def volume(docker_client: docker.DockerClient) -> Iterator[str]:
    """A fresh named volume, as compose.yaml's tfgpu-kernels; removed afterwards, with the
    containers that used it."""
    name = f"tfgpu-test-kernels-{uuid.uuid4().hex[:8]}"
    docker_client.volumes.create(name)
    yield name
    for container in docker_client.containers.list(all=True, filters={"volume": name}):
        container.remove(force=True)
    docker_client.volumes.get(name).remove(force=True)


def _cache_mount(volume: str) -> dict[str, Any]:
    return {"volumes": {volume: {"bind": CACHE, "mode": "rw"}}}


def test_hopper_is_ptx_jit_and_the_cache_is_named(
    gpu_host: GpuHost, images: dict[str, str], figures: dict[str, Any]
) -> None:
    """sm_90 (Hopper): the start-up lines name the PTX JIT and where its kernels are kept"""
    run = gpu_host.run(images["2.21"], ["true"], cards=(H100,))
    assert run.exit_code == 0, run.tail()
    text = " ".join(run.stderr.split())
    assert "compute capability 9.0" in text
    assert "the driver JIT-compiles its PTX (compute_90) at first use" in text
    assert f"kernel cache {CACHE}, up to 4 GiB, writable, in the container" in text
    assert "mount a volume at the kernel cache" in text  # lost with the container: a warning
    figures.update(start_up=[line for line in run.stderr.splitlines() if "capability" in line])


def test_hopper_with_a_volume_keeps_the_kernels_and_tensorflow_registers_it(
    gpu_host: GpuHost, images: dict[str, str], volume: str
) -> None:
    """sm_90 with a volume at the cache: kept across restarts; TensorFlow registers the GPU"""
    run = gpu_host.run(
        images["2.21"],
        ["python", "/probe/probe.py", "devices"],
        {"TF_CPP_MIN_LOG_LEVEL": "0"},
        cards=(H100,),
        run_options=_cache_mount(volume),
    )
    assert run.exit_code == 0, run.tail()
    text = " ".join(run.stderr.split())
    assert f"kernel cache {CACHE}, up to 4 GiB, writable, on a volume" in text
    assert "kept across restarts" in text and "mount a volume" not in text
    # real TensorFlow registers it (its build lists compute_90, so it does not warn, although
    # without sm_90 SASS the driver JIT-compiles every kernel: the kit's line is the one that says)
    assert "compute capability: 9.0" in text
    assert "not built with CUDA kernel binaries compatible" not in text
    assert run.probe["logical_gpus"] == ["/device:GPU:0"]


def test_blackwell_with_2_17_is_known_to_fail_and_required_exits_69(
    gpu_host: GpuHost, images: dict[str, str], figures: dict[str, Any]
) -> None:
    """sm_120 with 2.17: known to fail (with the report); TF_GPU_REQUIRED=true exits 69"""
    warned = gpu_host.run(images["2.17"], ["true"], cards=(RTX_5090,))
    text = " ".join(warned.stderr.split())
    assert warned.exit_code == 0, warned.tail()  # without TF_GPU_REQUIRED: a warning, it runs
    assert "warning: GPU 0 (Fake RTX 5090), compute capability 12.0" in text
    assert "TensorFlow 2.17.0's own kernels are known to fail here" in text
    assert "CUDA_ERROR_INVALID_PTX" in text and "tensorflow/tensorflow#112272" in text
    required = gpu_host.run(
        images["2.17"], ["true"], {"TF_GPU_REQUIRED": "true"}, cards=(RTX_5090,)
    )
    assert required.exit_code == 69, required.tail()
    assert "known to fail" in required.stderr and "nothing was started" in required.stderr
    figures.update(exit_code=required.exit_code)


def test_blackwell_required_exits_69_in_the_hook_too(
    gpu_host: GpuHost, images: dict[str, str]
) -> None:
    """sm_120 with 2.17 and no entrypoint (a `command:`): the hook refuses, exit 69"""
    run = gpu_host.run(
        images["2.17"],
        ["python", "-c", "import tensorflow"],
        {"TF_GPU_REQUIRED": "true"},
        cards=(RTX_5090,),
        run_options=ENTRYPOINT_BYPASSED,
    )
    assert run.exit_code == 69, run.tail()
    text = " ".join(run.stderr.split())
    assert "compute capability 12.0" in text and "known to fail" in text
    assert "Traceback" not in run.stderr


def test_blackwell_with_2_21_warns_of_xla_and_runs_when_required(
    gpu_host: GpuHost, images: dict[str, str]
) -> None:
    """sm_120 with 2.21: kernels by PTX JIT, XLA known to fail: a warning, never exit 69"""
    env = {"TF_GPU_REQUIRED": "true", "TF_CPP_MIN_LOG_LEVEL": "0"}
    run = gpu_host.probe(images["2.21"], "devices", env=env, cards=(RTX_5090,))
    assert run.exit_code == 0, run.tail()
    text = " ".join(run.stderr.split())
    # TensorFlow's own words on it: no kernel binaries for 12.0, only PTX to JIT-compile
    assert "not built with CUDA kernel binaries compatible with compute capability 12.0" in text
    assert "XLA (jit_compile=True) is known to fail" in text and "#111958" in text
    assert "jit_compile=False" in text  # the fix
    assert "own kernels are known to fail" not in text
    assert run.probe["logical_gpus"] == ["/device:GPU:0"]


def test_maxwell_has_no_kernels_and_required_exits_69(
    gpu_host: GpuHost, images: dict[str, str]
) -> None:
    """sm_52 with 2.21: no kernel of it runs there; TF_GPU_REQUIRED=true exits 69"""
    warned = gpu_host.run(images["2.21"], ["true"], cards=(M60,))
    assert warned.exit_code == 0, warned.tail()
    assert "has no kernel for this GPU" in " ".join(warned.stderr.split())
    for command, options in (
        (["true"], {}),
        (["python", "-c", "import tensorflow"], ENTRYPOINT_BYPASSED),
    ):
        run = gpu_host.run(
            images["2.21"], command, {"TF_GPU_REQUIRED": "true"}, cards=(M60,), run_options=options
        )
        assert run.exit_code == 69, run.tail()
        assert "compute capability 5.2" in " ".join(run.stderr.split())


def test_ampere_is_native_and_nothing_extra_is_said(
    gpu_host: GpuHost, images: dict[str, str]
) -> None:
    """sm_80 with 2.21: native; not a word about JIT, caches or failures"""
    run = gpu_host.run(images["2.21"], ["true"], {"TF_GPU_REQUIRED": "true"}, cards=(A100,))
    assert run.exit_code == 0, run.tail()
    for word in ("capability", "kernel cache", "JIT", "known to fail"):
        assert word not in run.stderr, run.stderr


def test_show_and_check_give_the_verdicts(gpu_host: GpuHost, images: dict[str, str]) -> None:
    """`tfgpu show` and `tfgpu check` say what the GPU means: check fails on a known failure"""
    show = gpu_host.run(images["2.17"], ["tfgpu", "show", "--json"], cards=(RTX_5090,))
    assert show.exit_code == 0, show.tail()
    [shown] = json.loads(show.stdout)["gpu_support"]
    assert (shown["status"], shown["kernels"], shown["xla"]) == ("known-failure",) * 3
    check = gpu_host.run(images["2.17"], ["tfgpu", "check", "--json"], cards=(RTX_5090,))
    assert check.exit_code == 1, check.tail()
    report = json.loads(check.stdout)
    assert report["ok"] is False and report["gpu_support"][0]["status"] == "known-failure"
    assert any(
        p["severity"] == "error" and "known to fail" in p["what"] for p in report["problems"]
    )
    hopper = gpu_host.run(images["2.21"], ["tfgpu", "check"], cards=(H100,))
    assert hopper.exit_code == 0, hopper.tail()
    assert (
        "GPU 0, compute capability 9.0" in hopper.stdout
        and f"kernel cache {CACHE}" in hopper.stdout
    )


@pytest.mark.parametrize("user", ["root", "1000:1000", "12345:12345"])
def test_any_uid_writes_the_kernel_cache(
    gpu_host: GpuHost, images: dict[str, str], volume: str, user: str
) -> None:
    """The kernel cache folder (and a fresh volume on it) is writable by any uid"""
    script = (
        'touch "$CUDA_CACHE_PATH/by-$(id -u)" && stat -c %a "$CUDA_CACHE_PATH"'
        ' && echo "$CUDA_CACHE_MAXSIZE"'
    )
    for options in ({}, _cache_mount(volume)):
        run = gpu_host.run(
            images["2.21"],
            ["sh", "-c", script],
            cards=(H100,),
            run_options={**options, "user": user},
        )
        assert run.exit_code == 0, run.tail()
        assert run.stdout.split() == ["1777", "4294967296"], run.stdout
