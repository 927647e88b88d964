"""Short human descriptions of settings, GPUs and problems (run's summary, show, check)."""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.machine import tegra
from tfgpu.plan.device_plan import format_mib

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, Dict, List, Optional

    from tfgpu.contract.settings import Settings
    from tfgpu.machine.nvml import Gpu, NvmlReport


def describe_plan(plan: "Dict[str, Any]", settings: "Optional[Settings]" = None) -> str:
    """One line, what the process asks TensorFlow for, from `Plan.as_json()` (also as check's
    child process wrote it). Per GPU the logical devices the plan resolved; before any GPU is
    known (show, no GPU visible) the limits as written. With `settings` (run, show) it names
    what decided growth; from a plan alone, the TF_FORCE_GPU_ALLOW_GROWTH it sets."""
    parts: List[str] = []
    for i, limits in enumerate(plan["gpu_limits_mib"]):
        if limits is not None:
            n = len(limits)
            sizes = ", ".join(format_mib(m) for m in limits)
            parts.append(f"GPU {i}: {n} logical GPU{'s' if n != 1 else ''} of {sizes} MiB")
    if not parts and settings is not None:
        parts += _limits_as_written(settings)
    if plan["memory_growth"] is not None:
        why = (
            _growth_source(settings)
            if settings is not None
            else f"TF_FORCE_GPU_ALLOW_GROWTH={plan['env'].get('TF_FORCE_GPU_ALLOW_GROWTH')}"
        )
        parts.append(f"memory growth {'on' if plan['memory_growth'] else 'off'} ({why})")
    if plan["cpu_devices"] is not None:
        parts.append(f"{plan['cpu_devices']} logical CPUs")
    if plan["mixed_precision"]:
        parts.append(f"Keras policy {plan['mixed_precision']}")
    if settings is not None and settings.allocator:
        parts.append(f"allocator {settings.allocator}")
    if settings is not None and settings.required:
        parts.append("GPU required")
    if parts:
        return "; ".join(parts)
    return "TensorFlow defaults" + (" (no TF_GPU_* settings)" if settings is not None else "")


def _limits_as_written(settings: "Settings") -> "List[str]":
    parts: List[str] = []
    if settings.mem_limit is not None:
        per = "per GPU" if len(settings.mem_limit) == 1 else "for GPUs in order"
        parts.append(f"memory limit {', '.join(str(a) for a in settings.mem_limit)} {per}")
    if settings.virtual_devices is not None:
        groups = "; ".join(", ".join(str(a) for a in g) for g in settings.virtual_devices)
        parts.append(f"logical GPUs of {groups}")
    return parts


def _growth_source(settings: "Settings") -> str:
    kit = settings.sources.get("TF_GPU_MEMORY_GROWTH")
    native = settings.sources.get("TF_FORCE_GPU_ALLOW_GROWTH")
    if kit is not None and not kit.note:
        return kit.source
    if native is not None:  # the native variable decided (or overrode the image default)
        return f"TF_FORCE_GPU_ALLOW_GROWTH, {native.source}"
    return kit.source if kit else ""


def describe_gpus(report: "NvmlReport", gpus: "List[Optional[Gpu]]") -> "Optional[str]":
    """None when there is certainly no driver: preflight's one warning line says so."""
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
