"""Read the driver and GPUs through NVML (`pynvml`, from nvidia-ml-py), without TensorFlow.

Optional: without nvidia-ml-py or without a driver, the report says why and the kit
carries on (caps cannot be checked against the card then). NVML ignores
CUDA_VISIBLE_DEVICES; `visible_gpus` maps CUDA's view onto NVML's devices.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

from tfgpu.contract.ascii_numbers import whole_number

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from types import ModuleType
    from typing import Dict, List, Optional, Tuple

    from tfgpu.contract.check_report import GpuInfo

# Any of these exists when a driver is present (bare metal, `docker run --gpus`, WSL).
# Checking them first spares the ~30 ms import of pynvml on the many machines without one.
DRIVER_MARKERS = ("/dev/nvidiactl", "/proc/driver/nvidia/version", "/dev/dxg")
NO_DRIVER = "NVML library not found (no NVIDIA driver mounted)"
_MIB = 1 << 20


class Gpu:
    """One GPU as NVML reports it (index = NVML's index, PCI bus order)."""

    __slots__ = ("brand", "compute_capability", "free_mib", "index", "name", "total_mib", "uuid")

    def __init__(
        self,
        index: int,
        name: str,
        uuid: str,
        total_mib: float,
        free_mib: float,
        compute_capability: "Optional[str]" = None,
        brand: "Optional[int]" = None,
    ) -> None:
        self.index = index
        self.name = name
        self.uuid = uuid
        self.total_mib = total_mib
        self.free_mib = free_mib
        self.compute_capability = compute_capability
        self.brand = brand

    def as_json(self) -> "GpuInfo":
        return {
            "index": self.index,
            "name": self.name,
            "uuid": self.uuid,
            "total_mib": self.total_mib,
            "free_mib": self.free_mib,
            "compute_capability": self.compute_capability,
        }


class NvmlReport:
    def __init__(self) -> None:
        self.found = False
        # False: certainly no driver; None: unknown (nvidia-ml-py missing, NVML failed).
        self.driver_present: Optional[bool] = None
        self.driver_version: Optional[str] = None
        self.cuda_version: Optional[str] = None  # the newest CUDA the driver supports
        self.error: Optional[str] = None
        # What failed, for callers that word their own message (the build side's `check` and
        # `plan`): the pynvml call ("nvmlInit" when NVML did not start), the GPU it was reading
        # (None before the first GPU) and the exception's own text.
        self.failed_call: Optional[str] = None
        self.failed_gpu: Optional[int] = None
        self.failure: Optional[str] = None
        self.gpus: List[Gpu] = []

    def driver_json(self) -> "Dict[str, object]":  # check_report.DriverInfo
        return {
            "found": self.found,
            "version": self.driver_version,
            "cuda_version": self.cuda_version,
            "error": self.error,
        }


def _text(x: object) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)  # old nvidia-ml-py returned bytes


