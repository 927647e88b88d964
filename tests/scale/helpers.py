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


def training_pods(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The pod templates of a training workload: a Job's, each replicatedJob's of a JobSet or a
    ClusterTrainingRuntime (its spec.template is a JobSet's)."""
    if doc["kind"] == "Job":
        return [doc["spec"]["template"]]
    if doc["kind"] == "JobSet":
        jobs = doc["spec"]["replicatedJobs"]
    elif doc["kind"] == "ClusterTrainingRuntime":
        jobs = doc["spec"]["template"]["spec"]["replicatedJobs"]
    else:
        return []
    return [job["template"]["spec"]["template"] for job in jobs]


def peers_only(docs: list[dict[str, Any]], versions: list[str]) -> list[dict[str, Any]]:
    """The other documents, after checking the one NetworkPolicy every multi-worker manifest has.
    Valid (strict), it selects every training pod of the rendered job and admits its workers'
    port from those pods only; those pods mount no service-account token."""
    [policy] = [d for d in docs if d["kind"] == "NetworkPolicy"]
    others = [d for d in docs if d is not policy]
    for version in versions:
        kubernetes_validate.validate(policy, version, strict=True)
    spec = policy["spec"]
    selector = spec["podSelector"]["matchLabels"]
    assert spec["policyTypes"] == ["Ingress"]
    peers, *metrics = spec["ingress"]
    assert peers["from"] == [{"podSelector": {"matchLabels": selector}}]
    assert [m.get("from") for m in metrics] == [None] * len(metrics)  # the metrics port only
    pods = [pod for doc in others for pod in training_pods(doc)]
    assert pods, "no training pod"
    for pod in pods:
        assert selector.items() <= pod["metadata"]["labels"].items(), pod["metadata"]
        assert pod["spec"]["automountServiceAccountToken"] is False
        [container] = pod["spec"]["containers"]
        ports = {p["containerPort"] for p in container.get("ports", [])}
        assert {p["port"] for p in peers["ports"]} <= ports
    return others
