"""`build.py plan`: check that the GPU memory caps of compose services or Kubernetes
pods add up on every GPU they share (see docs/scale.md)."""

from __future__ import annotations

import argparse
from typing import Any

from tfgpu_kit.cli.command import Command, request
from tfgpu_kit.plan import planner
from tfgpu_kit.plan.planner import DEFAULT_OVERHEAD

NAME = "plan"
HELP = "check that the GPU memory caps of compose services or Kubernetes pods fit their GPUs"

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


# The arguments of --help, in order: their add_argument keywords.
ARGUMENTS: dict[str, dict[str, Any]] = {
    "files": dict(nargs="+", metavar="FILE", help="compose files or Kubernetes manifests"),
    "--gpu-memory": dict(
        metavar="SIZE",
        help="memory of each GPU, e.g. 16GiB or 16384 (MiB); default: read through NVML",
    ),
    "--unified-memory": dict(
        action="store_true",
        help="the GPU memory is the system's, shared with the CPU (NVIDIA Jetson): needs "
        "--gpu-memory (the whole, MemTotal) and --reserve",
    ),
    "--reserve": dict(
        metavar="SIZE",
        help="with --unified-memory: what the OS and the non-TensorFlow processes keep of it, "
        "e.g. 4GiB; the caps are budgeted on the rest",
    ),
    "--context-overhead": dict(
        metavar="SIZE",
        default=DEFAULT_OVERHEAD,
        help="CUDA context memory per process and GPU, outside any cap "
        f"(default {DEFAULT_OVERHEAD})",
    ),
    "--gpu-count": dict(
        metavar="N",
        help="GPUs on the host (1 to 64), for `count: all`, `count: N` and "
        "NVIDIA_VISIBLE_DEVICES=all (default: NVML)",
    ),
    "--time-slicing": dict(
        metavar="REPLICAS",
        help="the device plugin shares each nvidia.com/gpu as REPLICAS time slices "
        "(default: from a time-slicing ConfigMap in the input; else GPUs are exclusive)",
    ),
    "--profile": dict(
        action="append",
        default=[],
        metavar="NAME",
        help="include compose services of this profile (repeatable; a profile no service "
        "of the inputs names is refused)",
    ),
    "--json": dict(action="store_true", help="print one JSON object instead of a table"),
    "--prometheus-rules": dict(
        metavar="OUT",
        help="also write each GPU's budget as Prometheus recording rules to OUT, for the "
        "alert TfgpuGpuOverPlan (docs/monitoring.md)",
    ),
    "--gpu-uuid": dict(
        action="append",
        default=[],
        metavar="ID=UUID",
        help="with --prometheus-rules: the UUID of host GPU ID (`nvidia-smi -L`), so the "
        "kit's own metrics can be compared with the plan (repeatable)",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    # the parser (cli/__init__.py) sets DESCRIPTION, the exit codes are the epilog; examples first.
    parser.epilog = EPILOG + "\n" + (parser.epilog or "")
    for flag, options in ARGUMENTS.items():
        parser.add_argument(flag, **options)


def run(args: argparse.Namespace) -> int:
    return planner.check(request(planner.PlanRequest, args))


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
