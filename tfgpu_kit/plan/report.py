"""Print a plan: a per-GPU table (rich) or one JSON object, both on stdout."""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence

from rich.console import Console
from rich.table import Table
from rich.text import Text

from tfgpu_kit.plan.budget import GpuBudget
from tfgpu_kit.plan.model import Problem
from tfgpu_kit.shared.output import mib
from tfgpu_kit.shared.yamlfile import shown


def _safe(text: str) -> str:
    """Names from the input (services, pods, files) escaped for the terminal: a control or bidi
    character in a name cannot move the cursor, recolour or rewrite the verdict."""
    return shown(text, limit=10_000)


def as_json(
    budgets: Sequence[GpuBudget],
    problems: Sequence[Problem],
    notes: Sequence[str],
    *,
    overhead_mib: float,
    memory_mib: float,
) -> str:
    return json.dumps(
        {
            "ok": not any(p.severity == "error" for p in problems),
            "gpu_memory_mib": memory_mib,
            "context_overhead_mib": overhead_mib,
            "gpus": [b.as_dict() for b in budgets],
            "problems": [p.as_dict() for p in problems],
            "notes": list(notes),
        },
        indent=2,
    )


# MiB in the table: thousands grouped, for reading across a row
_cell = functools.partial(mib, grouped=True)


def table(budget: GpuBudget) -> Table:
    """One GPU: who is on it, their caps and contexts, the sum and the headroom (MiB)."""
    where = _safe(f"GPU {budget.gpu}" if budget.sharing == "host" else budget.gpu)
    sharing = "shared on the host" if budget.sharing == "host" else _safe(budget.sharing)
    out = Table(title=f"{where}: {_cell(budget.memory_mib)} MiB, {sharing}", title_justify="left")
    out.add_column("who", overflow="fold")
    for name in ("procs", "cap MiB", "context MiB", "total MiB"):
        out.add_column(name, justify="right", no_wrap=True)
    for entry in budget.entries:
        out.add_row(
            Text(_safe(entry.who)),  # Text: a name like Deployment/x[tf] is not rich markup
            str(entry.count),
            "none" if entry.cap_mib is None else _cell(entry.cap_mib),
            _cell(entry.overhead_mib),
            _cell(entry.total_mib),
        )
    headroom = budget.headroom_mib
    if headroom is not None:
        verdict = Text(f"headroom {_cell(headroom)}", style="green" if headroom >= 0 else "red")
    elif budget.processes == 1:
        verdict = Text("whole card", style="green")
    else:
        verdict = Text("uncapped", style="red")
    extra = f" (+{budget.not_shown} more pods in the pool)" if budget.not_shown else ""
    out.add_section()
    out.add_row(
        Text(f"sum{extra}", style="bold"),
        str(budget.processes),
        "",
        "",
        Text(_cell(budget.committed_mib), style="bold"),
    )
    out.add_row(verdict, "", "", "", "")
    return out


def print_text(
    console: Console,
    budgets: Sequence[GpuBudget],
    problems: Sequence[Problem],
    notes: Sequence[str],
) -> None:
    for budget in budgets:
        console.print(table(budget))
    if not budgets and not problems:
        # not when a workload is reported: one with an invalid env does use a GPU
        console.print("No workload in the input uses a GPU.")
    for note in notes:
        console.print(Text(f"note: {_safe(note)}", style="dim"))
    for problem in problems:
        mark, style = ("✗", "red") if problem.severity == "error" else ("!", "yellow")
        console.print(Text(f"{mark} {_safe(problem.who)}: {_safe(problem.what)}", style=style))
        if problem.fix:
            console.print(f"    fix: {_safe(problem.fix)}", markup=False, highlight=False)
    errors = sum(p.severity == "error" for p in problems)
    console.print(
        Text(f"plan fails: {errors} error(s)", style="bold red")
        if errors
        else Text(f"plan OK: {len(budgets)} GPU budget(s) fit", style="bold green")
    )
