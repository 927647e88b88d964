"""compose.yaml's optional `monitoring` profile: a Prometheus with the kit's rules, valid for
compose v1 and v2, and invisible to `build.py plan` (no GPU). Its image cannot be pulled here:
the compose file is validated by compose itself (`config`, which checks it against the
Compose Specification's schema), the Prometheus configuration by promtool, and
test_prometheus_e2e.py runs the same rules in a real Prometheus."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.ci_policy import ci_or_skip
from tests.kit_images import COMPOSE_MISSING, ROOT, build_py, compose_command
from tests.monitoring.prometheus_tools import promtool_run

COMPOSE_FILE = ROOT / "compose.yaml"
PROMETHEUS_CONFIG = ROOT / "monitoring" / "prometheus.yml"


def compose_or_skip() -> list[str]:
    """The compose command; a missing one fails in CI, else skips (tests/ci_policy.py)."""
    command = compose_command()
    if command is None:
        ci_or_skip(COMPOSE_MISSING)
    return command


def compose_config(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # `config` reads and validates only: no engine, no image pull
    return subprocess.run(
        [*compose_or_skip(), "-f", str(path), "--profile", "monitoring", "config", *args],
        cwd=path.parent,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_compose_validates_the_monitoring_profile() -> None:
    done = compose_config(COMPOSE_FILE)
    assert done.returncode == 0, done.stderr
    service = yaml.safe_load(done.stdout)["services"]["prometheus"]
    assert service["profiles"] == ["monitoring"]
    assert service["image"].startswith("prom/prometheus:")
    assert "deploy" not in service and "gpus" not in service  # no GPU
    mounts = {str(v).split(":")[1]: str(v).split(":")[0] for v in service["volumes"]}
    assert Path(mounts["/etc/prometheus"]) == ROOT / "monitoring"
    assert "--config.file=/etc/prometheus/prometheus.yml" in service["command"]
    assert all(str(p).startswith("127.0.0.1:") for p in service["ports"])


def test_compose_rejects_a_malformed_profile(tmp_path: Path) -> None:
    """The validation above has teeth: compose's schema refuses a profile that is no list."""
    compose = yaml.safe_load(COMPOSE_FILE.read_text())
    compose["services"]["prometheus"]["profiles"] = 5
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(compose))
    done = compose_config(path)
    assert done.returncode != 0
    assert "profiles" in done.stderr


def test_the_profiles_prometheus_config_loads_the_kits_rules(promtool: Path) -> None:
    done = promtool_run(promtool, "check", "config", str(PROMETHEUS_CONFIG), timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tfgpu-alerts.rules.yaml" in done.stdout  # the rule_files glob found the alerts
    config = yaml.safe_load(PROMETHEUS_CONFIG.read_text())
    [job] = config["scrape_configs"]
    assert job["job_name"].startswith("tfgpu")  # what TfgpuMetricsEndpointDown watches
    compose = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    scraped = {t for c in job["static_configs"] for t in c["targets"]}
    with_metrics = {
        f"{name}:{s['environment']['TF_GPU_METRICS_PORT']}"
        for name, s in compose.items()
        if "TF_GPU_METRICS_PORT" in s.get("environment", {})
    }
    assert scraped == with_metrics  # every service that serves metrics, at its port


@pytest.mark.parametrize(
    "profile", [[], ["--profile", "monitoring"]], ids=["default", "monitoring"]
)
def test_plan_ignores_the_gpu_less_prometheus(profile: list[str]) -> None:
    done = build_py(
        "plan", str(COMPOSE_FILE), "--gpu-memory", "16GiB", "--json", *profile, timeout=120
    )
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    [gpu0] = report["gpus"]
    assert {e["who"] for e in gpu0["entries"]} == {"text-model", "image-model", "jupyter"}
    skipped = [n for n in report["notes"] if "'prometheus' skipped" in n]
    assert len(skipped) == (0 if profile else 1)
