"""Finding the user's command on PATH, the Python it starts, and exec'ing it, as a shell would,
without `shutil` or `warnings` (start-up time): `tfgpu run` execs the command, `tfgpu.commands.pid1`
execs it in its child; `unwrap` looks through the usual exec wrappers (`env VAR=1 python3`,
`timeout`, `nice`, `taskset`, `numactl`…), `python_command` reads which Python a command starts (its
name, or its script's shebang) and its program, so that `tfgpu run` imports
tfgpu.machine.interpreter, whose probe asks that Python about the hook, only for a command that
starts Python.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    import signal
    from typing import Dict, List, Mapping, NoReturn, Optional, Tuple
else:
    # `_signal`, the C module the interpreter has loaded already (`signal` imports enum)
    try:
        import _signal as signal
    except ImportError:  # an interpreter without it
        import signal

# What Python's start sets to ignored and an exec would hand down so (subprocess puts them back
# to their default in its child: restore_signals, _Py_RestoreSignals)
PYTHON_IGNORED = tuple(
    getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ") if hasattr(signal, name)
)


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
    execvpe itself goes on to the next PATH entry and raises its own error, as before.

    The command gets SIGPIPE and SIGXFSZ at their default, as it would from a shell or from
    subprocess: Python's start ignores them, and an ignored signal stays ignored across exec
    (`yes | head -1` would say "Broken pipe" and a writer to a closed pipe would go on). They
    are ignored again if no exec succeeds, for the error this process then writes."""
    for number in PYTHON_IGNORED:
        signal.signal(number, signal.SIG_DFL)
    try:
        path = which(command[0], env)
        if path is not None:
            try:  # noqa: SIM105 (contextlib.suppress: one more import at start-up)
                os.execve(path, command, env)
            except OSError:
                pass
        os.execvpe(command[0], command, env)
    finally:  # reached only when no exec succeeded
        for number in PYTHON_IGNORED:
            signal.signal(number, signal.SIG_IGN)


def _is_python(path: str) -> bool:
    """A CPython or PyPy interpreter by its name, or by the name of the file a link points to
    (`/usr/local/bin/py` -> python3.11)."""
    for name in (os.path.basename(path), os.path.basename(os.path.realpath(path))):
        for prefix in ("python", "pypy"):
            if name.startswith(prefix):
                rest = name[len(prefix) :]
                if all(c.isdigit() or c == "." for c in rest) and not rest.startswith("."):
                    return True
    return False


def _split(args: "List[str]") -> "Tuple[List[str], List[str]]":
    """(the interpreter's options, its program): the options before `-c CODE`, `-m MODULE`, a
    script or `-`, as python parses them: short options combine (`-Su`), `-W`/`-X` take a value,
    attached or next. The program starts with `-c` or `-m` (its value after), or is the script
    and its arguments; [] is the interactive interpreter."""
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
                value = arg[j + 1 :]
                program = [f"-{letter}", *([value] if value else []), *args[i + 1 :]]
                return out, program
            if letter in "WX":  # the rest is the value, else the next argument is
                out.append(arg)
                if j == len(arg) - 1 and i + 1 < len(args):
                    out.append(args[i + 1])
                    i += 1
                break
        else:
            out.append(arg)
        i += 1
    return out, args[i:][1:] if args[i : i + 1] == ["--"] else args[i:]


def _options(args: "List[str]") -> "List[str]":
    return _split(args)[0]


def _shebang(path: str) -> "Optional[List[str]]":
    """`#!/usr/bin/python3 -u` → ['/usr/bin/python3', '-u']; None for a binary, no shebang, or
    anything but a regular file (opening a FIFO would wait for a writer for ever)."""
    try:
        if os.stat(path).st_mode & 0o170000 != 0o100000:  # S_ISREG, without importing stat
            return None
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
        try:
            head = os.read(fd, 256)
        finally:
            os.close(fd)
    except OSError:
        return None
    if not head.startswith(b"#!"):
        return None
    line = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    return line.split() or None


