"""One CUDA/cuDNN fit rule (tfgpu.machine.libs.fits, which both sides call): what the build side
decides an image's base lacks (tfgpu_kit/matrix/cudagap.py) is
what `tfgpu check` says TensorFlow refuses in the
image (tfgpu.machine.libs.version_problem), for every TensorFlow of images/matrix.yaml and any
library version around its build's."""

from __future__ import annotations

import pytest
from tfgpu.machine import libs

from tfgpu_kit.matrix import cudagap, spec
from tfgpu_kit.matrix.versions import Version

SPEC = spec.load()


def _around(needed: Version) -> list[Version]:
    """Versions of the major below, the same and the one above, each minor 0-9, with a patch."""
    return [
        Version.parse(f"{major}.{minor}.{patch}")
        for major in (needed.major - 1, needed.major, needed.major + 1)
        for minor in range(10)
        for patch in (0, 2)
    ]


def _runtime_accepts(name: str, has: Version, build_info: dict[str, object], tf: str) -> bool:
    lib = {"name": name, "loaded": True, "version": str(has)}
    return libs.version_problem(lib, build_info, tf) is None


@pytest.mark.parametrize("tf", sorted(SPEC.matrix.tensorflow))
def test_cuda_runtime_fit_is_the_runtimes_rule(tf: str) -> None:
    needed = Version.parse(SPEC.matrix.tensorflow[tf].cuda)
    for has in _around(needed):
        runtime = _runtime_accepts("cudart", has, {"cuda_version": str(needed)}, tf)
        assert cudagap.fits(needed, has) is runtime, (tf, str(needed), str(has))


@pytest.mark.parametrize("tf", sorted(SPEC.matrix.tensorflow))
def test_cudnn_fit_is_the_runtimes_rule(tf: str) -> None:
    needed = Version.parse(SPEC.matrix.tensorflow[tf].cudnn)
    for has in _around(needed):
        runtime = _runtime_accepts("cudnn", has, {"cudnn_version": str(needed.major)}, tf)
        assert cudagap.fits(needed, has) is runtime, (tf, str(needed), str(has))
