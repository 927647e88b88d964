"""Stand-in base images for the container tests (see build.py for what they are)."""

from tests.standin.build import (
    GPU_TAG,
    JUPYTER_TAG,
    NOCUDNN_REGISTRY,
    NOCUDNN_TAG,
    REGISTRY,
    Result,
    StandinError,
    build_all,
)

__all__ = [
    "GPU_TAG",
    "JUPYTER_TAG",
    "NOCUDNN_REGISTRY",
    "NOCUDNN_TAG",
    "REGISTRY",
    "Result",
    "StandinError",
    "build_all",
]
