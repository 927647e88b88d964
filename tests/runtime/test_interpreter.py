"""`tfgpu run` and the Python it starts (tfgpu.command_path.python_of finds it, tfgpu.interpreter
asks it): a Python that imports TensorFlow without the hook is refused (exit 78) unless
TF_GPU_REQUIRE_HOOK=false; the interpreter is asked, not guessed. Real interpreters: .venv's (hook
installed), a venv of its own without the hook that sees .venv's TensorFlow, `python -S`."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from tfgpu import interpreter
from tfgpu.command_path import python_of

from tests.runtime.conftest import SRC, clean_env

TFGPU = [sys.executable, "-m", "tfgpu"]
PURELIB = sysconfig.get_paths()["purelib"]  # .venv's site-packages: tensorflow-cpu, tfgpu's hook


@pytest.fixture(scope="module")
def own_venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A team's venv without --system-site-packages and without tfgpu, whose TensorFlow is .venv's
    (a .pth line adds that folder to sys.path; .pth files in it are not read: no hook)."""
    path = tmp_path_factory.mktemp("own") / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(path)], check=True)
    site = subprocess.run(
        [
            str(path / "bin" / "python"),
            "-c",
            "import sysconfig; print(sysconfig.get_paths()['purelib'])",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    Path(site, "000-tensorflow.pth").write_text(PURELIB + "\n")
    return path


def run(command: list[str], **extra: str) -> subprocess.CompletedProcess[str]:
    env = clean_env(**extra)
    env["PYTHONPATH"] = str(SRC)  # tfgpu itself, for `python -m tfgpu`
    return subprocess.run(
        [*TFGPU, "run", "--", *command], env=env, capture_output=True, text=True, timeout=120
    )


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        (["python3", "-S", "train.py"], ["-S"]),
        (["python3", "-Su", "-c", "x"], ["-Su"]),
        (["python3", "-Sc", "x"], ["-S"]),
        (["python3", "-W", "ignore", "-X", "dev", "-m", "m"], ["-W", "ignore", "-X", "dev"]),
        (["python3", "-I", "train.py"], ["-I"]),
        (["python3", "train.py", "-S"], []),  # the program's own argument
    ],
)
def test_the_interpreter_options_are_read_as_python_reads_them(
    command: list[str], expected: list[str]
) -> None:
    found = python_of(command, {"PATH": os.path.dirname(sys.executable)})
    assert found is not None and found[1:] == expected


def test_scripts_are_followed_to_their_python_and_others_are_not(tmp_path: Path) -> None:
    env = {"PATH": f"{tmp_path}:{os.path.dirname(sys.executable)}"}
    direct = tmp_path / "direct"
    direct.write_text(f"#!{sys.executable} -u\nprint(1)\n")
    via_env = tmp_path / "via-env"
    via_env.write_text("#!/usr/bin/env -S python3 -s\nprint(1)\n")
    shell = tmp_path / "shell"
    shell.write_text("#!/bin/sh\npython3 x\n")
    for p in (direct, via_env, shell):
        p.chmod(0o755)
    assert python_of(["direct"], env) == [sys.executable, "-u"]
    found = python_of([str(via_env)], env)
    assert (
        found is not None
        and os.path.basename(found[0]).startswith("python3")
        and found[1:] == ["-s"]
    )
    assert python_of(["shell"], env) is None  # what a shell runs later is not known
    assert python_of(["true"], {"PATH": "/usr/bin:/bin"}) is None


def test_the_probe_asks_the_interpreter(own_venv: Path) -> None:
    env = clean_env()
    mine = interpreter.probe([sys.executable], env)
    assert mine is not None and mine.hook and mine.tensorflow and not mine.unhooked_tensorflow
    theirs = interpreter.probe([str(own_venv / "bin" / "python")], env)
    assert theirs is not None and theirs.tensorflow and not theirs.hook and theirs.venv
    no_site = interpreter.probe([sys.executable, "-S"], {**env, "PYTHONPATH": PURELIB})
    assert no_site is not None and no_site.tensorflow and not no_site.hook and no_site.no_site


def test_run_refuses_a_venv_python_without_the_hook(own_venv: Path) -> None:
    python = str(own_venv / "bin" / "python")
    refused = run([python, "-c", "print('ran')"])
    assert refused.returncode == 78, refused.stderr
    assert "ran" not in refused.stdout
    assert f"tfgpu: error: {python} imports TensorFlow without the tfgpu hook" in refused.stderr
    assert "virtual environment without the system site-packages" in refused.stderr
    assert "--find-links /usr/share/tfgpu/wheels 'tfgpu[nvml,metrics]'" in refused.stderr
    assert "TF_GPU_REQUIRE_HOOK=false" in refused.stderr
    assert "tfgpu: nothing was started" in refused.stderr
    # on purpose: it runs, without the caps
    allowed = run([python, "-c", "print('ran')"], TF_GPU_REQUIRE_HOOK="false")
    assert allowed.returncode == 0 and allowed.stdout.strip() == "ran"
    # the kit switched off: nothing is checked
    assert run([python, "-c", "print('ran')"], TF_GPU_CONFIG="off").returncode == 0
    # a bad value of the variable is refused as every variable's is
    bad = run([python, "-c", "print('ran')"], TF_GPU_REQUIRE_HOOK="maybe")
    assert bad.returncode == 78 and "TF_GPU_REQUIRE_HOOK='maybe' is not valid" in bad.stderr


def test_run_refuses_python_minus_s_that_still_finds_tensorflow() -> None:
    # PYTHONPATH carries tfgpu's source (for `python -m tfgpu`) and TensorFlow's folder
    env_refused = subprocess.run(
        [*TFGPU, "run", "--", sys.executable, "-S", "-c", "print('ran')"],
        env={**clean_env(), "PYTHONPATH": f"{SRC}:{PURELIB}"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert env_refused.returncode == 78, env_refused.stderr
    assert "it skips site (-S), so no .pth file is read" in env_refused.stderr
    assert "fix: drop -S" in env_refused.stderr


def test_a_python_with_the_hook_and_other_commands_run_as_before() -> None:
    ok = run([sys.executable, "-c", "print('ran')"])
    assert ok.returncode == 0 and ok.stdout.strip() == "ran"
    assert run(["sh", "-c", "echo shell"]).stdout.strip() == "shell"
