"""Fixtures of the monitoring tests: Prometheus's own tools, found or unpacked once per run.

A missing tool skips locally with the reason; with CI=true it fails the test (.ci/run
installs the `prometheus` package, so a missing one there is a broken set-up)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.monitoring import prometheus_tools
from tests.monitoring.ci import tool_missing


def _tool(name: str) -> Path:
    try:
        return prometheus_tools.find(name)
    except prometheus_tools.ToolMissing as exc:
        tool_missing(f"{name} is not available: {exc}")


@pytest.fixture(scope="session")
def promtool() -> Path:
    return _tool("promtool")


@pytest.fixture(scope="session")
def prometheus_server_binary() -> Path:
    return _tool("prometheus")
