"""The data `plan` passes between its readers, the budget and the report."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field


class Placement(enum.Enum):
    """How a workload's GPUs are chosen."""

    HOST = "host"  # known GPU ids on one machine (compose device_ids/count, NVIDIA_VISIBLE_DEVICES)
    EXCLUSIVE = "exclusive"  # Kubernetes device plugin: whole GPUs, never shared between pods
    TIME_SLICED = "time-sliced"  # device plugin time-slicing: R pods may share one physical GPU
    UNKNOWN = "unknown"  # cannot be resolved from the input (reported, not guessed)
    REFUSED = "refused"  # the container would not start on this host (count over its GPUs…)
    NONE = "none"  # no GPU (a parameter server): nothing to budget, its environment is checked


@dataclass(frozen=True)
class GpuRequest:
    placement: Placement
    # HOST: host GPU ids the process sees, in CUDA order (after CUDA_VISIBLE_DEVICES).
    host_gpus: tuple[str, ...] = ()
    # EXCLUSIVE / TIME_SLICED: devices per container, the resource name and slices per GPU.
    count: int = 0
    resource: str = ""
    slices_per_gpu: int = 1
    reason: str = ""  # UNKNOWN, REFUSED: why

    @property
    def visible(self) -> int:
        """How many GPUs the process sees (the length a per-GPU cap list must have)."""
        return len(self.host_gpus) if self.placement is Placement.HOST else self.count


@dataclass(frozen=True)
class Unresolved:
    """A value the plan needs but cannot know from the files (interpolation, env_file, secrets)."""

    what: str  # e.g. "TF_GPU_MEM_LIMIT"
    why: str  # e.g. "'${TEXT_CAP}' is interpolated from the shell environment"


@dataclass
class Workload:
    """One container (compose service or pod container) that may run TensorFlow on GPUs."""

    who: str  # "text-model" or "Deployment/serve:tf"
    source: str  # the file it came from
    replicas: int
    gpus: GpuRequest
    env: dict[str, str] = field(default_factory=dict)
    unresolved: list[Unresolved] = field(default_factory=list)
    processes: int = 1  # TensorFlow processes per replica (label io.tfgpu.processes)
    notes: list[str] = field(default_factory=list)
    fix_hint: str = "environment:"  # where the user sets a variable, for messages
    # JOB_COMPLETION_INDEX is Kubernetes' own, one per pod (an Indexed Job whose container does
    # not set it): the pods of one workload can be different workers
    index_per_pod: bool = False


@dataclass(frozen=True)
class Problem:
    severity: str  # "error" fails the plan; "warning" does not
    who: str
    what: str
    fix: str

    def as_dict(self) -> dict[str, str]:
        return {"severity": self.severity, "who": self.who, "what": self.what, "fix": self.fix}
