"""The local NVIDIA driver and GPUs through NVML (nvidia-ml-py), for `check` without --driver."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass

from tfgpu_kit.errors import KitError


class NoDriver(KitError):
    """NVML is not there or not usable: no NVIDIA driver on this machine (or not visible here)."""


@dataclass(frozen=True)
class LocalGpu:
    index: int
    name: str
    arch: tuple[int, int]


@dataclass(frozen=True)
class LocalDriver:
    version: str
    gpus: list[LocalGpu]


def read() -> LocalDriver:
    try:
        import pynvml
    except ImportError:
        raise NoDriver("cannot read the local driver: nvidia-ml-py is not installed") from None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NoDriver(
            f"no NVIDIA driver found on this machine (NVML: {exc})",
            hint="pass --driver VERSION (as nvidia-smi prints it on the GPU host)",
        ) from None
    try:
        version = pynvml.nvmlSystemGetDriverVersion()
        gpus = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(handle)
            gpus.append(
                LocalGpu(
                    index,
                    name.decode() if isinstance(name, bytes) else str(name),
                    (int(major), int(minor)),
                )
            )
    except pynvml.NVMLError as exc:
        raise NoDriver(f"NVML could not read the driver: {exc}") from None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
    return LocalDriver(version.decode() if isinstance(version, bytes) else str(version), gpus)
