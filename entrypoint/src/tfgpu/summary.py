"""Short human descriptions of settings, GPUs and problems (run's summary, show, check)."""

from __future__ import annotations

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import List, Optional

    from tfgpu.device_plan import Plan
    from tfgpu.nvml import Gpu, NvmlReport
    from tfgpu.settings import Settings


def describe_plan(settings: Settings, plan: Plan) -> str:
    parts: List[str] = []
    if settings.mem_limit is not None:
        per = "per GPU" if len(settings.mem_limit) == 1 else "for GPUs in order"
        parts.append(f"memory limit {', '.join(str(a) for a in settings.mem_limit)} {per}")
    if settings.virtual_devices is not None:
        groups = "; ".join(", ".join(str(a) for a in g) for g in settings.virtual_devices)
        parts.append(f"logical GPUs of {groups}")
    if settings.growth is not None:
        kit = settings.sources.get("TF_GPU_MEMORY_GROWTH")
        native = settings.sources.get("TF_FORCE_GPU_ALLOW_GROWTH")
        if kit is not None and not kit.note:
            why = kit.source
        elif native is not None:  # the native variable decided (or overrode the image default)
            why = f"TF_FORCE_GPU_ALLOW_GROWTH, {native.source}"
        else:
            why = kit.source if kit else ""
        parts.append(f"memory growth {'on' if settings.growth else 'off'} ({why})")
    if settings.cpu_devices is not None:
        parts.append(f"{settings.cpu_devices} logical CPUs")
    if settings.mixed_precision:
        parts.append(f"Keras policy {settings.mixed_precision}")
    if settings.allocator:
        parts.append(f"allocator {settings.allocator}")
    if settings.required:
        parts.append("GPU required")
    return "; ".join(parts) if parts else "TensorFlow defaults (no TF_GPU_* settings)"


def describe_gpus(report: NvmlReport, gpus: List[Optional[Gpu]]) -> Optional[str]:
    """None when there is certainly no driver: preflight's one warning line says so."""
    from tfgpu import tegra

    if isinstance(report, tegra.TegraReport) and report.found:  # a Jetson: unified memory
        return tegra.describe(report)
    if report.driver_present is False:
        return None
    if not report.found:
        return "GPUs: unknown (" + (report.error or "NVML unavailable") + ")"
    driver = f"driver {report.driver_version}" + (
        f" (CUDA {report.cuda_version})" if report.cuda_version else ""
    )
    if not gpus:
        return f"no GPU visible, {driver}"
    names = []
    for i, g in enumerate(gpus):
        if g is None:
            names.append(f"GPU {i}")
        else:
            names.append(f"GPU {i}: {g.name} ({int(g.total_mib)} MiB, {int(g.free_mib)} MiB free)")
    return "; ".join(names) + f", {driver}"
