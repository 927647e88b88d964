"""The dashboard's queries and the alert rules use only metrics that exist: what the runtime
really exports (derived from metrics.py), the plan's series, DCGM's and Prometheus's own."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit_images import ROOT
from tests.monitoring.metric_names import known_names, metric_names, runtime_names
from tests.monitoring.prometheus_tools import promtool_run

DASHBOARD = ROOT / "monitoring" / "tfgpu-dashboard.json"
RULES = ROOT / "monitoring" / "tfgpu-alerts.rules.yaml"


def dashboard_queries() -> Iterator[tuple[str, str]]:
    """(panel title, expr) of every query in the dashboard, rows' nested panels included."""
    doc = json.loads(DASHBOARD.read_text())

    def walk(panels: list[dict[str, Any]]) -> Iterator[tuple[str, str]]:
        for panel in panels:
            for target in panel.get("targets", []):
                yield panel["title"], target["expr"]
            yield from walk(panel.get("panels", []))

    yield from walk(doc["panels"])


def rule_exprs() -> Iterator[tuple[str, str]]:
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            yield rule.get("alert") or rule["record"], rule["expr"]


def test_the_runtime_exports_the_metrics_the_issue_names() -> None:
    """The derivation reads metrics.py's families (a renamed metric there changes this set)."""
    assert runtime_names() == {
        "tfgpu_config_info",
        "tfgpu_tensorflow_initialized",
        "tfgpu_device_memory_in_use_bytes",
        "tfgpu_device_memory_peak_bytes",
        "tfgpu_device_memory_limit_bytes",
        "tfgpu_memory_growth_enabled",
        "tfgpu_gpu_memory_total_bytes",
        "tfgpu_gpu_memory_used_bytes",
        "tfgpu_device_memory_stats_available",  # which devices have figures
        "tfgpu_recoveries_total",  # the recovery rule
        "tfgpu_recovery_stuck",
        "tfgpu_recovery_after_seconds",
        "tfgpu_recovery_streak_seconds",
    }


@pytest.mark.parametrize(
    ("expr", "names"),
    [
        ('sum by (uuid) (a_b{x="y"} * on(i) group_left(g) c[5m])', {"a_b", "c"}),
        ("rate(d_total[1m] offset 5m) > bool 1e9 unless e", {"d_total", "e"}),
        ('max_over_time(f{job=~"$job"}[${__range}]) or vector(1)', {"f"}),
        ("g:recorded / ignoring(device_type) h", {"g:recorded", "h"}),
    ],
)
def test_names_are_read_from_promql(expr: str, names: set[str]) -> None:
    assert metric_names(expr) == names


def test_a_misspelled_metric_is_reported() -> None:
    """The check below fails on an unknown name: a typo of a real metric is not known."""
    used = metric_names("tfgpu_device_memory_in_use_byte / tfgpu_device_memory_limit_bytes")
    assert used - known_names() == {"tfgpu_device_memory_in_use_byte"}


@pytest.mark.parametrize("source", ["dashboard", "rules"])
def test_every_query_uses_only_known_metrics(source: str) -> None:
    queries = list(dashboard_queries() if source == "dashboard" else rule_exprs())
    assert queries
    known = known_names()
    unknown = {
        where: sorted(metric_names(expr) - known)
        for where, expr in queries
        if metric_names(expr) - known
    }
    assert not unknown, f"unknown metric names (not exported by the runtime): {unknown}"


def test_the_dashboard_shows_process_card_plan_and_dcgm() -> None:
    used = set().union(*(metric_names(expr) for _, expr in dashboard_queries()))
    assert {
        "tfgpu_device_memory_in_use_bytes",
        "tfgpu_device_memory_peak_bytes",
        "tfgpu_device_memory_limit_bytes",
        "tfgpu_gpu_memory_used_bytes",
        "tfgpu_plan_committed_bytes",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_FREE",
        "up",
    } <= used


def test_the_dashboards_queries_parse(promtool: Path, tmp_path: Path) -> None:
    """Each query, with Grafana's variables filled in, as a recording rule promtool checks
    (it parses every expression)."""
    rules = [
        {"record": f"dashboard:query_{i}", "expr": re.sub(r"\$\{?\w+\}?", ".*", expr)}
        for i, (_, expr) in enumerate(dashboard_queries())
    ]
    path = tmp_path / "dashboard.rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = promtool_run(promtool, "check", "rules", str(path), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(rules)} rules found" in done.stdout
