"""The one-line summary names what decided memory growth (no TensorFlow, no GPU)."""

from __future__ import annotations

import pytest
from tfgpu.device_plan import make_plan
from tfgpu.settings import parse_environment
from tfgpu.summary import describe_plan

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
    assert describe_plan(settings, make_plan(settings, [])) == expected
