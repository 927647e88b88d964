"""Idle kernel culling for the Jupyter images: a culled kernel's process ends, and with it the
GPU memory it held (docs/jupyter.md).

The jupyter images run `python3 -m tfgpu.jupyter_cull install /etc/jupyter` at build time. The
file it writes, jupyter_server_config.py, is loaded by every Jupyter Server application
(`jupyter notebook` 7, `jupyter lab`, `jupyter server`) from that system config folder, the lowest
in Jupyter's order: a user's ~/.jupyter or a command-line --MappingKernelManager.* flag still wins.
It calls configure(), which turns TFGPU_JUPYTER_CULL_* into MappingKernelManager settings, or
stops the server with a one-line message when a value is bad (a config file's exception would
only be logged by Jupyter, which would then run without culling).

Standard library only, and nothing here imports Jupyter.
"""

from __future__ import annotations

import os
import sys

from tfgpu import is_disabled
from tfgpu.contract.ascii_numbers import is_ascii_number, whole_number
from tfgpu.contract.errors import EXIT_CONFIG, EXIT_USAGE, ConfigError
from tfgpu.contract.settings import parse_bool

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, List, Mapping, Optional

IDLE_TIMEOUT = "TFGPU_JUPYTER_CULL_IDLE_TIMEOUT"
INTERVAL = "TFGPU_JUPYTER_CULL_INTERVAL"
CONNECTED = "TFGPU_JUPYTER_CULL_CONNECTED"
VARIABLES = (IDLE_TIMEOUT, INTERVAL, CONNECTED)

# One hour idle frees the GPU within the working day and still survives a meeting; Jupyter's
# own interval; a kernel with an open browser tab is culled too, since a forgotten tab is the
# usual idle notebook (its file is saved; only the kernel's state is lost).
DEFAULT_IDLE_TIMEOUT = 3600
DEFAULT_INTERVAL = 300
DEFAULT_CONNECTED = True
MAX_SECONDS = 7 * 24 * 3600  # a week: anything longer is a typo, not a timeout

CONFIG_FILE = "jupyter_server_config.py"
CONFIG_TEXT = f"""\
# Written by the tfgpu kit (python3 -m tfgpu.jupyter_cull install): Jupyter Server culls
# idle kernels, so that their GPU memory returns to the card. Settings (see the kit's
# docs/jupyter.md): {IDLE_TIMEOUT} (seconds, 0 = off),
# {INTERVAL}, {CONNECTED}. Started as root (docker run --user 0), it may run as root.
from tfgpu import jupyter_cull, jupyter_root

jupyter_cull.configure(get_config())  # noqa: F821 (Jupyter's config loader provides get_config)
jupyter_root.configure(get_config())  # noqa: F821
"""


class CullSettings:
    """What MappingKernelManager gets. `idle_timeout` 0 means no culling."""

    __slots__ = ("connected", "idle_timeout", "interval")

    def __init__(self, idle_timeout: int, interval: int, connected: bool) -> None:
        self.idle_timeout = idle_timeout
        self.interval = interval
        self.connected = connected

    @property
    def enabled(self) -> bool:
        return self.idle_timeout > 0

    def describe(self) -> str:
        if not self.enabled:
            return f"idle kernels are not culled ({IDLE_TIMEOUT}=0)"
        tabs = "also" if self.connected else "but not"
        return (
            f"kernels idle for {self.idle_timeout} s are culled (checked every {self.interval} s, "
            f"{tabs} with a browser tab open)"
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CullSettings) and (
            self.idle_timeout,
            self.interval,
            self.connected,
        ) == (other.idle_timeout, other.interval, other.connected)

    def __repr__(self) -> str:
        return f"CullSettings({self.idle_timeout!r}, {self.interval!r}, {self.connected!r})"


