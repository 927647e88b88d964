"""The hook never breaks an import it does not understand: pip and ensurepip run from a zip (pip's
wheel on sys.path, as the images' build runs it; ensurepip's bundled wheel), whose zipimporter has
no create_module/exec_module before Python 3.10. Real CPython 3.8, 3.9 and 3.11, each in a venv
whose site-packages hold the hook's .pth exactly as a wheel installs it."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.runtime.conftest import SRC, clean_env, find_python

PTH = (SRC / "tfgpu-hook.pth").read_text(encoding="utf-8")


def hooked_venv(python: str, where: Path) -> Path:
    """A venv of `python` without pip, with the hook's .pth and the runtime's source on its path;
    returns its interpreter."""
    subprocess.run([python, "-m", "venv", "--without-pip", str(where)], check=True, timeout=120)
    venv_python = where / "bin" / "python"
    purelib = subprocess.run(
        [str(venv_python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    site = Path(purelib)
    (site / "_tfgpu_src.pth").write_text(f"{SRC}\n", encoding="utf-8")  # sorts before the hook
    (site / "tfgpu-hook.pth").write_text(PTH, encoding="utf-8")
    finder = subprocess.run(
        [str(venv_python), "-c",
         "import sys; print([type(f).__name__ for f in sys.meta_path][0])"],
        capture_output=True, text=True, check=True, env=clean_env(),
    ).stdout.strip()  # fmt: skip
    assert finder == "_Finder"  # the hook is first on sys.meta_path in this venv
    return venv_python


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.11"])
def test_ensurepip_runs_pip_from_its_bundled_wheel(version: str, tmp_path: Path) -> None:
    python = hooked_venv(find_python(version), tmp_path / "v")
    done = subprocess.run(
        [str(python), "-m", "ensurepip", "--default-pip"],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "create_module" not in done.stderr
    pip = subprocess.run(
        [str(python), "-m", "pip", "--version"], capture_output=True, text=True, env=clean_env()
    )
    assert pip.returncode == 0 and pip.stdout.startswith("pip "), pip.stderr


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.11"])
def test_pip_from_a_zip_resolves_an_install(version: str, tmp_path: Path) -> None:
    """`python pip.whl/pip install …`, the images' build step: the resolver's factory module,
    one of the hook's targets, is imported from the zip."""
    python = hooked_venv(find_python(version), tmp_path / "v")
    bundled = subprocess.run(
        [str(python), "-c", "import ensurepip, os; print(os.path.dirname(ensurepip.__file__))"],
        capture_output=True, text=True, check=True, env=clean_env(),
    ).stdout.strip()  # fmt: skip
    wheel = sorted(Path(bundled, "_bundled").glob("pip-*.whl"))[
        -1
    ]  # (pyenv may leave an older one)
    done = subprocess.run(
        [str(python), f"{wheel}/pip", "install", "--dry-run", "--no-index",
         "--find-links", str(Path(bundled, "_bundled")), "pip"],
        capture_output=True, text=True, timeout=300, env=clean_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Would install" in done.stdout or "already satisfied" in done.stdout, done.stdout
