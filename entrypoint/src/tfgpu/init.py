"""A minimal init for when `tfgpu run` is PID 1 (a container started without --init).

The kernel ignores signals without a handler for PID 1, so a plain exec would leave the
user's program deaf to `docker stop`'s SIGTERM (killed after the grace period instead)
and nobody would reap orphaned zombies. So as PID 1 tfgpu forks, the child execs the
command, and the parent forwards signals, reaps every child, and exits with the command's
status (128+N when a signal N killed it), like tini.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from types import FrameType
    from typing import List, Mapping, Optional

FORWARDED = (
    signal.SIGTERM,
    signal.SIGINT,
    signal.SIGHUP,
    signal.SIGQUIT,
    signal.SIGUSR1,
    signal.SIGUSR2,
    signal.SIGWINCH,
)


def exit_code(status: int) -> int:
    code = os.waitstatus_to_exitcode(status)
    return 128 - code if code < 0 else code  # killed by signal N → 128+N, as shells report it


def exec_child(command: List[str], env: Mapping[str, str]) -> None:
    """In the forked child: own the terminal (if any) so Ctrl-C reaches only the command,
    then exec."""
    try:
        if os.isatty(0):
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)
            os.setpgid(0, 0)
            os.tcsetpgrp(0, os.getpgrp())
            signal.signal(signal.SIGTTOU, signal.SIG_DFL)
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(
            signal.SIG_UNBLOCK, FORWARDED
        )  # a pending signal now acts as default
        os.execvpe(command[0], command, env)
    except OSError as e:
        sys.stderr.write(f"tfgpu: cannot run {command[0]}: {e.strerror}\n")
        os._exit(127 if isinstance(e, FileNotFoundError) else 126)


def run_as_init(command: List[str], env: Mapping[str, str]) -> int:
    child: List[int] = []

    def forward(signum: int, frame: Optional[FrameType]) -> None:
        with contextlib.suppress(ProcessLookupError):  # already gone: nothing to forward to
            os.kill(child[0], signum)

    # Signals stay blocked (pending, not lost) from before fork() until each side is ready:
    # the parent once it knows the child's PID, the child once its handlers are default.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    for sig in FORWARDED:
        signal.signal(sig, forward)
    pid = os.fork()
    if pid == 0:
        exec_child(command, env)
    child.append(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, FORWARDED)
    while True:
        try:
            reaped, status = os.wait()  # any child: orphans re-parented to PID 1 too
        except ChildProcessError:
            return 1
        if reaped == pid:
            code = exit_code(status)
            _reap_remaining()
            return code


def _reap_remaining() -> None:
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return
