"""`build.py lock [--check]`: lock the NVIDIA CUDA wheels images may add (file, sha256, sizes)."""

from __future__ import annotations

import argparse
import logging

from tfgpu_kit import context, wheellock
from tfgpu_kit import spec as specs
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED

NAME = "lock"
HELP = "lock the NVIDIA CUDA wheels of matrix.yaml's and_cuda pins (downloads them)"
DESCRIPTION = """Download every and_cuda pin of images/matrix.yaml for the bases' platform (into the
wheel cache, ~/.cache/tfgpu-kit/wheels) and write images/cuda-wheels.lock.yaml: each wheel's file,
sha256, size and unpacked size. The build refuses other bytes; `matrix` and `build --dry-run` read
the sizes. With --check, download nothing and exit 1 naming each pin the lock lacks."""

log = logging.getLogger(__name__)

# The NVIDIA wheels are py3-none-manylinux: any CPython picks the same files.
PYTHON = "3.11"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check", action="store_true", help="only check that every pin is locked (no download)"
    )


def run(args: argparse.Namespace) -> int:
    spec = specs.load()
    current = wheellock.load()
    if args.check:
        missing = wheellock.missing(spec, current)
        for pin in missing:
            log.error("%s: %s has no entry (run build.py lock)", wheellock.LOCK_NAME, pin)
        if not missing:
            log.info("%s: all %d pins locked", wheellock.LOCK_NAME, len(current.wheels))
        return EXIT_FAILED if missing else 0
    entries: dict[str, wheellock.LockedWheel] = {}
    builds = [build for build in spec.matrix.tensorflow.values() if build.and_cuda]
    for number, build in enumerate(builds, 1):
        pins = list(build.and_cuda)
        todo = [pin for pin in pins if pin not in entries]
        if not todo:
            continue
        log.info("[%d/%d] fetching %s", number, len(builds), ", ".join(todo))
        cache = context.fetch(pins, PYTHON)  # the whole set: its dependencies resolve together
        for pin in todo:
            wheel = context.wheel_for(pin, cache)
            entries[pin] = wheellock.describe(wheel, context.unpacked_bytes(wheel))
    path = wheellock.write(wheellock.Lock(wheels=entries))
    changed = {pin for pin, entry in entries.items() if current.wheels.get(pin) != entry}
    log.info("wrote %s: %d wheels, %d new or changed", path, len(entries), len(changed))
    print(path)
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
