"""Which CUDA libraries a build needs, and finding them in pip's `nvidia/*/lib` folders."""

from __future__ import annotations

import ctypes.util
import shutil
from pathlib import Path

from tfgpu import libs

CUDA_BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}


def test_needed_follows_build_info() -> None:
    assert libs.needed(CUDA_BUILD) == [
        ("cudart", "libcudart.so.12"),
        ("cublas", "libcublas.so.12"),
        ("cudnn", "libcudnn.so.9"),
    ]
    assert libs.needed({"is_cuda_build": False}) == []  # tensorflow-cpu: no cuda_version key
    assert libs.needed({"is_cuda_build": True, "cuda_version": "11.8", "cudnn_version": "8"})[
        2
    ] == (
        "cudnn",
        "libcudnn.so.8",
    )


def test_cuda_11_cudart_soname_is_11_0() -> None:
    """CUDA 11.x versions libcudart's soname as 11.0 (TensorFlow's cuda_configure.bzl, and
    pip's nvidia-cuda-runtime-cu11 ships lib/libcudart.so.11.0); there is no libcudart.so.11,
    so looking for it would call a working TF 2.12-2.14 set-up broken."""
    assert libs.needed({"is_cuda_build": True, "cuda_version": "11.8", "cudnn_version": "8"}) == [
        ("cudart", "libcudart.so.11.0"),
        ("cublas", "libcublas.so.11"),
        ("cudnn", "libcudnn.so.8"),
    ]


def test_found_in_a_pip_wheel_folder(tmp_path: Path) -> None:
    # Any real shared library stands in for libcudart here: the test is about where we look.
    real = ctypes.util.find_library("z") or ctypes.util.find_library("m")
    assert real, "a system libz or libm is needed to stand in for a CUDA library"
    source = next(
        p
        for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/lib64", "/usr/lib64")
        if (p := Path(d, real)).exists()
    )
    lib_dir = tmp_path / "nvidia" / "cuda_runtime" / "lib"
    lib_dir.mkdir(parents=True)
    shutil.copy(source, lib_dir / "libcudart.so.99")
    entry = libs.try_load("cudart", "libcudart.so.99", dirs=[str(tmp_path)])
    assert entry["loaded"] is True and entry["path"] == str(lib_dir / "libcudart.so.99")
    missing = libs.try_load("cudnn", "libcudnn.so.99", dirs=[str(tmp_path)])
    assert missing["loaded"] is False and "libcudnn.so.99" in str(missing["error"])
