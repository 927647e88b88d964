"""`build.py lock [--check] [--bases]`: lock what goes into the images (the three locks under
images/, each read by the build: tfgpu_kit.image.lock_refresh)."""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command
from tfgpu_kit.image import lock_refresh
from tfgpu_kit.matrix import spec as specs

HELP = "lock the images' wheels (CUDA wheels, extras, pip) and, with --bases, the bases' digests"
DESCRIPTION = """Without flags: download every and_cuda pin of images/matrix.yaml for the bases'
platform (into the wheel cache, ~/.cache/tfgpu-kit/wheels) and write images/cuda-wheels.lock.yaml
(each wheel's file, sha256, size and unpacked size); resolve pip and each set of packages the images
ask for (images.yaml runtime_extras and pip lists) for each base Python, afresh from the index, and
write images/image-wheels.lock.yaml (every wheel by exact version, file and sha256). The build
refuses other bytes. With --bases, only ask the registry (through the Docker engine) for the digest
of each official base and write images/bases.lock.yaml. With --check, fetch nothing: exit 1
naming each entry a lock lacks, else 0 (base digests the registry did not give, null in
bases.lock.yaml, are a warning with their count, not a failure: the lock may be refreshed only
where the registry answers)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that every lock has an entry for every image (no download); exit 1 when"
        " one lacks an entry, 0 otherwise, with a warning counting unknown base digests",
    )
    parser.add_argument(
        "--bases",
        action="store_true",
        help="lock the official bases' registry digests (needs a Docker engine that reaches"
        " the registry) instead of the wheels",
    )


def run(args: argparse.Namespace) -> int:
    return lock_refresh.run(specs.load(), check_only=args.check, bases=args.bases)


COMMAND = Command("lock", HELP, DESCRIPTION, add_arguments, run)
