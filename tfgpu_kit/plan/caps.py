"""A workload's caps per visible GPU, decided by the runtime's own code.

The plan must agree with what the container will do, so it does not parse the
variables itself: tfgpu.contract.settings validates the environment and tfgpu.plan.device_plan turns
it into per-GPU limits, exactly as the hook does inside the container (a value the
runtime would refuse with exit 78 is an error here too)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tfgpu.contract import names as runtime_names
from tfgpu.contract import settings as runtime_settings
from tfgpu.plan import device_plan as runtime_plan


@dataclass(frozen=True)
class ProcessCaps:
    """What one TensorFlow process will use on each GPU it sees."""

    per_gpu: list[float | None]  # MiB per visible GPU (sum of its logical devices); None = no cap
    growth: bool | None
    enabled: bool  # False with TF_GPU_CONFIG=off: the kit applies nothing
    warnings: list[str] = field(default_factory=list)


def resolve(env: Mapping[str, str], totals: Sequence[float]) -> ProcessCaps:
    """Caps for a process whose visible GPUs have `totals` MiB each (percentages resolve
    against them). Raises tfgpu.contract.errors.ConfigError for a value the runtime refuses."""
    runtime_names.refuse_strangers(env)  # a misspelt name: refused here, warned about at the door
    settings = runtime_settings.parse_environment(env)
    if not settings.enabled:
        return ProcessCaps([None] * len(totals), None, enabled=False)
    plan = runtime_plan.make_plan(settings, list(totals))
    per_gpu = [sum(limits) if limits is not None else None for limits in plan.gpu_limits]
    return ProcessCaps(per_gpu, settings.growth, enabled=True, warnings=list(plan.warnings))
