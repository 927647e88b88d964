"""The forward-compatibility table has one source: images/matrix.yaml.

The runtime (`tfgpu.machine.driver._FORWARD_COMPAT`) cannot read images/ at run time (it is a
package of its own inside the image), so it keeps a copy; this test ties the copy to the matrix, so
a change to either alone fails here. The runtime's upper bound, (newest CUDA major, 99), says "any
CUDA of the newest major the matrix knows" (matrix.yaml: "535: 12-3 ... 12-9 and 13-x"); a new CUDA
major in `cuda_majors:` fails this test until someone checks which branches its compat packages
serve."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from tfgpu.machine import driver

MATRIX = Path(__file__).resolve().parents[2] / "images" / "matrix.yaml"

Span = tuple[tuple[int, int], tuple[int, int]]


def runtime_table(matrix: dict[str, Any]) -> dict[int, Span]:
    """The runtime's table as the matrix says it must be."""
    newest_major = max(int(major) for major in matrix["cuda_majors"])
    table: dict[int, Span] = {}
    for branch, entry in matrix["forward_compat"].items():
        major, minor = (int(part) for part in str(entry["from_cuda"]).split("."))
        table[int(branch)] = ((major, minor), (newest_major, 99))
    return table


def load_matrix() -> dict[str, Any]:
    loaded = yaml.safe_load(MATRIX.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def test_the_runtime_table_is_the_matrix_table() -> None:
    assert runtime_table(load_matrix()) == driver._FORWARD_COMPAT


def test_a_change_to_the_matrix_alone_is_seen() -> None:
    """The comparison is not vacuous: each branch and each bound of the matrix reaches it."""
    matrix = load_matrix()
    assert matrix["forward_compat"], "images/matrix.yaml lists no forward_compat branch"
    for branch in list(matrix["forward_compat"]):
        changed = load_matrix()
        changed["forward_compat"][branch]["from_cuda"] = "99.0"
        assert runtime_table(changed) != driver._FORWARD_COMPAT, branch
        dropped = load_matrix()
        del dropped["forward_compat"][branch]
        assert runtime_table(dropped) != driver._FORWARD_COMPAT, branch
    newer = load_matrix()
    newer["cuda_majors"]["99"] = {"compat_floor": "999"}
    assert runtime_table(newer) != driver._FORWARD_COMPAT
