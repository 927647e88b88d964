"""GPU memory from NVML, when `--gpu-memory` or `--gpu-count` is not given and a driver is there.

No driver (nvidia-ml-py missing, or nvmlInit failing) is not an error here: `gpu_memory` returns
None and the command asks for the flags. NVML failing *after* nvmlInit (a GPU fallen off the bus,
a driver/library mismatch, a permission) raises NvmlFailed naming the call and the GPU: a KitError,
so the user sees one line instead of a traceback."""

from __future__ import annotations

import contextlib
import logging

from tfgpu_kit.errors import UsageError

log = logging.getLogger(__name__)


class NvmlFailed(UsageError):
    """NVML answered nvmlInit but then failed: the GPUs' memory cannot be read from it. Exit 2,
    as for a missing driver: the way out is a flag (--gpu-memory, --gpu-count)."""


def unavailable_reason() -> str | None:
    """Why NVML cannot be used here (None when it can); for the message asking for the flags."""
    try:
        import pynvml
    except ImportError:
        return "nvidia-ml-py is not installed"
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        return f"nvmlInit: {error}"
    with contextlib.suppress(pynvml.NVMLError):
        pynvml.nvmlShutdown()
    return None


def gpu_memory() -> dict[str, float] | None:
    """MiB per GPU, keyed by NVML index and by UUID; None without a driver.

    NVML indices follow PCI order, which is what Docker's device ids use; CUDA's own
    order can differ (see docs/scale.md). Raises NvmlFailed when NVML fails after nvmlInit."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        log.debug("NVML unavailable: %s", error)
        return None
    call = "nvmlDeviceGetCount"
    index: int | None = None
    try:
        found: dict[str, float] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            call = "nvmlDeviceGetHandleByIndex"
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            call = "nvmlDeviceGetMemoryInfo"
            mib = pynvml.nvmlDeviceGetMemoryInfo(handle).total / (1 << 20)
            call = "nvmlDeviceGetUUID"
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            found[str(index)] = mib
            found[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = mib
        return found
    except pynvml.NVMLError as error:
        what = "counting the GPUs" if index is None else f"reading GPU {index}"
        raise NvmlFailed(
            f"cannot read the GPUs' memory through NVML: {what} failed ({call}: {error})",
            hint="pass --gpu-memory SIZE (and --gpu-count N) so that plan does not read NVML",
        ) from None
    finally:
        with contextlib.suppress(pynvml.NVMLError):
            pynvml.nvmlShutdown()
