"""The shape of every build.py sub-command: arguments → one call into the domain → output.

Each command module ends with `COMMAND = Command(...)`; tfgpu_kit/cli/__init__.py imports them by
name (not by a string), so mypy checks every command against this shape."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Command:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]
