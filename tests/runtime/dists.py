"""Installed distributions and wheels made for the tests, in the formats pip writes and reads
(the core metadata spec, PEP 376's dist-info and RECORD, PEP 427's wheel), so that the runtime's
readers (importlib.metadata) and real pip and uv see them as they see any package."""

from __future__ import annotations

import base64
import hashlib
import zipfile
from collections.abc import Sequence
from pathlib import Path


def _metadata(name: str, version: str, requires: Sequence[str]) -> str:
    lines = ["Metadata-Version: 2.1", f"Name: {name}", f"Version: {version}"]
    lines += [f"Requires-Dist: {r}" for r in requires]
    return "\n".join(lines) + "\n"


def _record_line(path: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={digest},{len(data)}"


def install(
    site: Path,
    name: str,
    version: str,
    *,
    requires: Sequence[str] = (),
    top_level: str | None = None,
    files: dict[str, bytes] | None = None,
) -> Path:
    """A distribution installed into `site` as pip leaves it: its files, and NAME-VERSION.dist-info
    with METADATA, top_level.txt (when given) and RECORD listing every file with size."""
    files = dict(files or {})
    dist_info = f"{name.replace('-', '_')}-{version}.dist-info"
    files[f"{dist_info}/METADATA"] = _metadata(name, version, requires).encode()
    if top_level is not None:
        files[f"{dist_info}/top_level.txt"] = f"{top_level}\n".encode()
    records = []
    for rel, data in files.items():
        path = site / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        records.append(_record_line(rel, data))
    records.append(f"{dist_info}/RECORD,,")
    (site / dist_info / "RECORD").write_text("\n".join(records) + "\n")
    return site / dist_info


def wheel(
    folder: Path, name: str, version: str, *, requires: Sequence[str] = (), package: str = ""
) -> Path:
    """A pure-Python wheel NAME-VERSION-py3-none-any.whl in `folder` (a module `package`, default
    the name with underscores), that pip and uv install offline from --find-links."""
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{name.replace('-', '_')}-{version}"
    package = package or name.replace("-", "_")
    dist_info = f"{stem}.dist-info"
    files = {
        f"{package}/__init__.py": f"VERSION = {version!r}\n".encode(),
        f"{dist_info}/METADATA": _metadata(name, version, requires).encode(),
        f"{dist_info}/WHEEL": (
            b"Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    record = [_record_line(p, d) for p, d in files.items()] + [f"{dist_info}/RECORD,,"]
    files[f"{dist_info}/RECORD"] = ("\n".join(record) + "\n").encode()
    path = folder / f"{stem}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as zf:
        for rel, data in files.items():
            zf.writestr(rel, data)
    return path
