"""Turn Settings plus what is known about the visible GPUs into a concrete Plan.

Pure (no I/O): the hook, `tfgpu run`'s preflight and `tfgpu check` all call it, with GPU
totals from NVML when available (None when unknown), so they agree on every decision.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import AMOUNT_ACCEPTED

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Optional, Sequence

    from tfgpu.contract.settings import MemAmount, Settings

# Memory the CUDA context and libraries take per process outside TensorFlow's allocator
# (a few hundred MiB; more with cuDNN/cuBLAS loaded). A cap closer than this to the card's
# total will not fit.
CUDA_CONTEXT_MIB = 300
# Below this a TensorFlow process rarely gets past its first kernels (cuDNN workspaces,
# cuBLAS handles); allowed, but worth a warning.
SMALL_CAP_MIB = 512


class Plan:
    """What to do in TensorFlow: per visible GPU the logical-device sizes (MiB), or None."""

    def __init__(self) -> None:
        self.gpu_limits: List[Optional[List[float]]] = []
        self.growth: Optional[bool] = None
        self.env: Dict[str, str] = {}  # native variables to set in the process (growth)
        self.cpu_devices: Optional[int] = None
        self.mixed_precision: Optional[str] = None
        self.warnings: List[str] = []

    def as_json(self) -> "Dict[str, object]":
        return {
            "gpu_limits_mib": self.gpu_limits,
            "memory_growth": self.growth,
            "env": self.env,
            "cpu_devices": self.cpu_devices,
            "mixed_precision": self.mixed_precision,
            "warnings": self.warnings,
        }


def _per_gpu(
    variable: str, value: str, items: "Sequence[object]", count: int, example: str
) -> "List[int]":
    """Index into `items` for each of `count` GPUs: one item = all GPUs, else exactly one each."""
    if len(items) == 1:
        return [0] * count
    if len(items) != count:
        raise ConfigError(
            variable,
            value,
            f"one value for every GPU, or exactly one per visible GPU ({count} visible)",
            example,
            why=f"{len(items)} values for {count} visible GPU{'s' if count != 1 else ''}",
        )
    return list(range(count))


def _resolve(
    variable: str, value: str, amount: "MemAmount", total: "Optional[float]", gpu: int
) -> float:
    try:
        return (
            float(int(amount.resolve(total)))
            if amount.percent is not None
            else amount.resolve(total)
        )
    except ValueError:
        raise ConfigError(
            variable,
            value,
            AMOUNT_ACCEPTED,
            "4096",
            why=f"{amount} of GPU {gpu} needs its total memory, which NVML (nvidia-ml-py) could "
            "not tell; "
            "give the size in MiB",
        ) from None


def make_plan(
    settings: "Settings", totals: "Sequence[Optional[float]]", names: "Sequence[str]" = ()
) -> "Plan":
    """`totals`: one entry per visible GPU, in TensorFlow's order: total MiB, or None if unknown."""
    plan = Plan()
    plan.cpu_devices = settings.cpu_devices
    plan.mixed_precision = settings.mixed_precision
    plan.growth = settings.growth
    if settings.growth is not None:
        # The native variable is the only way to get growth inside logical devices
        # ("grow up to the cap"); TensorFlow reads it when it creates each allocator.
        plan.env["TF_FORCE_GPU_ALLOW_GROWTH"] = "true" if settings.growth else "false"
    plan.warnings.extend(settings.warnings)
    count = len(totals)
    plan.gpu_limits = [None] * count
    if not settings.asks_for_gpu_config:
        return plan
    if count == 0:
        # Nothing to cap, so a length that fits no GPU is no contradiction yet: warn, run on
        # the CPU. With one GPU or more the length must fit (_per_gpu), README says the same.
        which = "TF_GPU_MEM_LIMIT" if settings.mem_limit is not None else "TF_GPU_VIRTUAL_DEVICES"
        value = settings.sources[which].value if which in settings.sources else ""
        plan.warnings.append(
            f"{which}={value!r} is set but no GPU is visible; it is not applied "
            "(TensorFlow runs on the CPU)"
        )
        return plan

    def label(i: int) -> str:
        name = names[i] if i < len(names) else ""
        total = totals[i]
        inside = ", ".join(x for x in (name, f"{int(total)} MiB" if total is not None else "") if x)
        return f"GPU {i}" + (f" ({inside})" if inside else "")

    if settings.mem_limit is not None:
        variable, value = "TF_GPU_MEM_LIMIT", settings.sources["TF_GPU_MEM_LIMIT"].value
        for gpu, k in enumerate(_per_gpu(variable, value, settings.mem_limit, count, "4096,2048")):
            plan.gpu_limits[gpu] = [
                _resolve(variable, value, settings.mem_limit[k], totals[gpu], gpu)
            ]
    else:
        assert settings.virtual_devices is not None
        variable, value = "TF_GPU_VIRTUAL_DEVICES", settings.sources["TF_GPU_VIRTUAL_DEVICES"].value
        groups = settings.virtual_devices
        for gpu, k in enumerate(_per_gpu(variable, value, groups, count, "6144,8192;4096")):
            plan.gpu_limits[gpu] = [
                _resolve(variable, value, a, totals[gpu], gpu) for a in groups[k]
            ]

    for gpu, limits in enumerate(plan.gpu_limits):
        assert limits is not None
        total, used = totals[gpu], sum(limits)
        if total is not None and used > total:
            raise ConfigError(
                variable,
                value,
                f"at most the GPU's memory ({int(total)} MiB for {label(gpu)})",
                str(int(total) // 2),
                why=f"{format_mib(used)} MiB is more than {label(gpu)} has",
            )
        if total is not None and used > total - CUDA_CONTEXT_MIB:
            plan.warnings.append(
                f"{variable}: {format_mib(used)} MiB on {label(gpu)} leaves less than "
                f"{CUDA_CONTEXT_MIB} MiB for the CUDA "
                "context, which TensorFlow's allocator does not count; out-of-memory errors "
                "are likely "
                f"(try {int(total) - 2 * CUDA_CONTEXT_MIB})"
            )
        small = [m for m in limits if m < SMALL_CAP_MIB]
        if small:
            plan.warnings.append(
                f"{variable}: {format_mib(min(small))} MiB on {label(gpu)} is less than "
                f"{SMALL_CAP_MIB} MiB; "
                "TensorFlow may fail to start kernels (cuDNN/cuBLAS workspaces)"
            )
    return plan


def format_mib(x: float) -> str:
    """4096 -> '4096', 1536.5 -> '1536.5': MiB as the runtime's messages write them."""
    return str(int(x)) if x == int(x) else f"{x:.1f}"
