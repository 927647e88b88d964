"""`build.py k8s --queue NAME` and `--workers N --ps M`.

Every rendered object validates with kubernetes-validate --strict (Kubernetes 1.29 and the newest
it bundles), a JobSet also against the strict JobSet CRD schema of test_k8s_multiworker.py with
each replicatedJob's Job template as a batch/v1 Job. Kueue's own CRDs (kubernetes-sigs/kueue
ff69552e79ad21652c36caa97038382e55625cf7, config/components/crd/bases) describe its LocalQueue,
ClusterQueue, Workload and other objects of its own, none of which the kit renders: what Kueue
reads from ours is the label, checked here on every Job, JobSet and Deployment, and `suspend`.
The host names each parameter-server pod is given are held to the pods' host names by the
JobSet and Indexed Job naming rules (tfgpu_kit/k8s/workers.py cites them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.scale.helpers import errors, peers_only, plan_json, validate_job_templates
from tests.scale.test_k8s_multiworker import JOBSET_SCHEMA
from tfgpu_kit import cli

VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
QUEUE = "kueue.x-k8s.io/queue-name"
CAPS = {"TF_GPU_MEM_LIMIT", "TF_GPU_VIRTUAL_DEVICES", "TF_GPU_MEMORY_GROWTH"}


def render(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 0
    return [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]


def validate(doc: dict[str, Any]) -> None:
    if doc["kind"] == "PodMonitor":
        return  # test_k8s_render.py validates it against its CRD's structural schema
    if doc["kind"] == "JobSet":
        jsonschema.validate(doc, JOBSET_SCHEMA)
        validate_job_templates(doc["spec"]["replicatedJobs"], VERSIONS)
        return
    for version in VERSIONS:
        kubernetes_validate.validate(doc, version, strict=True)


QUEUED = [
    ["--mem-limit", "6GiB", "--pod-monitor", "--time-slicing", "4"],
    ["--kind", "job", "--workers", "2", "--mem-limit", "6GiB"],
    ["--kind", "job", "--workers", "2", "--jobset"],
    ["--workers", "2", "--ps", "1", "--mem-limit", "6GiB"],
    ["--kind", "job", "--workers", "3", "--ps", "2", "--jobset", "--namespace", "ml"],
]


@pytest.mark.parametrize("flags", QUEUED, ids=lambda f: " ".join(f))
def test_every_workload_kueue_reads_carries_the_queue(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    docs = render(capsys, *flags, "--queue", "team-a")
    workloads = [d for d in docs if d["kind"] in ("Job", "JobSet", "Deployment")]
    assert workloads
    for doc in docs:
        validate(doc)
        labels = doc["metadata"].get("labels", {})
        if doc["kind"] in ("Job", "JobSet", "Deployment"):
            assert labels[QUEUE] == "team-a", doc["kind"]
            # Kueue reads the workload's own label; on the pods' template it would make Kueue's
            # pod integration take each pod for a workload of its own
            template = doc["spec"].get("template", {}).get("metadata", {})
            assert QUEUE not in template.get("labels", {})
        else:
            assert QUEUE not in labels, doc["kind"]  # Service, ConfigMap, PodMonitor: not queued
        if doc["kind"] in ("Job", "JobSet"):
            assert doc["spec"]["suspend"] is True  # Kueue unsuspends it on admission
        if doc["kind"] == "Deployment":
            assert "suspend" not in doc["spec"]  # no such field: Kueue gates its pods instead


def test_without_queue_nothing_is_suspended(capsys: pytest.CaptureFixture[str]) -> None:
    for doc in render(capsys, "--workers", "2", "--ps", "1"):
        assert QUEUE not in doc["metadata"]["labels"]
        assert "suspend" not in doc["spec"]


@pytest.mark.parametrize(
    "name", ["Team-a", "team_a", "-team", "team.", "a..b", "a" * 64, "team a", ""]
)
def test_a_queue_name_kueue_refuses_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    assert cli.main(["k8s", "--image", IMAGE, f"--queue={name}"]) == 2
    err = capsys.readouterr().err
    assert f"--queue {name!r} is not a LocalQueue name" in err and "example: --queue" in err


@pytest.mark.parametrize("name", ["team-a", "a", "ml.gpu-queue", "a" * 63])
def test_queue_names_kueue_accepts(capsys: pytest.CaptureFixture[str], name: str) -> None:
    (job,) = render(capsys, "--kind", "job", "--queue", name)
    assert job["metadata"]["labels"][QUEUE] == name


def test_plan_shows_the_queue(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--workers", "2", "--ps", "1", "--jobset", "--mem-limit", "6GiB", "--queue", "q1"]
    assert cli.main(["k8s", "--image", IMAGE, *flags, "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    files = sorted(str(p) for p in tmp_path.glob("*.yaml"))
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    queued = [n for n in report["notes"] if "queued by Kueue in LocalQueue q1 " in n]
    # the serving Deployment and the JobSet's three Jobs
    assert len(queued) == 4, report["notes"]


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["name"]: e["value"] for e in container.get("env", [])}


def _hosts(pattern: str, count: int) -> list[str]:
    return [pattern.replace("{index}", str(i)) for i in range(count)]


@pytest.mark.parametrize("jobset", [False, True])
def test_parameter_server_groups(capsys: pytest.CaptureFixture[str], jobset: bool) -> None:
    flags = ["--kind", "job", "--workers", "3", "--ps", "2", "--mem-limit", "6GiB"]
    flags += ["--jobset", "--train-cmd", "python ps_train.py"] if jobset else []
    docs = peers_only(render(capsys, *flags), VERSIONS)
    for doc in docs:
        validate(doc)
    # (group name, Job spec, the pods' hostname prefix, subdomain) of each group
    if jobset:
        (doc,) = docs
        name = doc["metadata"]["name"]
        assert doc["spec"]["successPolicy"] == {
            "operator": "Any",
            "targetReplicatedJobs": ["chief"],
        }
        groups = {
            r["name"]: (r["template"]["spec"], f"{name}-{r['name']}-0", name)
            for r in doc["spec"]["replicatedJobs"]
        }
        assert all(len(group) <= 20 for group in groups)  # Trainer v2.4.0's limit
    else:
        *jobs, service = docs
        assert [d["kind"] for d in jobs] == ["Job"] * 3 and service["kind"] == "Service"
        name = service["metadata"]["name"]
        groups = {}
        for job in jobs:
            pod = job["spec"]["template"]
            assert pod["spec"]["subdomain"] == name
            assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
            role = pod["metadata"]["labels"]["tfgpu.io/role"]
            groups[role] = (job["spec"], job["metadata"]["name"], name)
    assert list(groups) == ["chief", "worker", "ps"]
    counts = {"chief": 1, "worker": 3, "ps": 2}
    envs = {}
    for role, (spec, prefix, subdomain) in groups.items():
        assert spec["completionMode"] == "Indexed"
        assert spec["parallelism"] == spec["completions"] == counts[role]
        pod = spec["template"]["spec"]
        (container,) = pod["containers"]
        env = envs[role] = _env(container)
        assert env["TF_GPU_ROLE"] == role
        resources = container["resources"]
        if role == "ps":  # CPU-only: no GPU, no caps, not tolerated onto GPU nodes
            assert "nvidia.com/gpu" not in resources["limits"]
            assert "nvidia.com/gpu" not in resources["requests"]
            assert not CAPS & env.keys() and "tolerations" not in pod
        else:
            assert resources["limits"]["nvidia.com/gpu"] == "1"
            assert env["TF_GPU_MEM_LIMIT"] == "6GiB"
        if role == "chief":
            assert container["args"] == (
                ["python", "ps_train.py"] if jobset else ["python", "train.py"]
            )
        else:
            assert container["args"] == ["tfgpu", "server"]
        # the hosts every pod is told are the hosts Kubernetes gives this group's pods
        told = {
            "chief": [env["TF_GPU_CHIEF_HOST"]],
            "worker": _hosts(env["TF_GPU_WORKER_HOSTS"], int(env["TF_GPU_WORKERS"])),
            "ps": _hosts(env["TF_GPU_PS_HOSTS"], int(env["TF_GPU_PS"])),
        }[role]
        assert told == [f"{prefix}-{i}.{subdomain}" for i in range(counts[role])]
        if jobset:  # only the chief or a ps ends the run; a worker is replaced on its own
            assert spec["backoffLimit"] == (9 if role == "worker" else 0)
    gpu_only = {*CAPS, "CUDA_CACHE_PATH", "CUDA_CACHE_MAXSIZE"}  # a ps has no GPU (kernel cache)
    shared = {k: v for k, v in envs["chief"].items() if k not in gpu_only and k != "TF_GPU_ROLE"}
    for env in envs.values():  # one cluster: every role is told the same
        assert shared.items() <= env.items()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--ps", "1"], "--ps shapes a multi-worker Job, which only --workers renders"),
        (["--workers", "2", "--ps", "0"], "--ps '0' is not valid"),
        (["--workers", "2", "--ps", "x"], "--ps 'x' is not valid"),
        (["--workers", "2", "--env", "TF_GPU_ROLE=ps"], "--workers sets TF_GPU_ROLE"),
        (["--workers", "2", "--ps", "1", "--env", "TF_GPU_PS=2"], "--workers sets TF_GPU_PS"),
        (["--kind", "deployment", "--ps", "1"], "--ps shapes the job"),
        (
            ["--workers", "2", "--ps", "1000", "--jobset", "--name", "a" * 48],
            "of the group 'worker': the last one's host name",
        ),
    ],
)
def test_bad_parameter_server_flags(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
