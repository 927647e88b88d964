"""`build.py check [--driver V] [--tf X …] [--gpu-arch sm_90] [--json]`: can this driver run the
images?"""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command
from tfgpu_kit.matrix import driver_check
from tfgpu_kit.matrix import spec as specs

HELP = "verdict per TensorFlow version for a driver (default: the local one, through NVML)"
DESCRIPTION = """For each TensorFlow version: runs natively; runs by minor-version compatibility
(and, with --gpu-arch, whether PTX-only coverage then fails to JIT); needs forward compatibility
(data-centre GPUs only); or does not run, with the minimum driver and the newest TensorFlow that
would. Exits 1 when any selected version cannot run."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--driver", help="driver version as nvidia-smi prints it, e.g. 535.104.05")
    parser.add_argument(
        "--tf",
        action="append",
        default=[],
        metavar="VERSION",
        help="TensorFlow version (2.21.0, or 2.21 for the newest 2.21.x; a bare major such as 2"
        " is ambiguous and refused); repeatable; default: all offered",
    )
    parser.add_argument("--gpu-arch", help="GPU architecture, e.g. sm_90 (H100) or 8.0 (A100)")
    parser.add_argument("--json", action="store_true", help="JSON on stdout")


def run(args: argparse.Namespace) -> int:
    return driver_check.report(
        specs.load(),
        driver_text=args.driver,
        tensorflow=args.tf,
        gpu_arch=args.gpu_arch,
        as_json=args.json,
    )


COMMAND = Command("check", HELP, DESCRIPTION, add_arguments, run)
