"""ASCII digits read into whole numbers, bounded before int() converts them: the one reading of
a count, a port or an index that the contract's variables (tfgpu.contract.settings,
tfgpu.contract.tf_config), NVML's device list (tfgpu.machine.nvml) and Jupyter's culling
(tfgpu.jupyter_cull) all use. Imports nothing.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Optional


def is_ascii_number(text: str) -> bool:
    """Only 0-9: `"²".isdigit()` is True but `int("²")` raises, and `int("٣")` is 3, which no
    other program reading the same variable would accept."""
    return text.isascii() and text.isdigit()


def whole_number(text: str, high: int) -> "Optional[int]":
    """int(text) for ASCII digits whose value is at most `high`, else None. The length is judged
    before int() converts: int() of more than 4,300 digits raises (CPython's limit on
    quadratic-time conversion), and even below it costs time on a value no bound admits.
    Leading zeros are allowed, as int() allows them."""
    if not is_ascii_number(text):
        return None
    digits = text.lstrip("0")
    if len(digits) > len(str(high)):
        return None
    number = int(digits or "0")
    return number if number <= high else None
