"""tests/engine_lock.py: `once` (work one run does once, on whichever xdist worker comes first)
and prunes that are put off rather than wait for a build elsewhere; and the stand-ins' locks
(tests/base_standins/cache_lock.py)."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from tests import engine_lock
from tests.base_standins import cache_lock


def test_once_per_run_and_not_when_the_work_failed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)
    name = f"test-{uuid.uuid4().hex}"
    with pytest.raises(RuntimeError), engine_lock.once(name) as done:
        assert done is False
        raise RuntimeError("the build failed")
    with engine_lock.once(name) as done:
        assert done is False  # a failed attempt does not count: the next caller tries again
    with engine_lock.once(name) as done:
        assert done is True
    monkeypatch.setenv("PYTEST_XDIST_TESTRUNUID", uuid.uuid4().hex)  # the next run
    with engine_lock.once(name) as done:
        assert done is False


def test_on_one_process_the_work_is_always_done(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYTEST_XDIST_TESTRUNUID", raising=False)
    for _ in range(2):
        with engine_lock.once("test-one-process") as done:
            assert done is False


HOLDER = """\
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o666)
fcntl.flock(fd, fcntl.LOCK_SH if sys.argv[2] == "sh" else fcntl.LOCK_EX)
print("held", flush=True)
sys.stdin.readline()  # until told
open(sys.argv[3], "w").close()  # the marker, written before the lock is let go
os.close(fd)
time.sleep(60)
"""


def _holder(lock: Path, mode: str, marker: Path) -> subprocess.Popen[str]:
    """Another process (a worker's build) holding LOCK in MODE until a line on its stdin."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(lock), mode, str(marker)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline() == "held\n"
    return proc


@pytest.mark.timeout(60)  # a prune that waited for the build would hang here: fail instead
def test_a_prune_is_put_off_while_a_build_runs_elsewhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_lock, "ENGINE", tmp_path / "engine.lock")
    build = _holder(engine_lock.ENGINE, "sh", tmp_path / "released")
    try:
        with engine_lock.pruning(free_bytes=engine_lock.WAIT_BELOW_FREE) as may:
            assert may is False  # at once: the build is not waited for
        with engine_lock.building():  # a build here is not held up by the one elsewhere
            pass
    finally:
        build.kill()
        build.wait()
    with engine_lock.pruning(free_bytes=engine_lock.WAIT_BELOW_FREE) as may:
        assert may is True


def test_a_prune_waits_for_the_build_when_the_disk_is_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_lock, "ENGINE", tmp_path / "engine.lock")
    released = tmp_path / "released"
    build = _holder(engine_lock.ENGINE, "sh", released)
    seen: list[tuple[bool, bool]] = []  # (may, was the build over when the prune began)

    def prune() -> None:
        with engine_lock.pruning(free_bytes=engine_lock.WAIT_BELOW_FREE - 1) as may:
            seen.append((may, released.exists()))

    pruner = threading.Thread(target=prune)
    try:
        pruner.start()
        # While the build holds the lock the prune cannot begin, however long this takes; a
        # prune that did not wait would be over well within the second.
        pruner.join(timeout=1.0)
        assert pruner.is_alive() and seen == []
        assert build.stdin is not None
        build.stdin.write("go\n")  # the build ends (it writes the marker, then lets go)
        build.stdin.flush()
        pruner.join(timeout=60)
        assert seen == [(True, True)]
    finally:
        build.kill()
        build.wait()
        pruner.join(timeout=60)


def test_a_prune_inside_a_build_is_refused() -> None:
    with (
        engine_lock.building(),
        pytest.raises(RuntimeError, match="wait on itself"),
        engine_lock.pruning(),
    ):
        pass


@pytest.mark.timeout(60)  # a lock that waited on another name would hang here: fail instead
def test_stand_in_locks_are_one_per_name(tmp_path: Path) -> None:
    """tests/base_standins/cache_lock.py: the CUDA 11.8 family's build does not wait for the
    CUDA 12.3 one's, nor one cache for another; the same name is one builder at a time."""
    (tmp_path / "locks").mkdir()
    build = _holder(tmp_path / "locks" / "image-cuda.lock", "ex", tmp_path / "released")
    try:
        with cache_lock.held(tmp_path, "image-cuda11"), cache_lock.held(tmp_path, "wheels"):
            pass  # other names: not held up
        fd = os.open(tmp_path / "locks" / "image-cuda.lock", os.O_RDWR)
        try:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        finally:
            os.close(fd)
    finally:
        build.kill()
        build.wait()
