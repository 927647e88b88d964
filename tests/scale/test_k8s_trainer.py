"""`build.py k8s --workers N [--ps M] --trainer`: a Kubeflow Trainer v2 ClusterTrainingRuntime and
a TrainJob.

The schemas are the `openAPIV3Schema` of kubeflow/trainer's CRDs at commit
8c0f5059bd51ec3ba6d6a6a7b2e1471de7bc13b3 (master after v2.3.0, VERSION v2.3.0):
manifests/base/crds/trainer.kubeflow.org_clustertrainingruntimes.yaml and
trainer.kubeflow.org_trainjobs.yaml, stored as JSON (trainer_*_v1alpha1_schema.json) and made
strict as the JobSet one (test_k8s_multiworker.py). Each replicatedJob's Job template is also a
batch/v1 Job for kubernetes-validate --strict. No Trainer controller ran: the host names each pod
is told are held to Trainer's own endpoint rule instead (pkg/runtime/framework/plugins/jobset/
jobset.go syncPodNetwork at that commit: `<trainJob>-<replicatedJob>-<replica>-<pod>.<trainJob>`).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tfgpu.contract.settings import parse_environment

from tests.scale.helpers import errors, peers_only, plan_json, validate_job_templates, write
from tests.scale.test_k8s_multiworker import _strict
from tfgpu_kit import cli

HERE = Path(__file__).parent
RUNTIME_SCHEMA = _strict(
    json.loads((HERE / "trainer_clustertrainingruntime_v1alpha1_schema.json").read_text("utf-8"))
)
TRAINJOB_SCHEMA = _strict(
    json.loads((HERE / "trainer_trainjob_v1alpha1_schema.json").read_text("utf-8"))
)
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
ANCESTOR = "trainer.kubeflow.org/trainjob-ancestor-step"


def render(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[dict[str, Any], ...]:
    assert cli.main(["k8s", "--image", IMAGE, "--kind", "job", "--trainer", *flags]) == 0
    docs = [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]
    docs = peers_only(docs, VERSIONS)
    assert [d["kind"] for d in docs] == ["ClusterTrainingRuntime", "TrainJob"]
    return tuple(docs)


def validate(runtime: dict[str, Any], trainjob: dict[str, Any]) -> None:
    jsonschema.validate(runtime, RUNTIME_SCHEMA)
    jsonschema.validate(trainjob, TRAINJOB_SCHEMA)
    validate_job_templates(runtime["spec"]["template"]["spec"]["replicatedJobs"], VERSIONS)


def test_the_strict_schemas_refuse_an_unknown_field(capsys: pytest.CaptureFixture[str]) -> None:
    runtime, trainjob = render(capsys, "--workers", "2")
    trainjob["spec"]["podTemplateOverrides"] = []  # Trainer v2.2 replaced it with runtimePatches
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(trainjob, TRAINJOB_SCHEMA)
    runtime["spec"]["mlPolicy"]["tensorflow"] = {}  # no such policy: TensorFlow has none
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(runtime, RUNTIME_SCHEMA)


def _expand(env: list[dict[str, Any]], labels: dict[str, str]) -> dict[str, str]:
    """A container's environment as the kubelet makes it: fieldRef labels read, and $(VAR)
    replaced by a variable defined earlier in the list (kubernetes.io, "Define Dependent
    Environment Variables"); an undefined reference stays as it is."""
    out: dict[str, str] = {}
    for item in env:
        if "valueFrom" in item:
            path = item["valueFrom"]["fieldRef"]["fieldPath"]
            match = re.fullmatch(r"metadata\.labels\['([^']+)'\]", path)
            assert match, path
            out[item["name"]] = labels[match.group(1)]
        else:
            out[item["name"]] = re.sub(
                r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)",
                lambda m: out.get(m.group(1), m.group(0)),
                item["value"],
            )
    return out


