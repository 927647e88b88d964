"""`plan --unified-memory --reserve SIZE`: budgeting a device whose GPU memory is the system's
(an NVIDIA Jetson: CPU and GPU share one RAM, and there is no NVML to read it).

There the caps must leave room for the CPU side too: the OS and every process that is not
TensorFlow (a detection service's pre-processing, a speech module's audio stack…). The plan
takes `--gpu-memory` as the whole unified memory (MemTotal, which is also what the runtime takes
percentages of) and budgets the caps against what is left after `--reserve`."""

from __future__ import annotations

from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.flag_values import size_mib

RESERVE_EXAMPLE = "--unified-memory --reserve 4GiB"


def check_flags(unified: bool, reserve: str | None, gpu_memory: str | None) -> None:
    """UsageError for flags that do not go together (before anything is read)."""
    if not unified:
        if reserve is not None:
            raise UsageError(
                f"--reserve {reserve!r} applies to unified memory only (a Jetson); "
                f"example: {RESERVE_EXAMPLE}"
            )
        return
    if gpu_memory is None:
        raise UsageError(
            "--unified-memory needs --gpu-memory SIZE, the whole memory the CPU and GPU share "
            "(MemTotal of /proc/meminfo on the device; there is no NVML to read it); "
            f"example: --gpu-memory 15820 {RESERVE_EXAMPLE}"
        )
    if reserve is None:
        raise UsageError(
            "--unified-memory needs --reserve SIZE: what the OS and the processes that are not "
            f"TensorFlow keep of the shared memory; example: {RESERVE_EXAMPLE}"
        )


def reserve_mib(reserve: str | None, total: float) -> float:
    """The MiB the CPU side keeps of `total` (0 without --reserve); UsageError for a reserve that
    leaves nothing."""
    if reserve is None:
        return 0.0
    kept = size_mib("--reserve", reserve, "4GiB")
    if kept >= total:
        raise UsageError(
            f"--reserve {reserve!r} ({kept:.0f} MiB) leaves nothing of --gpu-memory "
            f"({total:.0f} MiB) for TensorFlow: accepted: less than --gpu-memory; "
            f"example: {RESERVE_EXAMPLE}"
        )
    return kept


def note(total: float, kept: float) -> str:
    return (
        f"unified memory (--unified-memory): the {total:.0f} MiB are shared with the CPU; "
        f"{kept:.0f} MiB are kept for the OS and the processes that are not TensorFlow "
        f"(--reserve), so the caps are budgeted on {total - kept:.0f} MiB; percentages are of "
        f"the {total:.0f} MiB, as the runtime takes them (MemTotal)"
    )
