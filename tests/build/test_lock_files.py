"""Each committed lock file is exactly what its writer writes: header and entries, byte for byte.

`lock --check` compares entries only; without this a header edited in the code (or in the file)
would drift until the next `lock` run rewrote it."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from tfgpu_kit.matrix.locks import base_lock, wheel_locks
from tfgpu_kit.matrix.spec import IMAGES_DIR
from tfgpu_kit.shared.errors import SpecError

LOCKS = {lock.name: lock for lock in (base_lock.FILE, wheel_locks.FILE, wheel_locks.IMAGE_FILE)}


@pytest.mark.parametrize("name", sorted(LOCKS))
def test_committed_lock_is_what_its_writer_writes(name: str, tmp_path: Path) -> None:
    lock = LOCKS[name]
    written = lock.write(lock.load(), tmp_path)
    assert written.read_bytes() == (IMAGES_DIR / name).read_bytes()


def test_an_interrupted_write_leaves_the_old_lock_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock = base_lock.FILE
    old = lock.write(lock.load(), tmp_path).read_bytes()
    real_write = os.write

    def disk_full(fd: int, data: bytes) -> int:
        real_write(fd, bytes(data[: len(data) // 2]))
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", disk_full)
    with pytest.raises(OSError, match="No space left"):
        lock.write(lock.load(), tmp_path)
    assert (tmp_path / lock.name).read_bytes() == old
    assert sorted(path.name for path in tmp_path.iterdir()) == [lock.name]  # no partial file left


def test_a_link_at_the_temporary_path_is_refused_and_the_mode_kept(tmp_path: Path) -> None:
    """The writer must not follow a symlink planted at `.NAME.partial` (writing wherever it
    points), nor turn a 0600 lock into 0644."""
    lock = base_lock.FILE
    path = lock.write(lock.load(), tmp_path)
    path.chmod(0o600)
    lock.write(lock.load(), tmp_path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600  # the old file's mode, not the umask's
    target = tmp_path / "elsewhere"
    target.write_text("precious")
    partial = tmp_path / f".{lock.name}.partial"
    partial.symlink_to(target)
    with pytest.raises(SpecError, match=r"already exists \(a link or a file"):
        lock.write(lock.load(), tmp_path)
    assert target.read_text() == "precious" and partial.is_symlink()  # neither followed nor removed
    partial.unlink()
    partial.symlink_to(tmp_path / "missing")  # a dangling link: nothing may be created through it
    with pytest.raises(SpecError):
        lock.write(lock.load(), tmp_path)
    assert not (tmp_path / "missing").exists()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
