"""The tests' one stand-in for `pynvml` (nvidia-ml-py). It is NOT NVML and proves nothing about a
driver; no GPU was used. The calls the kit makes, with NVML's order rules (nothing before
nvmlInit), its error classes, and failures on demand. tests/fakegpu checks the kit against the
real nvidia-ml-py over a fake libnvidia-ml instead."""

from __future__ import annotations

import types

GPU_NAME = "NVIDIA A10"


class NVMLError(Exception):
    pass


class NVMLError_LibraryNotFound(NVMLError):
    pass


class NVMLError_DriverNotLoaded(NVMLError):
    pass


def gpus_of(*mib: int) -> list[tuple[str, str, int]]:
    """GPUs of these sizes (MiB), with distinct UUIDs, for tests that care only about memory."""
    return [(GPU_NAME, f"GPU-0000000{i}-fake", size) for i, size in enumerate(mib)]


def standin_pynvml(
    gpus: list[tuple[str, str, int]],
    *,
    driver: str = "550.54.15",
    cuda: int = 12040,
    brand: int = 2,
    compute_capability: tuple[int, int] = (8, 6),
    missing: bool = False,
    init_error: str | None = None,
    fail: tuple[str, int | None] | None = None,
) -> types.ModuleType:
    """A `pynvml` module. gpus: (name, uuid, total MiB) in NVML (PCI) order.

    missing: nvmlInit raises NVMLError_LibraryNotFound (no driver); init_error: it raises
    NVMLError_DriverNotLoaded with that text; fail = (call, GPU index or None): that call raises
    NVMLError("Unknown Error"). `calls` lists every call made; `state["init"]` counts nvmlInit
    minus nvmlShutdown."""
    m = types.ModuleType("pynvml")
    state = {"init": 0}
    calls: list[str] = []

    def call(name: str, index: int | None = None) -> None:
        calls.append(name)
        if name != "nvmlInit" and state["init"] <= 0:
            raise NVMLError("Uninitialized")
        if fail == (name, index):
            raise NVMLError("Unknown Error")

    def nvml_init() -> None:
        calls.append("nvmlInit")
        if missing:
            raise NVMLError_LibraryNotFound("NVML Shared Library Not Found")
        if init_error is not None:
            raise NVMLError_DriverNotLoaded(init_error)
        state["init"] += 1

    def nvml_shutdown() -> None:
        calls.append("nvmlShutdown")
        state["init"] -= 1

    def driver_version() -> str:
        call("nvmlSystemGetDriverVersion")
        return driver

    def cuda_version() -> int:
        call("nvmlSystemGetCudaDriverVersion")
        return cuda

    def count() -> int:
        call("nvmlDeviceGetCount")
        return len(gpus)

    def handle(i: int) -> int:
        call("nvmlDeviceGetHandleByIndex", i)
        if not 0 <= i < len(gpus):
            raise NVMLError("Invalid Argument")
        return i

    def memory(h: int) -> types.SimpleNamespace:
        call("nvmlDeviceGetMemoryInfo", h)
        total = gpus[h][2] << 20
        return types.SimpleNamespace(total=total, free=total - (300 << 20), used=300 << 20)

    def name(h: int) -> str:
        call("nvmlDeviceGetName", h)
        return gpus[h][0]

    def uuid(h: int) -> bytes:
        call("nvmlDeviceGetUUID", h)
        return gpus[h][1].encode()  # bytes, as nvidia-ml-py before 11.515 returned

    def capability(h: int) -> tuple[int, int]:
        call("nvmlDeviceGetCudaComputeCapability", h)
        return compute_capability

    def get_brand(h: int) -> int:
        call("nvmlDeviceGetBrand", h)
        return brand

    m.nvmlInit = nvml_init  # type: ignore[attr-defined]
    m.nvmlShutdown = nvml_shutdown  # type: ignore[attr-defined]
    m.nvmlSystemGetDriverVersion = driver_version  # type: ignore[attr-defined]
    m.nvmlSystemGetCudaDriverVersion = cuda_version  # type: ignore[attr-defined]
    m.nvmlDeviceGetCount = count  # type: ignore[attr-defined]
    m.nvmlDeviceGetHandleByIndex = handle  # type: ignore[attr-defined]
    m.nvmlDeviceGetName = name  # type: ignore[attr-defined]
    m.nvmlDeviceGetUUID = uuid  # type: ignore[attr-defined]
    m.nvmlDeviceGetMemoryInfo = memory  # type: ignore[attr-defined]
    m.nvmlDeviceGetCudaComputeCapability = capability  # type: ignore[attr-defined]
    m.nvmlDeviceGetBrand = get_brand  # type: ignore[attr-defined]
    m.NVMLError = NVMLError  # type: ignore[attr-defined]
    m.NVMLError_LibraryNotFound = NVMLError_LibraryNotFound  # type: ignore[attr-defined]
    m.NVMLError_DriverNotLoaded = NVMLError_DriverNotLoaded  # type: ignore[attr-defined]
    m.state = state  # type: ignore[attr-defined]
    m.calls = calls  # type: ignore[attr-defined]
    return m
