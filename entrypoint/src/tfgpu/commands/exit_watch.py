"""`tfgpu run`'s side of the exit grace (TF_GPU_EXIT_GRACE, default 10 s): once the program has
finished (tfgpu.act.exit_guard tells, through a pipe), its process gets the grace to exit; after
that `tfgpu run` ends it and exits with the program's own status, saying so on one line.

Why: TensorFlow can keep a finished program's process alive. With ParameterServerStrategy, a
chief that lost a worker waits forever at exit (ClusterCoordinator.__del__ waits for a lock that
the worker-recovery thread holds, and Python has frozen that thread); one that lost a parameter
server spends about 20 s in gRPC retries. Either keeps the pod, and its GPUs, for nothing.
After the kit's lost-peer line the program cannot go on, so the grace is PEER_LOST_GRACE_S.

The pipe's read end raises SIGIO (O_ASYNC), which pid1's loop takes with sigtimedwait beside the
signals it forwards; the grace's deadline is that wait's timeout.
"""

import os
import time

from tfgpu.act.exit_guard import PIPE_VAR

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict, List, Mapping, Optional

PEER_LOST_GRACE_S = 2.0
# what Python was doing when the grace ran out, by the last event heard
_PHASES = {
    "main": "joining threads or running exit handlers (an async checkpoint or a summary writer "
    "may be unfinished: give it a longer TF_GPU_EXIT_GRACE)",
    "handlers": "tearing down its modules, after every exit handler had run (threads or "
    "connections TensorFlow still held)",
}


class ExitWatch:
    """The read end of the program's pipe, and what it has said."""

    def __init__(self, grace_s: float) -> None:
        import fcntl  # only with a grace: a C module

        self.grace_s = grace_s
        self.read_fd, self.write_fd = os.pipe()  # neither inheritable, until the child says so
        os.set_blocking(self.read_fd, False)
        fcntl.fcntl(self.read_fd, fcntl.F_SETOWN, os.getpid())
        flags = fcntl.fcntl(self.read_fd, fcntl.F_GETFL)
        fcntl.fcntl(self.read_fd, fcntl.F_SETFL, flags | os.O_ASYNC)
        self.status: Optional[int] = None  # the program's, once it has finished
        self.how = ""
        self.finished_at: Optional[float] = None
        self.deadline: Optional[float] = None
        self.phase = ""
        self.peer_lost = False
        self._pending = b""

    def child_env(self, env: "Mapping[str, str]") -> "Dict[str, str]":
        """In the forked child: the command's environment, with the pipe handed down to it."""
        os.set_inheritable(self.write_fd, True)
        os.close(self.read_fd)
        return {**env, PIPE_VAR: f"{self.write_fd}:{os.getpid()}"}

    def forked(self) -> None:
        """In the parent, after fork: only the child writes."""
        os.close(self.write_fd)

    def timeout(self) -> "Optional[float]":
        """Seconds left of the grace; None while the program runs."""
        if self.deadline is None:
            return None
        return max(0.0, self.deadline - time.monotonic())

    def read(self) -> None:
        """Take what the program has written (SIGIO said there is some)."""
        while True:
            try:
                chunk = os.read(self.read_fd, 4096)
            except BlockingIOError:
                break
            except OSError:
                break
            if not chunk:
                break
            self._pending += chunk
        *lines, self._pending = self._pending.split(b"\n")
        for line in lines:
            self._event(line.decode("ascii", "replace").split())

    def _event(self, words: "List[str]") -> None:
        now = time.monotonic()
        if not words:
            return
        if words[0] == "main" and len(words) == 3 and words[1].isdigit():
            self.status, self.how, self.phase = int(words[1]), words[2], "main"
            self.finished_at = now
            self._until(now + (PEER_LOST_GRACE_S if self.peer_lost else self.grace_s))
        elif words[0] == "handlers":
            self.phase = "handlers"
        elif words[0] == "peer-lost":
            self.peer_lost = True
            self._until(now + PEER_LOST_GRACE_S)

    def _until(self, deadline: float) -> None:
        self.deadline = deadline if self.deadline is None else min(self.deadline, deadline)

    def cut(self) -> str:
        """The one line said when the grace has run out and the process is ended."""
        since = time.monotonic() - (self.finished_at or time.monotonic())
        status = 1 if self.status is None else self.status
        how = {
            "sys.exit": "as the program gave sys.exit()",
            "raised": "the program raised an exception",
            "interrupted": "the program was interrupted",
            "returned": "the program returned",
        }.get(self.how, "the program's own")
        why = "after the kit's lost-peer line" if self.peer_lost else "its exit"
        phase = _PHASES.get(self.phase, "ending")
        return (
            f"the program finished {since:.1f}s ago but its process had not exited: Python was "
            f"{phase}; ended it (the grace for {why}: "
            f"{PEER_LOST_GRACE_S if self.peer_lost else self.grace_s:g}s, TF_GPU_EXIT_GRACE); "
            f"exit status {status} ({how})"
        )
