"""Fixtures of the monitoring tests: Prometheus's own tools, found or unpacked once per run.

A missing tool skips locally with the reason; with CI=true it fails the test (.ci/run
installs the `prometheus` package, so a missing one there is a broken set-up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.ci_policy import ci_or_skip
from tests.monitoring import prometheus_tools


def _tool(name: str) -> Path:
    try:
        return prometheus_tools.find(name)
    except prometheus_tools.ToolMissing as exc:
        ci_or_skip(f"{name} is not available: {exc}")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return _tool("promtool")


@pytest.fixture(scope="session")
def prometheus_server_binary() -> Path:
    return _tool("prometheus")
