"""Jupyter as root in the jupyter images: allowed when the container is started as root.

The images run Jupyter as their non-root user (as jupyter/docker-stacks do); `docker run
--user 0` still works. Jupyter Server refuses to start as root without `--allow-root`, a flag
a user's own command (`jupyter lab …`) would have to repeat; the config file that
`python3 -m tfgpu.jupyter_cull install` writes calls configure() here, which sets
`ServerApp.allow_root` only when the process is root, so a non-root server is unchanged.
Standard library only, and nothing here imports Jupyter.
"""

from __future__ import annotations

import os

from tfgpu import is_disabled

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Any, Mapping, Optional


def configure(
    config: Any, environ: Optional[Mapping[str, str]] = None, euid: Optional[int] = None
) -> bool:
    """Set `config.ServerApp.allow_root` when running as root; returns whether it did."""
    environ = os.environ if environ is None else environ
    euid = os.geteuid() if euid is None else euid
    if is_disabled(environ) or euid != 0:
        return False
    config.ServerApp.allow_root = True
    return True
