"""A minimal init for when `tfgpu run` is PID 1 (a container started without --init).

The kernel ignores signals without a handler for PID 1, so a plain exec would leave the
user's program deaf to `docker stop`'s SIGTERM (killed after the grace period instead)
and nobody would reap orphaned zombies. So as PID 1 tfgpu forks, the child execs the
command, and the parent forwards signals, reaps every child, and exits with the command's
status (128+N when a signal N killed it), like tini.

Like tini, the parent takes signals synchronously (blocked, then sigwaitinfo), not with Python
handlers: a handler runs only between bytecodes, so a SIGTERM that came after the last check and
before os.wait() blocked was never forwarded, and `docker stop` killed the container after its
grace period (tests/runtime/test_run.py saw it once in a loaded CI run).
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import errno
import os
import sys

from tfgpu.contract.errors import printable
from tfgpu.machine.command_path import exec_command

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    import signal
    from typing import List, Mapping, NoReturn, Optional, Tuple

    from tfgpu.commands.exit_watch import ExitWatch
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
# What the parent waits for: a signal to forward, or a child that ended.
WATCHED = (*FORWARDED, signal.SIGCHLD)


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


def exec_child(
    command: "List[str]", env: "Mapping[str, str]", watch: "Optional[ExitWatch]" = None
) -> "NoReturn":
    """In the forked child: own the terminal (if any), then exec. Never returns: whatever
    fails ends this process with 126 (127: not found) and a message, so the child can never
    go on running the parent's code."""
    code = 126
    try:
        _own_terminal()
        for sig in FORWARDED:
            signal.signal(sig, signal.SIG_DFL)
        # the parent's mask is inherited (and kept across exec): unblock, so that a pending
        # signal now acts as default and the command gets SIGCHLD for its own children
        signal.pthread_sigmask(signal.SIG_UNBLOCK, (*WATCHED, signal.SIGIO))
        if watch is not None:
            env = watch.child_env(env)
        exec_command(
            command, env
        )  # os.execvpe, without importing warnings (tfgpu.machine.command_path)
    except OSError as e:
        code = 127 if isinstance(e, FileNotFoundError) else 126
        _say(f"cannot run {printable(command[0])}: {e.strerror or e}")
    except BaseException as e:
        _say(f"cannot run {printable(command[0])}: {type(e).__name__}: {printable(str(e))}")
    finally:
        os._exit(code)


def run_as_init(
    command: "List[str]", env: "Mapping[str, str]", watch: "Optional[ExitWatch]" = None
) -> int:
    """Fork, exec the command in the child; in the parent forward WATCHED's signals to it and
    reap every child until the command has ended; its exit code. With `watch`, a program that
    has finished but whose process outlives the grace is ended, and the program's own status
    is returned (tfgpu.commands.exit_watch). The signals stay blocked in this process afterwards:
    PID 1 exits next (exit_as_init)."""
    watched = WATCHED if watch is None else (*WATCHED, signal.SIGIO)
    # Blocked from before fork(): a signal that comes at any point after stays pending (also
    # SIGCHLD, though its default is to ignore it) until sigwaitinfo takes it.
    signal.pthread_sigmask(signal.SIG_BLOCK, watched)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)  # an inherited SIG_IGN would reap for us
    pid = os.fork()
    if pid == 0:
        try:
            exec_child(command, env, watch)
        finally:
            os._exit(126)  # exec_child never returns; this is the belt to its braces
    if watch is not None:
        watch.forked()
    while True:
        code = _reap(pid)
        if code is not None:
            return code
        signum, cut = _next_signal(watched, watch)
        if cut and watch is not None:
            return _end(pid, watch)
        if signum == signal.SIGIO and watch is not None:
            watch.read()
        elif signum not in (signal.SIGCHLD, signal.SIGIO, 0):
            try:  # noqa: SIM105 (contextlib: an import the start-up does not pay, module comment)
                os.kill(pid, signum)
            except ProcessLookupError:  # already gone: nothing to forward to
                pass


def _next_signal(watched: "Tuple[int, ...]", watch: "Optional[ExitWatch]") -> "Tuple[int, bool]":
    """(the next signal, 0 for none), and whether the exit grace has run out meanwhile."""
    timeout = watch.timeout() if watch is not None else None
    if timeout is None:
        return signal.sigwaitinfo(watched).si_signo, False
    info = signal.sigtimedwait(watched, timeout)
    return (0, True) if info is None else (info.si_signo, False)


def _end(pid: int, watch: "ExitWatch") -> int:
    """The grace has run out: say so, end the process, reap it; the program's own status."""
    _say(watch.cut())
    try:  # noqa: SIM105 (contextlib: an import the start-up does not pay, module comment)
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    while _reap(pid) is None:
        signal.sigtimedwait((signal.SIGCHLD,), 1.0)
    return 1 if watch.status is None else watch.status


def _reap(command: int) -> "Optional[int]":
    """Reap every child that has ended (orphans re-parented to PID 1 too): the command's exit
    code once it is among them, else None. (SIGCHLDs that come together are one signal: hence
    a loop, not one wait per signal.)"""
    code = None
    while True:
        try:
            reaped, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:  # no child left at all
            return 1 if code is None else code
        if reaped == 0:
            return code
        if reaped == command:
            code = exit_code(status)


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