def _seconds(variable: str, value: str, low: int, example: str) -> int:
    text = value.strip()
    accepted = f"whole seconds from {low} to {MAX_SECONDS} (a week)"
    if not is_ascii_number(text):
        unit = text[-1:].isalpha() and is_ascii_number(text[:-1].strip())
        why = "seconds without a unit, e.g. 1h = 3600" if unit else ""
        raise ConfigError(variable, value, accepted, example, why=why)
    seconds = whole_number(text, MAX_SECONDS)  # bounded before int(): 4,300 digits raise
    if seconds is None:
        raise ConfigError(variable, value, accepted, example, why="longer than a week")
    if seconds < low:
        raise ConfigError(variable, value, accepted, example, why=f"at least {low} s")
    return seconds


def read_settings(environ: Mapping[str, str]) -> CullSettings:
    """Validate TFGPU_JUPYTER_CULL_*; unset or empty (compose's `VAR=`) means the default.
    Raises ConfigError on the first bad value."""

    def get(name: str) -> Optional[str]:
        value = environ.get(name)
        return None if value is None or not value.strip() else value

    value = get(IDLE_TIMEOUT)
    idle_timeout = (
        DEFAULT_IDLE_TIMEOUT
        if value is None
        else _seconds(IDLE_TIMEOUT, value, 0, "3600 (or 0: no culling)")
    )
    value = get(INTERVAL)
    interval = DEFAULT_INTERVAL if value is None else _seconds(INTERVAL, value, 1, "300")
    value = get(CONNECTED)
    connected = DEFAULT_CONNECTED if value is None else parse_bool(CONNECTED, value)
    return CullSettings(idle_timeout, interval, connected)


def configure(config: Any, environ: Optional[Mapping[str, str]] = None) -> Optional[CullSettings]:
    """Set `config.MappingKernelManager` (a traitlets Config) from the environment. With
    TF_GPU_CONFIG=off the kit does nothing, here too. A bad value ends the process (exit 78)
    with the kit's one-line message instead of a traceback."""
    environ = os.environ if environ is None else environ
    if is_disabled(environ):
        return None
    try:
        settings = read_settings(environ)
    except ConfigError as error:
        sys.stderr.write(f"tfgpu: error: {error}\n")
        sys.stderr.write("tfgpu: Jupyter was not started (see the kit's docs/jupyter.md)\n")
        sys.stderr.flush()
        # SystemExit, not an exception: Jupyter's config loader catches exceptions, logs them
        # and goes on without this file, i.e. silently without culling.
        raise SystemExit(EXIT_CONFIG) from None
    manager = config.MappingKernelManager
    manager.cull_idle_timeout = settings.idle_timeout
    manager.cull_interval = settings.interval
    manager.cull_connected = settings.connected
    return settings


def install(directory: str) -> str:
    """Write CONFIG_TEXT as DIRECTORY/jupyter_server_config.py; refuse to replace a file the
    base already has there (its settings would be lost without a word)."""
    path = os.path.join(directory, CONFIG_FILE)
    os.makedirs(directory, exist_ok=True)
    with open(path, "x", encoding="utf-8") as handle:  # "x": fails if the file exists
        handle.write(CONFIG_TEXT)
    return path


USAGE = "usage: python3 -m tfgpu.jupyter_cull install DIR   (e.g. /etc/jupyter)"


def main(argv: Optional[List[str]] = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 2 or args[0] != "install":
        sys.stderr.write(USAGE + "\n")
        return EXIT_USAGE
    try:
        path = install(args[1])
    except FileExistsError:
        sys.stderr.write(
            f"tfgpu: error: {os.path.join(args[1], CONFIG_FILE)} exists already (from the base "
            "image?); the kit does not replace it. Merge the two, or install into another "
            "folder of `jupyter --paths`\n"
        )
        return 1
    except OSError as error:
        sys.stderr.write(f"tfgpu: error: cannot write {CONFIG_FILE} into {args[1]}: {error}\n")
        return 1
    sys.stdout.write(f"{path}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
