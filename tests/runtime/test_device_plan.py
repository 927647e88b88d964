"""The planner: settings plus GPU sizes → per-GPU logical devices, errors and warnings."""

from __future__ import annotations

import pytest
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import parse_environment
from tfgpu.plan.device_plan import make_plan


@pytest.mark.parametrize(
    ("environ", "totals", "limits"),
    [
        ({"TF_GPU_MEM_LIMIT": "4096"}, [24576, 24576], [[4096], [4096]]),
        ({"TF_GPU_MEM_LIMIT": "4096,2048"}, [24576, 24576], [[4096], [2048]]),
        ({"TF_GPU_MEM_LIMIT": "50%"}, [24576, 16384], [[12288], [8192]]),
        ({"TF_GPU_MEM_LIMIT": "33%"}, [10000], [[3300]]),
        ({"TF_GPU_VIRTUAL_DEVICES": "6144,8192"}, [24576, 24576], [[6144, 8192], [6144, 8192]]),
        ({"TF_GPU_VIRTUAL_DEVICES": "6144,8192;4096"}, [24576, 24576], [[6144, 8192], [4096]]),
        ({"TF_GPU_VIRTUAL_DEVICES": "4096"}, [None], [[4096]]),
        ({}, [24576], [None]),
        ({"TF_GPU_MEM_LIMIT": "4096"}, [], []),
    ],
)
def test_plan_limits(
    environ: dict[str, str], totals: list[float | None], limits: list[object]
) -> None:
    assert make_plan(parse_environment(environ), totals).gpu_limits == limits


@pytest.mark.parametrize(
    ("environ", "totals", "match"),
    [
        ({"TF_GPU_MEM_LIMIT": "4096,2048,1024"}, [24576, 24576], "3 values for 2 visible GPUs"),
        ({"TF_GPU_VIRTUAL_DEVICES": "1;2;3"}, [24576], "3 values for 1 visible GPU"),
        ({"TF_GPU_MEM_LIMIT": "32GiB"}, [24576], "32768 MiB is more than GPU 0"),
        ({"TF_GPU_VIRTUAL_DEVICES": "16384,16384"}, [24576], "32768 MiB is more than GPU 0"),
        ({"TF_GPU_MEM_LIMIT": "40%"}, [None], "needs its total memory"),
    ],
)
def test_plan_errors(environ: dict[str, str], totals: list[float | None], match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        make_plan(parse_environment(environ), totals)


@pytest.mark.parametrize(
    ("environ", "totals", "match"),
    [
        ({"TF_GPU_MEM_LIMIT": "24500"}, [24576], "CUDA context"),
        ({"TF_GPU_MEM_LIMIT": "100%"}, [24576], "CUDA context"),
        ({"TF_GPU_MEM_LIMIT": "256"}, [24576], "less than 512 MiB"),
        ({"TF_GPU_MEM_LIMIT": "4096"}, [], "no GPU is visible"),
    ],
)
def test_plan_warnings(environ: dict[str, str], totals: list[float | None], match: str) -> None:
    plan = make_plan(parse_environment(environ), totals)
    assert any(match in w for w in plan.warnings), plan.warnings


@pytest.mark.parametrize(
    "environ",
    [
        {"TF_GPU_MEM_LIMIT": "4096,2048"},
        {"TF_GPU_MEM_LIMIT": "4096"},
        {"TF_GPU_VIRTUAL_DEVICES": "1024,1024;2048"},
    ],
)
def test_no_gpu_visible_any_length_warns_and_applies_nothing(environ: dict[str, str]) -> None:
    """README: with no GPU visible nothing is capped, whatever the list's length."""
    [(variable, value)] = environ.items()
    plan = make_plan(parse_environment(environ), [])
    assert plan.gpu_limits == []
    assert plan.warnings == [
        f"{variable}={value!r} is set but no GPU is visible; it is not applied "
        "(TensorFlow runs on the CPU)"
    ]


@pytest.mark.parametrize("count", [1, 3])
def test_a_per_gpu_list_that_does_not_fit_the_visible_gpus_is_an_error(count: int) -> None:
    """README: with at least one GPU visible, a list's length must be 1 or the GPU count."""
    with pytest.raises(ConfigError) as info:
        make_plan(parse_environment({"TF_GPU_MEM_LIMIT": "4096,2048"}), [24576.0] * count)
    assert info.value.variable == "TF_GPU_MEM_LIMIT"
    assert f"2 values for {count} visible GPU" in str(info.value)


def test_growth_goes_through_the_native_variable() -> None:
    plan = make_plan(
        parse_environment({"TF_GPU_MEMORY_GROWTH": "on", "TF_GPU_MEM_LIMIT": "4096"}), [24576]
    )
    assert plan.env == {"TF_FORCE_GPU_ALLOW_GROWTH": "true"} and plan.growth is True
