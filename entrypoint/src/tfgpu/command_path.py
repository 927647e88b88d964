"""Finding the user's command on PATH and exec'ing it, as a shell would, without `shutil` or
`warnings` (start-up time): `tfgpu run` execs the command, `tfgpu.pid1` execs it in its child,
`tfgpu.interpreter` looks for the Python it names.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import List, Mapping, NoReturn, Optional


def candidates(name: str, env: "Mapping[str, str]") -> "List[str]":
    """Where exec looks for `name`: the name itself if it has a '/', else each PATH entry."""
    if "/" in name:
        return [name]
    return [os.path.join(d or ".", name) for d in env.get("PATH", os.defpath).split(os.pathsep)]


def which(name: str, env: "Mapping[str, str]") -> "Optional[str]":
    """shutil.which without importing shutil (start-up time): an executable on env's PATH."""
    for path in candidates(name, env):
        if os.access(path, os.X_OK) and not os.path.isdir(path):
            return path
    return None


def exec_command(command: "List[str]", env: "Mapping[str, str]") -> "NoReturn":
    """os.execvpe(command[0], command, env): returns only by raising. The file it would run (the
    first executable of that name on PATH) is tried first without its search, which imports
    `warnings` (os.get_exec_path): ~0.2 ms of start-up (-X importtime). If that exec fails,
    execvpe itself goes on to the next PATH entry and raises its own error, as before."""
    path = which(command[0], env)
    if path is not None:
        try:  # noqa: SIM105 (contextlib.suppress: one more import at start-up)
            os.execve(path, command, env)
        except OSError:
            pass
    os.execvpe(command[0], command, env)
