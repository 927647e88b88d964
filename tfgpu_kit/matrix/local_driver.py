"""The local NVIDIA driver and GPUs, for `check` without --driver and `plan` without --gpu-memory.

NVML is read by the runtime's reader (`tfgpu.machine.nvml.query`), the kit's one reader of it; this
module only words its failures as the build side's errors. The build side imports pynvml itself and
hands it over: the runtime's reader would first look for a driver's device files (its shortcut
inside containers), while a build host may load NVML without them (and the tests' fake driver has
none).
"""

from __future__ import annotations

from collections.abc import Sequence

from tfgpu.machine import nvml
from tfgpu.machine.nvml import NvmlReport

from tfgpu_kit.shared.errors import KitError, UsageError

NOT_INSTALLED = "nvidia-ml-py is not installed"


class NoDriver(KitError):
    """NVML is not there or not usable: no NVIDIA driver on this machine (or not visible here)."""


class NvmlFailed(UsageError):
    """NVML answered nvmlInit but then failed: the GPUs' memory cannot be read from it. Exit 2,
    as for a missing driver: the way out is a flag (--gpu-memory, --gpu-count)."""


def read() -> NvmlReport | None:
    """NVML's report (see its `failed_call` when something failed); None without nvidia-ml-py."""
    try:
        import pynvml
    except ImportError:
        return None
    return nvml.query(pynvml)


def local_driver() -> NvmlReport:
    """The driver and GPUs for `check`; NoDriver says why they cannot be read."""
    report = read()
    if report is None:
        raise NoDriver(f"cannot read the local driver: {NOT_INSTALLED}")
    if report.failed_call == "nvmlInit":
        raise NoDriver(
            f"no NVIDIA driver found on this machine (NVML: {report.failure})",
            hint="pass --driver VERSION (as nvidia-smi prints it on the GPU host)",
        )
    if report.failure is not None or report.driver_version is None:
        raise NoDriver(f"NVML could not read the driver: {report.failure}")
    return report


def gpu_memory(missing_flags: Sequence[str]) -> tuple[dict[str, float] | None, str | None]:
    """(MiB per GPU keyed by NVML index and by UUID, None), or (None, why NVML cannot be used)
    without a driver: then `plan` asks for the flags.

    NVML indices follow PCI order, which is what Docker's device ids use; CUDA's own order can
    differ (see docs/scale.md). NVML failing after nvmlInit (a GPU fallen off the bus, a
    driver/library mismatch) raises NvmlFailed naming the call and the GPU, with a hint naming
    `missing_flags`, the flags that would spare reading NVML."""
    report = read()
    if report is None:
        return None, NOT_INSTALLED
    if report.failed_call == "nvmlInit":
        return None, f"nvmlInit: {report.failure}"
    if report.failed_call is not None:
        if report.failed_gpu is not None:
            what = f"reading GPU {report.failed_gpu}"
        elif report.failed_call == "nvmlDeviceGetCount":
            what = "counting the GPUs"
        else:
            what = "reading the driver"
        raise NvmlFailed(
            f"cannot read the GPUs' memory through NVML: {what} failed "
            f"({report.failed_call}: {report.failure})",
            hint=f"pass {' and '.join(missing_flags)} so that plan does not read NVML",
        )
    found = {key: gpu.total_mib for gpu in report.gpus for key in (str(gpu.index), gpu.uuid)}
    return found, None
