"""docs/CONTRACTS.md cannot drift from the code: every dotted name of the kit's packages it gives
in backticks (`tfgpu.<module>.<name>`, `tfgpu_kit.<module>.<name>`) is imported, and where it
gives a signature (`name(params) -> result`) that signature is the one `inspect.signature`
reports, spelled as the code spells it (annotations are strings under `from __future__ import
annotations`)."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

CONTRACTS = Path(__file__).resolve().parent.parent / "docs" / "CONTRACTS.md"

# `tfgpu.contract.settings.parse_mem_limit(value: str, …) -> List[MemAmount]`, or a bare dotted
# name.
NAMED = re.compile(r"`((?:tfgpu|tfgpu_kit)(?:\.\w+)+)(\(.*?\)(?: -> [^`]+)?)?`")


def named_in_contracts() -> list[tuple[str, str | None]]:
    text = " ".join(CONTRACTS.read_text(encoding="utf-8").split())  # signatures may wrap lines
    return [(m.group(1), m.group(2)) for m in NAMED.finditer(text)]


def resolve(dotted: str) -> object:
    """The object a dotted name names: the longest importable module prefix, then attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: ModuleType | object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for attribute in parts[cut:]:
            assert hasattr(found, attribute), f"docs/CONTRACTS.md names {dotted}: no {attribute}"
            found = getattr(found, attribute)
        return found
    raise AssertionError(f"docs/CONTRACTS.md names {dotted}: no such module")


class _Spelled:
    """An annotation printed as written (inspect prints a string annotation quoted)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


def _plain(annotation: object) -> object:
    return _Spelled(annotation) if isinstance(annotation, str) else annotation


def spelled(target: object, *, method: bool) -> str:
    signature = inspect.signature(target)  # type: ignore[arg-type]
    parameters = list(signature.parameters.values())[1 if method else 0 :]  # no `self`
    return str(
        signature.replace(
            parameters=[p.replace(annotation=_plain(p.annotation)) for p in parameters],
            return_annotation=_plain(signature.return_annotation),
        )
    )


def test_contracts_names_what_it_checks() -> None:
    """The page keeps its checked names (a regex that matched nothing would pass anything)."""
    named = dict(named_in_contracts())
    assert "tfgpu.contract.settings.parse_environment" in named
    assert named["tfgpu.contract.settings.parse_mem_limit"] is not None


@pytest.mark.parametrize(("dotted", "documented"), named_in_contracts(), ids=lambda v: str(v))
def test_every_name_exists_with_the_documented_signature(
    dotted: str, documented: str | None
) -> None:
    target = resolve(dotted)
    if documented is None:
        return
    owner = resolve(dotted.rsplit(".", 1)[0])
    method = inspect.isclass(owner) and inspect.isfunction(target)
    assert documented == spelled(target, method=method), f"docs/CONTRACTS.md: {dotted}"
