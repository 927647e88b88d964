"""docs/architecture.md stays true: every module it names exists, and every package of the build
side, the fake driver and the runtime is a line of its table of rooms, and every line a package;
its floors are the layers of the import-linter contract (.importlinter, checked by `./kit lint`),
every module of tfgpu_kit is on one, and there are at most 9. The runtime's layers (its doors,
then its five tier packages) are its contract, hold every module of the runtime, and are the
floors tools/import_floors.py counts from the imports (no circles)."""

from __future__ import annotations

import ast
import configparser
import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"`((?:tfgpu_kit|entrypoint/src/tfgpu|fakegpu)/[\w/]*\.py)`")
ROOM = re.compile(r"^\| `((?:tfgpu_kit|entrypoint/src/tfgpu|fakegpu)/[\w/]*)` \|", re.M)
CONTRACT = ROOT / ".importlinter"
MOST_FLOORS = 9  # the build side, build.py included


def packages() -> set[str]:
    """Every package folder of the build side, the fake driver and the runtime, as `path/`."""
    found = set()
    for folder in ("tfgpu_kit", "entrypoint/src/tfgpu", "fakegpu"):
        found |= {
            f"{path.parent.relative_to(ROOT).as_posix()}/"
            for path in (ROOT / folder).rglob("__init__.py")
        }
    return found


def rooms() -> set[str]:
    text = DOC.read_text(encoding="utf-8").split("## Rooms", 1)[1]
    return {m.group(1) for m in ROOM.finditer(text)}


def test_every_module_named_exists() -> None:
    named = {m.group(1) for m in NAMED.finditer(DOC.read_text(encoding="utf-8"))}
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == []


def test_every_package_is_a_room_and_every_room_a_package() -> None:
    assert sorted(packages() - rooms()) == []
    assert sorted(rooms() - packages()) == []
    assert len(packages()) > 15  # the walk found the tree


def contract() -> configparser.ConfigParser:
    config = configparser.ConfigParser()
    assert config.read(CONTRACT, encoding="utf-8") == [str(CONTRACT)]
    return config


def layers() -> list[set[str]]:
    """The layers of the floors contract, top to bottom, each the set of its modules."""
    floors = contract()["importlinter:contract:floors"]
    assert floors["type"] == "layers"
    lines = floors["layers"].strip().splitlines()
    return [{name.strip() for name in line.split("|")} for line in lines]


def doc_floors() -> dict[int, set[str]]:
    """The table of the doc's "Floors" section: floor number -> the names in its row."""
    text = DOC.read_text(encoding="utf-8").split("## Floors", 1)[1].split("\n## ", 1)[0]
    rows = re.finditer(r"^\| (\d+) \| (.+) \|$", text, re.M)
    return {int(row.group(1)): set(re.findall(r"`([^`]+)`", row.group(2))) for row in rows}


def test_the_floors_are_the_layers_of_the_import_contract() -> None:
    floors = doc_floors()
    top = len(floors)
    assert sorted(floors, reverse=True) == list(range(top, 0, -1))
    assert top <= MOST_FLOORS
    # build.py, a script outside the package, is the top floor; the contract's layers the rest
    assert floors[top] == {"build.py"}
    assert [floors[n] for n in range(top - 1, 0, -1)] == layers()


def test_build_py_stands_on_the_top_layer_only() -> None:
    tree = ast.parse((ROOT / "build.py").read_text(encoding="utf-8"))
    imported = {
        node.module if isinstance(node, ast.ImportFrom) else alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.Import | ast.ImportFrom)
        for alias in node.names
    }
    # the standard library aside (build.py names the missing dependency itself, with sys)
    assert imported - sys.stdlib_module_names == layers()[0]


def test_every_module_of_the_build_side_is_on_a_floor() -> None:
    """A new module needs a floor (the layers contract leaves unnamed modules unchecked)."""
    kit = ROOT / "tfgpu_kit"
    children = {f"tfgpu_kit.{p.stem}" for p in kit.glob("*.py") if p.stem != "__init__"}
    children |= {f"tfgpu_kit.{p.parent.name}" for p in kit.glob("*/__init__.py")}
    named = set().union(*layers())
    assert sorted(children - named) == []
    assert sorted(named - children - {"tfgpu", "fakegpu"}) == []
    assert {"tfgpu", "fakegpu"} <= layers()[-1]  # the runtime and the fake driver: the bottom floor


def test_the_runtime_never_imports_the_build_side() -> None:
    runtime = contract()["importlinter:contract:runtime"]
    assert runtime["type"] == "forbidden"
    assert runtime["source_modules"].split() == ["tfgpu"]
    assert runtime["forbidden_modules"].split() == ["tfgpu_kit"]


def test_the_fake_driver_stands_alone() -> None:
    """The fake driver is a component of its own (fakegpu/), which the kit uses."""
    alone = contract()["importlinter:contract:fakegpu"]
    assert (alone["type"], alone["source_modules"].split()) == ("forbidden", ["fakegpu"])
    assert alone["forbidden_modules"].split() == ["tfgpu_kit", "tfgpu"]
    assert not (ROOT / "tfgpu_kit" / "fakegpu").exists()


