"""`build.py lock [--check] [--bases]`: lock what goes into the images.

Three locks under images/, each read by the build:
- cuda-wheels.lock.yaml: the NVIDIA CUDA wheels of matrix.yaml's and_cuda pins (file, sha256,
  sizes);
- image-wheels.lock.yaml: per base Python, pip and the resolution of each set of packages an image
  asks for (runtime_extras, variants' and versions' pip), by exact version and sha256;
- bases.lock.yaml: the registry digest of each official base (`--bases`: asks the registry through
  the Docker engine)."""

from __future__ import annotations

import argparse
import logging

from tfgpu_kit import baselock, catalog, context, wheellock
from tfgpu_kit import spec as specs
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED

NAME = "lock"
HELP = "lock the images' wheels (CUDA wheels, extras, pip) and, with --bases, the bases' digests"
DESCRIPTION = """Without flags: download every and_cuda pin of images/matrix.yaml for the bases'
platform (into the wheel cache, ~/.cache/tfgpu-kit/wheels) and write images/cuda-wheels.lock.yaml
(each wheel's file, sha256, size and unpacked size); resolve pip and each set of packages the images
ask for (images.yaml runtime_extras and pip lists) for each base Python, afresh from the index, and
write images/image-wheels.lock.yaml (every wheel by exact version, file and sha256). The build
refuses other bytes. With --bases, only ask the registry (through the Docker engine) for the digest
of each official base and write images/bases.lock.yaml. With --check, fetch nothing and exit 1
naming each entry a lock lacks."""

log = logging.getLogger(__name__)

# The NVIDIA wheels are py3-none-manylinux: any CPython picks the same files.
PYTHON = "3.11"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--check",
        action="store_true",
        help="only check that every lock has an entry for every image (no download)",
    )
    parser.add_argument(
        "--bases",
        action="store_true",
        help="lock the official bases' registry digests (needs a Docker engine that reaches"
        " the registry) instead of the wheels",
    )


def check(spec: specs.Spec) -> int:
    problems = [
        f"{wheellock.LOCK_NAME}: {pin} has no entry (run `build.py lock`)"
        for pin in wheellock.missing(spec, wheellock.load())
    ]
    problems += [
        f"{wheellock.IMAGE_LOCK_NAME}: {what} has no entry (run `build.py lock`)"
        for what in wheellock.missing_images(spec, wheellock.load_images())
    ]
    images = catalog.images(spec)
    bases = baselock.load()
    problems += [
        f"{baselock.LOCK_NAME}: {ref} has no entry (run `build.py lock --bases`)"
        for ref in baselock.missing(images, bases)
    ]
    for problem in problems:
        log.error("%s", problem)
    if unknown := baselock.unknown(images, bases):
        log.warning(
            "%s: %d base digests unknown (null); refresh with `build.py lock --bases` where the"
            " registry answers",
            baselock.LOCK_NAME,
            len(unknown),
        )
    if not problems:
        log.info("locks complete: CUDA wheels, image wheels, bases")
    return EXIT_FAILED if problems else 0


def lock_cuda(spec: specs.Spec) -> None:
    current = wheellock.load()
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


def _resolved(packages: list[str], python: str) -> dict[str, wheellock.PinnedFile]:
    return {
        context.pin_of(wheel): wheellock.pinned_file(wheel)
        for wheel in context.resolve(packages, python)
    }


def lock_image_wheels(spec: specs.Spec) -> None:
    pythons: dict[str, wheellock.PythonWheels] = {}
    for python, sets in sorted(wheellock.image_sets(spec).items()):
        log.info("Python %s: resolving pip and %d package set(s)", python, len(sets))
        ((pin, pip_file),) = _resolved(["pip"], python).items()
        locked_sets = [
            wheellock.WheelSet(packages=packages, wheels=_resolved(packages, python))
            for packages in sets
        ]
        pythons[python] = wheellock.PythonWheels(
            pip=wheellock.PipWheel(pin=pin, **pip_file.model_dump()), sets=locked_sets
        )
    path = wheellock.write_images(wheellock.ImageLock(pythons=pythons))
    log.info("wrote %s: %d Pythons", path, len(pythons))
    print(path)


def lock_bases(spec: specs.Spec) -> int:
    from tfgpu_kit import dockerbuild

    refs = baselock.refs(catalog.images(spec))
    new, failed = baselock.refresh(dockerbuild.client(), refs, baselock.load())
    path = baselock.write(new)
    log.info("wrote %s: %d bases, %d unreadable", path, len(refs), len(failed))
    print(path)
    return EXIT_FAILED if failed else 0


def run(args: argparse.Namespace) -> int:
    spec = specs.load()
    if args.check:
        return check(spec)
    if args.bases:
        return lock_bases(spec)
    lock_cuda(spec)
    lock_image_wheels(spec)
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