def query(pynvml: "Optional[ModuleType]" = None) -> "NvmlReport":
    """Ask NVML. `pynvml` may be a stand-in module (tests); otherwise it is imported lazily."""
    report = NvmlReport()
    if pynvml is None:
        if not any(os.path.exists(p) for p in DRIVER_MARKERS):
            report.error = NO_DRIVER
            report.driver_present = False
            return report
        try:
            import pynvml as real  # type: ignore[import-not-found,unused-ignore]
        except ImportError:
            report.error = (
                "nvidia-ml-py is not installed (pip install 'tfgpu[nvml]'); GPUs not inspected"
            )
            return report
        pynvml = real
    try:
        pynvml.nvmlInit()
    except Exception as e:  # NVMLError_LibraryNotFound, DriverNotLoaded, NoPermission…
        name = type(e).__name__
        report.failed_call, report.failure = "nvmlInit", str(e)
        report.error = (
            NO_DRIVER if "LibraryNotFound" in name else f"NVML could not start: {name}: {e}"
        )
        if "LibraryNotFound" in name or "DriverNotLoaded" in name:
            report.driver_present = False
        return report
    call = "nvmlSystemGetDriverVersion"
    index: Optional[int] = None
    try:
        report.found = True
        report.driver_present = True
        report.driver_version = _text(pynvml.nvmlSystemGetDriverVersion())
        try:
            v = int(pynvml.nvmlSystemGetCudaDriverVersion())
            report.cuda_version = f"{v // 1000}.{v % 1000 // 10}"
        except Exception:
            pass
        call = "nvmlDeviceGetCount"
        for index in range(int(pynvml.nvmlDeviceGetCount())):
            call = "nvmlDeviceGetHandleByIndex"
            h = pynvml.nvmlDeviceGetHandleByIndex(index)
            call = "nvmlDeviceGetMemoryInfo"
            mem = pynvml.nvmlDeviceGetMemoryInfo(h)
            cc: Optional[str] = None
            brand: Optional[int] = None
            try:
                major, minor = pynvml.nvmlDeviceGetCudaComputeCapability(h)
                cc = f"{major}.{minor}"
            except Exception:
                pass
            try:  # noqa: SIM105  (no contextlib: this module is on `tfgpu run`'s start-up path)
                brand = int(pynvml.nvmlDeviceGetBrand(h))
            except Exception:
                pass
            call = "nvmlDeviceGetName"
            name = _text(pynvml.nvmlDeviceGetName(h))
            call = "nvmlDeviceGetUUID"
            uuid = _text(pynvml.nvmlDeviceGetUUID(h))
            report.gpus.append(Gpu(index, name, uuid, mem.total / _MIB, mem.free / _MIB, cc, brand))
    except Exception as e:
        report.error = f"NVML failed while listing GPUs: {type(e).__name__}: {e}"
        report.failed_call, report.failed_gpu, report.failure = call, index, str(e)
    finally:
        try:  # noqa: SIM105  (as above)
            pynvml.nvmlShutdown()
        except Exception:
            pass
    return report


def visible_gpus(
    report: "NvmlReport", visible: "Optional[List[str]]", device_order: "Optional[str]"
) -> "Tuple[List[Optional[Gpu]], List[str]]":
    """The GPUs CUDA (and so TensorFlow) will see, in CUDA's order, as NVML devices.

    An entry is None when it exists but cannot be matched (a MIG instance; a CUDA index
    when CUDA's order may differ from NVML's). Returns (gpus, notes for the user).

    CUDA numbers devices fastest-first unless CUDA_DEVICE_ORDER=PCI_BUS_ID, while NVML uses
    PCI order, so an index is only trusted when the order is PCI_BUS_ID or all GPUs are the
    same model (then the order does not matter). UUIDs are always exact.
    """
    notes: List[str] = []
    if not report.found:
        # No NVML: CUDA_VISIBLE_DEVICES entries are all we know (sizes unknown).
        return [None for _ in visible] if visible else [], notes
    same_model = len({(g.name, round(g.total_mib)) for g in report.gpus}) <= 1
    trusted_index = same_model or (device_order or "").strip().upper() == "PCI_BUS_ID"
    if visible is None:
        return [g if trusted_index else None for g in report.gpus], notes
    out: List[Optional[Gpu]] = []
    for entry in visible:
        if entry.isdigit():
            # bounded before int() (4,300 digits raise): any index past the GPUs is past them
            found = whole_number(entry, len(report.gpus))
            i = len(report.gpus) if found is None else found
            if i >= len(report.gpus):
                notes.append(
                    f"CUDA_VISIBLE_DEVICES names GPU {entry[:20]}, but only {len(report.gpus)} "
                    "exist; "
                    "CUDA hides it and every entry after it"
                )
                break
            if not trusted_index:
                notes.append(
                    f"cannot tell which physical GPU CUDA index {i} is (CUDA orders fastest "
                    "first, NVML by "
                    "PCI bus); set CUDA_DEVICE_ORDER=PCI_BUS_ID or use GPU UUIDs to check caps "
                    "against it"
                )
            out.append(report.gpus[i] if trusted_index else None)
        elif entry.startswith("GPU-"):
            matches = [g for g in report.gpus if g.uuid.lower().startswith(entry.lower())]
            if len(matches) != 1:
                why = "matches no GPU" if not matches else "matches several GPUs"
                notes.append(
                    f"CUDA_VISIBLE_DEVICES entry {entry} {why}; CUDA hides it and every entry "
                    "after it"
                )
                break
            out.append(matches[0])
        else:  # MIG-…: a slice whose size NVML reports elsewhere; leave it unknown
            out.append(None)
    return out, notes
