"""The suite's one rule for a missing prerequisite (engine, tool, Python, privilege): in CI the
machine is broken, so the test fails and says why; elsewhere it is skipped with the same reason.

"In CI" is any true value of `CI` (true, 1, yes, on; any case, blanks ignored): CI services set
`CI=true`, others `CI=1`, and a CI that set `CI=1` must not turn failures into skips."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest

TRUE_VALUES = frozenset({"true", "1", "yes", "on"})


def in_ci() -> bool:
    """Whether `CI` holds a true value."""
    return os.environ.get("CI", "").strip().lower() in TRUE_VALUES


def ci_or_skip(reason: str, *, in_ci_because: str = "") -> NoReturn:
    """Fail the test in CI (`CI=VALUE: reason` plus `in_ci_because`), skip it elsewhere with
    the reason and how to make it an error."""
    if in_ci():
        ci = os.environ.get("CI", "").strip()
        pytest.fail(f"CI={ci}: {reason}{in_ci_because}", pytrace=False)
    pytest.skip(f"{reason} (set CI=true to make this an error)")