# The runtime: its doors above its tier packages, the layers of the contract runtime_tiers, and
# the floors tools/import_floors.py counts from the imports, so the doc's figures are the tool's.
RUNTIME = ROOT / "entrypoint" / "src" / "tfgpu"
RUNTIME_MOST_FLOORS = 8
RUNTIME_MOST_DOORS = 10  # modules at the top of the package, __init__ included
RUNTIME_SECTION = "## The runtime's tiers"
TIERS = ["commands", "act", "plan", "machine", "contract"]  # top to bottom
HOOK = "tfgpu._hook"  # a door that is its own module, on act's layer


def import_floors() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_floors", ROOT / "tools" / "import_floors.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runtime_section() -> str:
    return DOC.read_text(encoding="utf-8").split(RUNTIME_SECTION, 1)[1].split("\n## ", 1)[0]


def runtime_layers() -> list[set[str]]:
    """The layers of the contract runtime_tiers, top to bottom, each the set of its names."""
    section = contract()["importlinter:contract:runtime_tiers"]
    assert section["type"] == "layers"
    lines = section["layers"].strip().splitlines()
    return [set(re.split(r"\s*[|:]\s*", line.strip())) for line in lines]


def doors() -> set[str]:
    """The modules at the top of the runtime package, __init__ apart."""
    return {f"tfgpu.{path.stem}" for path in RUNTIME.glob("*.py") if path.stem != "__init__"}


def tier_packages() -> set[str]:
    return {f"tfgpu.{path.parent.name}" for path in RUNTIME.glob("*/__init__.py")}


def test_the_runtime_layers_are_the_contract_and_hold_every_module() -> None:
    rows = re.finditer(r"^\| ([a-z]+) \| [^|]+ \| (`.+) \|$", runtime_section(), re.M)
    doc = {row.group(1): set(re.findall(r"`([^`]+)`", row.group(2))) for row in rows}
    assert list(doc) == ["doors", *TIERS]
    assert list(doc.values()) == runtime_layers()
    assert doc["doors"] | {HOOK} == doors()  # every module at the top is a door
    # each tier is its package; the hook, a door of its own, stands on act's layer
    assert [doc[tier] - {HOOK} for tier in TIERS] == [{f"tfgpu.{tier}"} for tier in TIERS]
    assert HOOK in doc["act"]
    assert tier_packages() == {f"tfgpu.{tier}" for tier in TIERS}  # no package outside a tier
    assert len(doors()) + 1 <= RUNTIME_MOST_DOORS
    # nothing of a tier sits loose in a sub-folder that is not a package
    assert sorted(p.parent.name for p in RUNTIME.glob("*/*.py") if p.parent.name not in TIERS) == []


def test_the_runtime_floors_are_one_per_tier_with_no_circles() -> None:
    tool = import_floors()
    graph = tool.import_graph(RUNTIME)
    assert tool.circles(graph) == []
    floors = tool.floors(graph)
    assert set(floors) == set(graph)  # every unit placed: none stands on a circle
    # each tier a floor of its own, in the contract's order, the doors above them all
    tier_floors = [floors[tier] for tier in TIERS]
    assert tier_floors == sorted(set(tier_floors), reverse=True)
    assert all(floors[door.split(".", 1)[1]] > floors["act"] for door in doors())
    top = max(floors.values())
    assert top <= RUNTIME_MOST_FLOORS
    assert f"runtime has **{top}** floors and **0** circles" in runtime_section().replace("\n", " ")


def test_the_floor_counter_sees_a_circle_and_counts_a_package_folder_as_one(
    tmp_path: Path,
) -> None:
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("def f():\n    from pkg import b\n")  # in a function: counts
    (package / "b.py").write_text("from .a import f\n")
    (package / "c.py").write_text("if False:\n    import pkg.sub.x\n")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "x.py").write_text("from ..d import y\n")
    (package / "d.py").write_text("y = 1\n")
    tool = import_floors()
    graph = tool.import_graph(package)
    assert graph["sub"] == {"d"} and graph["c"] == {"sub"}
    assert tool.circles(graph) == [["a", "b"]]
    assert tool.floors(graph) == {"__init__": 1, "d": 1, "sub": 2, "c": 3}


LAZY_REASON = re.compile(r"#.*(~[\d.]+ ms\b.*importtime|\(not a cost\))")


def said(lines: list[str], index: int) -> str:
    """The import at lines[index] with its comment: on its line, or the comment line above it
    or above the run of imports it stands in."""
    above = index - 1
    while above >= 0 and lines[above].lstrip().startswith(("from ", "import ")):
        above -= 1
    return lines[index] + (lines[above] if above >= 0 else "")


def test_every_import_inside_a_function_of_the_runtime_says_its_measured_cost() -> None:
    """An import of the package inside a function only where its start-up cost was
    measured, the figure in a comment on its line or just above (else it goes to the top)."""
    bare = []
    for path in sorted(RUNTIME.rglob("*.py")):
        lines = path.read_text(encoding="utf-8").splitlines()
        for function in ast.walk(ast.parse("\n".join(lines))):
            if not isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(function):
                internal = (
                    isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tfgpu")
                ) or (
                    isinstance(node, ast.Import)
                    and any(alias.name.startswith("tfgpu") for alias in node.names)
                )
                if internal and not LAZY_REASON.search(said(lines, node.lineno - 1)):
                    bare.append(f"{path.name}:{node.lineno}")
    assert bare == []
