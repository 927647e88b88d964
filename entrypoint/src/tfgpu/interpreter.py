"""Whether the Python a command runs loads the tfgpu hook, asked of that Python itself (which
Python a command runs is tfgpu.command_path.python_of's answer).

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
