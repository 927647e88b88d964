"""`tfgpu run` and the Python it starts (tfgpu.machine.command_path.python_of finds it,
tfgpu.machine.interpreter asks it): a Python that imports TensorFlow without the hook is refused
(exit 78) unless TF_GPU_REQUIRE_HOOK=false; the interpreter is asked, not guessed. Real
interpreters: .venv's (hook installed), a venv of its own without the hook that sees .venv's
TensorFlow, `python -S`."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

import pytest
from tfgpu.machine import interpreter
from tfgpu.machine.command_path import python_of

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


def test_run_refuses_a_venv_python_without_the_hook(own_venv: Path, tmp_path: Path) -> None:
    python = str(own_venv / "bin" / "python")
    train = tmp_path / "train.py"  # a script: whether it imports TensorFlow is not known
    train.write_text("print('ran')\n")
    refused = run([python, str(train)])
    assert refused.returncode == 78, refused.stderr
    assert "ran" not in refused.stdout
    assert f"tfgpu: error: {python} imports TensorFlow without the tfgpu hook" in refused.stderr
    assert "virtual environment without the system site-packages" in refused.stderr
    assert "--find-links /usr/share/tfgpu/wheels 'tfgpu[nvml,metrics]'" in refused.stderr
    assert "TF_GPU_REQUIRE_HOOK=false" in refused.stderr
    assert "tfgpu: nothing was started" in refused.stderr
    # code that names TensorFlow is refused as well
    assert run([python, "-c", "import tensorflow"]).returncode == 78
    # on purpose: it runs, without the caps
    allowed = run([python, str(train)], TF_GPU_REQUIRE_HOOK="false")
    assert allowed.returncode == 0 and allowed.stdout.strip() == "ran"
    # the kit switched off: nothing is checked
    assert run([python, str(train)], TF_GPU_CONFIG="off").returncode == 0
    # a bad value of the variable is refused as every variable's is
    bad = run([python, str(train)], TF_GPU_REQUIRE_HOOK="maybe")
    assert bad.returncode == 78 and "TF_GPU_REQUIRE_HOOK='maybe' is not valid" in bad.stderr


def test_a_python_that_merely_can_import_tensorflow_is_not_refused(own_venv: Path) -> None:
    python = str(own_venv / "bin" / "python")
    printed = run([python, "-c", "print('ran')"])
    assert printed.returncode == 0 and printed.stdout.strip() == "ran", printed.stderr
    for module in (["-m", "venv", "--help"], ["-m", "platform"], ["-m", "pip", "--version"]):
        done = run([python, *module])
        assert "tfgpu: error" not in done.stderr, (module, done.stderr)


def test_run_refuses_python_minus_s_that_still_finds_tensorflow() -> None:
    # PYTHONPATH carries tfgpu's source (for `python -m tfgpu`) and TensorFlow's folder
    env_refused = subprocess.run(
        [*TFGPU, "run", "--", sys.executable, "-S", "-c", "import tensorflow; print('ran')"],
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


@pytest.mark.parametrize(
    "wrapper",
    [
        ["env", "TRAINING=1"],
        ["/usr/bin/env", "-u", "HOME", "TRAINING=1"],
        ["env", "-S", "TRAINING=1 nice -n 5"],
        ["timeout", "--signal=TERM", "600"],
        ["timeout", "-k", "5", "600"],
        ["nice", "-n", "5"],
        ["nohup"],
        ["taskset", "-c", "0"],
        ["setsid"],
        ["env", "nice", "timeout", "600"],
    ],
    ids=lambda w: " ".join(w),
)
def test_the_door_looks_through_exec_wrappers(
    own_venv: Path, tmp_path: Path, wrapper: list[str]
) -> None:
    train = tmp_path / "train.py"
    train.write_text("print('ran')\n")
    python = str(own_venv / "bin" / "python")
    refused = run([*wrapper, python, str(train)])
    assert refused.returncode == 78, (wrapper, refused.stderr)
    assert "imports TensorFlow without the tfgpu hook" in refused.stderr
    assert "ran" not in refused.stdout


def test_unwrap_reads_each_wrappers_syntax() -> None:
    from tfgpu.machine.command_path import unwrap

    env = {"PATH": "/usr/bin:/bin", "HOME": "/root"}
    cases = {
        ("numactl", "--cpunodebind=0", "-m", "0", "python3", "x.py"): ["python3", "x.py"],
        ("taskset", "0x3", "python3", "x.py"): ["python3", "x.py"],
        ("chrt", "-f", "10", "python3"): ["python3"],
        ("stdbuf", "-oL", "-e", "0", "python3"): ["python3"],
        ("ionice", "-c", "2", "-n", "7", "python3"): ["python3"],
        ("tini", "--", "python3"): ["python3"],
        ("gosu", "1000", "python3"): ["python3"],
        ("taskset", "-p", "1234"): ["taskset", "-p", "1234"],  # acts on a process
        ("sh", "-c", "python3 x.py"): ["sh", "-c", "python3 x.py"],  # not followed: blind
    }
    for command, inner in cases.items():
        assert unwrap(list(command), env)[0] == inner, command
    command, changed = unwrap(["env", "-i", "A=1", "-u", "A", "B=2", "python3"], env)
    assert command == ["python3"] and changed == {"B": "2"}


def test_python_i_under_tfgpu_run_reads_its_first_line(tmp_path: Path) -> None:
    """A Python other than tfgpu's own (a venv over the system site: it has the hook) is probed;
    the probe reads nothing of the command's stdin, so `python -i` gets every line."""
    venv = tmp_path / "site-venv"
    subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", "--system-site-packages", str(venv)],
        check=True,
    )
    done = subprocess.run(
        [*TFGPU, "run", "--", str(venv / "bin" / "python"), "-i", "-q"],
        input="print(40 + 2)\nprint('second')\n",
        env={**clean_env(), "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["42", "second"], done.stdout


def test_a_probe_that_hangs_is_bounded_and_refused(own_venv: Path, tmp_path: Path) -> None:
    """A .pth that blocks (or a loaded host) cannot hold `tfgpu run` for more than the probe's
    bound, and a probe without an answer is a refusal, never "no TensorFlow here"."""
    slow = tmp_path / "slow-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(slow)], check=True)
    purelib = "import sysconfig; print(sysconfig.get_paths()['purelib'])"
    site = subprocess.run(
        [str(slow / "bin" / "python"), "-c", purelib], capture_output=True, text=True, check=True
    ).stdout.strip()
    Path(site, "000-slow.pth").write_text("import time; time.sleep(20)\n")
    train = tmp_path / "train.py"
    train.write_text("print('ran')\n")
    t0 = time.monotonic()
    done = run([str(slow / "bin" / "python"), str(train)])
    elapsed = time.monotonic() - t0
    assert done.returncode == 78, done.stderr
    assert "cannot tell whether" in done.stderr and "did not answer within 0.5 s" in done.stderr
    assert "TF_GPU_REQUIRE_HOOK=false" in done.stderr and "ran" not in done.stdout
    assert elapsed < 15, elapsed  # tfgpu's own start, the 0.5 s bound: not the .pth's 20 s


def test_a_fifo_as_the_command_does_not_hang_the_door(tmp_path: Path) -> None:
    fifo = tmp_path / "train"
    os.mkfifo(fifo)
    fifo.chmod(0o755)
    done = subprocess.run(
        [*TFGPU, "run", "--", str(fifo)],
        env={**clean_env(), "PYTHONPATH": str(SRC)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode in (126, 127), done.stderr  # exec's own refusal, as a shell's
    assert "tfgpu: error: cannot run" in done.stderr and "Traceback" not in done.stderr
