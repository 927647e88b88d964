"""One line when a multi-worker group loses a peer (installed by tfgpu.act.apply when TF_CONFIG is
set).

When one worker of a MultiWorkerMirroredStrategy group dies, TensorFlow's coordination service
stops hearing its heartbeats and aborts the collectives on every survivor: the training step
raises UnavailableError ("Collective ops is aborted by: … The following tasks are unhealthy
(stopped sending heartbeats): /job:worker/replica:0/task:1"), deep inside a long traceback. This
adds, after that traceback, one line naming the lost peer and saying what brings the group back;
the exit status stays Python's (1), which the Job's or JobSet's failure policy acts on.

In a parameter-server cluster (TF_CONFIG with a "ps" role) only the chief runs a program: a lost
worker is survived there (the ClusterCoordinator runs its closures on the other workers), and an
error that reaches the chief's top level is a lost parameter server (tested: "failed to connect to
all addresses … remote target /job:ps/replica:0/task:0"), whose line says so instead.
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
_PS_TARGET = "remote target /job:ps/"


def is_peer_lost(kind: "Type[BaseException]", error: BaseException) -> bool:
    names = {c.__name__ for c in kind.__mro__}
    return bool(names.intersection(_KINDS)) and any(m in str(error) for m in _MARKERS)


def message(error: BaseException, parameter_servers: bool = False) -> str:
    text = str(error)
    if parameter_servers:
        return _ps_message(error, text)
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


def _ps_message(error: BaseException, text: str) -> str:
    lost = "a parameter server or worker"
    if _PS_TARGET in text:
        task = text.split(_PS_TARGET, 1)[1].split(maxsplit=1)[0]
        lost = "the parameter server /job:ps/" + task.split("/device:")[0]
    return (
        f"tfgpu: error: this parameter-server cluster lost {lost} (TensorFlow: "
        f"{type(error).__name__}); the variables a parameter server holds are gone with it, so "
        "the chief stops (a lost worker is survived: the coordinator runs its steps on the other "
        "workers); start the cluster again and restore your last tf.train.Checkpoint\n"
    )


def install(parameter_servers: bool = False) -> None:
    previous = sys.excepthook

    def hook(
        kind: "Type[BaseException]", error: BaseException, tb: "Optional[TracebackType]"
    ) -> None:
        previous(kind, error, tb)
        if is_peer_lost(kind, error):
            sys.stderr.write(message(error, parameter_servers))
            sys.stderr.flush()
            # the program cannot go on: `tfgpu run` ends it soon
            from tfgpu.act import exit_guard  # only after a lost peer: ~0.8 ms (-X importtime)

            exit_guard.peer_lost()

    sys.excepthook = hook
