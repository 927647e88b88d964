"""Run `build.py plan` in-process on YAML written to a temporary folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tfgpu_kit import cli


def validate_job_templates(replicated_jobs: list[dict[str, Any]], versions: list[str]) -> list[str]:
    """Each JobSet replicatedJob's template validated strictly as the batch/v1 Job it becomes
    (kubernetes-validate knows no JobSet); the validator's results, one per job and version."""
    results = []
    for replicated in replicated_jobs:
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "x"},
            "spec": copy.deepcopy(replicated["template"]["spec"]),
        }
        results += [str(kubernetes_validate.validate(job, v, strict=True)) for v in versions]
    return results


def write(folder: Path, name: str, *docs: Any) -> str:
    path = folder / name
    path.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return str(path)


def plan_json(
    capsys: pytest.CaptureFixture[str], files: list[str], *flags: str
) -> tuple[int, dict[str, Any]]:
    code = cli.main(["plan", *files, "--json", *flags])
    out = capsys.readouterr().out
    return code, json.loads(out)


def errors(report: dict[str, Any]) -> list[str]:
    return [
        f"{p['who']}: {p['what']} | {p['fix']}"
        for p in report["problems"]
        if p["severity"] == "error"
    ]
