"""`build.py matrix [--json]`: the compatibility table, and what each image's base lacks."""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command
from tfgpu_kit.matrix import matrix_table
from tfgpu_kit.matrix import spec as specs

HELP = "print the TensorFlow → CUDA/cuDNN/Python/driver/architecture table"
DESCRIPTION = """Per TensorFlow version: what it was built with (CUDA, cuDNN, Python, SASS/PTX
architectures); what its official base image ships (images/bases.yaml) and whether that is enough
(base provides), or what the kit's image adds (the [and-cuda] wheels, with their unpacked size from
images/cuda-wheels.lock.yaml); the CUDA the image's TensorFlow really loads, and the drivers that
run it (native minimum, minor-version-compatibility floor, NVIDIA_REQUIRE_CUDA). Where the kit also
offers a slim image (X-gpu-slim: TensorFlow and the same wheels on bases.yaml's slim Python base,
without the official base's unusable CUDA), the row names it."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON array on stdout, one object per TensorFlow version",
    )


def run(args: argparse.Namespace) -> int:
    matrix_table.show(specs.load(), as_json=args.json)
    return 0


COMMAND = Command("matrix", HELP, DESCRIPTION, add_arguments, run)
