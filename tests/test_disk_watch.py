"""The disk low-water mark of the run (tests/disk_watch.py): what the CI log's disk line says."""

from __future__ import annotations

import time
from pathlib import Path

from tests.disk_watch import DiskWatch, filesystems


def test_it_keeps_the_lowest_free_space_and_the_test_running_then(tmp_path: Path) -> None:
    free = iter([50, 40, 10, 30])
    watch = DiskWatch([str(tmp_path)], free=lambda path: next(free) * 2**30)
    watch.where = "tests/a.py::one"
    watch.sample()  # 40
    watch.where = "tests/b.py::two"
    watch.sample()  # 10: the low
    watch.where = "tests/c.py::three"
    watch.sample()  # 30
    assert watch.lines() == [
        f"{tmp_path}: lowest free 10.0 GiB (at the start 50.0 GiB), during tests/b.py::two"
    ]


def test_the_thread_samples_until_stopped(tmp_path: Path) -> None:
    calls: list[str] = []

    def free(path: str) -> int:
        calls.append(path)
        return 2**30

    watch = DiskWatch([str(tmp_path)], interval=0.01, free=free)
    watch.start()
    deadline = time.monotonic() + 10
    while len(calls) < 4 and time.monotonic() < deadline:
        time.sleep(0.01)
    watch.stop()
    stopped_at = len(calls)
    time.sleep(0.05)
    assert stopped_at >= 4 and len(calls) == stopped_at


def test_one_path_per_filesystem_and_missing_paths_dropped(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    paths = [str(tmp_path / "a"), str(tmp_path), str(tmp_path / "missing"), "/proc"]
    assert filesystems(paths) == [str(tmp_path / "a"), "/proc"]
