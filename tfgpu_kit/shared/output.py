"""Printing data on stdout: JSON for scripts, rich tables for people, sizes in MiB for both."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tfgpu_kit.shared import log

BYTES_PER_MIB = 1 << 20


def mib(value: float | None, places: int = 0, *, grouped: bool = False) -> str:
    """A size in MiB as the kit writes it, without the unit (a table's column may carry it):
    `places` decimals; thousands separators when `grouped` (tables for people, not messages a
    user may copy into a flag); "—" when unknown."""
    if value is None:
        return "—"
    return f"{value:{',' if grouped else ''}.{places}f}"


def print_json(value: object) -> None:
    # plain print: rich would wrap or colour it
    print(json.dumps(value, indent=2))


def _console() -> Console:
    """stdout; a pipe or file gets long lines rather than rich's 80-column default."""
    if log.stdout.is_terminal:
        return log.stdout
    return Console(no_color=bool(os.environ.get("NO_COLOR")), width=200, soft_wrap=True)


def table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
    t = Table(title=title, title_justify="left")
    for column in columns:
        t.add_column(column, overflow="fold")
    for row in rows:
        # cells are data, not rich markup: `tensorflow[and-cuda]` must print as it is
        t.add_row(*(escape(cell) for cell in row))
    _console().print(t)
