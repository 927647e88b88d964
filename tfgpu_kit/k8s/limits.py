"""`build.py k8s`: two bounds on the pods a workload runs, checked. --shm-size: the size of the
Memory emptyDir every GPU container mounts at /dev/shm, part of the container's memory limit.
--deadline: how long a training run may last before Kubernetes ends it (activeDeadlineSeconds)."""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from tfgpu_kit.k8s.flags import DEFAULTS, EXAMPLES, MAX_DEADLINE_S, Flags
from tfgpu_kit.shared import kube_quantity
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.flag_values import duration_seconds, duration_text

SHM_PATH = "/dev/shm"
SHM_VOLUME = "dshm"
# The container runtime's own /dev/shm, 64 MiB (containerd internal/cri/server/podsandbox/
# helpers_linux.go defaultShmSize, as Docker's): a volume no larger gives nothing, and a bare
# number is bytes in Kubernetes, so `--shm-size 1024` is a mistake, not a wish.
RUNTIME_SHM_BYTES = 64 * 2**20
SHM_FORMS = (
    "a Kubernetes quantity of bytes above 64Mi (1Gi, 512Mi, 2G; a bare number is bytes), or none "
    "(no volume: the container runtime's 64 MiB)"
)


@dataclass(frozen=True)
class SharedMemory:
    """/dev/shm of every GPU container: a Memory emptyDir of `size` (a quantity)."""

    size: str
    volume: str = SHM_VOLUME
    path: str = SHM_PATH


def shared_memory(flags: Flags) -> SharedMemory | None:
    """--shm-size, refused unless smaller than --memory: a tmpfs's pages are charged to the
    memory cgroup of the container that writes them (kubernetes.io "Volumes", emptyDir), so
    /dev/shm is a part of the memory limit, not an addition to it. None for `none`."""
    value = flags.value("shm_size").strip()
    if value == "none":
        return None
    size = kube_quantity.parse(value)
    if size is None or size.denominator != 1 or size <= RUNTIME_SHM_BYTES:
        raise UsageError(
            f"--shm-size {value!r} is not valid: accepted: {SHM_FORMS}; "
            f"example: --shm-size {EXAMPLES['shm_size']}"
        )
    memory = kube_quantity.parse(flags.memory)  # a quantity: check.py has seen to it
    if memory is not None and size >= memory:
        given = "" if flags.shm_size is not None else " (the default)"
        raise UsageError(
            f"--shm-size {value}{given} is not smaller than --memory {flags.memory}: what the "
            "program writes to /dev/shm counts against the container's memory limit (--memory), "
            "so it would leave the program nothing; accepted: a --shm-size below --memory, or "
            f"--shm-size none; example: --shm-size {DEFAULTS['shm_size']} --memory 8Gi"
        )
    return SharedMemory(kube_quantity.of_bytes(int(size)))


def deadline(flags: Flags) -> tuple[int, str] | None:
    """--deadline: (seconds, as written back) of the training run's activeDeadlineSeconds; None
    when not given (no deadline)."""
    if flags.deadline is None:
        return None
    example = shlex.quote(EXAMPLES["deadline"])
    seconds = duration_seconds("--deadline", flags.deadline, example, high=MAX_DEADLINE_S)
    return seconds, duration_text(seconds)
