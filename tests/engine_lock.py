"""Builds and prunes of the one Docker engine, across the suite's pytest-xdist workers (owner:
harness).

`./kit test` runs on two workers (pyproject.toml; tests/conftest.py says which tests go where), and
both build images on the same engine. `docker image prune` (tests/kit_images.py drops each build's
dangling images, for disk) must not run while a build runs elsewhere: the classic builder's
intermediate images, and a finished builder stage waiting for the final stage's `COPY --from`, are
dangling, so a prune can delete them under the build ("No such image"). Builds take `building()`
(shared: any number at once); a prune takes `pruning()` (exclusive). A prune only keeps the disk
down, so it does not wait for the other worker's build (minutes: the waits cost a cold run about
8 min of the two workers' time) unless the disk is short: it is put off, and the next prune, on
either worker, takes what it left.

The stand-in bases keep locks of their own, per image and per cache
(tests/base_standins/cache_lock.py).

And one thing is done once per run, whichever worker asks first: `once(name)` (the kit's images,
which tests on both workers use: the other worker waits for them and does not build them again).

The locks are flock(2) locks on files in the temporary folder: the kernel drops them when a worker
dies, so a crashed run never leaves one held. fcntl rather than the filelock package: only these
two kinds of lock, Linux only (as the engine here), and no dependency for it."""

from __future__ import annotations

import fcntl
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_DIR = Path(tempfile.gettempdir())
ENGINE = _DIR / "tfgpu-tests-engine.lock"
# Below this much free space on the engine's disk a prune waits for the other worker's build
# instead of being put off: a repaired image's builder stage left dangling is ~5 GB, and the
# next build needs ~10 GB more (tests/kit_images.py).
WAIT_BELOW_FREE = 20 * 2**30

# This process's shared holds on ENGINE: an exclusive request while holding one would wait on
# itself forever, so it is refused instead.
_shared_depth = 0


@contextmanager
def flock(path: Path, mode: int) -> Iterator[bool]:
    """flock(2) on PATH (created when missing) for the block; yields whether it is held: False
    only with LOCK_NB in `mode`, when another process holds it. (Also the stand-ins' locks,
    tests/base_standins/cache_lock.py.)"""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, mode)
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the descriptor releases the lock


@contextmanager
def building() -> Iterator[None]:
    """Around a build (or anything that leaves dangling images mid-way): no prune meanwhile."""
    global _shared_depth
    with flock(ENGINE, fcntl.LOCK_SH):
        _shared_depth += 1
        try:
            yield
        finally:
            _shared_depth -= 1


@contextmanager
def pruning(*, free_bytes: int | None = None) -> Iterator[bool]:
    """Around a prune or removal of dangling images: no build anywhere meanwhile. Yields True
    when the prune may go ahead. Given the engine disk's `free_bytes`, it does not wait for a
    build that runs elsewhere while WAIT_BELOW_FREE or more is free: it yields False at once
    (put the prune off)."""
    if _shared_depth:
        raise RuntimeError("engine_lock.pruning() inside building(): it would wait on itself")
    put_off = free_bytes is not None and free_bytes >= WAIT_BELOW_FREE
    with flock(ENGINE, fcntl.LOCK_EX | (fcntl.LOCK_NB if put_off else 0)) as held:
        yield held  # False: a build holds it


@contextmanager
def once(name: str) -> Iterator[bool]:
    """Around work that one run does once, on whichever worker comes first: yields True when it
    was done already in this run (then skip it), False when it is this caller's to do; it counts
    as done when the block ends without an exception. One run is one PYTEST_XDIST_TESTRUNUID
    (the same on every worker of a run); on one process, without it, the work is always done."""
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    if not run:
        yield False
        return
    done = _DIR / f"tfgpu-tests-done-{name}-{run}"
    with flock(_DIR / f"tfgpu-tests-once-{name}.lock", fcntl.LOCK_EX):
        if done.exists():
            yield True
            return
        yield False
        done.touch()
