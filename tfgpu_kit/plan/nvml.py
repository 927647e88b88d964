"""GPU memory from NVML, when `--gpu-memory` is not given and a driver is present."""

from __future__ import annotations

import logging

log = logging.getLogger(__name__)


def gpu_memory() -> dict[str, float] | None:
    """MiB per GPU, keyed by NVML index and by UUID; None without a driver.

    NVML indices follow PCI order, which is what Docker's device ids use; CUDA's own
    order can differ (see docs/scale.md)."""
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as error:
        log.debug("NVML unavailable: %s", error)
        return None
    try:
        found: dict[str, float] = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            mib = pynvml.nvmlDeviceGetMemoryInfo(handle).total / (1 << 20)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            found[str(index)] = mib
            found[uuid.decode() if isinstance(uuid, bytes) else str(uuid)] = mib
        return found
    finally:
        pynvml.nvmlShutdown()
