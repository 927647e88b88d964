"""`tfgpu run`: exec semantics, exit codes, signals, PID-1 init. No TensorFlow, no GPU."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.runtime.conftest import SRC, clean_env

TFGPU = [sys.executable, "-m", "tfgpu"]
TERM_CATCHER = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, lambda *a: (print('got TERM', flush=True), sys.exit(42)))\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


def env(**extra: str) -> dict[str, str]:
    e = clean_env(**extra)
    e["PYTHONPATH"] = str(SRC)
    return e


def run(*args: str, timeout: float = 30, **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TFGPU, *args], env=env(**extra), capture_output=True, text=True, timeout=timeout
    )


def python_c(code: str) -> subprocess.CompletedProcess[str]:
    """This interpreter running `code`, with tfgpu importable (env())."""
    return subprocess.run(
        [sys.executable, "-c", code], env=env(), capture_output=True, text=True, timeout=30
    )


def test_exec_keeps_the_pid_and_the_exit_code() -> None:
    p = subprocess.Popen(
        [*TFGPU, "run", "--", "sh", "-c", "echo $$; exit 7"],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = p.communicate(timeout=30)
    assert p.returncode == 7
    assert int(out.strip()) == p.pid  # exec, not a child process


def test_command_gets_translated_environment() -> None:
    r = run("run", "--", "sh", "-c", "echo $TF_FORCE_GPU_ALLOW_GROWTH", TF_GPU_MEMORY_GROWTH="yes")
    assert r.returncode == 0 and r.stdout.strip() == "true"


def test_show_under_run_reports_what_run_derived() -> None:
    # the image default TF_GPU_MEMORY_GROWTH=true becomes TF_FORCE_GPU_ALLOW_GROWTH=true in the
    # command's environment; `tfgpu show` there must not call it the user's own setting
    r = run(
        "run", "--", sys.executable, "-m", "tfgpu", "show", "--json",
        TFGPU_IMAGE_DEFAULTS="TF_GPU_MEMORY_GROWTH=true", TF_GPU_MEMORY_GROWTH="true",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    settings = json.loads(r.stdout)["settings"]
    assert settings["TF_FORCE_GPU_ALLOW_GROWTH"]["source"] == "derived"
    assert settings["TF_GPU_MEMORY_GROWTH"]["source"] == "image default"


def test_sigterm_reaches_the_command() -> None:
    p = subprocess.Popen(
        [*TFGPU, "run", "--", sys.executable, "-c", TERM_CATCHER],
        env=env(),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=30)
    assert out.strip() == "got TERM" and p.returncode == 42


@pytest.mark.parametrize(
    ("extra", "code", "message"),
    [
        ({"TF_GPU_MEM_LIMIT": "4MB"}, 78, "TF_GPU_MEM_LIMIT='4MB' is not valid"),
        ({"TF_GPU_MEMORY_GROWTH": "true", "TF_FORCE_GPU_ALLOW_GROWTH": "false"}, 78, "contradicts"),
        ({"CUDA_VISIBLE_DEVICES": "all"}, 78, "NVIDIA_VISIBLE_DEVICES"),
        (
            {"TF_GPU_REQUIRED": "true"},
            69,
            "TF_GPU_REQUIRED=true, but no usable GPU",
        ),  # no driver on this host
        ({"TF_GPU_REQUIRED": "true", "CUDA_VISIBLE_DEVICES": "-1"}, 69, "hides every GPU"),
        (
            {"TF_GPU_METRICS_PORT": "65536"},
            78,
            "TF_GPU_METRICS_PORT='65536' is not valid: accepted: a TCP port from 1 to 65535 "
            "(ASCII digits), or 0 for no metrics; example: TF_GPU_METRICS_PORT=9401",
        ),
        ({"TF_GPU_METRICS_PORT": "http"}, 78, "TF_GPU_METRICS_PORT='http' is not valid"),
    ],
)
def test_bad_input_runs_nothing(
    tmp_path: Path, extra: dict[str, str], code: int, message: str
) -> None:
    marker = tmp_path / "ran"
    r = run("run", "--", "touch", str(marker), **extra)
    assert r.returncode == code
    assert message in r.stderr and "nothing was started" in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()


def test_metrics_port_zero_is_off_and_runs() -> None:
    r = run("run", "--", "sh", "-c", "echo ran", TF_GPU_METRICS_PORT="0")
    assert r.returncode == 0 and r.stdout.strip() == "ran", r.stderr
    assert "METRICS" not in r.stderr


# --- HOME: Jupyter, IPython, Keras write under it --------------------------------------------


def test_a_writable_home_is_left_alone(tmp_path: Path) -> None:
    r = run("run", "--", "sh", "-c", 'echo "$HOME"', HOME=str(tmp_path))
    assert r.returncode == 0 and r.stdout.strip() == str(tmp_path)
    assert "HOME" not in r.stderr


def test_a_home_that_is_not_writable_moves_under_tmpdir(tmp_path: Path) -> None:
    """A read-only root file system (docker run --read-only), or HOME=/ for an arbitrary uid:
    the command gets a private HOME under TMPDIR, and says so once."""
    if os.geteuid() == 0:
        # root may write into any folder of a writable file system; procfs refuses it
        home = "/proc/self"
    else:
        home = str(tmp_path / "ro")
        os.mkdir(home, 0o500)
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    script = 'echo "$HOME"; touch "$HOME/written" && echo wrote'
    r = run("run", "--", "sh", "-c", script, HOME=home, TMPDIR=str(tmp))
    assert r.returncode == 0, r.stderr
    (expected,) = tmp.iterdir()
    assert re.fullmatch(rf"tfgpu-home-{os.getuid()}-[0-9a-f]{{16}}", expected.name)
    assert r.stdout.split() == [str(expected), "wrote"]
    assert f"HOME={home!r} is not writable; the command gets HOME={expected}" in r.stderr
    assert expected.stat().st_mode & 0o777 == 0o700
    # each start gets a new, unpredictable one: a fixed name another uid could create first
    again = run("run", "--", "sh", "-c", 'echo "$HOME"', HOME=home, TMPDIR=str(tmp))
    assert again.stdout.strip() not in ("", str(expected))
    assert Path(again.stdout.strip()).parent == tmp


@pytest.fixture
def shm_homes() -> Iterator[Path]:
    """/dev/shm, where the fallback HOMEs go; the ones a test made are removed after it."""
    shm = Path("/dev/shm")
    before = set(shm.glob(f"tfgpu-home-{os.getuid()}-*"))
    yield shm
    for path in set(shm.glob(f"tfgpu-home-{os.getuid()}-*")) - before:
        shutil.rmtree(path, ignore_errors=True)


def test_where_tmpdir_is_not_writable_home_goes_to_dev_shm(shm_homes: Path) -> None:
    """Docker's `--tmpfs /tmp` is root's (mode 755): another uid cannot write there, but
    /dev/shm is writable for every uid."""
    r = run("run", "--", "sh", "-c", 'echo "$HOME"', HOME="/proc/self", TMPDIR="/proc/self")
    assert r.returncode == 0, r.stderr
    home = Path(r.stdout.strip())
    assert home.parent == shm_homes and home.name.startswith(f"tfgpu-home-{os.getuid()}-")
    assert f"the command gets HOME={home}" in r.stderr


def test_a_planted_home_cannot_take_the_fallback_away(tmp_path: Path, shm_homes: Path) -> None:
    """With a fixed name, another uid (or a link) planted at tfgpu-home-UID first would leave
    this uid without a HOME under that folder. The name is unpredictable: what is planted at
    the fixed name, or a link into someone else's folder, is never used."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    planted = tmp / f"tfgpu-home-{os.getuid()}"
    planted.symlink_to(elsewhere)
    r = run("run", "--", "sh", "-c", 'echo "$HOME"', HOME="/proc/self", TMPDIR=str(tmp))
    assert r.returncode == 0, r.stderr
    home = Path(r.stdout.strip())
    assert home.parent == tmp and home != planted and not home.is_symlink()
    assert list(elsewhere.iterdir()) == []


