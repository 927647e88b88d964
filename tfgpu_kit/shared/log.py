"""Logging for build.py: everything human goes to stderr (rich, colour only on a
terminal and never with NO_COLOR), so stdout carries only data for scripts."""

from __future__ import annotations

import logging
import os
import sys

from rich.console import Console
from rich.logging import RichHandler

# Data (tables, JSON, tags) goes to stdout through this console; logs go to stderr.
stdout = Console(no_color=bool(os.environ.get("NO_COLOR")), soft_wrap=True)
stderr = Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")), soft_wrap=True)


def setup(verbose: bool = False) -> None:
    """Send the kit's log records to stderr; call once from cli.main."""
    handler = RichHandler(
        console=stderr, show_time=sys.stderr.isatty(), show_path=False, markup=False
    )
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(message)s",
        handlers=[handler],
        force=True,
    )