@pytest.mark.parametrize("servers", [0, 2])
def test_runtime_and_trainjob(capsys: pytest.CaptureFixture[str], servers: int) -> None:
    flags = ["--workers", "3", "--mem-limit", "6GiB", "--queue", "team-a", "--namespace", "ml"]
    flags += ["--ps", str(servers)] if servers else []
    runtime, trainjob = render(capsys, *flags)
    validate(runtime, trainjob)
    assert trainjob["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": runtime["metadata"]["name"],
    }
    assert trainjob["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "team-a"
    assert trainjob["spec"]["suspend"] is True
    assert "namespace" not in runtime["metadata"]  # cluster-scoped
    replicated = runtime["spec"]["template"]["spec"]["replicatedJobs"]
    names = [r["name"] for r in replicated]
    assert names == (["chief", "worker", "ps"] if servers else ["node"])
    assert all(len(name) <= 20 for name in names)  # Trainer v2.4.0's limit
    # Trainer's trainer node: the first replicatedJob, with a container named `node`, whose
    # count numNodes sets
    marked = [r["name"] for r in replicated if r["template"].get("metadata", {}).get("labels")]
    assert marked == names[:1]
    assert replicated[0]["template"]["metadata"]["labels"][ANCESTOR] == "trainer"
    first = replicated[0]["template"]["spec"]
    assert [c["name"] for c in first["template"]["spec"]["containers"]] == ["node"]
    assert runtime["spec"]["mlPolicy"] == {"numNodes": first["parallelism"]}
    # a TrainJob of any name: what each pod is told is where Trainer puts the pods
    for job_name in (trainjob["metadata"]["name"], "other-run"):
        told = {}
        for r in replicated:
            spec = r["template"]["spec"]
            (container,) = spec["template"]["spec"]["containers"]
            env = _expand(container["env"], {"jobset.sigs.k8s.io/jobset-name": job_name})
            assert "$(" not in "".join(env.values())
            hosts = [f"{job_name}-{r['name']}-0-{i}.{job_name}" for i in range(spec["parallelism"])]
            told[r["name"]] = (env, hosts)
        if not servers:
            env, hosts = told["node"]
            for index in range(len(hosts)):  # each pod's runtime, as it will run there
                s = parse_environment({**env, "JOB_COMPLETION_INDEX": str(index)})
                assert s.tf_config is not None
                assert s.tf_config.cluster["worker"] == [f"{h}:2222" for h in hosts]
        else:
            env = told["chief"][0]
            assert [env["TF_GPU_CHIEF_HOST"]] == told["chief"][1]
            for role, count, variable in (
                ("worker", 3, "TF_GPU_WORKER_HOSTS"),
                ("ps", 2, "TF_GPU_PS_HOSTS"),
            ):
                pattern = told[role][0][variable]
                hosts = [pattern.replace("{index}", str(i)) for i in range(count)]
                assert hosts == told[role][1]
            ps_container = replicated[2]["template"]["spec"]["template"]["spec"]["containers"][0]
            assert "nvidia.com/gpu" not in ps_container["resources"]["limits"]
            assert runtime["spec"]["template"]["spec"]["successPolicy"]["targetReplicatedJobs"] == [
                "chief"
            ]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--trainer"], "--trainer shapes a multi-worker Job, which only --workers renders"),
        (["--workers", "2", "--trainer", "--jobset"], "a Trainer v2 runtime is a JobSet already"),
        (["--workers", "2", "--trainer", "--env", "JOBSET_NAME=x"], "--workers sets JOBSET_NAME"),
    ],
)
def test_bad_trainer_flags(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["k8s", "--image", IMAGE, "--kind", "job", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("servers", [0, 1])
def test_plan_names_what_it_does_not_read_in_trainer_output(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], servers: int
) -> None:
    """Before: `plan clustertrainingruntime.yaml trainjob.yaml` printed "plan OK: 0 GPU budget(s)
    fit" for pods it never read. A TrainJob alone is an error that says what to plan; beside
    the JobSet Trainer makes of it (the runtime's template under the TrainJob's name), the
    TrainJob is planned through that JobSet."""
    flags = ["--workers", "2", "--mem-limit", "4GiB"] + (["--ps", "1"] if servers else [])
    runtime, trainjob = render(capsys, *flags)
    files = [write(tmp_path, "runtime.yaml", runtime), write(tmp_path, "trainjob.yaml", trainjob)]
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 1
    [problem] = report["problems"]
    assert problem["who"] == "TrainJob/tfgpu-train"
    assert "ClusterTrainingRuntimes are not read" in problem["what"]
    assert "kubectl get jobset tfgpu-train" in problem["fix"] and "--jobset" in problem["fix"]
    assert any("ClusterTrainingRuntime/" in note and "not read" in note for note in report["notes"])
    jobset = {  # what Trainer's controller makes: the runtime's JobSet, named after the TrainJob
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": trainjob["metadata"]["name"]},
        "spec": runtime["spec"]["template"]["spec"],
    }
    files.append(write(tmp_path, "jobset.yaml", jobset))
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert report["gpus"], "the JobSet's GPU pods are budgeted"
    assert any("planned through its JobSet" in note for note in report["notes"])
