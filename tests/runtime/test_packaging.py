"""Packaging of the runtime package: the in-tree build backend (entrypoint/_build).

`pip install ./entrypoint` must work with no index at all, on Python 3.8-3.13, and the wheel
must be byte-for-byte reproducible (the image build context contains it). The slow tests install
into fresh venvs of the oldest, the .venv and the newest Python, truly offline
(PIP_CONFIG_FILE=/dev/null, --no-index).
"""

from __future__ import annotations

import base64
import csv
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from email.parser import BytesParser
from pathlib import Path
from types import ModuleType

import pytest

from tests.runtime.conftest import ROOT, SRC, clean_env, find_python

ENTRYPOINT = ROOT / "entrypoint"
WHEEL_NAME = "tfgpu-0.1.0-py3-none-any.whl"
DIST_INFO = "tfgpu-0.1.0.dist-info"
HOOK_LINE = "import tfgpu._hook\n"
HOOK_ACTIVE = "import sys; print('tfgpu._hook' in sys.modules)"
BUILD = (
    "import sys; sys.path.insert(0, sys.argv[1]); import tfgpu_backend as b; "
    "print(b.build_wheel(sys.argv[2])); print(b.build_sdist(sys.argv[2]))"
)


def load_backend(entrypoint: Path = ENTRYPOINT, name: str = "tfgpu_backend") -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, entrypoint / "_build" / "tfgpu_backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def build_wheel(tmp_path: Path, sub: str) -> Path:
    out = tmp_path / sub
    out.mkdir()
    name: str = load_backend().build_wheel(str(out))
    assert name == WHEEL_NAME
    return out / name


def offline_env(**extra: str) -> dict[str, str]:
    """No pip configuration, no index, no PYTHONPATH: what a machine without network sees."""
    env = {k: v for k, v in clean_env().items() if not k.startswith(("PIP_", "PYTHON"))}
    env.update(
        PIP_CONFIG_FILE=os.devnull,
        PIP_NO_INDEX="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        PYTHONDONTWRITEBYTECODE="1",  # the backend runs from entrypoint/_build
    )
    env.update(extra)
    return env


# The backend's metadata and outputs (fast: the backend runs in-process)


