"""Writing and checking the three locks under images/ (tfgpu_kit.matrix.locks), what `build.py lock`
does: the wheels resolved afresh from the index, the bases' digests asked of the registry through
the Docker engine."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tfgpu_kit.image import context
from tfgpu_kit.matrix import catalog
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.locks import base_lock, wheel_locks
from tfgpu_kit.shared.errors import EXIT_FAILED

log = logging.getLogger(__name__)

# The NVIDIA wheels are py3-none-manylinux: any CPython picks the same files.
PYTHON = "3.11"


@dataclass(frozen=True)
class Completeness:
    missing: list[str]  # one line per entry a lock lacks, with the command that adds it
    unknown_digests: int  # bases locked with digest null (no registry answered)


def completeness(spec: specs.Spec) -> Completeness:
    """What the committed locks lack for this spec (no download, no registry)."""
    lacking = [  # (lock, what it lacks, the flags of `build.py lock` that add it)
        (wheel_locks.LOCK_NAME, wheel_locks.missing(spec, wheel_locks.load()), ""),
        (wheel_locks.IMAGE_LOCK_NAME, missing_images(spec, wheel_locks.load_images()), ""),
    ]
    images = catalog.images(spec)
    bases = base_lock.load()
    lacking.append((base_lock.LOCK_NAME, base_lock.missing(images, bases), " --bases"))
    missing = [
        f"{lock}: {what} has no entry (run `build.py lock{flags}`)"
        for lock, whats, flags in lacking
        for what in whats
    ]
    return Completeness(missing, len(base_lock.unknown(images, bases)))


def image_sets(spec: specs.Spec) -> dict[str, list[list[str]]]:
    """Every (base Python, package set) the offered images need, each once."""
    wanted: dict[str, list[list[str]]] = {}
    for image in catalog.images(spec):
        packages = wheel_locks.image_packages(list(spec.images.runtime_extras), image.pip)
        sets = wanted.setdefault(image.base_python, [])
        if packages not in sets:
            sets.append(packages)
    return wanted


def missing_images(spec: specs.Spec, lock: wheel_locks.ImageLock) -> list[str]:
    """What the lock lacks, one line each: `Python 3.11: pip` or `Python 3.11: a, b`."""
    problems = []
    for python, sets in sorted(
        image_sets(spec).items(), key=lambda kv: wheel_locks.python_key(kv[0])
    ):
        entry = lock.pythons.get(python)
        if entry is None:
            problems.append(f"Python {python}: pip and {', '.join(sets[0]) or 'no packages'}")
            continue
        problems += [
            f"Python {python}: {', '.join(p) or 'no packages'}"
            for p in sets
            if entry.find(p) is None
        ]
    return problems


def lock_cuda(spec: specs.Spec) -> Path:
    """Download every and_cuda and tf_keras pin (into the wheel cache) and write
    cuda-wheels.lock.yaml."""
    current = wheel_locks.load()
    entries: dict[str, wheel_locks.LockedWheel] = {}
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
            entries[pin] = wheel_locks.describe(wheel, context.unpacked_bytes(wheel))
    keras = sorted({build.tf_keras for build in spec.matrix.tensorflow.values() if build.tf_keras})
    for pin in keras:  # one at a time: pip refuses two versions of a package in one call
        log.info("fetching %s (without TensorFlow, its one dependency)", pin)
        cache = context.fetch([pin], PYTHON, deps=False)
        wheel = context.wheel_for(pin, cache)
        entries[pin] = wheel_locks.describe(wheel, context.unpacked_bytes(wheel))
    path = wheel_locks.write(wheel_locks.Lock(wheels=entries))
    changed = {pin for pin, entry in entries.items() if current.wheels.get(pin) != entry}
    log.info("wrote %s: %d wheels, %d new or changed", path, len(entries), len(changed))
    return path


def _resolved(packages: list[str], python: str) -> dict[str, wheel_locks.PinnedFile]:
    # a set holding TensorFlow (the slim variant's) is most of its image: its sizes are recorded
    sized = any(p.startswith("tensorflow==") for p in packages)
    return {
        context.pin_of(wheel): wheel_locks.pinned_file(
            wheel, context.unpacked_bytes(wheel) if sized else None
        )
        for wheel in context.resolve(packages, python)
    }


def lock_image_wheels(spec: specs.Spec) -> Path:
    """Resolve pip and each package set per base Python and write image-wheels.lock.yaml."""
    pythons: dict[str, wheel_locks.PythonWheels] = {}
    for python, sets in sorted(image_sets(spec).items()):
        log.info("Python %s: resolving pip and %d package set(s)", python, len(sets))
        ((pin, pip_file),) = _resolved(["pip"], python).items()
        pythons[python] = wheel_locks.PythonWheels(
            pip=wheel_locks.PipWheel(pin=pin, file=pip_file.file, sha256=pip_file.sha256),
            sets=[
                wheel_locks.WheelSet(packages=packages, wheels=_resolved(packages, python))
                for packages in sets
            ],
        )
    path = wheel_locks.write_images(wheel_locks.ImageLock(pythons=pythons))
    log.info("wrote %s: %d Pythons", path, len(pythons))
    return path


def lock_bases(spec: specs.Spec) -> tuple[Path, list[str]]:
    """Ask the registry for each official base's digest and write bases.lock.yaml; returns the
    path and the references the registry did not answer for."""
    # here: only --bases needs the Docker SDK, which adds 45-90 ms to every command's start
    from tfgpu_kit.image import docker_engine

    refs = base_lock.refs(catalog.images(spec))
    new, failed = base_lock.refresh(docker_engine.client(), refs, base_lock.load())
    path = base_lock.write(new)
    log.info("wrote %s: %d bases, %d unreadable", path, len(refs), len(failed))
    return path, failed


def check(spec: specs.Spec) -> int:
    """--check: log each entry a lock lacks; EXIT_FAILED when any."""
    found = completeness(spec)
    for problem in found.missing:
        log.error("%s", problem)
    if found.unknown_digests:
        log.warning(
            "%s: %d base digests unknown (null); refresh with `build.py lock --bases` where the"
            " registry answers",
            base_lock.LOCK_NAME,
            found.unknown_digests,
        )
    if found.missing:
        return EXIT_FAILED
    if found.unknown_digests:
        # every entry is there, but not every digest is known: say which part is complete
        log.info(
            "locks complete: CUDA wheels, image wheels; bases: every base has an entry, %d with "
            "an unknown digest (those images are labelled without a base digest)",
            found.unknown_digests,
        )
    else:
        log.info("locks complete: CUDA wheels, image wheels, bases (every digest known)")
    return 0


def run(spec: specs.Spec, *, check_only: bool, bases: bool) -> int:
    """`build.py lock`: --check, --bases, or the two wheel locks; prints each lock it writes."""
    if check_only:
        return check(spec)
    if bases:
        path, failed = lock_bases(spec)
        print(path)
        return EXIT_FAILED if failed else 0
    print(lock_cuda(spec))
    print(lock_image_wheels(spec))
    return 0
