"""One lock file of images/: a pydantic model read from YAML and written back under its generated
header, and the one check that a downloaded file is the file a lock names (name and sha256)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict

from tfgpu_kit.errors import SpecError
from tfgpu_kit.spec import IMAGES_DIR, load_yaml, validate

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
        try:
            partial.write_text(text, encoding="utf-8")
            partial.replace(path)
        finally:
            partial.unlink(missing_ok=True)  # nothing half-written left beside it
        return path


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
