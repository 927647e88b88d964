"""Which Python a command runs, and whether that Python loads the tfgpu hook.

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

from tfgpu.command_path import which

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
PROBE_TIMEOUT = 30.0


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


def probe(interpreter: "List[str]", environ: "Mapping[str, str]") -> "Optional[Probe]":
    """Run the interpreter with `interpreter`'s options and ask; None when it cannot say."""
    import subprocess  # lazily: only for commands that start Python

    env = dict(environ)
    env["TF_GPU_QUIET"] = "true"
    env.pop("TF_GPU_CONFIG", None)  # off would keep the hook from installing: ask where it is
    try:
        proc = subprocess.run(
            [*interpreter, "-c", PROBE],
            env=env,
            capture_output=True,
            text=True,
            timeout=PROBE_TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    for line in proc.stdout.splitlines():
        parts = line.split("\t")
        if len(parts) == 6 and parts[0] == _MARK:
            flags = [p == "1" for p in parts[1:5]]
            return Probe(flags[0], flags[1], flags[2], flags[3], parts[5])
    return None


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
