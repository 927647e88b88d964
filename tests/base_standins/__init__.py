"""Stand-in base images for the container tests (see build.py for what they are)."""

from tests.base_standins.build import (
    BUILDERS,
    CUDA11,
    CUDA11_STANDINS,
    CUDA12_STANDINS,
    CUDA_TAG,
    GPU_TAG,
    JUPYTER_TAG,
    REGISTRY,
    SLIM_STANDINS,
    TF_VERSIONS,
    Result,
    StandinError,
    build_all,
    gpu_tag,
    slim_tag,
)

__all__ = [
    "BUILDERS",
    "CUDA11",
    "CUDA11_STANDINS",
    "CUDA12_STANDINS",
    "CUDA_TAG",
    "GPU_TAG",
    "JUPYTER_TAG",
    "REGISTRY",
    "SLIM_STANDINS",
    "TF_VERSIONS",
    "Result",
    "StandinError",
    "build_all",
    "gpu_tag",
    "slim_tag",
]
