"""Checks before the user's command starts, without TensorFlow: settings against the
GPUs NVML reports, the driver against the image's CUDA, each GPU's architecture against the
image's TensorFlow (tfgpu.plan.gpu_verdicts), TF_GPU_REQUIRED (and /dev/shm, only for a caller that
asks: see tfgpu.machine.shm).

Raises ConfigError (exit 78) for settings the hardware refutes, GpuUnavailableError
(exit 69) when a GPU is required and none is usable; everything else is a Problem.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.contract.errors import GpuUnavailableError
from tfgpu.contract.problems import ERROR, WARNING, Problem
from tfgpu.machine import gpu_report, nvml
from tfgpu.plan.device_plan import make_plan

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional

    from tfgpu.contract.settings import Settings
    from tfgpu.machine.kernel_cache import KernelCache
    from tfgpu.machine.nvml import Gpu, NvmlReport
    from tfgpu.plan.device_plan import Plan
    from tfgpu.plan.gpu_verdicts import GpuFindings, GpuVerdict


class Preflight:
    def __init__(
        self, nvml_report: "NvmlReport", gpus: "List[Optional[Gpu]]", plan: "Plan"
    ) -> None:
        self.nvml = nvml_report
        self.gpus = gpus  # visible GPUs in CUDA's order (None = exists, size unknown)
        self.plan = plan
        self.problems: List[Problem] = []
        self.verdicts: List[GpuVerdict] = []  # each visible GPU's architecture, judged
        self.arch_problems: List[Problem] = []  # those of self.problems that the verdicts raise
        self.notes: List[str] = []  # for the summary: PTX JIT and where its kernels are kept
        self.cache: Optional[KernelCache] = None  # inspected when a GPU needs the PTX JIT


def why_no_gpu(
    report: "NvmlReport", settings: "Settings", gpus: "List[Optional[Gpu]]"
) -> "Optional[str]":
    if settings.visible_devices == []:
        return "CUDA_VISIBLE_DEVICES is empty or -1, which hides every GPU"
    if not report.found:
        # Unknown (no nvidia-ml-py): say nothing rather than guess; TensorFlow will tell.
        return (report.error or nvml.NO_DRIVER) if report.driver_present is False else None
    if not report.gpus:
        return "the NVIDIA driver reports no GPU (was the container started with --gpus?)"
    if not gpus:
        return "CUDA_VISIBLE_DEVICES matches none of the GPUs"
    return None


def run_preflight(
    settings: "Settings",
    environ: "Mapping[str, str]",
    *,
    nvml_report: "Optional[NvmlReport]" = None,
    build_info: "Optional[Callable[[], Optional[Dict[str, object]]]]" = None,
    shm_path: "Optional[str]" = None,
) -> "Preflight":
    """`shm_path`: also check that /dev/shm is larger than Docker's default (None: not here;
    the hook and `tfgpu check` do, see tfgpu.machine.shm)."""
    report = nvml_report if nvml_report is not None else gpu_report.read(environ)
    gpus, notes = nvml.visible_gpus(
        report, settings.visible_devices, environ.get("CUDA_DEVICE_ORDER")
    )
    if not report.found and (report.driver_present is False or settings.visible_devices is None):
        gpus = []  # no driver: nothing visible; or unknown count: plan without GPUs
    problems = [Problem(WARNING, n) for n in notes]

    no_gpu = why_no_gpu(report, settings, gpus)
    if report.found and report.driver_version:
        # ~0.15 ms (-X importtime): with a driver only
        from tfgpu.machine.driver import check_driver

        problems += check_driver(report.driver_version, settings.image, [g for g in report.gpus])
    driver_unusable = any(p.severity == ERROR for p in problems)
    gpu: Optional[GpuFindings] = None
    if report.found and any(g is not None and g.compute_capability for g in gpus):
        from tfgpu.plan import gpu_verdicts  # ~0.5 ms (-X importtime): with a GPU in sight only

        gpu = gpu_verdicts.assess(gpus, environ, build_info or _build_info)
        problems += gpu.problems
    if settings.required:
        if no_gpu is None and driver_unusable:
            no_gpu = "the NVIDIA driver is too old for this image's CUDA (see above)"
        if no_gpu is None and build_info is not None:
            info = build_info()
            if info is not None and not info.get("is_cuda_build"):
                no_gpu = "the installed TensorFlow is a CPU-only build (tensorflow-cpu)"
        if no_gpu is None and gpu is not None and gpu.unusable is not None:
            from tfgpu.plan.gpu_verdicts import UNUSABLE_FIX  # (not a cost): imported above

            err = GpuUnavailableError(gpu.unusable, UNUSABLE_FIX)
            err.problems = problems  # type: ignore[attr-defined]
            raise err
        if no_gpu is not None:
            err = GpuUnavailableError(no_gpu)
            err.problems = problems  # type: ignore[attr-defined]
            raise err

    totals = [g.total_mib if g is not None else None for g in gpus]
    names = [g.name if g is not None else "" for g in gpus]
    plan = make_plan(settings, totals, names)
    if (
        report.driver_present is None and not gpus
    ):  # GPUs unknown, not absent: no "not applied" noise
        plan.warnings = [w for w in plan.warnings if "no GPU is visible" not in w]
    result = Preflight(report, gpus, plan)
    if no_gpu is not None and not settings.hide_gpus:  # a parameter server's is by design
        problems.append(Problem(WARNING, f"no GPU: {no_gpu}; TensorFlow will run on the CPU"))
    if gpu is not None and not settings.hide_gpus:  # a parameter server uses no GPU
        result.verdicts, result.notes, result.cache = gpu.verdicts, gpu.notes, gpu.cache
        result.arch_problems = gpu.arch_problems
        problems += gpu.arch_problems
    problems += [Problem(WARNING, w) for w in plan.warnings]
    if shm_path is not None:  # imported only then: `tfgpu run` does not ask (~0.7 ms, importtime)
        from tfgpu.machine.shm import shm_problem

        shm = shm_problem(shm_path, environ)
        if shm is not None:
            problems.append(shm)
    result.problems = problems
    return result


def _build_info() -> "Optional[Dict[str, object]]":
    """The installed TensorFlow's build facts, for an image that does not name its architectures
    (one not built by the kit)."""
    from tfgpu.machine import tfbuild  # ~0.13 ms (-X importtime): outside a kit image only

    return tfbuild.build_info()
