"""A minimal init for when `tfgpu run` is PID 1 (a container started without --init).

The kernel ignores signals without a handler for PID 1, so a plain exec would leave the
user's program deaf to `docker stop`'s SIGTERM (killed after the grace period instead)
and nobody would reap orphaned zombies. So as PID 1 tfgpu forks, the child execs the
command, and the parent forwards signals, reaps every child, and exits with the command's
status (128+N when a signal N killed it), like tini.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import errno
import os
import sys

from tfgpu.command_path import exec_command
from tfgpu.errors import printable

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    import signal
    from types import FrameType
    from typing import List, Mapping, NoReturn, Optional
else:
    # `signal` is `_signal` (the C module) plus enums for the numbers it returns, which this
    # module never reads; its `import enum` (with functools and collections) is ~1.5 ms of the
    # start-up of every container without --init (-X importtime). No contextlib either (~3 ms).
    try:
        import _signal as signal
    except ImportError:  # an interpreter without it
        import signal

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
    """The exit code of a wait() status; killed by signal N → 128+N, as shells report it.
    (os.waitstatus_to_exitcode exists only from Python 3.9; the 2.12/2.13 images run 3.8.)"""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    raise ValueError(f"not the status of a process that ended: {status!r}")


# What tcsetpgrp/setpgid say when stdin is a terminal that is not this session's controlling
# one (`docker run -t` without -i, a pty handed down by a parent): nothing to take over, so go
# on without a foreground group, as tini does.
_NOT_OUR_TERMINAL = (errno.ENOTTY, errno.ENXIO, errno.EPERM)


def _say(line: str) -> None:
    """Straight to fd 2: in the forked child sys.stderr may hold the parent's unflushed
    buffer, and os._exit does not flush it."""
    try:  # noqa: SIM105 (contextlib: an import the start-up does not pay, module comment)
        os.write(2, f"tfgpu: {line}\n".encode(errors="replace"))
    except Exception:
        pass


def _own_terminal() -> None:
    """Become the terminal's foreground process group (if stdin is our controlling terminal),
    so Ctrl-C reaches only the command."""
    if not os.isatty(0):
        return
    signal.signal(signal.SIGTTOU, signal.SIG_IGN)
    try:
        os.setpgid(0, 0)
        os.tcsetpgrp(0, os.getpgrp())
    except OSError as e:
        if e.errno not in _NOT_OUR_TERMINAL:
            raise
    finally:
        signal.signal(signal.SIGTTOU, signal.SIG_DFL)


def exec_child(command: "List[str]", env: "Mapping[str, str]") -> "NoReturn":
    """In the forked child: own the terminal (if any), then exec. Never returns: whatever
    fails ends this process with 126 (127: not found) and a message, so the child can never
    go on running the parent's code."""
    code = 126
    try:
        _own_terminal()
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(
            signal.SIG_UNBLOCK, FORWARDED
        )  # a pending signal now acts as default
        exec_command(command, env)  # os.execvpe, without importing warnings (tfgpu.command_path)
    except OSError as e:
        code = 127 if isinstance(e, FileNotFoundError) else 126
        _say(f"cannot run {printable(command[0])}: {e.strerror or e}")
    except BaseException as e:
        _say(f"cannot run {printable(command[0])}: {type(e).__name__}: {printable(str(e))}")
    finally:
        os._exit(code)


def run_as_init(command: "List[str]", env: "Mapping[str, str]") -> int:
    child: List[int] = []

    def forward(signum: int, frame: "Optional[FrameType]") -> None:
        try:  # noqa: SIM105 (contextlib: an import the start-up does not pay, module comment)
            os.kill(child[0], signum)
        except ProcessLookupError:  # already gone: nothing to forward to
            pass

    # Signals stay blocked (pending, not lost) from before fork() until each side is ready:
    # the parent once it knows the child's PID, the child once its handlers are default.
    signal.pthread_sigmask(signal.SIG_BLOCK, FORWARDED)
    for sig in FORWARDED:
        signal.signal(sig, forward)
    pid = os.fork()
    if pid == 0:
        try:
            exec_child(command, env)
        finally:
            os._exit(126)  # exec_child never returns; this is the belt to its braces
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


def exit_as_init(code: int) -> int:
    """Leave with `code` once the command has ended and its children are reaped: the standard
    streams flushed, then os._exit, without the interpreter's finalisation (module teardown,
    garbage collection), which nothing of this process needs: it started no thread and
    registered no atexit handler. -3 ms of every container started without --init (bench_runtime
    2c, 2026-12-03). Returns `code` only where a stream cannot be flushed, so that the
    interpreter's own exit reports that as it always did (exit 120)."""
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except Exception:  # None, closed, EPIPE: the interpreter's own exit says so
        return code
    os._exit(code)


def _reap_remaining() -> None:
    while True:
        try:
            reaped, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if reaped == 0:
            return
