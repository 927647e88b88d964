"""Packaging of the runtime package: the hatchling build of entrypoint/pyproject.toml.

What the images get is the wheel `build.py build` builds on the host (`build_runtime_wheel`:
`pip wheel --no-build-isolation` with the .venv's hatchling): its contents, its metadata and its
bytes (reproducible: the build contexts hold it and Docker's layer cache keys on it) are checked
here on the real wheel. The slow tests install ./entrypoint the way a user does, with pip's build
isolation (hatchling comes from the index), into fresh venvs of the oldest, the .venv's and the
newest Python, and check that the hook runs.
"""

from __future__ import annotations

import base64
import csv
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Iterator
from email.parser import BytesParser
from pathlib import Path

import pytest
from hatchling import build as hatchling_build

from tests.runtime.conftest import ROOT, SRC, clean_env, find_python
from tfgpu_kit.image.context import build_runtime_wheel

ENTRYPOINT = ROOT / "entrypoint"
WHEEL_NAME = "tfgpu-0.1.0-py3-none-any.whl"
DIST_INFO = "tfgpu-0.1.0.dist-info"
HOOK_LINE = "import tfgpu._hook\n"
HOOK_ACTIVE = "import sys; print('tfgpu._hook' in sys.modules)"
# hatchling's date for every entry when SOURCE_DATE_EPOCH is not set
HATCHLING_DEFAULT_DATE = (2020, 2, 2, 0, 0, 0)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def package_files() -> list[str]:
    return sorted(
        p.relative_to(SRC).as_posix()
        for p in (SRC / "tfgpu").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    )


def verify_record(zf: zipfile.ZipFile) -> list[str]:
    """Checks every RECORD line against the archive; returns the paths RECORD lists."""
    rows = list(csv.reader(io.StringIO(zf.read(f"{DIST_INFO}/RECORD").decode())))
    assert rows[-1] == [f"{DIST_INFO}/RECORD", "", ""]
    for path, hash_, size in rows[:-1]:
        data = zf.read(path)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert hash_ == f"sha256={digest}" and int(size) == len(data), path
    return [row[0] for row in rows]


