#!/usr/bin/env python3
"""Count a package's floors and circles from its imports (docs/architecture.md, "Floors").

A floor is a module of the package, or a sub-package folder taken as one, above everything it
imports of the package: imports inside functions and under TYPE_CHECKING count as much as those
at the top. A module that imports nothing of the package stands on floor 1; any other on the
floor above the highest one it imports. Modules that import each other, directly or round a
loop, are a circle and have no floor. The figures docs/architecture.md names are checked with
this by tests/test_architecture_doc.py, so they are counted, not typed.

Usage: .venv/bin/python tools/import_floors.py DIR [DIR ...]
(e.g. `tools/import_floors.py entrypoint/src/tfgpu tfgpu_kit`): per package its floors, top
first, then its circles (none: "0 circles").
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path


def _unit(package: str, module: str) -> str | None:
    """The part of `package` that `module` (a dotted name) stands in, or None when outside it."""
    parts = module.split(".")
    if parts[0] != package:
        return None
    return parts[1] if len(parts) > 1 else "__init__"


def _imported(path: Path, dotted: str, is_package: bool) -> set[str]:
    """Every dotted name that the file at `path` (module `dotted`) imports, wherever it stands."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                # `from . import x` in pkg/a.py is pkg; in pkg/__init__.py it is pkg too
                anchor = dotted.split(".")
                drop = node.level - 1 if is_package else node.level
                base = anchor[: len(anchor) - drop]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            # `from pkg import x` imports pkg.x when x is a module
            names |= {f"{module}.{alias.name}" for alias in node.names}
    return names


def import_graph(folder: Path) -> dict[str, set[str]]:
    """Each unit of the package in `folder` (a module, or a sub-package as one) -> the units it
    imports (itself left out)."""
    package = folder.name
    units = {p.stem for p in folder.glob("*.py")} | {
        p.parent.name for p in folder.glob("*/__init__.py")
    }
    graph: dict[str, set[str]] = {unit: set() for unit in units}
    for path in folder.rglob("*.py"):
        relative = path.relative_to(folder).with_suffix("").parts
        is_package = relative[-1] == "__init__"
        dotted = ".".join((package, *(relative[:-1] if is_package else relative)))
        own = _unit(package, dotted) or "__init__"
        for name in _imported(path, dotted, is_package):
            unit = _unit(package, name)
            if unit in units and unit != own:
                graph[own].add(unit)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected parts of more than one unit (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(unit: str) -> None:
        index[unit] = low[unit] = len(index)
        stack.append(unit)
        for other in sorted(graph[unit]):
            if other not in index:
                visit(other)
                low[unit] = min(low[unit], low[other])
            elif other in stack:
                low[unit] = min(low[unit], index[other])
        if low[unit] == index[unit]:
            part = []
            while True:
                other = stack.pop()
                part.append(other)
                if other == unit:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for unit in sorted(graph):
        if unit not in index:
            visit(unit)
    return sorted(found)


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each unit's floor (1: imports nothing of the package); units in a circle are left out,
    and so is whatever stands on one."""
    looped = {unit for part in circles(graph) for unit in part}
    floor: dict[str, int] = {}

    def place(unit: str) -> int | None:
        if unit in looped:
            return None
        if unit not in floor:
            below = [place(other) for other in graph[unit]]
            if None in below:
                looped.add(unit)
                return None
            floor[unit] = 1 + max((f for f in below if f is not None), default=0)
        return floor[unit]

    for unit in sorted(graph):
        place(unit)
    return floor


def main(folders: list[str]) -> int:
    if folders[:1] in (["-h"], ["--help"]):
        print(__doc__.strip())
        return 0
    if not folders:
        print(__doc__.strip().split("\n\n")[-1], file=sys.stderr)
        return 2
    for name in folders:
        folder = Path(name)
        if not (folder / "__init__.py").is_file():
            print(
                f"import_floors: {name} is not a package folder (no __init__.py); "
                "e.g. entrypoint/src/tfgpu",
                file=sys.stderr,
            )
            return 2
        graph = import_graph(folder)
        floor = floors(graph)
        top = max(floor.values(), default=0)
        print(f"{folder.name}: {top} floors, {len(circles(graph))} circles")
        for level in range(top, 0, -1):
            print(f"  {level:2} | " + ", ".join(sorted(u for u, f in floor.items() if f == level)))
        for part in circles(graph):
            print("  circle: " + " <-> ".join(part))
        unplaced = sorted(set(graph) - set(floor))
        if unplaced:
            print("  no floor (on a circle, or above one): " + ", ".join(unplaced))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