def test_backend_metadata_equals_pyproject() -> None:
    with open(ENTRYPOINT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    assert pyproject["project"] == load_backend().PROJECT
    assert pyproject["build-system"] == {
        "requires": [],
        "build-backend": "tfgpu_backend",
        "backend-path": ["_build"],
    }


def test_backend_refuses_to_build_when_pyproject_differs(tmp_path: Path) -> None:
    copy = tmp_path / "entrypoint"
    shutil.copytree(ENTRYPOINT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    toml = copy / "pyproject.toml"
    toml.write_text(toml.read_text().replace('version = "0.1.0"', 'version = "0.2.0"'))
    backend = load_backend(copy, "tfgpu_backend_drifted")
    with pytest.raises(RuntimeError, match=r"differ in \['version'\]"):
        backend.build_wheel(str(tmp_path))


def verify_record(zf: zipfile.ZipFile) -> list[str]:
    """Checks every RECORD line against the archive; returns the paths RECORD lists."""
    rows = list(csv.reader(io.StringIO(zf.read(f"{DIST_INFO}/RECORD").decode())))
    assert rows[-1] == [f"{DIST_INFO}/RECORD", "", ""]
    for path, hash_, size in rows[:-1]:
        data = zf.read(path)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert hash_ == f"sha256={digest}" and int(size) == len(data), path
    return [row[0] for row in rows]


def test_wheel_contents_record_and_metadata(wheel: Path) -> None:
    assert wheel.name == WHEEL_NAME  # the one pip wheel built (the build side's path)
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert verify_record(zf) == names
        package = sorted(
            p.relative_to(SRC).as_posix()
            for p in (SRC / "tfgpu").rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
        )
        assert sorted(names) == sorted(
            [
                *package,
                "tfgpu-hook.pth",
                *(f"{DIST_INFO}/{n}" for n in ("METADATA", "WHEEL", "entry_points.txt", "RECORD")),
            ]
        )
        assert zf.read("tfgpu-hook.pth").decode() == HOOK_LINE
        for info in zf.infolist():
            assert info.external_attr >> 16 == 0o100644, info.filename
        metadata = BytesParser().parsebytes(zf.read(f"{DIST_INFO}/METADATA"))
        wheel_file = BytesParser().parsebytes(zf.read(f"{DIST_INFO}/WHEEL"))
        entry_points = zf.read(f"{DIST_INFO}/entry_points.txt").decode()
    assert metadata["Metadata-Version"] == "2.1"
    assert (metadata["Name"], metadata["Version"]) == ("tfgpu", "0.1.0")
    assert metadata["Requires-Python"] == ">=3.8" and metadata["License"] == "Apache-2.0"
    assert metadata["Summary"].startswith("Configure TensorFlow GPU memory")
    assert metadata.get_all("Provides-Extra") == ["nvml", "metrics"]
    assert metadata.get_all("Requires-Dist") == [
        'nvidia-ml-py; extra == "nvml"',
        'prometheus-client; extra == "metrics"',
    ]
    assert "# tfgpu" in metadata.get_payload()  # the README as the long description
    assert wheel_file["Wheel-Version"] == "1.0" and wheel_file["Root-Is-Purelib"] == "true"
    assert wheel_file.get_all("Tag") == ["py3-none-any"]
    assert entry_points == "[console_scripts]\ntfgpu = tfgpu.cli:main\n"


def test_wheel_and_sdist_are_reproducible_on_every_python(wheel: Path, tmp_path: Path) -> None:
    """The same bytes twice in a row, from pip wheel, and from Python 3.8, 3.9 and 3.13.

    The sdist of Python 3.8 holds the same files but not the same bytes: its tarfile writes
    "0000000" into the device-number fields of regular files, where 3.9+ writes NULs. The
    wheel (what the image build contexts hold) is the same on every Python."""
    first, second = build_wheel(tmp_path, "a"), build_wheel(tmp_path, "b")
    assert sha256(first) == sha256(second) == sha256(wheel)
    sdist = load_backend().build_sdist(str(tmp_path / "a"))
    for version in ("3.8", "3.9", "3.13"):
        out = tmp_path / version
        out.mkdir()
        r = subprocess.run(
            [find_python(version), "-B", "-c", BUILD, str(ENTRYPOINT / "_build"), str(out)],
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        assert r.stdout.split() == [WHEEL_NAME, sdist]
        assert sha256(out / WHEEL_NAME) == sha256(wheel), version
        if version != "3.8":
            assert sha256(out / sdist) == sha256(tmp_path / "a" / sdist), version
        assert sdist_files(out / sdist) == sdist_files(tmp_path / "a" / sdist), version


def sdist_files(path: Path) -> list[tuple[str, int, int, bytes]]:
    """(name, mode, mtime, content) of every member, in order."""
    with tarfile.open(path) as tar:
        return [
            (m.name, m.mode, m.mtime, tar.extractfile(m).read())  # type: ignore[union-attr]
            for m in tar.getmembers()
        ]


def test_timestamps_follow_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    with zipfile.ZipFile(build_wheel(tmp_path, "default")) as zf:
        assert {i.date_time for i in zf.infolist()} == {(1980, 1, 1, 0, 0, 0)}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    with zipfile.ZipFile(build_wheel(tmp_path, "epoch")) as zf:
        assert {i.date_time for i in zf.infolist()} == {time.gmtime(1700000000)[:6]}


def test_editable_wheel(tmp_path: Path) -> None:
    name = load_backend().build_editable(str(tmp_path))
    with zipfile.ZipFile(tmp_path / name) as zf:
        names = verify_record(zf)
        assert zf.read("_tfgpu_editable.pth").decode() == f"{SRC}\n"
        assert zf.read("tfgpu-hook.pth").decode() == HOOK_LINE
    assert name == WHEEL_NAME
    # `site` reads .pth files in sorted order: the path line first, so the hook can import tfgpu
    assert sorted(n for n in names if n.endswith(".pth")) == [
        "_tfgpu_editable.pth",
        "tfgpu-hook.pth",
    ]
    assert not any(n.startswith("tfgpu/") for n in names)


def test_sdist_builds_the_same_wheel(tmp_path: Path, wheel: Path) -> None:
    name = load_backend().build_sdist(str(tmp_path))
    assert name == "tfgpu-0.1.0.tar.gz"
    with tarfile.open(tmp_path / name) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    top = {n.split("/")[1] for n in names}
    assert top == {"pyproject.toml", "README.md", "PKG-INFO", "src", "_build"}
    assert "tfgpu-0.1.0/src/tfgpu-hook.pth" in names
    assert "tfgpu-0.1.0/_build/tfgpu_backend.py" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    unpacked = tmp_path / "unpacked" / "tfgpu-0.1.0"
    out = tmp_path / "from-sdist"
    out.mkdir()
    r = subprocess.run(
        [sys.executable, "-B", "-c", BUILD, str(unpacked / "_build"), str(out)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert sha256(out / WHEEL_NAME) == sha256(wheel)


# Real offline installs into fresh venvs (slow: one venv per Python, reused by both tests)


class FreshVenv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")
        self.site = Path(self.run("import sysconfig; print(sysconfig.get_paths()['purelib'])"))

    def run(self, code: str) -> str:
        r = subprocess.run(
            [self.python, "-c", code],
            env=offline_env(),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=self.path,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    def pip(self, *args: str) -> None:
        r = subprocess.run(
            [self.python, "-m", "pip", *args],
            env=offline_env(),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert r.returncode == 0, r.stdout + r.stderr

    def tfgpu_help(self) -> str:
        r = subprocess.run(
            [str(self.path / "bin" / "tfgpu"), "--help"],
            env=offline_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert r.returncode == 0, r.stderr
        return r.stdout


@pytest.fixture(scope="module", params=["3.8", "3.11", "3.13"])
def fresh_venv(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> FreshVenv:
    """A new venv of that Python with its own pip; each test leaves it without tfgpu."""
    path = tmp_path_factory.mktemp(f"py{request.param}") / "v"
    subprocess.run(
        [find_python(request.param), "-m", "venv", str(path)],
        env=offline_env(),
        check=True,
        timeout=120,
    )
    return FreshVenv(path)


@pytest.mark.slow
def test_offline_install_activates_the_hook(fresh_venv: FreshVenv) -> None:
    fresh_venv.pip("install", "--no-index", str(ENTRYPOINT))
    assert "usage: tfgpu" in fresh_venv.tfgpu_help()
    assert fresh_venv.run(HOOK_ACTIVE) == "True"  # the .pth ran at interpreter start
    assert (fresh_venv.site / "tfgpu-hook.pth").read_text() == HOOK_LINE
    assert (fresh_venv.site / "tfgpu" / "_hook.py").is_file()
    fresh_venv.pip("uninstall", "-y", "tfgpu")
    assert not (fresh_venv.site / "tfgpu-hook.pth").exists()
    assert not (fresh_venv.site / "tfgpu").exists()
    assert not (fresh_venv.path / "bin" / "tfgpu").exists()
    assert fresh_venv.run(HOOK_ACTIVE) == "False"


@pytest.mark.slow
def test_offline_editable_install_sees_edits(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    # A copy, so that the edit below does not touch the checkout.
    copy = tmp_path / "entrypoint"
    shutil.copytree(ENTRYPOINT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fresh_venv.pip("install", "--no-index", "-e", str(copy))
    assert (fresh_venv.site / "_tfgpu_editable.pth").read_text() == f"{copy / 'src'}\n"
    assert (fresh_venv.site / "tfgpu-hook.pth").read_text() == HOOK_LINE
    assert not (fresh_venv.site / "tfgpu").exists()
    assert fresh_venv.run(HOOK_ACTIVE) == "True"
    assert fresh_venv.run("import tfgpu; print(tfgpu.__file__)") == str(
        copy / "src" / "tfgpu" / "__init__.py"
    )
    assert "usage: tfgpu" in fresh_venv.tfgpu_help()
    with open(copy / "src" / "tfgpu" / "__init__.py", "a") as f:
        f.write("EDITED = 'visible without reinstall'\n")
    assert fresh_venv.run("import tfgpu; print(tfgpu.EDITED)") == "visible without reinstall"
    fresh_venv.pip("uninstall", "-y", "tfgpu")
    assert not (fresh_venv.site / "_tfgpu_editable.pth").exists()
    assert not (fresh_venv.site / "tfgpu-hook.pth").exists()
