"""The run's disk low-water mark (owner: harness), printed at the end of the run.

The suite's images are big and the CI machine's disk is limited: a run that fills the disk fails
in whichever build comes next, with "no space left on device" and nothing to say how close the
earlier runs came. A background thread samples the free space of the filesystems the run writes
to (the Docker engine's data root, the temporary folder, the wheel caches under ~/.cache) and
remembers, for each, the lowest value and the test (and phase) running at that moment; the
summary line makes every CI log say how much room the run left."""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Low:
    """One filesystem: its free space at the start, and the lowest seen with where it was seen."""

    path: str
    start: int
    lowest: int
    where: str


def filesystems(paths: Iterable[str]) -> list[str]:
    """The paths that exist, one per filesystem (the first named wins)."""
    seen: set[int] = set()
    kept = []
    for path in paths:
        try:
            device = os.stat(path).st_dev
        except OSError:
            continue
        if device not in seen:
            seen.add(device)
            kept.append(path)
    return kept


def default_paths(docker_root: str | None) -> list[str]:
    return [
        *([docker_root] if docker_root else []),
        tempfile.gettempdir(),
        str(Path.home() / ".cache"),
    ]


class DiskWatch:
    """Samples `free(path)` for each path every `interval` seconds until stopped."""

    def __init__(
        self,
        paths: Iterable[str],
        *,
        interval: float = 2.0,
        free: Callable[[str], int] = lambda path: shutil.disk_usage(path).free,
    ) -> None:
        self._free = free
        self._interval = interval
        self.where = "the start of the run"
        self.lows = []
        for path in filesystems(paths):
            free_now = free(path)
            self.lows.append(Low(path, free_now, free_now, self.where))
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="disk-watch", daemon=True)

    def sample(self) -> None:
        where = self.where
        for low in self.lows:
            free = self._free(low.path)
            if free < low.lowest:
                low.lowest, low.where = free, where

    def _loop(self) -> None:
        while not self._stop.wait(self._interval):
            self.sample()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        self.sample()

    def lines(self) -> list[str]:
        return [
            f"{low.path}: lowest free {low.lowest / 2**30:.1f} GiB (at the start "
            f"{low.start / 2**30:.1f} GiB), during {low.where}"
            for low in self.lows
        ]
