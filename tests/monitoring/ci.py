"""The suite's CI policy for a missing tool: a failure under CI=true, a skip with the reason
elsewhere (the same test of CI=true as tests/conftest.py, which pytest owns as a conftest)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def tool_missing(reason: str) -> NoReturn:
    if in_ci():
        pytest.fail(f"CI=true: {reason}", pytrace=False)
    pytest.skip(f"{reason} (set CI=true to make this an error)")
