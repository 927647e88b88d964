"""One lock file of images/: a pydantic model read from YAML and written back under its generated
header, and the one check that a downloaded file is the file a lock names (name and sha256)."""

from __future__ import annotations

import hashlib
import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict

from tfgpu_kit.matrix.spec import IMAGES_DIR, load_yaml, validate
from tfgpu_kit.shared.errors import SpecError

M = TypeVar("M", bound=BaseModel)


class Entry(BaseModel):
    """The base of every model a lock file holds: no unknown keys, never changed once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


@dataclass
class LockFile(Generic[M]):
    """images/<name>: `load` (an empty lock when the file does not exist yet), `write` (the header,
    then `dump(lock)` as YAML in the order dump gives)."""

    name: str
    header: str
    model: type[M]
    dump: Callable[[M], dict[str, Any]]

    def path(self, directory: Path | None = None) -> Path:
        return (directory or IMAGES_DIR) / self.name

    def load(self, directory: Path | None = None) -> M:
        path = self.path(directory)
        if not path.exists():
            return self.model()
        return validate(self.model, load_yaml(path) or {}, path)

    def write(self, lock: M, directory: Path | None = None) -> Path:
        path = self.path(directory)
        text = self.header + yaml.safe_dump(self.dump(lock), sort_keys=False)
        # written beside it, then renamed over it: an interrupted `lock` leaves the old file whole
        partial = path.with_name(f".{path.name}.partial")
        fd = _create_new(partial, _mode_of(path))
        try:
            _write_all(fd, text.encode("utf-8"))
            os.close(fd)
            fd = -1
            partial.replace(path)
        finally:
            if fd >= 0:
                os.close(fd)
            partial.unlink(missing_ok=True)  # nothing half-written left beside it
        return path


def _mode_of(path: Path) -> int:
    """The permission bits the lock has now (a 0600 lock stays 0600); 0644 for a new one."""
    try:
        return stat.S_IMODE(path.stat(follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return 0o644


def _create_new(partial: Path, mode: int) -> int:
    """A new file at `partial`, never an existing one: O_EXCL refuses any name already there,
    a symbolic link included (O_NOFOLLOW says so for a link whose target is missing), so a
    link planted at the temporary path cannot redirect the write or its mode elsewhere."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(partial, flags, mode)
    except FileExistsError:
        raise SpecError(
            f"{partial} already exists (a link or a file left there), so the lock is not "
            "written through it",
            hint=f"look at it and remove it (rm {partial}), then run the command again",
        ) from None
    os.fchmod(fd, mode)  # the umask narrowed the mode given to open; the old file's is kept
    return fd


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def sorted_dump(lock: BaseModel) -> dict[str, Any]:
    """The lock's fields (each a dict of entries) with the entries in key order."""
    return {field: dict(sorted(entries.items())) for field, entries in lock.model_dump().items()}


def sha256(path: Path) -> str:
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def check_file(pin: str, locked_file: str, locked_sha256: str, path: Path, lock_name: str) -> None:
    """SpecError unless `path` is the file `lock_name` locks for `pin` (its name and sha256)."""
    if path.name != locked_file or sha256(path) != locked_sha256:
        raise SpecError(
            f"{pin}: {path.name} is not the locked wheel"
            f" ({locked_file}, sha256 {locked_sha256[:16]}…) of {lock_name}",
            hint="the index served other bytes than when the lock was written: check them, then"
            " `build.py lock` to accept them",
        )