# The exec wrappers `tfgpu run` looks through to the command they start: per wrapper, its options
# that take a value (as the next argument), and how many operands of its own precede the command
# (timeout's duration, taskset's mask, chrt's priority, gosu's user). `env` is read apart (its
# assignments change the command's environment; -S splits a string). Others (a shell's `-c`) are
# not followed: what they run is not known here (docs/runtime.md lists them).
WRAPPERS = {
    "timeout": (("-s", "--signal", "-k", "--kill-after"), 1),
    "nice": (("-n", "--adjustment"), 0),
    "nohup": ((), 0),
    "setsid": ((), 0),
    "taskset": ((), 1),
    "chrt": ((), 1),
    "ionice": (("-c", "--class", "-n", "--classdata"), 0),
    "stdbuf": (("-i", "-o", "-e"), 0),
    "numactl": (
        (
            "-N",
            "--cpunodebind",
            "-m",
            "--membind",
            "-C",
            "--physcpubind",
            "-i",
            "--interleave",
            "-p",
            "--preferred",
            "-P",
            "--preferred-many",
            "-w",
            "--weighted-interleave",
        ),
        0,
    ),
    "tini": (("-p", "-e"), 0),
    "dumb-init": (("-r", "--rewrite"), 0),
    "gosu": ((), 1),
    "su-exec": ((), 1),
    "time": (("-f", "--format", "-o", "--output"), 0),
}
_ENV_VALUED = ("-u", "--unset", "-C", "--chdir", "-S", "--split-string")
MAX_WRAPPERS = 8  # `env nice timeout …`: deeper than this is not followed


def _skip_wrapper(name: str, args: "List[str]") -> "Optional[List[str]]":
    """The command after wrapper `name`'s options and operands in `args`; None when it has none
    (`taskset -p PID`, a bare `nice`)."""
    valued, operands = WRAPPERS[name]
    i = 0
    while i < len(args) and args[i].startswith("-") and args[i] != "-":
        arg = args[i]
        i += 1
        if arg == "--":
            break
        if arg in valued:  # the value is the next argument (an attached one needs no skip)
            i += 1
        if name == "taskset" and arg in ("-p", "--pid"):
            return None  # acts on a process, starts nothing
    i += operands
    return args[i:] if i < len(args) else None


def _skip_env(args: "List[str]", environ: "Dict[str, str]") -> "Optional[List[str]]":
    """env(1): its options and NAME=VALUE assignments applied to `environ`; the command after."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            i += 1
            break
        if arg in ("-i", "--ignore-environment", "-"):
            environ.clear()
        elif arg in ("-u", "--unset") and i + 1 < len(args):
            environ.pop(args[i + 1], None)
            i += 1
        elif arg.startswith("--unset="):
            environ.pop(arg.partition("=")[2], None)
        elif arg in ("-S", "--split-string") and i + 1 < len(args):
            # -S splits one string into arguments (env -S 'python3 -u'): a shebang's habit
            return _skip_env([*args[i + 1].split(), *args[i + 2 :]], environ)
        elif arg.startswith(("-S", "--split-string=")):
            rest = arg[2:] if arg.startswith("-S") else arg.partition("=")[2]
            return _skip_env([*rest.split(), *args[i + 1 :]], environ)
        elif arg in _ENV_VALUED:
            i += 1
        elif not arg.startswith("-") and "=" in arg:
            name, _, value = arg.partition("=")
            environ[name] = value
        elif not arg.startswith("-"):
            break
        i += 1
    return args[i:] if i < len(args) else None


def unwrap(
    command: "List[str]", environ: "Mapping[str, str]"
) -> "Tuple[List[str], Dict[str, str]]":
    """The command that `command` ends up exec'ing through the usual exec wrappers (env, timeout,
    nice, nohup, taskset, numactl… : WRAPPERS), and its environment after env's assignments.
    A command that is not a known wrapper is returned as it is."""
    env = dict(environ)
    for _ in range(MAX_WRAPPERS):
        if not command:
            break
        path = which(command[0], env)
        name = os.path.basename(path or command[0])
        if name == "env":
            inner = _skip_env(command[1:], env)
        elif name in WRAPPERS:
            inner = _skip_wrapper(name, command[1:])
        else:
            break
        if not inner:
            break
        command = inner
    return command, env


def python_command(
    command: "List[str]", environ: "Mapping[str, str]"
) -> "Optional[Tuple[List[str], List[str]]]":
    """(the interpreter and its options, its program) that `command` starts when it starts
    Python directly (`python3 -S train.py`, a script or console script whose shebang names Python,
    also through `/usr/bin/env`); None for anything else (a shell, a binary): what a shell runs
    later is not known here. Wrappers are `unwrap`'s business, before this."""
    if not command:
        return None
    path = which(command[0], environ)
    if path is None:
        return None
    if _is_python(path):
        options, program = _split(command[1:])
        return [path, *options], program
    words = _shebang(path)
    if not words:
        return None
    words, _ = unwrap(words, environ)  # `#!/usr/bin/env -S python3 -u`
    found = which(words[0], environ) if words else None
    if found is None or not _is_python(found):
        return None
    return [found, *_options(words[1:])], [path, *command[1:]]


def python_of(command: "List[str]", environ: "Mapping[str, str]") -> "Optional[List[str]]":
    """The interpreter and its options that `command` starts (python_command's first part)."""
    found = python_command(command, environ)
    return found[0] if found is not None else None
