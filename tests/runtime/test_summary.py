"""The one-line summary names what decided memory growth (no TensorFlow, no GPU)."""

from __future__ import annotations

import pytest
from tfgpu.commands.summary import describe_plan
from tfgpu.contract.settings import parse_environment
from tfgpu.plan.device_plan import make_plan

IMAGE = {"TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true", "TF_GPU_MEMORY_GROWTH": "true"}


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        (IMAGE, "memory growth on (image default)"),
        ({**IMAGE, "TF_GPU_MEMORY_GROWTH": "false"}, "memory growth off (environment)"),
        (
            {**IMAGE, "TF_FORCE_GPU_ALLOW_GROWTH": "false"},
            "memory growth off (TF_FORCE_GPU_ALLOW_GROWTH, environment)",
        ),
        (
            {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
            "memory growth on (TF_FORCE_GPU_ALLOW_GROWTH, environment)",
        ),
    ],
)
def test_the_summary_names_what_decided_growth(environ: dict[str, str], expected: str) -> None:
    settings = parse_environment(environ)
    assert describe_plan(make_plan(settings, []).as_json(), settings) == expected


def test_limits_resolved_per_gpu_once_the_gpus_are_known() -> None:
    settings = parse_environment({"TF_GPU_MEM_LIMIT": "25%", "TF_GPU_MEMORY_GROWTH": "true"})
    plan = make_plan(settings, [16384.0, 8192.0]).as_json()
    assert describe_plan(plan, settings) == (
        "GPU 0: 1 logical GPU of 4096 MiB; GPU 1: 1 logical GPU of 2048 MiB;"
        " memory growth on (environment)"
    )
    # from the plan alone (check's JSON, written by its child process): the native variable it sets
    assert describe_plan(plan) == (
        "GPU 0: 1 logical GPU of 4096 MiB; GPU 1: 1 logical GPU of 2048 MiB;"
        " memory growth on (TF_FORCE_GPU_ALLOW_GROWTH=true)"
    )


def test_limits_as_written_before_any_gpu_is_known() -> None:
    settings = parse_environment({"TF_GPU_MEM_LIMIT": "25%", "TF_GPU_REQUIRED": "true"})
    assert describe_plan(make_plan(settings, []).as_json(), settings) == (
        "memory limit 25% per GPU; GPU required"
    )
    nothing = parse_environment({})
    assert describe_plan(make_plan(nothing, []).as_json(), nothing) == (
        "TensorFlow defaults (no TF_GPU_* settings)"
    )
