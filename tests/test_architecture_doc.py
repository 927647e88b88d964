"""docs/architecture.md stays true: every module it names exists, and every module of the build
side and the runtime is in its table of rooms (the fake driver's C sources apart: its package is
one room)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"
NAMED = re.compile(r"`((?:tfgpu_kit|entrypoint/src/tfgpu)/[\w/]*\.py)`")


def modules() -> set[str]:
    found = set()
    for folder in ("tfgpu_kit", "entrypoint/src/tfgpu"):
        for path in (ROOT / folder).rglob("*.py"):
            relative = path.relative_to(ROOT).as_posix()
            if "/fakegpu/" in relative and not relative.endswith("fakegpu/__init__.py"):
                continue
            found.add(relative)
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
