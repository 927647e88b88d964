"""Fixtures of the runtime tests: a real wheel installed into a throwaway venv.

The hook must be tested as users get it (a wheel, its .pth at the root of site-packages),
not through the editable install of .venv. To stay fast the throwaway venv does not
reinstall TensorFlow: a .pth file adds .venv's site-packages after its own, so it sees
tensorflow-cpu from .venv and tfgpu (and its hook) from the wheel.
"""

from __future__ import annotations

import functools
import glob
import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from tests.ci_policy import ci_or_skip
from tfgpu_kit.image.context import build_runtime_wheel

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "entrypoint" / "src"
# Quiet TensorFlow's start-up logs so stderr assertions see ours.
QUIET_TF = {"TF_CPP_MIN_LOG_LEVEL": "3", "TF_ENABLE_ONEDNN_OPTS": "0"}


def clean_env(**extra: str) -> dict[str, str]:
    """The test process's environment without any variable of the contract, plus `extra`."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("TF_GPU_", "TF_CPU_", "TF_MIXED", "TF_FORCE_GPU", "TFGPU_", "CUDA_VISIBLE")
        )
    }
    env.update(QUIET_TF)
    env.update(extra)
    return env


def _pyenv_roots() -> list[str]:
    roots = [os.environ.get("PYENV_ROOT", ""), os.path.expanduser("~/.pyenv"), "/root/.pyenv"]
    return list(dict.fromkeys(r for r in roots if r))


def _patch_level(path: str) -> tuple[int, ...]:
    """(3, 9, 18) from /root/.pyenv/versions/3.9.18/bin/python3.9: newest patch first."""
    release = Path(path).parents[1].name.split("-")[0]
    return tuple(int(x) for x in release.split(".") if x.isdecimal())


@functools.cache
def _find_python(version: str) -> str | None:
    """The first interpreter that really is Python `version`: python3.X on PATH, then pyenv's.

    Each candidate is run once: a pyenv shim on PATH exists but fails unless that version is
    selected (`pyenv global`), so existing is not enough."""
    candidates = [shutil.which(f"python{version}")]
    for root in _pyenv_roots():
        found = glob.glob(os.path.join(root, "versions", f"{version}.*", "bin", f"python{version}"))
        candidates += sorted(found, key=_patch_level, reverse=True)
    for candidate in dict.fromkeys(c for c in candidates if c):
        try:
            r = subprocess.run(
                [candidate, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                capture_output=True,
                text=True,
                timeout=30,
            )
        except (OSError, subprocess.TimeoutExpired):
            continue
        if r.returncode == 0 and r.stdout.strip() == version:
            return candidate
    return None


def find_python(version: str) -> str:
    """Python `version` for the tests that run the runtime on every supported Python.

    Missing: in CI (CI=true) that is a broken machine, so the test fails and says how to
    install it; elsewhere the test is skipped with the same reason."""
    python = _find_python(version)
    if python is not None:
        return python
    reason = (
        f"Python {version} not found (no working python{version} on PATH, none under "
        f"{' or '.join(r + '/versions/' for r in _pyenv_roots())}); install it with "
        f"`pyenv install {version}` (CI machines have 3.8-3.13 under /root/.pyenv, see "
        "docs/CONTRACTS.md)"
    )
    ci_or_skip(reason)


@pytest.fixture(scope="session")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # the same wheel the image build contexts get
    return build_runtime_wheel(tmp_path_factory.mktemp("wheel"))


class Venv:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.python = str(path / "bin" / "python")
        self.tfgpu = str(path / "bin" / "tfgpu")

    def run(
        self, code: str, env: dict[str, str], timeout: float = 180
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [self.python, "-c", code],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            cwd=self.path,
        )


@pytest.fixture(scope="session")
def wheel_venv(tmp_path_factory: pytest.TempPathFactory, wheel: Path) -> Venv:
    path = tmp_path_factory.mktemp("venv") / "v"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    venv = Venv(path)
    site = subprocess.run(
        [venv.python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    # .venv's site-packages, for TensorFlow; sorted before tfgpu-hook.pth does not matter.
    Path(site, "000-dotvenv-tensorflow.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            venv.python,
            "install",
            "-q",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        check=True,
    )
    assert Path(site, "tfgpu-hook.pth").read_text() == "import tfgpu._hook\n"
    return venv
