"""Finding the user's command on PATH, the Python it starts, and exec'ing it, as a shell would,
without `shutil` or `warnings` (start-up time): `tfgpu run` execs the command, `tfgpu.pid1` execs
it in its child; `python_of` reads which Python a command starts (its name, or its script's
shebang), so that `tfgpu run` imports tfgpu.interpreter, whose probe asks that Python about the
hook, only for a command that starts Python.
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


def _is_python(path: str) -> bool:
    base = os.path.basename(path)
    if not base.startswith("python"):
        return False
    rest = base[len("python") :]
    return all(c.isdigit() or c == "." for c in rest) and not rest.startswith(".")


def _options(args: "List[str]") -> "List[str]":
    """The interpreter's options before its program (`-c`, `-m`, a script or `-`), as python
    parses them: short options combine (`-Su`), `-W`/`-X` take a value, attached or next."""
    out: List[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in ("-", "--") or not arg.startswith("-"):
            break
        if arg.startswith("--"):  # --check-hash-based-pycs MODE, --help…: keep as given
            out.append(arg)
            if arg == "--check-hash-based-pycs" and i + 1 < len(args):
                out.append(args[i + 1])
                i += 1
            i += 1
            continue
        for j, letter in enumerate(arg[1:], start=1):
            if letter in "cm":  # the program starts here: keep the options before it
                if j > 1:
                    out.append(arg[:j])
                return out
            if letter in "WX":  # the rest is the value, else the next argument is
                out.append(arg)
                if j == len(arg) - 1 and i + 1 < len(args):
                    out.append(args[i + 1])
                    i += 1
                break
        else:
            out.append(arg)
        i += 1
    return out


def _shebang(path: str) -> "Optional[List[str]]":
    """`#!/usr/bin/python3 -u` → ['/usr/bin/python3', '-u']; None for a binary or no shebang."""
    try:
        with open(path, "rb") as f:
            head = f.read(256)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split() or None


def python_of(command: "List[str]", environ: "Mapping[str, str]") -> "Optional[List[str]]":
    """The interpreter and its options that `command` starts, when it starts Python directly
    (`python3 -S train.py`, a script or console script whose shebang names Python, also through
    `/usr/bin/env`); None for anything else (a shell, a binary): what a shell runs later is not
    known here."""
    if not command:
        return None
    path = which(command[0], environ)
    if path is None:
        return None
    if _is_python(path):
        return [path, *_options(command[1:])]
    words = _shebang(path)
    if not words:
        return None
    if os.path.basename(words[0]) == "env":
        words = words[1:]
        while words and words[0].startswith("-"):  # env's own options: `env -S python3 -u`
            words = words[1:]
        if not words:
            return None
        found = which(words[0], environ)
        if found is None:
            return None
        words = [found, *words[1:]]
    if not _is_python(words[0]):
        return None
    return [words[0], *_options(words[1:])]
