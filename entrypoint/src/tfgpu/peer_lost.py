"""One line when a multi-worker group loses a peer (installed by tfgpu.apply when TF_CONFIG is set).

When one worker of a MultiWorkerMirroredStrategy group dies, TensorFlow's coordination service
stops hearing its heartbeats and aborts the collectives on every survivor: the training step
raises UnavailableError ("Collective ops is aborted by: … The following tasks are unhealthy
(stopped sending heartbeats): /job:worker/replica:0/task:1"), deep inside a long traceback. This
adds, after that traceback, one line naming the lost peer and saying what brings the group back;
the exit status stays Python's (1), which the Job's or JobSet's failure policy acts on.
"""

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Optional, Type

# tensorflow.errors classes a lost peer shows up as (by name: no TensorFlow import here)
_KINDS = ("UnavailableError", "AbortedError", "DeadlineExceededError", "CancelledError")
_MARKERS = (
    "stopped sending heartbeats",
    "unhealthy",
    "Collective ops is aborted",
    "Socket closed",
    "Connection reset by peer",
    "failed to connect to all addresses",
)
_HEARTBEATS = "(stopped sending heartbeats):"


def is_peer_lost(kind: "Type[BaseException]", error: BaseException) -> bool:
    names = {c.__name__ for c in kind.__mro__}
    return bool(names.intersection(_KINDS)) and any(m in str(error) for m in _MARKERS)


def message(error: BaseException) -> str:
    text = str(error)
    lost = "a peer"
    if _HEARTBEATS in text:
        tasks = text.split(_HEARTBEATS, 1)[1].strip().splitlines()
        if tasks and tasks[0].startswith("/job:"):
            lost = f"the peer {tasks[0].strip()}"
    return (
        f"tfgpu: error: this multi-worker group lost {lost} (TensorFlow: "
        f"{type(error).__name__}); a collective cannot go on without it, so every worker stops; "
        "the whole group must start again together (the Indexed Job replaces its pods, a JobSet "
        "restarts them), and tf.keras.callbacks.BackupAndRestore resumes from its last "
        "checkpoint\n"
    )


def install() -> None:
    previous = sys.excepthook

    def hook(
        kind: "Type[BaseException]", error: BaseException, tb: "Optional[TracebackType]"
    ) -> None:
        previous(kind, error, tb)
        if is_peer_lost(kind, error):
            sys.stderr.write(message(error))
            sys.stderr.flush()

    sys.excepthook = hook
