"""Each committed lock file is exactly what its writer writes: header and entries, byte for byte.

`lock --check` compares entries only; without this a header edited in the code (or in the file)
would drift until the next `lock` run rewrote it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tfgpu_kit.locks import base_lock, wheel_locks
from tfgpu_kit.spec import IMAGES_DIR

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

    def disk_full(self: Path, text: str, encoding: str) -> int:
        with self.open("w", encoding=encoding) as f:
            f.write(text[: len(text) // 2])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_text", disk_full)
    with pytest.raises(OSError, match="No space left"):
        lock.write(lock.load(), tmp_path)
    assert (tmp_path / lock.name).read_bytes() == old
    assert sorted(path.name for path in tmp_path.iterdir()) == [lock.name]  # no partial file left
