"""Whether the Python a command runs loads the tfgpu hook, asked of that Python itself (which
Python a command runs is tfgpu.machine.command_path.python_of's answer).

The hook is a .pth file in the image's site directory. A Python that skips `site` (`python -S`), a
virtual environment created without `--system-site-packages`, or a second Python never reads it:
its TensorFlow then takes the whole GPU, with no word. `tfgpu run` refuses such a command (exit 78,
unless TF_GPU_REQUIRE_HOOK=false) and `tfgpu check --build` fails the build. Both ask the
interpreter itself (the same executable, its flags, the command's environment) instead of
re-implementing site.py's rules, which differ between venvs, flags and Python versions.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
import os
import sys

TYPE_CHECKING = False  # not `from typing import …`: `tfgpu run` imports this for Python commands
if TYPE_CHECKING:
    from typing import List, Mapping, Optional

REQUIRE_HOOK = "TF_GPU_REQUIRE_HOOK"
WHEELS = "/usr/share/tfgpu/wheels"
INSTALL_LINE = f"python -m pip install --no-index --find-links {WHEELS} 'tfgpu[nvml,metrics]'"
_MARK = "TFGPU-PROBE"
PROBE = (
    "import sys, importlib.util as u; print("
    f"'{_MARK}', int('tfgpu._hook' in sys.modules), "
    "int(u.find_spec('tensorflow') is not None), int(sys.prefix != sys.base_prefix), "
    "int(sys.flags.no_site), sys.executable, sep='\\t')"
)
# `tfgpu run`'s bound on the probe: a Python answers it in tens of milliseconds; one that takes
# longer (a .pth that blocks, a loaded host) is not waited for (ProbeFailed). The build's guard,
# which starts nothing and reads no terminal, waits longer (build_check).
PROBE_TIMEOUT = 0.5
# Programs of a Python that never import TensorFlow themselves: `python -m pip …` is run as it is
# even where the interpreter lacks the hook (`-c` code is read for the names below instead).
TOOLS = ("pip", "ensurepip", "venv", "virtualenv", "pipx", "uv", "idlelib", "pydoc")
TENSORFLOW_NAMES = ("tensorflow", "keras", "tf_keras")


class ProbeFailed(Exception):
    """The interpreter did not answer the probe: why (the caller refuses, it does not guess)."""


PTH = "tfgpu-hook.pth"  # the hook's line in site-packages (entrypoint/pyproject.toml)


def site_dirs() -> "List[str]":
    """The site-packages folders of this Python (where the hook's .pth file would be)."""
    import site  # lazily: only `check` needs it

    dirs = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    if user:
        dirs.append(user)
    return dirs + [p for p in sys.path if p.endswith(("site-packages", "dist-packages"))]


def hook_pth() -> "Optional[str]":
    """The hook's .pth file in this Python's site folders, or None where it is not installed."""
    for d in site_dirs():
        path = os.path.join(d, PTH)
        if os.path.exists(path):
            return path
    return None


class Probe:
    """What the interpreter said about itself."""

    __slots__ = ("executable", "hook", "no_site", "tensorflow", "venv")

    def __init__(self, hook: bool, tensorflow: bool, venv: bool, no_site: bool, exe: str) -> None:
        self.hook = hook
        self.tensorflow = tensorflow
        self.venv = venv
        self.no_site = no_site
        self.executable = exe

    @property
    def unhooked_tensorflow(self) -> bool:
        """TensorFlow importable, the hook not loaded: the settings would not apply."""
        return self.tensorflow and not self.hook

    def why(self) -> str:
        if self.no_site:
            return "it skips site (-S), so no .pth file is read"
        if self.venv:
            return "it is a virtual environment without the system site-packages and without tfgpu"
        return "another Python than the image's: its site-packages have no tfgpu-hook.pth"


def _not_interactive(options: "List[str]") -> "List[str]":
    """The options without `-i` (alone or in a cluster such as `-Si`): the probe must end after
    its own code and never read the command's terminal or stdin."""
    out: List[str] = []
    value_next = False
    for option in options:
        if value_next or not option.startswith("-") or option.startswith("--"):
            out.append(option)
            value_next = False
            continue
        flags = ""
        for j, letter in enumerate(option[1:], start=1):
            if letter in "WX":  # the rest (or the next argument) is a value: kept as it is
                flags += option[j:]
                value_next = j == len(option) - 1
                break
            if letter != "i":
                flags += letter
        if flags:
            out.append("-" + flags)
    return out


def probe(
    interpreter: "List[str]", environ: "Mapping[str, str]", timeout: float = PROBE_TIMEOUT
) -> "Probe":
    """Run the interpreter with `interpreter`'s options (never interactive, stdin closed) and ask;
    ProbeFailed (why) when it does not answer within `timeout` seconds."""
    import subprocess  # lazily: only for commands that start Python

    env = dict(environ)
    env["TF_GPU_QUIET"] = "true"
    env.pop("TF_GPU_CONFIG", None)  # off would keep the hook from installing: ask where it is
    command = [interpreter[0], *_not_interactive(interpreter[1:]), "-c", PROBE]
    try:
        proc = subprocess.run(
            command,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        raise ProbeFailed(f"it did not answer within {timeout:g} s") from None
    except OSError as e:
        raise ProbeFailed(f"it cannot run ({e.strerror})") from None
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 6 and parts[0] == _MARK:
            flags = [p == "1" for p in parts[1:5]]
            return Probe(flags[0], flags[1], flags[2], flags[3], parts[5])
    last = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    raise ProbeFailed(f"it exited {proc.returncode} without an answer ({last})")


def may_import_tensorflow(program: "List[str]") -> bool:
    """Whether the Python program (python_command's second part) may import TensorFlow: not `-c`
    code that names none of TENSORFLOW_NAMES, nor `-m` of a packaging tool (TOOLS) or of the
    standard library; a script, a module, the interactive interpreter may."""
    if program[:1] == ["-c"]:
        code = program[1] if len(program) > 1 else ""
        return any(name in code for name in TENSORFLOW_NAMES)
    if program[:1] == ["-m"] and len(program) > 1:
        top = program[1].partition(".")[0]
        stdlib = getattr(sys, "stdlib_module_names", ())  # Python 3.10+
        return top not in TOOLS and top not in stdlib
    return True


def _venv_root(executable: str) -> "Optional[str]":
    """The virtual environment `executable` runs in: where site.py finds pyvenv.cfg (beside the
    executable or one folder up), or None."""
    here = os.path.dirname(os.path.abspath(executable))
    for folder in (here, os.path.dirname(here)):
        if os.path.isfile(os.path.join(folder, "pyvenv.cfg")):
            return folder
    return None


def same_site(interpreter: "List[str]", environ: "Mapping[str, str]") -> bool:
    """The command's Python is this one, in the same environment, with site: then its site reads
    the very .pth files this interpreter read, the hook's among them, and no probe is needed."""
    executable = interpreter[0]
    options = "".join(
        o[1:] for o in interpreter[1:] if o.startswith("-") and not o.startswith("--")
    )
    if "S" in options.partition("W")[0].partition("X")[0]:
        return False
    return (
        os.path.realpath(executable) == os.path.realpath(sys.executable)
        and _venv_root(executable) == _venv_root(sys.executable)
        and environ.get("PYTHONHOME") == os.environ.get("PYTHONHOME")
        and "tfgpu._hook" in sys.modules
    )


def unknown(interpreter: "List[str]", why: str) -> str:
    """The message of `tfgpu run`'s refusal (exit 78) when the probe failed."""
    return (
        f"cannot tell whether {' '.join(interpreter)} loads the tfgpu hook: asked, {why}; "
        "without the hook the TF_GPU_* settings would not apply and TensorFlow would take the "
        f"whole GPU; fix: check that interpreter, or run it without the check: {REQUIRE_HOOK}=false"
    )


def refusal(interpreter: "List[str]", found: Probe) -> str:
    """The message of `tfgpu run`'s refusal (exit 78)."""
    shown = " ".join(interpreter)
    fix = (
        "drop -S"
        if found.no_site
        else f"install the runtime into it: {found.executable} -m pip install --no-index "
        f"--find-links {WHEELS} 'tfgpu[nvml,metrics]' (or create the venv with "
        "--system-site-packages)"
    )
    return (
        f"{shown} imports TensorFlow without the tfgpu hook ({found.why()}): the TF_GPU_* "
        f"settings would not apply and TensorFlow would take the whole GPU; fix: {fix}; "
        f"or run it without them on purpose: {REQUIRE_HOOK}=false"
    )
