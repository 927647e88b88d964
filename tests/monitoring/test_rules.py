"""The shipped alert rules, checked and unit-tested with Prometheus's own promtool
(`promtool check rules`, `promtool test rules`), and the plan's recording rules with them."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.kit_images import ROOT, build_py
from tests.monitoring.prometheus_tools import promtool_run

RULES = ROOT / "monitoring" / "tfgpu-alerts.rules.yaml"
UNIT_TESTS = Path(__file__).with_name("tfgpu-alerts.test.yaml")
ALERTS = {
    "TfgpuMemoryNearCap",
    "TfgpuMemoryPeakReachedCap",
    "TfgpuUncappedOnSharedGpu",
    "TfgpuGpuOverPlan",
    "TfgpuMetricsEndpointDown",
    "TfgpuRestartedAtCap",
}


def alert_rules() -> list[dict[str, Any]]:
    doc = yaml.safe_load(RULES.read_text())
    return [rule for group in doc["groups"] for rule in group["rules"] if "alert" in rule]


def test_promtool_accepts_the_rules_file(promtool: Path) -> None:
    done = promtool_run(promtool, "check", "rules", str(RULES))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(ALERTS)} rules found" in done.stdout


def test_every_rule_names_the_target_and_the_variable_to_change() -> None:
    """Each alert: a summary naming the pod/container (or the GPU, for the per-card alert),
    a description naming the variable to change, and a severity."""
    rules = alert_rules()
    assert {r["alert"] for r in rules} == ALERTS
    for rule in rules:
        summary, description = rule["annotations"]["summary"], rule["annotations"]["description"]
        if rule["alert"] == "TfgpuGpuOverPlan":
            assert "$labels.gpu" in summary, rule["alert"]
        else:
            assert "$labels.pod" in summary and "$labels.container" in summary, rule["alert"]
        assert "TF_GPU_MEM_LIMIT" in description or "TF_GPU_METRICS_PORT" in description
        assert rule["labels"]["severity"] in {"warning", "critical"}


def test_every_alert_has_a_must_fire_and_a_must_not_fire_case() -> None:
    """promtool compares the alerts listed with exactly those firing: an empty list is a
    must-not-fire case, a listed alert a must-fire case."""
    cases = yaml.safe_load(UNIT_TESTS.read_text())
    fire: set[str] = set()
    silent: set[str] = set()
    for group in cases["tests"]:
        for check in group["alert_rule_test"]:
            (fire if check["exp_alerts"] else silent).add(check["alertname"])
    assert fire == ALERTS
    assert silent == ALERTS


def test_promtool_unit_tests_pass(promtool: Path) -> None:
    done = promtool_run(promtool, "test", "rules", str(UNIT_TESTS))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


# A changed threshold or join in the rules must make the unit tests fail: proof that they
# test the thresholds, not only that the file parses.
MUTATIONS = [
    ("near cap: 0.90 -> 0.96", "\n          > 0.90", "\n          > 0.96"),
    ("near cap: for 10m -> 20m", "for: 10m", "for: 20m"),
    ("peak: 0.98 -> 0.999", "\n          >= 0.98", "\n          >= 0.999"),
    ("shared: >1 -> >2 processes", "> 1)", "> 2)"),
    ("shared: cap ignored", "unless on(instance, job) tfgpu_device_memory_limit_bytes", ""),
    ("over plan: DCGM MiB read as bytes", "* 1048576", "* 1"),
    ("endpoint: only job tfgpu", "\n          or (up == 0 and", "\n          and (up == 0 and"),
]


@pytest.mark.parametrize(("old", "new"), [m[1:] for m in MUTATIONS], ids=[m[0] for m in MUTATIONS])
def test_unit_tests_catch_a_changed_rule(
    promtool: Path, tmp_path: Path, old: str, new: str
) -> None:
    text = RULES.read_text()
    assert old in text, f"the rules file no longer contains {old!r}: update MUTATIONS"
    (tmp_path / "monitoring").mkdir()
    (tmp_path / "monitoring" / RULES.name).write_text(text.replace(old, new, 1))
    tests_dir = tmp_path / "tests" / "monitoring"
    tests_dir.mkdir(parents=True)
    shutil.copy(UNIT_TESTS, tests_dir / UNIT_TESTS.name)
    done = promtool_run(promtool, "test", "rules", UNIT_TESTS.name, cwd=tests_dir)
    assert done.returncode != 0, f"the unit tests still pass with {new!r}:\n{done.stdout}"
    assert "FAILED" in done.stdout + done.stderr


def test_the_plans_rules_feed_the_over_plan_alert(promtool: Path, tmp_path: Path) -> None:
    """`build.py plan compose.yaml --prometheus-rules` writes series that promtool accepts and
    that TfgpuGpuOverPlan compares with the card's use: above the plan fires, below does not."""
    plan_rules = tmp_path / "plan.rules.yaml"
    uuid = "GPU-fa6e0000-0000-4000-8000-000000000000"
    done = build_py(
        "plan",
        str(ROOT / "compose.yaml"),
        "--gpu-memory",
        "16GiB",
        "--prometheus-rules",
        str(plan_rules),
        "--gpu-uuid",
        f"0={uuid}",
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    check = promtool_run(promtool, "check", "rules", str(plan_rules))
    assert check.returncode == 0, check.stdout + check.stderr
    committed = (6144 + 8192 + 512 + 3 * 500) << 20  # compose.yaml's caps and 3 contexts
    rules = yaml.safe_load(plan_rules.read_text())["groups"][0]["rules"]
    assert {"record": "tfgpu_plan_committed_bytes", "expr": f"vector({committed})",
            "labels": {"gpu": "0", "uuid": uuid}} in rules  # fmt: skip
    used = 'tfgpu_gpu_memory_used_bytes{job="tfgpu",instance="h:9401",gpu="0",uuid="%s",name="x"}'
    cases = {
        "rule_files": [str(RULES), str(plan_rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    {"series": used % uuid, "values": f"{committed + (64 << 20)}x10"},
                    {"series": used % uuid.replace("fa6e", "0000"), "values": "17e9x10"},
                ],
                # ALERTS: the series Prometheus writes for each pending/firing alert; exactly
                # the planned card's alert fires (promtool compares the whole result).
                "promql_expr_test": [
                    {
                        "eval_time": "6m",
                        "expr": 'ALERTS{alertname="TfgpuGpuOverPlan", alertstate="firing"}',
                        "exp_samples": [
                            {
                                "labels": 'ALERTS{alertname="TfgpuGpuOverPlan",'
                                f'alertstate="firing",gpu="0",severity="warning",uuid="{uuid}"}}',
                                "value": 1,
                            }
                        ],
                    }
                ],
            }
        ],
    }
    path = tmp_path / "over-plan.test.yaml"
    path.write_text(yaml.safe_dump(cases))
    done = promtool_run(promtool, "test", "rules", str(path))
    assert done.returncode == 0, done.stdout + done.stderr
