"""The program's side of the exit grace: it tells `tfgpu run` when it has finished, and with which
status, so that a process that TensorFlow keeps alive after that is ended
(tfgpu.commands.exit_watch).

`tfgpu run` passes the write end of a pipe as TFGPU_EXIT_PIPE=FD:PID; only the process of that
PID (the command itself, not a process it starts) writes to it, one line per event:

    main STATUS HOW   the main thread has finished (threading's exit callbacks, before Python
                      joins the other threads; Python 3.8: the first exit handler): STATUS is
                      what the program gave sys.exit(), 1 after an uncaught exception, 130
                      after KeyboardInterrupt, else 0; HOW says which
    handlers          the exit handlers (atexit: async checkpoints, summary writers) have run
    peer-lost         the kit's lost-peer line was printed: the program cannot go on

A bare `raise SystemExit(N)` is not seen (no hook sees it): it reads as "returned", 0.
"""

import os
import sys

TYPE_CHECKING = False  # not `from typing import …`: the hook imports this at `import tensorflow`
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Dict, Mapping, NoReturn, Optional, Type, Union

PIPE_VAR = "TFGPU_EXIT_PIPE"
# the pipe's fd (-1: none), the PID that may write to it, and how the program ends
_state: "Dict[str, Union[int, str]]" = {"fd": -1, "pid": -1, "status": 0, "how": "returned"}


def channel(environ: "Mapping[str, str]") -> int:
    """The pipe's fd when this process is the one `tfgpu run` started, else -1."""
    fd, _, pid = environ.get(PIPE_VAR, "").partition(":")
    if not (fd.isdigit() and pid.isdigit()) or int(pid) != os.getpid():
        return -1
    return int(fd)


def _send(line: str) -> None:
    fd = int(_state["fd"])
    # a process forked from the program (os.fork, multiprocessing's fork) holds the fd and these
    # hooks too: its end is not the program's
    if fd < 0 or _state["pid"] != os.getpid():
        return
    try:
        os.write(fd, f"{line}\n".encode("ascii", "replace"))
    except OSError:  # tfgpu run has gone: nobody to tell
        _state["fd"] = -1


def watch_handlers(environ: "Mapping[str, str]") -> None:
    """At interpreter start (the hook): an exit handler registered before any other, so that it
    runs after all of them (atexit runs the last registered first)."""
    fd = channel(environ)
    if fd < 0:
        return
    _state["fd"], _state["pid"] = fd, os.getpid()
    os.set_inheritable(fd, False)  # the programs it execs never hold the pipe
    import atexit  # a built-in module: no file read

    atexit.register(_send, "handlers")


def install(environ: "Mapping[str, str]") -> None:
    """At `import tensorflow`: note how the program ends, and say when its main thread is done."""
    if channel(environ) < 0:
        return
    _state["fd"], _state["pid"] = channel(environ), os.getpid()
    real_exit = sys.exit

    def exit_noting(code: "Union[str, int, None]" = None) -> "NoReturn":
        _note_exit(code)
        real_exit(code)

    sys.exit = exit_noting
    previous = sys.excepthook

    def hook(
        kind: "Type[BaseException]", error: BaseException, tb: "Optional[TracebackType]"
    ) -> None:
        interrupted = issubclass(kind, KeyboardInterrupt)
        _state["status"], _state["how"] = (130, "interrupted") if interrupted else (1, "raised")
        previous(kind, error, tb)

    sys.excepthook = hook
    import threading  # TensorFlow has imported it already

    register = getattr(threading, "_register_atexit", None)  # Python 3.9+
    if register is not None:
        register(_main_finished)
    else:
        import atexit

        atexit.register(_main_finished)


def _note_exit(code: object) -> None:
    """What Python's exit status will be for sys.exit(code) (pythonrun.c, _Py_HandleSystemExit):
    None is 0, an integer its low 8 bits (as the kernel keeps them), anything else 1."""
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code & 0xFF
    else:
        status = 1
    _state["status"], _state["how"] = status, "sys.exit"


def _main_finished() -> None:
    for stream in (sys.stdout, sys.stderr):  # the program's last lines reach the log first
        try:
            if stream is not None:
                stream.flush()
        except Exception:
            pass
    _send(f"main {_state['status']} {_state['how']}")


def peer_lost() -> None:
    """The kit's lost-peer line is out (tfgpu.act.peer_lost): the program cannot go on."""
    _send("peer-lost")
