"""The exit grace (TF_GPU_EXIT_GRACE): a program that has finished, but whose process Python and
TensorFlow keep alive, is ended by `tfgpu run` within the grace, with the program's own status and
one line that says so (tfgpu.commands.exit_watch, tfgpu.act.exit_guard).

The stand-in reproduces the mechanism measured with TensorFlow 2.21.0's ParameterServerStrategy
(tests/multiworker/ps_train.py): at interpreter exit, ClusterCoordinator.__del__ waits for a lock
that a daemon thread holds, and Python has frozen daemon threads by then, so the process never
ends. Here the finalizer runs in Python's last garbage collection (an object in a cycle), after
every exit handler, as TensorFlow's did. Real TensorFlow on the same path:
tests/multiworker/test_parameter_servers.py. `tfgpu run` is PID 1 here (a new PID namespace, as
in a container without --init).
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.runtime.test_run import TFGPU, UNSHARE, _pid1_available, env

STAND_IN = """
import gc, os, sys, threading, time
from tfgpu.act import exit_guard
exit_guard.install(os.environ)  # what the hook does right after `import tensorflow`
mode = sys.argv[1]
if mode not in ("clean", "fork"):
    gc.disable()  # the coordinator below is collected by Python's last collection, at exit
    lock = threading.Lock()
    def recover():  # TensorFlow's worker-recovery thread: holds the lock, waits for the worker
        with lock:
            time.sleep(3600)
    threading.Thread(target=recover, daemon=True).start()
    time.sleep(0.1)
    class Coordinator:
        def __init__(self):
            self.lock, self.cycle = lock, self
        def __del__(self):  # ClusterCoordinator.__del__ -> Cluster.stop() waits for the lock
            self.lock.acquire()
    Coordinator()
if mode == "fork":  # a child forked from the program ends first: not the program's end
    if os.fork() == 0:
        sys.exit(0)
    os.wait()
    time.sleep(3)
    sys.exit(5)
if mode == "threads":  # a thread that never ends: Python joins it forever
    threading.Thread(target=time.sleep, args=(3600,)).start()
print("last line", flush=True)
if mode == "exit3":
    sys.exit(3)
if mode in ("raise", "peer"):
    if mode == "peer":
        exit_guard.peer_lost()  # as tfgpu.act.peer_lost does after its line
    raise RuntimeError("boom")
if mode == "clean":
    sys.exit(4)
"""


def start(
    tmp_path: Path, mode: str, **extra: str
) -> tuple[subprocess.CompletedProcess[str], float]:
    """`tfgpu run -- python stand_in.py MODE` as PID 1: the result and its seconds."""
    _pid1_available()
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN, encoding="utf-8")
    t0 = time.monotonic()
    done = subprocess.run(
        [*UNSHARE, *TFGPU, "run", "--", sys.executable, str(script), mode],
        env=env(TF_GPU_QUIET="true", **extra),
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, time.monotonic() - t0


@pytest.mark.parametrize(
    ("mode", "status", "how"),
    [
        ("exit3", 3, "as the program gave sys.exit()"),
        ("raise", 1, "the program raised an exception"),
        ("return", 0, "the program returned"),
    ],
)
def test_a_process_kept_alive_after_its_program_is_ended_with_its_status(
    tmp_path: Path, mode: str, status: int, how: str
) -> None:
    done, took = start(tmp_path, mode, TF_GPU_EXIT_GRACE="2s")
    assert done.returncode == status, done.stderr
    assert "last line" in done.stdout
    line = [x for x in done.stderr.splitlines() if "had not exited" in x]
    assert len(line) == 1, done.stderr
    assert f"exit status {status} ({how})" in line[0]
    assert "tearing down its modules" in line[0] and "TF_GPU_EXIT_GRACE" in line[0]
    assert took < 2 + 8, took  # the grace, and the start of two Pythons on a loaded host


def test_the_grace_is_the_cause(tmp_path: Path) -> None:
    """TF_GPU_EXIT_GRACE=off: the stand-in hangs as TensorFlow's chief did."""
    with pytest.raises(subprocess.TimeoutExpired):
        _pid1_available()
        script = tmp_path / "stand_in.py"
        script.write_text(STAND_IN, encoding="utf-8")
        subprocess.run(
            [*UNSHARE, *TFGPU, "run", "--", sys.executable, str(script), "return"],
            env=env(TF_GPU_QUIET="true", TF_GPU_EXIT_GRACE="off"),
            capture_output=True,
            timeout=6,
        )


def test_a_program_that_ends_by_itself_keeps_its_status_and_gets_no_line(tmp_path: Path) -> None:
    done, _ = start(tmp_path, "clean", TF_GPU_EXIT_GRACE="30s")
    assert done.returncode == 4, done.stderr
    assert "had not exited" not in done.stderr


def test_after_a_lost_peer_the_grace_is_short(tmp_path: Path) -> None:
    """The kit's lost-peer line: the program cannot go on, so 2 s, not the grace."""
    done, took = start(tmp_path, "peer", TF_GPU_EXIT_GRACE="1h")
    assert done.returncode == 1, done.stderr
    assert "after the kit's lost-peer line: 2s" in done.stderr, done.stderr
    assert took < 2 + 8, took


def test_a_thread_that_never_ends_is_cut_too(tmp_path: Path) -> None:
    done, _ = start(tmp_path, "threads", TF_GPU_EXIT_GRACE="2s")
    assert done.returncode == 0, done.stderr
    assert "joining threads or running exit handlers" in done.stderr, done.stderr


def test_a_cluster_task_is_watched_without_pid_1(tmp_path: Path) -> None:
    """Outside a PID namespace `tfgpu run` execs a command, keeping its PID; a task of a
    training cluster is watched all the same."""
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN, encoding="utf-8")
    cluster = {
        "TF_GPU_WORKERS": "1",
        "TF_GPU_WORKER_HOSTS": "localhost",
        "JOB_COMPLETION_INDEX": "0",
    }
    done = subprocess.run(
        [*TFGPU, "run", "--", sys.executable, str(script), "exit3"],
        env=env(TF_GPU_QUIET="true", TF_GPU_EXIT_GRACE="2s", **cluster),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 3 and "had not exited" in done.stderr, done.stderr


@pytest.mark.parametrize("value", ["abc", "0", "2h", "1.5s", "-1", "9" * 5000])
def test_a_bad_grace_is_refused_at_the_door(value: str) -> None:
    done = subprocess.run(
        [*TFGPU, "run", "--", "true"],
        env=env(TF_GPU_EXIT_GRACE=value),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 78, done.stderr
    assert "TF_GPU_EXIT_GRACE=" in done.stderr and "example: TF_GPU_EXIT_GRACE=30s" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_forked_child_that_ends_is_not_the_programs_end(tmp_path: Path) -> None:
    """A process forked from the program inherits the pipe and the hooks; its sys.exit must not
    start the grace on the program, which runs on past it."""
    done, _ = start(tmp_path, "fork", TF_GPU_EXIT_GRACE="1s")
    assert done.returncode == 5 and "had not exited" not in done.stderr, done.stderr
