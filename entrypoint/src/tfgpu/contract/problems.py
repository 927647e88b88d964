"""A finding of preflight or check: what is wrong and how to fix it."""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Dict

ERROR = "error"
WARNING = "warning"


class Problem:
    __slots__ = ("fix", "severity", "what")

    def __init__(self, severity: str, what: str, fix: str = "") -> None:
        self.severity = severity
        self.what = what
        self.fix = fix

    def as_json(self) -> "Dict[str, str]":
        return {"severity": self.severity, "what": self.what, "fix": self.fix}

    def __str__(self) -> str:
        return f"{self.severity}: {self.what}" + (f"\n  fix: {self.fix}" if self.fix else "")

    def __repr__(self) -> str:
        return f"Problem({self.severity!r}, {self.what!r})"