def test_off_does_nothing_at_all() -> None:
    r = run("run", "--", "sh", "-c", "echo ran", TF_GPU_CONFIG="off", TF_GPU_MEM_LIMIT="garbage")
    assert r.returncode == 0 and r.stdout.strip() == "ran" and r.stderr == ""


def test_summary_on_stderr_and_quiet() -> None:
    r = run("run", "--", "true", TF_CPU_VIRTUAL_DEVICES="2")
    assert "tfgpu: 2 logical CPUs" in r.stderr
    # Quiet: only what is wrong. Here the one no-GPU warning line stays (there is no driver).
    q = run("run", "--", "true", TF_CPU_VIRTUAL_DEVICES="2", TF_GPU_QUIET="true")
    assert q.returncode == 0
    assert all(line.startswith("tfgpu: ") for line in q.stderr.splitlines())
    assert q.stderr.count("warning:") == 1


def test_no_command_starts_a_shell() -> None:
    r = subprocess.run(
        [*TFGPU, "run", "--"],
        input="echo from-the-shell\n",
        env=env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0 and r.stdout.strip() == "from-the-shell"
    assert "starting an interactive shell (bash)" in r.stderr or "(sh)" in r.stderr


def test_unknown_command_is_127_without_traceback() -> None:
    r = run("run", "--", "no-such-command-tfgpu")
    assert r.returncode == 127 and "command not found: no-such-command-tfgpu" in r.stderr


def test_command_that_exists_but_cannot_run_is_126(tmp_path: Path) -> None:
    """As in a shell: a file without the execute bit is 'Permission denied' (126), not
    'command not found' (127), both by path and on PATH."""
    script = tmp_path / "train.sh"
    script.write_text("#!/bin/sh\necho ran\n")
    script.chmod(0o644)
    r = run("run", "--", str(script))
    assert r.returncode == 126 and "Permission denied" in r.stderr, r.stderr
    assert "command not found" not in r.stderr
    r = run("run", "--", "train.sh", PATH=f"{tmp_path}{os.pathsep}{os.defpath}")
    assert r.returncode == 126 and "Permission denied" in r.stderr, r.stderr


@pytest.mark.parametrize("sub", [[], ["run"], ["show"], ["check"]])
def test_help_on_every_subcommand(sub: list[str]) -> None:
    r = run(*sub, "--help")
    assert r.returncode == 0 and r.stdout.startswith("usage: tfgpu")


def test_show_json_sources() -> None:
    import json

    r = run(
        "show",
        "--json",
        TF_GPU_MEMORY_GROWTH="true",
        TFGPU_IMAGE_DEFAULTS="TF_GPU_MEMORY_GROWTH=true",
    )
    doc = json.loads(r.stdout)
    assert doc["settings"]["TF_GPU_MEMORY_GROWTH"] == {"value": "true", "source": "image default"}
    assert doc["settings"]["TF_FORCE_GPU_ALLOW_GROWTH"]["source"] == "derived"
    assert doc["settings"]["TF_GPU_QUIET"]["source"] == "kit default"
    bad = run("show", TF_GPU_VIRTUAL_DEVICES="1;;2")
    assert bad.returncode == 78 and bad.stderr.startswith("tfgpu: error: TF_GPU_VIRTUAL_DEVICES=")


# --- PID 1: a new PID namespace on the host (we are root) --------------------------------------

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _pid1_available() -> None:
    assert shutil.which("unshare"), "unshare (util-linux) is needed for the PID-1 tests"


def _child_of(pid: int, timeout: float = 10) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            kids = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
        except OSError:
            kids = []
        if kids:
            return int(kids[0])
        time.sleep(0.05)
    raise AssertionError(f"process {pid} got no child")


def test_pid1_forks_and_exits_with_the_childs_code() -> None:
    _pid1_available()
    r = subprocess.run(
        [*UNSHARE, *TFGPU, "run", "--", "sh", "-c", "echo $$; exit 5"],
        env=env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 5, r.stderr
    assert int(r.stdout.strip()) != 1  # tfgpu stayed PID 1, the command is its child


def test_pid1_still_says_everything_before_it_leaves() -> None:
    """As PID 1, tfgpu leaves without the interpreter's finalisation
    (tfgpu.commands.pid1.exit_as_init): its summary still reaches stderr whole, and the command's
    code is the exit code."""
    _pid1_available()
    r = subprocess.run(
        [*UNSHARE, *TFGPU, "run", "--", "sh", "-c", "echo out; echo err >&2; exit 3"],
        env=env(TF_GPU_MEMORY_GROWTH="true"),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 3, r.stderr
    assert r.stdout == "out\n"
    assert r.stderr.startswith("tfgpu: memory growth on (environment)\n")
    assert r.stderr.endswith("err\n")


EXIT_AS_INIT = """
import sys
from tfgpu.commands.pid1 import exit_as_init
sys.stdout.write("no newline, still buffered")
sys.stderr.write("nor here")
code = exit_as_init(7)
sys.stderr.write(f"returned {code}")  # never: exit_as_init left
"""


def test_exit_as_init_flushes_then_leaves_with_the_code() -> None:
    r = python_c(EXIT_AS_INIT)
    assert (r.returncode, r.stdout, r.stderr) == (7, "no newline, still buffered", "nor here")


def test_exit_as_init_returns_when_a_stream_cannot_be_flushed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Then the interpreter's own exit reports it (exit 120 for stdout), as it did before."""
    from tfgpu.commands import pid1

    class Broken:
        def flush(self) -> None:
            raise BrokenPipeError(32, "Broken pipe")

    monkeypatch.setattr(sys, "stdout", Broken())
    assert pid1.exit_as_init(5) == 5


def test_pid1_forwards_sigterm_and_reports_signal_death() -> None:
    _pid1_available()
    for command, expected, output in (
        ([sys.executable, "-c", TERM_CATCHER], 42, "got TERM"),
        (["sleep", "60"], 128 + signal.SIGTERM, ""),  # killed by the forwarded SIGTERM → 143
    ):
        p = subprocess.Popen(
            [*UNSHARE, *TFGPU, "run", "--", *command], env=env(), stdout=subprocess.PIPE, text=True
        )
        init = _child_of(p.pid)  # tfgpu, PID 1 inside the namespace
        _child_of(init)  # wait until the command has been forked
        if output:
            assert p.stdout is not None and p.stdout.readline().strip() == "ready"
        os.kill(init, signal.SIGTERM)
        out, _ = p.communicate(timeout=30)
        assert p.returncode == expected
        assert out.strip() == output


def test_pid1_with_a_terminal_that_is_not_ours_still_runs_the_command() -> None:
    """stdin is a terminal, but not the controlling terminal of tfgpu's session (`docker run
    -t` without -i, a pty a parent handed down): tcsetpgrp fails with ENOTTY. tini ignores
    that, and so must we, instead of refusing to run the command (126)."""
    import pty

    _pid1_available()
    master, slave = pty.openpty()
    try:
        r = subprocess.run(
            [*UNSHARE, *TFGPU, "run", "--", "sh", "-c", "test -t 0 && echo ran-with-a-tty"],
            env=env(),
            stdin=slave,
            capture_output=True,
            text=True,
            timeout=30,
        )
    finally:
        os.close(slave)
        os.close(master)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ran-with-a-tty" and "cannot run" not in r.stderr


CHILD_FAILS_BEFORE_EXEC = """
import sys
from tfgpu.commands.pid1 import run_as_init
sys.exit(run_as_init(["true"], {"PATH": "/usr/bin:/bin", "BAD": "a\\0b"}))
"""


def test_a_child_failing_before_exec_exits_126_and_never_runs_the_parents_code() -> None:
    """An exception in the forked child that is not an OSError (here exec's ValueError for a
    NUL byte in the environment) must end the child with 126 and a message: it must never
    return into the init loop, where it would run the parent's code as a second 'init'."""
    r = python_c(CHILD_FAILS_BEFORE_EXEC)
    assert r.returncode == 126, r.stderr
    assert r.stderr.strip() == ("tfgpu: cannot run true: ValueError: embedded null byte"), r.stderr
    assert "Traceback" not in r.stderr


SIGNAL_STATE = ["grep", "-E", "^Sig(Ign|Blk)", "/proc/self/status"]


@pytest.mark.parametrize("pid1", [False, True], ids=["exec", "pid1"])
def test_the_command_gets_the_signals_it_would_get_without_tfgpu(pid1: bool) -> None:
    """Python's start ignores SIGPIPE and SIGXFSZ, and an ignored signal stays ignored across
    exec: the command must get them at their default, as from a shell or subprocess. Compared
    with the same command started here without tfgpu (what this host's runner ignores, it
    ignores in both)."""
    _pid1_available()
    prefix = UNSHARE if pid1 else []
    direct = subprocess.run(
        [*prefix, *SIGNAL_STATE], env=env(), capture_output=True, text=True, timeout=30
    )
    through = subprocess.run(
        [*prefix, *TFGPU, "run", "--", *SIGNAL_STATE],
        env=env(),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert direct.returncode == through.returncode == 0, through.stderr
    assert through.stdout == direct.stdout
    ignored = int(re.search(r"SigIgn:\s*([0-9a-f]+)", through.stdout).group(1), 16)  # type: ignore[union-attr]
    assert not ignored & (1 << (signal.SIGPIPE - 1)), through.stdout


def test_a_pipeline_ends_quietly_when_its_reader_leaves() -> None:
    """`yes | head -1`: yes dies of SIGPIPE, as in any shell, instead of writing on to a closed
    pipe and saying "Broken pipe"."""
    r = run("run", "--", "sh", "-c", "yes | head -n 1")
    assert r.returncode == 0, r.stderr
    assert r.stdout == "y\n"
    assert "Broken pipe" not in r.stderr, r.stderr


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"TF_GPU_MEMORY_GROWTH": "true", "TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true"},
        {"TF_GPU_MEM_LIMIT": "4096", "TF_CPU_VIRTUAL_DEVICES": "2"},
        {"TF_MIXED_PRECISION": "mixed_float16", "TF_GPU_METRICS_PORT": "9401"},
    ],
)
def test_run_does_not_import_tensorflow(extra: dict[str, str]) -> None:
    """The entrypoint starts every container: importing TensorFlow would cost seconds. The
    interpreter lists every module it imports (-X importtime) until it execs the command;
    TensorFlow and Keras are installed here, so a stray import would show."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "tfgpu", "run", "--", "true"],
        env=env(**extra),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 0, r.stderr
    imported = [
        line.rsplit("|", 1)[-1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "tfgpu.commands.run" in imported  # the probe sees the entrypoint's own imports
    heavy = [m for m in imported if m.split(".")[0] in ("tensorflow", "keras")]
    assert heavy == []