@pytest.fixture
def in_entrypoint(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """hatchling's PEP 517 hooks build the project in the current directory."""
    monkeypatch.chdir(ENTRYPOINT)
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    yield


def test_build_system_is_hatchling() -> None:
    with open(ENTRYPOINT / "pyproject.toml", "rb") as f:
        pyproject = tomllib.load(f)
    assert pyproject["build-system"] == {
        "requires": ["hatchling>=1.27"],
        "build-backend": "hatchling.build",
    }
    assert pyproject["project"]["requires-python"] == ">=3.8"
    assert not (ENTRYPOINT / "_build").exists()


def test_wheel_contents_record_and_metadata(wheel: Path) -> None:
    assert wheel.name == WHEEL_NAME  # the wheel build_runtime_wheel built (the build contexts')
    with zipfile.ZipFile(wheel) as zf:
        names = zf.namelist()
        assert verify_record(zf) == names
        assert sorted(names) == sorted(
            [
                *package_files(),
                "tfgpu-hook.pth",  # at the root of site-packages, next to tfgpu/
                *(f"{DIST_INFO}/{n}" for n in ("METADATA", "WHEEL", "entry_points.txt", "RECORD")),
            ]
        )
        assert zf.read("tfgpu-hook.pth").decode() == HOOK_LINE
        for name in package_files():
            assert zf.read(name) == (SRC / name).read_bytes(), name
        for info in zf.infolist():
            assert (info.external_attr >> 16) & 0o777 == 0o644, info.filename
        metadata = BytesParser().parsebytes(zf.read(f"{DIST_INFO}/METADATA"))
        wheel_file = BytesParser().parsebytes(zf.read(f"{DIST_INFO}/WHEEL"))
        entry_points = zf.read(f"{DIST_INFO}/entry_points.txt").decode()
    assert metadata["Metadata-Version"] == "2.4"  # pinned: the bases' older pips read it
    assert (metadata["Name"], metadata["Version"]) == ("tfgpu", "0.1.0")
    assert metadata["Requires-Python"] == ">=3.8"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert metadata["Summary"].startswith("Configure TensorFlow GPU memory")
    assert sorted(metadata.get_all("Provides-Extra")) == ["metrics", "nvml"]
    assert sorted(metadata.get_all("Requires-Dist")) == [
        "nvidia-ml-py; extra == 'nvml'",
        "prometheus-client; extra == 'metrics'",
    ]
    assert "# tfgpu" in metadata.get_payload()  # the README as the long description
    assert wheel_file["Wheel-Version"] == "1.0" and wheel_file["Root-Is-Purelib"] == "true"
    assert wheel_file.get_all("Tag") == ["py3-none-any"]
    assert wheel_file["Generator"].startswith("hatchling ")
    assert entry_points == "[console_scripts]\ntfgpu = tfgpu.commands.cli:main\n"


def test_wheel_is_reproducible(wheel: Path, tmp_path: Path) -> None:
    """Two more builds the way `build.py build` builds it: the same bytes each time."""
    first = build_runtime_wheel(tmp_path / "a")
    second = build_runtime_wheel(tmp_path / "b")
    assert first.name == second.name == WHEEL_NAME
    assert sha256(first) == sha256(second) == sha256(wheel)


def test_timestamps_follow_source_date_epoch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    with zipfile.ZipFile(build_runtime_wheel(tmp_path / "default")) as zf:
        assert {i.date_time for i in zf.infolist()} == {HATCHLING_DEFAULT_DATE}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1700000000")
    epoch = build_runtime_wheel(tmp_path / "epoch")
    with zipfile.ZipFile(epoch) as zf:
        assert {i.date_time for i in zf.infolist()} == {time.gmtime(1700000000)[:6]}
    assert sha256(epoch) == sha256(build_runtime_wheel(tmp_path / "epoch-again"))


def test_editable_wheel_puts_src_on_the_path_and_the_hook_at_the_root(
    tmp_path: Path, in_entrypoint: None
) -> None:
    name = hatchling_build.build_editable(str(tmp_path))
    assert name == WHEEL_NAME
    with zipfile.ZipFile(tmp_path / name) as zf:
        names = verify_record(zf)
        pths = sorted(n for n in names if n.endswith(".pth"))
        # `site` reads .pth files in sorted order: the path line first, so the hook can import tfgpu
        assert pths == ["_tfgpu.pth", "tfgpu-hook.pth"]
        assert zf.read(pths[0]).decode().strip() == str(SRC)
        assert zf.read("tfgpu-hook.pth").decode() == HOOK_LINE
    assert not any(n.startswith("tfgpu/") for n in names)


def test_sdist_builds_the_same_wheel(tmp_path: Path, wheel: Path, in_entrypoint: None) -> None:
    name = hatchling_build.build_sdist(str(tmp_path))
    assert name == "tfgpu-0.1.0.tar.gz"
    with tarfile.open(tmp_path / name) as tar:
        names = tar.getnames()
        tar.extractall(tmp_path / "unpacked", filter="data")
    # hatchling also copies the checkout's .gitignore (it finds the git root's ignore rules)
    top = {n.split("/")[1] for n in names} - {".gitignore"}
    assert top == {"pyproject.toml", "README.md", "PKG-INFO", "src"}
    assert "tfgpu-0.1.0/src/tfgpu-hook.pth" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    out = build_runtime_wheel(tmp_path / "from-sdist", tmp_path / "unpacked" / "tfgpu-0.1.0")
    assert sha256(out) == sha256(wheel)


# Real installs into fresh venvs, as a user runs them (slow: one venv per Python, reused)


def pip_env() -> dict[str, str]:
    """The machine's pip configuration (pip fetches hatchling from the index), no PYTHONPATH."""
    env = {k: v for k, v in clean_env().items() if not k.startswith("PYTHON")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


class FreshVenv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")
        self.site = Path(self.run("import sysconfig; print(sysconfig.get_paths()['purelib'])"))

    def run(self, code: str) -> str:
        r = subprocess.run(
            [self.python, "-c", code],
            env=pip_env(),
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
            env=pip_env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert r.returncode == 0, r.stdout + r.stderr

    def tfgpu_help(self) -> str:
        r = subprocess.run(
            [str(self.path / "bin" / "tfgpu"), "--help"],
            env=pip_env(),
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
        env=pip_env(),
        check=True,
        timeout=120,
    )
    return FreshVenv(path)


@pytest.mark.slow
def test_install_activates_the_hook(fresh_venv: FreshVenv) -> None:
    fresh_venv.pip("install", str(ENTRYPOINT))
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
def test_editable_install_sees_edits(fresh_venv: FreshVenv, tmp_path: Path) -> None:
    # A copy, so that the edit below does not touch the checkout.
    copy = tmp_path / "entrypoint"
    shutil.copytree(ENTRYPOINT, copy, ignore=shutil.ignore_patterns("__pycache__"))
    fresh_venv.pip("install", "-e", str(copy))
    assert (fresh_venv.site / "_tfgpu.pth").read_text().strip() == str(copy / "src")
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
    assert not (fresh_venv.site / "tfgpu-hook.pth").exists()
    assert not (fresh_venv.site / "_tfgpu.pth").exists()
    assert fresh_venv.run(HOOK_ACTIVE) == "False"
    assert os.path.isdir(copy / "src" / "tfgpu")  # uninstalling leaves the sources alone
