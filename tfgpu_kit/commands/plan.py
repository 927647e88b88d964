"""`build.py plan`: check that the GPU memory caps of compose services or Kubernetes
pods add up on every GPU they share (see docs/scale.md)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tfgpu.settings import is_ascii_number

from tfgpu_kit import log, nvml
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED, EXIT_OK, UsageError
from tfgpu_kit.flag_values import size_mib, whole_number
from tfgpu_kit.fleet_budget import budget, devices, prometheus, report, sources, unified
from tfgpu_kit.fleet_budget.fields import MAX_COUNT
from tfgpu_kit.yamlfile import shown

NAME = "plan"
HELP = "check that the GPU memory caps of compose services or Kubernetes pods fit their GPUs"
DEFAULT_OVERHEAD = "500MiB"

DESCRIPTION = """\
Read compose files or Kubernetes manifests, find which services or pods land on
which GPU, and add up their caps (TF_GPU_MEM_LIMIT, TF_GPU_VIRTUAL_DEVICES,
percentages of the card) plus a CUDA context per process, which TensorFlow's
allocator does not count. Exits 1 when a GPU is over-committed, when a
process on a shared GPU has no cap, when a container would not start (a value
the runtime refuses, more GPUs than the host has), or when something that
decides the answer cannot be read from the files (${VAR} interpolation,
env_file, Secrets). Exits 2 for a bad flag or a file Compose, Docker or
Kubernetes would refuse (the message names the file, the field and what is
accepted), and 5 for a file that cannot be read (missing, neither a regular
file nor a pipe, over 8 MiB, not UTF-8). Each file is read once: naming one
twice is an error. FILE may be /dev/stdin fed by a pipe."""

EPILOG = """\
examples:
  ./kit plan compose.yaml --gpu-memory 16GiB
  ./kit plan k8s/*.yaml --gpu-memory 40GiB --time-slicing 4 --json
  ./kit plan compose.yaml --gpu-memory 15820 --unified-memory --reserve 4GiB   # a Jetson
  ./kit plan compose.yaml --gpu-memory 16GiB --prometheus-rules monitoring/plan.rules.yaml \\
      --gpu-uuid 0=GPU-fa6e0000-0000-4000-8000-000000000000
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # cli.py sets DESCRIPTION and the exit codes as epilog; the examples go first.
    parser.epilog = EPILOG + "\n" + (parser.epilog or "")
    parser.add_argument(
        "files", nargs="+", metavar="FILE", help="compose files or Kubernetes manifests"
    )
    parser.add_argument(
        "--gpu-memory",
        metavar="SIZE",
        help="memory of each GPU, e.g. 16GiB or 16384 (MiB); default: read through NVML",
    )
    parser.add_argument(
        "--unified-memory",
        action="store_true",
        help="the GPU memory is the system's, shared with the CPU (NVIDIA Jetson): needs "
        "--gpu-memory (the whole, MemTotal) and --reserve",
    )
    parser.add_argument(
        "--reserve",
        metavar="SIZE",
        help="with --unified-memory: what the OS and the non-TensorFlow processes keep of it, "
        "e.g. 4GiB; the caps are budgeted on the rest",
    )
    parser.add_argument(
        "--context-overhead",
        metavar="SIZE",
        default=DEFAULT_OVERHEAD,
        help="CUDA context memory per process and GPU, outside any cap "
        f"(default {DEFAULT_OVERHEAD})",
    )
    parser.add_argument(
        "--gpu-count",
        metavar="N",
        help="GPUs on the host (1 to 64), for `count: all`, `count: N` and "
        "NVIDIA_VISIBLE_DEVICES=all (default: NVML)",
    )
    parser.add_argument(
        "--time-slicing",
        metavar="REPLICAS",
        help="the device plugin shares each nvidia.com/gpu as REPLICAS time slices "
        "(default: from a time-slicing ConfigMap in the input; else GPUs are exclusive)",
    )
    parser.add_argument(
        "--profile",
        action="append",
        default=[],
        metavar="NAME",
        help="include compose services of this profile (repeatable; a profile no service "
        "of the inputs names is refused)",
    )
    parser.add_argument(
        "--json", action="store_true", help="print one JSON object instead of a table"
    )
    parser.add_argument(
        "--prometheus-rules",
        metavar="OUT",
        help="also write each GPU's budget as Prometheus recording rules to OUT, for the "
        "alert TfgpuGpuOverPlan (docs/monitoring.md)",
    )
    parser.add_argument(
        "--gpu-uuid",
        action="append",
        default=[],
        metavar="ID=UUID",
        help="with --prometheus-rules: the UUID of host GPU ID (`nvidia-smi -L`), so the "
        "kit's own metrics can be compared with the plan (repeatable)",
    )


def _read_nvml(args: argparse.Namespace) -> tuple[dict[str, float] | None, str | None]:
    """nvml.gpu_memory(), its failure's hint naming only the flags still missing."""
    missing = []
    if args.gpu_memory is None:
        missing.append("--gpu-memory SIZE")
    if args.gpu_count is None:
        missing.append("--gpu-count N")
    return nvml.gpu_memory(missing)


def run(args: argparse.Namespace) -> int:
    overhead = size_mib("--context-overhead", args.context_overhead, "500MiB")
    if args.gpu_uuid and args.prometheus_rules is None:
        raise UsageError(
            "--gpu-uuid only labels the series of --prometheus-rules OUT: pass both; "
            f"example: --prometheus-rules plan.rules.yaml --gpu-uuid {prometheus.UUID_EXAMPLE}"
        )
    uuids = prometheus.parse_gpu_uuids(args.gpu_uuid)
    unified.check_flags(args.unified_memory, args.reserve, args.gpu_memory)
    # NVML only for what the flags leave open: with both given, a broken driver cannot matter
    found, unavailable = (
        _read_nvml(args) if args.gpu_memory is None or args.gpu_count is None else (None, None)
    )
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
    note = budget.mixed_sizes_note(memory, inputs.workloads)
    if note is not None:
        inputs.notes.append(note)
    budgets, problems = budget.build(inputs.workloads, memory=memory, overhead_mib=overhead)
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


def _gpu_memory(
    args: argparse.Namespace, found: dict[str, float] | None, unavailable: str | None
) -> budget.GpuMemory:
    """Each GPU's memory: --gpu-memory (less --reserve on a unified-memory device), else NVML's."""
    if args.gpu_memory is not None:
        total = size_mib("--gpu-memory", args.gpu_memory, "16GiB")
        kept = unified.reserve_mib(args.reserve, total)
        return budget.GpuMemory(total, reserve_mib=kept)
    if found:
        # a pod's GPU is not known (Kubernetes): the smallest card is the one that may not fit it
        return budget.GpuMemory(min(found.values()), found)
    reason = unavailable if found is None else "NVML reports no GPU"
    raise UsageError(
        "--gpu-memory is needed: no NVIDIA driver (NVML) here to read the GPUs' memory"
        + (f" ({reason})" if reason else ""),
        hint="give the memory of each GPU, e.g. --gpu-memory 16GiB",
    )


def _host_gpus(args: argparse.Namespace, found: dict[str, float] | None) -> list[str] | None:
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
    left_out = len(budgets) - written
    notes.append(
        f"{out}: Prometheus recording rules for {written} GPU(s)"
        + (
            f"; {left_out} Kubernetes budget(s) left out (the scheduler picks their GPU)"
            if left_out
            else ""
        )
    )


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
