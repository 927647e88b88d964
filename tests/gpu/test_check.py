"""TF_GPU_REQUIRED, `tfgpu check` and `tfgpu show` with a GPU present, and the driver verdicts
of each image for drivers 470, 535, 560 and 580 (the fake driver reports the version given)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.gpu.harness import CARD, GpuHost


def test_gpu_required_refuses_a_container_without_one(
    gpu_host: GpuHost, runtime_image: str, figures: dict[str, Any]
) -> None:
    """TF_GPU_REQUIRED=true: exit 69 with the reason when no GPU is visible"""
    env = {"TF_GPU_REQUIRED": "true", "CUDA_VISIBLE_DEVICES": ""}
    run = gpu_host.probe(runtime_image, "devices", env=env)
    assert run.exit_code == 69, run.tail()
    assert "CUDA_VISIBLE_DEVICES" in run.stderr
    if not gpu_host.real:  # a driver that sees no card at all
        none = gpu_host.probe(runtime_image, "devices", env={"TF_GPU_REQUIRED": "true"}, cards=())
        assert none.exit_code == 69, none.tail()
        figures.update(no_card_exit=none.exit_code)
    figures.update(hidden_exit=run.exit_code)


def test_gpu_required_runs_with_one(gpu_host: GpuHost, runtime_image: str) -> None:
    """TF_GPU_REQUIRED=true with a GPU: the program runs on it"""
    run = gpu_host.probe(runtime_image, "devices", env={"TF_GPU_REQUIRED": "true"})
    assert run.exit_code == 0, run.tail()
    assert run.probe["logical_gpus"] == ["/device:GPU:0"]


def test_check_reports_the_gpu_the_libraries_and_the_plan(
    gpu_host: GpuHost, image: str, figures: dict[str, Any]
) -> None:
    """`tfgpu check --json`: GPU, every CUDA library loaded, cap resolved and applied"""
    run = gpu_host.run(image, ["tfgpu", "check", "--json"], {"TF_GPU_MEM_LIMIT": "25%"})
    assert run.exit_code == 0, run.tail()
    report = json.loads(run.stdout)
    assert report["ok"] is True
    assert report["driver"]["found"] is True
    [gpu] = report["gpus"][:1]
    if not gpu_host.real:
        assert gpu["total_mib"] == CARD.memory_mib
        assert gpu["name"] == CARD.name
    quarter = int(gpu["total_mib"]) * 25 // 100
    assert report["plan"]["gpu_limits_mib"][0] == [quarter]
    assert report["applied"]["ok"] is True
    assert report["applied"]["logical_gpus"][0] == "/device:GPU:0"
    missing = [lib["soname"] for lib in report["libraries"] if not lib["loaded"]]
    assert missing == []
    figures.update(
        gpu=gpu["name"],
        total_mib=gpu["total_mib"],
        libraries=[f"{lib['soname']} {lib.get('version')}" for lib in report["libraries"]],
    )


def test_show_resolves_the_settings(gpu_host: GpuHost, runtime_image: str) -> None:
    """`tfgpu show`: where each setting came from, without starting TensorFlow"""
    env = {"TF_GPU_MEM_LIMIT": "25%", "TF_FORCE_GPU_ALLOW_GROWTH": "false"}
    run = gpu_host.run(runtime_image, ["tfgpu", "show", "--json"], env)
    assert run.exit_code == 0, run.tail()
    shown = json.loads(run.stdout)
    assert shown["settings"]["TF_GPU_MEM_LIMIT"] == {"value": "25%", "source": "environment"}
    growth = shown["settings"]["TF_GPU_MEMORY_GROWTH"]
    assert growth["note"] == "overridden by TF_FORCE_GPU_ALLOW_GROWTH"
    assert "memory growth off (TF_FORCE_GPU_ALLOW_GROWTH, environment)" in run.stderr


# (image, driver) -> tfgpu check's exit code and the words of its verdict. The floors are
# the images' TFGPU_IMAGE_DRIVER_MIN: 555.42.06 (CUDA 12.5, 2.21), 545.23.08 (CUDA 12.3,
# 2.17); 525.60.13 is CUDA 12's minor-version compatibility floor.
VERDICTS = [
    ("2.21", "470.256.02", 1, "Forward compatibility is not available for driver branch 470"),
    ("2.21", "535.104.05", 0, "minor-version compatibility mode"),
    ("2.21", "560.35.03", 0, "OK: the set-up works"),
    ("2.21", "580.65.06", 0, "OK: the set-up works"),
    ("2.17", "470.256.02", 1, "but driver 470.256.02 was detected"),
    ("2.17", "535.104.05", 0, "which wants NVIDIA driver 545.23.08 or later"),
    ("2.17", "560.35.03", 0, "OK: the set-up works"),
    ("2.17", "580.65.06", 0, "OK: the set-up works"),
]


@pytest.mark.parametrize(("version", "driver", "code", "words"), VERDICTS)
def test_the_driver_verdict(
    gpu_host: GpuHost,
    images: dict[str, str],
    version: str,
    driver: str,
    code: int,
    words: str,
    figures: dict[str, Any],
) -> None:
    """`tfgpu check` judges the host driver against the image's CUDA"""
    run = gpu_host.run(images[version], ["tfgpu", "check"], driver=driver)
    assert run.exit_code == code, run.tail()
    assert words in run.logs
    assert f"NVIDIA driver: {driver}" in run.stdout
    figures.update(image=images[version], driver=driver, exit=run.exit_code)


def test_a_parameter_server_started_without_the_door_sees_no_gpu(
    gpu_host: GpuHost, runtime_image: str
) -> None:
    """A parameter server's plain `command:` (no `tfgpu run`): the hook hides the GPUs before
    TensorFlow lists them, as `tfgpu show` says it does"""
    env = {
        "TF_GPU_PS": "1",
        "TF_GPU_WORKERS": "1",
        "TF_GPU_WORKER_HOSTS": "w-{index}.t",
        "TF_GPU_PS_HOSTS": "p-{index}.t",
        "TF_GPU_CHIEF_HOST": "c.t",
        "TF_GPU_ROLE": "ps",
        "JOB_COMPLETION_INDEX": "0",
    }
    code = "import tensorflow as tf; print('GPUS', len(tf.config.list_physical_devices('GPU')))"
    run = gpu_host.run(runtime_image, ["python", "-c", code], env, run_options={"entrypoint": []})
    assert run.exit_code == 0, run.tail()
    assert "GPUS 0" in run.stdout, run.tail()
    shown = gpu_host.run(runtime_image, ["tfgpu", "show"], env, run_options={"entrypoint": []})
    assert "a parameter server: no GPU" in shown.stdout, shown.stdout
    # a worker of the same cluster keeps its GPU
    worker = gpu_host.run(
        runtime_image, ["python", "-c", code], {**env, "TF_GPU_ROLE": "worker"},
        run_options={"entrypoint": []},
    )  # fmt: skip
    assert "GPUS 1" in worker.stdout, worker.tail()
