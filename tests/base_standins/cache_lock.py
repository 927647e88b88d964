"""One builder at a time per stand-in image and per cache, for stand-in builds that run at once
(the suite's two xdist workers, tests/engine_lock.py; or `python -m tests.base_standins` beside a
run). Each lock guards one thing, so different stand-ins build side by side (a cold run's CUDA
11.8 and CUDA 12.3 families: one lock for all of them made a worker wait about 5.5 min):

- `image-NAME`: checking a stand-in's key and building it, so two workers never build the same
  image (the second waits, then finds it up to date);
- the rootfs tarball's file name: debootstrap and the tarball that spares the next recipe it;
- a wheel folder's name: `pip download` into it and `pip install --find-links` from it (pip
  writes a download in place, so another pip could read half a wheel).

A lock is not re-entrant (flock(2) on a new descriptor of a file this process already locked
waits on itself): no caller takes one inside another of the same name. The flock itself is
tests/engine_lock.py's (why fcntl and not the filelock package: there)."""

from __future__ import annotations

import fcntl
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.engine_lock import flock


@contextmanager
def held(folder: Path, name: str) -> Iterator[None]:
    """An exclusive flock on FOLDER/locks/NAME.lock for the block (the kernel drops it when the
    process dies)."""
    locks = folder / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    with flock(locks / f"{name}.lock", fcntl.LOCK_EX):
        yield
