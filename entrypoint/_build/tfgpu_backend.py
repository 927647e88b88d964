"""The build backend of the runtime package `tfgpu` (PEP 517 and PEP 660), standard library only.

Why hand-written: `pip install ./entrypoint` must work offline. With a third-party backend
(hatchling, before) pip's build isolation first downloads the backend from an index, so a truly
offline install fails. pyproject.toml says `requires = []` and loads this file through
`backend-path` (the way flit_core builds itself), so there is nothing to download.

Where the metadata comes from: `tomllib` exists only from Python 3.11, the package installs on
3.8 to 3.10 too, and a home-made TOML reader would be one more parser to get wrong. So PROJECT
below is what the backend builds from, on every Python (the same wheel bytes whichever Python
builds it), and pyproject.toml's `[project]` table states the same values for the tools that
read PEP 621 metadata. The two are kept equal: on 3.11+ every build compares them and refuses to
build when they differ, and tests/runtime/test_packaging.py compares them as well.

Outputs (reproducible: sorted entries, fixed permissions, timestamps from SOURCE_DATE_EPOCH or
else 1980-01-01; the image build context contains the wheel and Docker's layer cache keys on its
bytes):
- wheel: tfgpu/**, tfgpu-hook.pth at the root of site-packages (the hook, see
  src/tfgpu/_hook.py), tfgpu-VERSION.dist-info/{METADATA,WHEEL,entry_points.txt,RECORD};
- editable wheel: _tfgpu_editable.pth (the absolute path of src/; sorts before the hook, so
  tfgpu is importable when the hook's line runs), tfgpu-hook.pth, the same dist-info;
- sdist: tfgpu-VERSION/{pyproject.toml,README.md,PKG-INFO,src/**,_build/**}.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import os
import sys
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

# Equal to pyproject.toml's [project] table (see the module docstring).
PROJECT: Dict[str, Any] = {
    "name": "tfgpu",
    "version": "0.1.0",
    "description": (
        "Configure TensorFlow GPU memory from environment variables, inside the user's own process"
    ),
    "readme": "README.md",
    "requires-python": ">=3.8",
    "license": "Apache-2.0",
    "dependencies": [],
    "classifiers": [
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
    ],
    "optional-dependencies": {
        "nvml": ["nvidia-ml-py"],
        "metrics": ["prometheus-client"],
    },
    "scripts": {"tfgpu": "tfgpu.cli:main"},
}

ROOT = Path(__file__).resolve().parent.parent  # entrypoint/
SRC = ROOT / "src"
NAME: str = PROJECT["name"]
VERSION: str = PROJECT["version"]
DIST_INFO = f"{NAME}-{VERSION}.dist-info"
TAG = "py3-none-any"
HOOK = "tfgpu-hook.pth"
EDITABLE_PTH = "_tfgpu_editable.pth"

Files = List[Tuple[str, bytes]]  # (path inside the archive, content)


def _checked_project() -> Dict[str, Any]:
    """PROJECT, after comparing it with pyproject.toml where tomllib exists (3.11+)."""
    if sys.version_info >= (3, 11):
        import tomllib

        with open(ROOT / "pyproject.toml", "rb") as f:
            declared = tomllib.load(f)["project"]
        if declared != PROJECT:
            keys = sorted(k for k in {*declared, *PROJECT} if declared.get(k) != PROJECT.get(k))
            raise RuntimeError(
                f"pyproject.toml's [project] and PROJECT in {__file__} differ in {keys}; "
                "make them equal"
            )
    return PROJECT


def _epoch() -> int:
    """SOURCE_DATE_EPOCH if set, not before 1980 (the earliest date a zip file can hold)."""
    return max(int(os.environ.get("SOURCE_DATE_EPOCH", "0")), 315532800)


def _tree(top: Path) -> List[Path]:
    """The files under top, sorted, without bytecode."""
    return sorted(
        p
        for p in top.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )


def _metadata() -> bytes:
    project = _checked_project()
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {project['name']}",
        f"Version: {project['version']}",
        f"Summary: {project['description']}",
        f"License: {project['license']}",
        *(f"Classifier: {c}" for c in project["classifiers"]),
        f"Requires-Python: {project['requires-python']}",
        *(f"Requires-Dist: {r}" for r in project["dependencies"]),
    ]
    for extra, requirements in project["optional-dependencies"].items():
        lines.append(f"Provides-Extra: {extra}")
        for req in requirements:
            spec, _, marker = req.partition(";")
            condition = f'extra == "{extra}"'
            if marker:
                condition = f"({marker.strip()}) and {condition}"
            lines.append(f"Requires-Dist: {spec.strip()}; {condition}")
    lines.append("Description-Content-Type: text/markdown")
    readme: str = (ROOT / project["readme"]).read_text(encoding="utf-8")
    return ("\n".join(lines) + "\n\n" + readme).encode("utf-8")


def _dist_info() -> Files:
    """The dist-info files but RECORD."""
    wheel = f"Wheel-Version: 1.0\nGenerator: tfgpu_backend\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    scripts = "".join(f"{k} = {v}\n" for k, v in _checked_project()["scripts"].items())
    return [
        (f"{DIST_INFO}/METADATA", _metadata()),
        (f"{DIST_INFO}/WHEEL", wheel.encode()),
        (f"{DIST_INFO}/entry_points.txt", f"[console_scripts]\n{scripts}".encode()),
    ]


def _record(files: Files) -> bytes:
    lines = []
    for name, data in files:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        lines.append(f"{name},sha256={digest},{len(data)}\n")
    lines.append(f"{DIST_INFO}/RECORD,,\n")
    return "".join(lines).encode()


def _write_wheel(directory: str, files: Files) -> str:
    files = sorted(files) + _dist_info()  # dist-info at the end, as the wheel spec suggests
    files.append((f"{DIST_INFO}/RECORD", _record(files)))
    name = f"{NAME}-{VERSION}-{TAG}.whl"
    date_time = time.gmtime(_epoch())[:6]
    with zipfile.ZipFile(Path(directory, name), "w") as zf:
        for arcname, data in files:
            info = zipfile.ZipInfo(arcname, date_time=date_time)
            info.create_system = 3  # Unix, so that external_attr means the mode below
            info.external_attr = 0o100644 << 16  # a regular file, rw-r--r--
            info.compress_type = zipfile.ZIP_DEFLATED
            zf.writestr(info, data)
    return name


# PEP 517 / PEP 660 hooks


def get_requires_for_build_wheel(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[Dict[str, Any]] = None) -> List[str]:
    return []


def get_requires_for_build_editable(
    config_settings: Optional[Dict[str, Any]] = None,
) -> List[str]:
    return []


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    files = [(p.relative_to(SRC).as_posix(), p.read_bytes()) for p in _tree(SRC / NAME)]
    files.append((HOOK, (SRC / HOOK).read_bytes()))
    return _write_wheel(wheel_directory, files)


def build_editable(
    wheel_directory: str,
    config_settings: Optional[Dict[str, Any]] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    files = [(EDITABLE_PTH, f"{SRC}\n".encode()), (HOOK, (SRC / HOOK).read_bytes())]
    return _write_wheel(wheel_directory, files)


def build_sdist(sdist_directory: str, config_settings: Optional[Dict[str, Any]] = None) -> str:
    base = f"{NAME}-{VERSION}"
    files = [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in _tree(SRC)]
    files += [(p.relative_to(ROOT).as_posix(), p.read_bytes()) for p in _tree(ROOT / "_build")]
    files += [(n, (ROOT / n).read_bytes()) for n in ("pyproject.toml", PROJECT["readme"])]
    files.append(("PKG-INFO", _metadata()))
    name = f"{base}.tar.gz"
    epoch = _epoch()
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for arcname, data in sorted(files):
            info = tarfile.TarInfo(f"{base}/{arcname}")
            info.size, info.mtime, info.mode = len(data), epoch, 0o644
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            tar.addfile(info, io.BytesIO(data))
    Path(sdist_directory, name).write_bytes(gzip.compress(buffer.getvalue(), mtime=epoch))
    return name
