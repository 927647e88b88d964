"""docs/architecture.md stays true: every module it names exists, and every module of the build
side and the runtime is in its table of rooms (the fake driver's C sources apart: its package is
one room); its floors are the layers of the import-linter contract (.importlinter, checked by
`./kit lint`), every module of tfgpu_kit is on one, and there are at most 9."""

from __future__ import annotations

import ast
import configparser
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"`((?:tfgpu_kit|entrypoint/src/tfgpu|fakegpu)/[\w/]*\.py)`")
CONTRACT = ROOT / ".importlinter"
MOST_FLOORS = 9  # the build side, build.py included (issue 32; issue 17 asked 10)


def modules() -> set[str]:
    found = set()
    for folder in ("tfgpu_kit", "entrypoint/src/tfgpu", "fakegpu"):
        found |= {path.relative_to(ROOT).as_posix() for path in (ROOT / folder).rglob("*.py")}
    return found


def rooms() -> set[str]:
    text = DOC.read_text(encoding="utf-8").split("## Rooms", 1)[1]
    return {m.group(1) for m in NAMED.finditer(text)}


def test_every_module_named_exists() -> None:
    named = {m.group(1) for m in NAMED.finditer(DOC.read_text(encoding="utf-8"))}
    missing = sorted(name for name in named if not (ROOT / name).is_file())
    assert missing == []


def test_every_module_is_a_room() -> None:
    assert sorted(modules() - rooms()) == []
    assert len(modules()) > 50  # the walk found the tree


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
    assert imported == layers()[0]


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
    """Issue 17: the fake driver is a component of its own (fakegpu/), which the kit uses."""
    alone = contract()["importlinter:contract:fakegpu"]
    assert (alone["type"], alone["source_modules"].split()) == ("forbidden", ["fakegpu"])
    assert alone["forbidden_modules"].split() == ["tfgpu_kit", "tfgpu"]
    assert not (ROOT / "tfgpu_kit" / "fakegpu").exists()
