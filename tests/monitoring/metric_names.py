"""Which metric names exist, and which ones a PromQL expression uses.

Known names are derived, not listed by hand where a source exists: the runtime's from
entrypoint/src/tfgpu/act/metrics.py (its metric families' names, read from its syntax tree, so a
renamed metric in the runtime shows up here), prometheus-client's process_* collector as the
runtime registers it, the plan's recorded series, DCGM's documented names and Prometheus's own
series."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.kit_images import ROOT
from tfgpu_kit.plan import prometheus as plan_prometheus

METRICS_MODULE = ROOT / "entrypoint" / "src" / "tfgpu" / "act" / "metrics.py"
# The DCGM exporter's default counters used by the kit's rules and dashboard, in MiB and %
# (NVIDIA/dcgm-exporter etc/default-counters.csv at 00d6d344ea4a39112b211b9ff5af3d97e0bb51c2).
DCGM = {"DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_GPU_UTIL"}
# Prometheus's own series: `up` per target, ALERTS per pending/firing alert
# (https://prometheus.io/docs/concepts/jobs_instances/, …/configuration/alerting_rules/).
PROMETHEUS = {"up", "ALERTS"}
_FAMILIES = {
    "GaugeMetricFamily": "",
    "InfoMetricFamily": "_info",
    "CounterMetricFamily": "_total",
    "family": "",
}


def runtime_names(path: Path = METRICS_MODULE) -> set[str]:
    """Exposed names of the metric families metrics.py creates: the first argument of each
    `GaugeMetricFamily(…)`, `InfoMetricFamily(…)` (exposed with `_info`),
    `CounterMetricFamily(…)` (exposed with `_total`) or `family(…)` call."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        called = func.id if isinstance(func, ast.Name) else getattr(func, "attr", "")
        first = node.args[0]
        if called in _FAMILIES and isinstance(first, ast.Constant) and isinstance(first.value, str):
            names.add(first.value + _FAMILIES[called])
    return names


def process_names() -> set[str]:
    """The sample names of prometheus-client's ProcessCollector, which the runtime registers."""
    import prometheus_client

    registry = prometheus_client.CollectorRegistry(auto_describe=False)
    prometheus_client.ProcessCollector(registry=registry)
    return {sample.name for family in registry.collect() for sample in family.samples}


def known_names() -> set[str]:
    plan = {plan_prometheus.COMMITTED, plan_prometheus.MEMORY}
    return runtime_names() | process_names() | plan | DCGM | PROMETHEUS


_KEYWORDS = {"and", "or", "unless", "bool", "offset", "inf", "nan", "atan2"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_LABEL_LIST = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_NUMBER = re.compile(r"(?<![\w:])\d+(?:\.\d+)?(?:[eE][+-]?\d+|(?:ms|[smhdwy])+)?(?![\w:])")
_IDENTIFIER = re.compile(r"[A-Za-z_:][A-Za-z0-9_:]*(?!\s*\()")


def metric_names(expr: str) -> set[str]:
    """Metric names a PromQL expression selects (Grafana's $variables allowed)."""
    text = re.sub(r"\$\{?\w+\}?", "v", expr)  # Grafana variables: only inside strings/ranges
    text = _STRING.sub('""', text)
    text = re.sub(r"\{[^}]*\}", " ", text)  # label matchers
    text = re.sub(r"\[[^\]]*\]", " ", text)  # ranges and subqueries' steps
    text = _LABEL_LIST.sub(" ", text)
    text = _NUMBER.sub(" ", text)
    found = set()
    for match in _IDENTIFIER.finditer(text):
        name = match.group(0)
        # an identifier cut short by the lookahead (`rat` of `rate(`) is followed by a word char
        end = match.end()
        if end < len(text) and (text[end].isalnum() or text[end] in "_:"):
            continue
        if name not in _KEYWORDS:
            found.add(name)
    return found
