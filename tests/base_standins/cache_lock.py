"""One builder at a time per stand-in image and per cache, for stand-in builds that run at once
(`./kit test-images`'s groups side by side in .ci/run, or `python -m tests.base_standins`
beside a run). Each lock guards one thing, so different stand-ins build side by side (the CUDA
11.8 and CUDA 12.3 families, the arm64 one):

- `image-NAME`: checking a stand-in's key and building it, so two builders never build the same
  image (the second waits, then finds it up to date);
- the rootfs tarball's file name: debootstrap and the tarball that spares the next recipe it;
- a wheel folder's name: `pip download` into it and `pip install --find-links` from it (pip
  writes a download in place, so another pip could read half a wheel).

A lock is not re-entrant (flock(2) on a new descriptor of a file this process already locked
waits on itself): no caller takes one inside another of the same name. fcntl rather than the
filelock package: one kind of lock, Linux only (as the engine here), and no dependency for it."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def flock(path: Path, mode: int) -> Iterator[None]:
    """flock(2) on PATH (created when missing) for the block; closing the descriptor releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


@contextmanager
def held(folder: Path, name: str) -> Iterator[None]:
    """An exclusive flock on FOLDER/locks/NAME.lock for the block (the kernel drops it when the
    process dies)."""
    locks = folder / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with flock(locks / f"{name}.lock", fcntl.LOCK_EX):
        yield
