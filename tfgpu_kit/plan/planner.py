"""`build.py plan` from its flags to its report: the GPUs' memory and count (flags, else NVML),
the inputs' workloads, each GPU's budget, and the report and recording rules."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from tfgpu.contract.settings import is_ascii_number

from tfgpu_kit.matrix import local_driver
from tfgpu_kit.plan import budget, devices, prometheus, report, sources, unified
from tfgpu_kit.plan.fields import MAX_COUNT
from tfgpu_kit.shared import log
from tfgpu_kit.shared.errors import EXIT_FAILED, EXIT_OK, UsageError
from tfgpu_kit.shared.flag_values import size_mib, whole_number
from tfgpu_kit.shared.yamlfile import shown

DEFAULT_OVERHEAD = "500MiB"


@dataclass(frozen=True)
class PlanRequest:
    """`build.py plan`'s flags as given (strings: each is checked, with its flag's name, here)."""

    files: list[str]
    gpu_memory: str | None
    unified_memory: bool
    reserve: str | None
    context_overhead: str
    gpu_count: str | None
    time_slicing: str | None
    profile: list[str]
    json: bool
    prometheus_rules: str | None
    gpu_uuid: list[str]


def check(args: PlanRequest) -> int:
    """`build.py plan`: the budget of every GPU the inputs share, as text or JSON, and the
    recording rules when asked; EXIT_FAILED when an error was found."""
    overhead = size_mib("--context-overhead", args.context_overhead, DEFAULT_OVERHEAD)
    if args.gpu_uuid and args.prometheus_rules is None:
        raise UsageError(
            "--gpu-uuid only labels the series of --prometheus-rules OUT: pass both; "
            f"example: --prometheus-rules plan.rules.yaml --gpu-uuid {prometheus.UUID_EXAMPLE}"
        )
    uuids = prometheus.parse_gpu_uuids(args.gpu_uuid)
    unified.check_flags(args.unified_memory, args.reserve, args.gpu_memory)
    found, unavailable = _read_nvml(args)
    memory = _gpu_memory(args, found, unavailable)
    host_gpus = _host_gpus(args, found)
    slices = (
        None
        if args.time_slicing is None
        else _count_flag("--time-slicing", args.time_slicing, "4", MAX_COUNT)
    )
    inputs = sources.load(
        args.files, host_gpus=host_gpus, time_slicing=slices, profiles=args.profile
    )
    if memory.reserve_mib:
        inputs.notes.append(unified.note(memory.default_mib, memory.reserve_mib))
    if (note := budget.mixed_sizes_note(memory, inputs.workloads)) is not None:
        inputs.notes.append(note)
    budgets, problems = budget.build(inputs.workloads, memory=memory, overhead_mib=overhead)
    problems = [*inputs.problems, *problems]
    if args.prometheus_rules is not None:
        _write_rules(Path(args.prometheus_rules), budgets, uuids, args.files, inputs.notes)
    if args.json:
        text = report.as_json(
            budgets, problems, inputs.notes, overhead_mib=overhead, memory_mib=memory.default_mib
        )
        sys.stdout.write(text + "\n")
    else:
        report.print_text(log.stdout, budgets, problems, inputs.notes)
    return EXIT_FAILED if any(p.severity == "error" for p in problems) else EXIT_OK


def _read_nvml(args: PlanRequest) -> tuple[dict[str, float] | None, str | None]:
    """local_driver.gpu_memory(), its failure's hint naming only the flags still missing. NVML
    only for what the flags leave open: with both given, a broken driver cannot matter."""
    flags = {"--gpu-memory SIZE": args.gpu_memory, "--gpu-count N": args.gpu_count}
    missing = [flag for flag, value in flags.items() if value is None]
    return local_driver.gpu_memory(missing) if missing else (None, None)


def _gpu_memory(
    args: PlanRequest, found: dict[str, float] | None, unavailable: str | None
) -> budget.GpuMemory:
    """Each GPU's memory: --gpu-memory (less --reserve on a unified-memory device), else NVML's."""
    if args.gpu_memory is not None:
        total = size_mib("--gpu-memory", args.gpu_memory, "16GiB")
        return budget.GpuMemory(total, reserve_mib=unified.reserve_mib(args.reserve, total))
    if found:
        # a pod's GPU is not known (Kubernetes): the smallest card is the one that may not fit it
        return budget.GpuMemory(min(found.values()), found)
    reason = unavailable if found is None else "NVML reports no GPU"
    raise UsageError(
        "--gpu-memory is needed: no NVIDIA driver (NVML) here to read the GPUs' memory"
        + (f" ({reason})" if reason else ""),
        hint="give the memory of each GPU, e.g. --gpu-memory 16GiB",
    )


def _host_gpus(args: PlanRequest, found: dict[str, float] | None) -> list[str] | None:
    """The host's GPU indexes: --gpu-count, else NVML's; None when neither says."""
    if args.gpu_count is not None:
        # bounded before any list is built: --gpu-count 99999999999 is a typo, not a host
        count = _count_flag("--gpu-count", args.gpu_count, "2", devices.MAX_GPUS)
        return [str(i) for i in range(count)]
    if found:
        return sorted((k for k in found if is_ascii_number(k)), key=int)
    return None


def _count_flag(flag: str, value: str, example: str, high: int) -> int:
    """A count flag from 1 to `high`; a value of many digits is refused before int() sees it
    (Python refuses to convert more than 4300 digits, with a traceback)."""
    if len(value.strip()) > len(str(high)):
        raise UsageError(
            f"{flag} {shown(value, 24)!r} is not valid: accepted: a whole number from 1 to "
            f"{high}; example: {flag} {example}"
        )
    return whole_number(flag, value, example, high=high)


def _write_rules(
    out: Path,
    budgets: list[budget.GpuBudget],
    uuids: dict[str, str],
    files: list[str],
    notes: list[str],
) -> None:
    text = prometheus.recording_rules(budgets, uuids=uuids, sources=files)
    out.write_text(text, encoding="utf-8")
    written = len(prometheus.host_budgets(budgets))
    note = f"{out}: Prometheus recording rules for {written} GPU(s)"
    if left_out := len(budgets) - written:
        note += f"; {left_out} Kubernetes budget(s) left out (the scheduler picks their GPU)"
    notes.append(note)
