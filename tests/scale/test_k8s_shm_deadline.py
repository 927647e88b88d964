"""`./kit k8s --shm-size` and `--deadline`, in every form the command renders.

--shm-size: every container that asks for nvidia.com/gpu mounts /dev/shm from a Memory emptyDir
of that sizeLimit (default 1Gi; `none`: no volume); its pages count against the container's
memory limit, so the size must be smaller than --memory, which stays the pod's request and limit
(the rule this kit chose). A parameter server without a GPU gets none.

--deadline: the training run's activeDeadlineSeconds: on each Job, on each replicatedJob's Job of
a JobSet (v1alpha2 has no deadline of its own) with a failurePolicy rule that fails the JobSet on
DeadlineExceeded, and on the TrainJob for Kubeflow Trainer (whose runtime stays a template).

Every form validates with kubernetes-validate --strict (1.29.0 and the newest), the JobSet and
Trainer objects against their strict CRD schemas (test_k8s_multiworker.py, test_k8s_trainer.py);
`plan` reads the manifests, the volume changes none of its budgets, and it says each deadline."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.scale.helpers import errors, plan_json, training_pods, validate_job_templates, write
from tests.scale.test_k8s_multiworker import JOBSET_SCHEMA
from tests.scale.test_k8s_trainer import RUNTIME_SCHEMA, TRAINJOB_SCHEMA
from tfgpu_kit import cli
from tfgpu_kit.shared import kube_quantity

IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
VERSIONS = ["1.29.0", kubernetes_validate.latest_version()]
PS_GPUS = ["--env", "TF_GPU_PS_GPUS=true"]
# every form the command renders: the Deployment, a Job, and each multi-worker training form
FORMS = [
    ["--kind", "deployment"],
    ["--kind", "job"],
    ["--kind", "job", "--workers", "2"],
    ["--workers", "2", "--jobset"],
    ["--workers", "2", "--ps", "1"],
    ["--workers", "2", "--ps", "1", "--jobset"],
    ["--workers", "2", "--trainer"],
    ["--workers", "2", "--ps", "1", "--trainer"],
    ["--workers", "2", "--ps", "1", *PS_GPUS],
    ["--workers", "2", "--ps", "1", "--jobset", *PS_GPUS],
    ["--workers", "2", "--ps", "1", "--trainer", *PS_GPUS],
]
TRAINING = [form for form in FORMS if form != ["--kind", "deployment"]]


def render(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 0, capsys.readouterr().err
    return [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]


def refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert captured.err.count("error:") == 1, captured.err
    return captured.err


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template of a document: a Deployment's, or a training workload's."""
    if doc["kind"] == "Deployment":
        return [doc["spec"]["template"]]
    return training_pods(doc)


def validate(docs: list[dict[str, Any]]) -> None:
    """Each document strictly: Kubernetes' kinds with kubernetes-validate on every version, the
    CRDs against their strict schemas, and the Jobs a JobSet or runtime becomes."""
    for doc in docs:
        if doc["kind"] == "JobSet":
            jsonschema.validate(doc, JOBSET_SCHEMA)
            validate_job_templates(doc["spec"]["replicatedJobs"], VERSIONS)
        elif doc["kind"] == "ClusterTrainingRuntime":
            jsonschema.validate(doc, RUNTIME_SCHEMA)
            validate_job_templates(doc["spec"]["template"]["spec"]["replicatedJobs"], VERSIONS)
        elif doc["kind"] == "TrainJob":
            jsonschema.validate(doc, TRAINJOB_SCHEMA)
        else:
            for version in VERSIONS:
                kubernetes_validate.validate(doc, version, strict=True)


def shm_of(pod: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The pod's /dev/shm volume and where its container mounts it (None, None: none)."""
    [container] = pod["spec"]["containers"]
    volume = next((v for v in pod["spec"].get("volumes", []) if v["name"] == "dshm"), None)
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    return volume, mounts.get("dshm")


def bytes_of(quantity: str) -> int:
    value = kube_quantity.parse(quantity)
    assert value is not None and value.denominator == 1, quantity
    return int(value)


# --- --shm-size ------------------------------------------------------------------------------


@pytest.mark.parametrize("form", FORMS, ids=" ".join)
@pytest.mark.parametrize(
    ("flags", "size"),
    [([], "1Gi"), (["--shm-size", "2G"], "2G"), (["--shm-size", "1.5Gi"], "1536Mi")],
    ids=["default", "2G", "1.5Gi"],
)
def test_every_gpu_container_mounts_shm_within_its_memory(
    capsys: pytest.CaptureFixture[str], form: list[str], flags: list[str], size: str
) -> None:
    docs = render(capsys, *form, *flags)
    pods = [pod for doc in docs for pod in pod_templates(doc)]
    gpu_pods = 0
    for pod in pods:
        [container] = pod["spec"]["containers"]
        resources = container["resources"]
        gpu = "nvidia.com/gpu" in resources["limits"]
        volume, mount = shm_of(pod)
        if not gpu:  # a parameter server without a GPU: no tf.data, no NCCL, no volume
            assert (volume, mount) == (None, None)
            continue
        gpu_pods += 1
        assert volume == {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": size}}
        assert mount == "/dev/shm"
        # the rule: --memory stays the request and the limit, and /dev/shm fits inside it
        assert resources["requests"]["memory"] == resources["limits"]["memory"] == "8Gi"
        assert bytes_of(size) < bytes_of(resources["limits"]["memory"])
    cpu_only = 1 if "--ps" in form and PS_GPUS[1] not in form else 0  # the one parameter server
    assert gpu_pods == len(pods) - cpu_only
    validate(docs)


def test_the_manifest_says_shm_counts_against_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["k8s", "--image", IMAGE, "--kind", "deployment"]) == 0
    text = capsys.readouterr().out  # the comments, beside the limit and the volume
    assert "It holds /dev/shm too (the dshm volume, up to 1Gi)" in text
    assert "its pages count against the container's memory limit" in text


@pytest.mark.parametrize("form", [["--kind", "deployment"], ["--workers", "2", "--jobset"]])
def test_none_mounts_no_shm(capsys: pytest.CaptureFixture[str], form: list[str]) -> None:
    docs = render(capsys, *form, "--shm-size", "none")
    for pod in [pod for doc in docs for pod in pod_templates(doc)]:
        assert shm_of(pod) == (None, None)
    validate(docs)


def test_a_small_memory_takes_a_smaller_shm(capsys: pytest.CaptureFixture[str]) -> None:
    [deployment] = render(capsys, "--kind", "deployment", "--memory", "2Gi", "--shm-size", "512Mi")
    volume, _ = shm_of(deployment["spec"]["template"])
    assert volume is not None and volume["emptyDir"]["sizeLimit"] == "512Mi"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--shm-size", "abc"], "--shm-size 'abc' is not valid: accepted: a Kubernetes quantity"),
        (["--shm-size", "0"], "--shm-size '0' is not valid"),
        (["--shm-size", "NONE"], "or none (no volume"),
        (["--shm-size", "1024"], "a bare number is bytes"),
        (["--shm-size", "64Mi"], "--shm-size '64Mi' is not valid: accepted: a Kubernetes quantity"),
        (["--shm-size=-1Gi"], "--shm-size '-1Gi' is not valid"),
        (["--shm-size", "1.5"], "example: --shm-size 2Gi"),
        (["--shm-size", "1Gi\n"], "--shm-size"),
        (["--shm-size", "1e999999999"], "--shm-size 1e999999999 is not smaller than --memory"),
        (
            ["--shm-size", "8Gi"],
            "--shm-size 8Gi is not smaller than --memory 8Gi: what the program writes to "
            "/dev/shm counts against the container's memory limit",
        ),
        (["--memory", "1Gi"], "--shm-size 1Gi (the default) is not smaller than --memory 1Gi"),
        (["--memory", "512Mi", "--shm-size", "1G"], "accepted: a --shm-size below --memory"),
    ],
)
def test_bad_shm_sizes_are_refused(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    err = refused(capsys, *flags)
    assert message in err, err


# --- --deadline --------------------------------------------------------------------------------


def deadlines(docs: list[dict[str, Any]]) -> dict[str, list[object]]:
    """activeDeadlineSeconds of each object that can hold one, by kind (None: not set)."""
    found: dict[str, list[object]] = {}
    for doc in docs:
        kind, spec = doc["kind"], doc["spec"]
        if kind in ("Job", "TrainJob"):
            found.setdefault(kind, []).append(spec.get("activeDeadlineSeconds"))
        jobs = spec["replicatedJobs"] if kind == "JobSet" else []
        if kind == "ClusterTrainingRuntime":
            jobs = spec["template"]["spec"]["replicatedJobs"]
        for job in jobs:
            found.setdefault(kind, []).append(job["template"]["spec"].get("activeDeadlineSeconds"))
        for pod in pod_templates(doc):  # never the pod's own deadline
            assert "activeDeadlineSeconds" not in pod["spec"]
    return found


def failure_rules(docs: list[dict[str, Any]]) -> list[str]:
    rules = []
    for doc in docs:
        spec = doc["spec"]
        if doc["kind"] == "ClusterTrainingRuntime":
            spec = spec["template"]["spec"]
        if doc["kind"] in ("JobSet", "ClusterTrainingRuntime"):
            rules += [rule["name"] for rule in spec["failurePolicy"]["rules"]]
    return rules


@pytest.mark.parametrize("form", TRAINING, ids=" ".join)
def test_the_deadline_is_where_each_form_keeps_it(
    capsys: pytest.CaptureFixture[str], form: list[str]
) -> None:
    docs = render(capsys, *form, "--deadline", "90m")
    found = deadlines(docs)
    if "--trainer" in form:  # the TrainJob's; the runtime is a template other runs share
        assert found["TrainJob"] == [5400]
        assert set(found["ClusterTrainingRuntime"]) == {None}
        assert "deadlineExceeded" not in failure_rules(docs)
    elif "--jobset" in form:  # each Job's, and a Job past it fails the JobSet
        assert found["JobSet"] == [5400] * (3 if "--ps" in form else 1)
        [jobset] = [doc for doc in docs if doc["kind"] == "JobSet"]
        assert {
            "name": "deadlineExceeded",
            "action": "FailJobSet",
            "onJobFailureReasons": ["DeadlineExceeded"],
        } in jobset["spec"]["failurePolicy"]["rules"]
    else:  # each Job's: one, or the chief's, the workers' and the parameter servers'
        assert found["Job"] == [5400] * (3 if "--ps" in form else 1)
    validate(docs)


@pytest.mark.parametrize("form", FORMS, ids=" ".join)
def test_no_deadline_without_the_flag(capsys: pytest.CaptureFixture[str], form: list[str]) -> None:
    docs = render(capsys, *form)
    assert all(value is None for values in deadlines(docs).values() for value in values)
    assert "deadlineExceeded" not in failure_rules(docs)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90m", 5400),
        ("12h", 43200),
        ("2d", 172800),
        ("3600s", 3600),
        ("3600", 3600),
        ("1", 1),
        ("12H", 43200),
        ("365d", 31536000),
        ("31536000", 31536000),
    ],
)
def test_deadline_spellings(capsys: pytest.CaptureFixture[str], value: str, seconds: int) -> None:
    assert deadlines(render(capsys, "--kind", "job", "--deadline", value)) == {"Job": [seconds]}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--deadline", "abc"], "--deadline 'abc' is not valid: accepted: a duration from 1s"),
        (["--deadline", "0"], "--deadline '0' is not valid: accepted: a duration from 1s to 365d"),
        (["--deadline=-5"], "--deadline '-5' is not valid"),
        (["--deadline", "1.5h"], "minutes (90m), hours (12h) or days (2d)"),
        (["--deadline", "1h30m"], "--deadline '1h30m' is not valid"),
        (["--deadline", "366d"], "--deadline '366d' is not valid"),
        (["--deadline", "31536001"], "--deadline '31536001' is not valid"),
        (["--deadline", "9" * 40], "is not valid: accepted: a duration from 1s to 365d"),
        (["--deadline", ""], "example: --deadline 12h"),
        (["--deadline", "2h\n"], "--deadline"),
        (
            ["--kind", "deployment", "--deadline", "2h"],
            "--deadline shapes the job, which --kind deployment does not render (a Deployment "
            "serves until it is deleted: it has no deadline): accepted: --deadline with --kind "
            "job or all; example: --kind all --deadline 12h",
        ),
    ],
)
def test_bad_deadlines_are_refused(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    err = refused(capsys, *flags)
    assert message in err, err


# --- plan reads them ---------------------------------------------------------------------------


def _rendered(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> list[str]:
    out = tmp_path / "_".join(flags).replace("-", "")  # a folder per set of flags
    argv = ["k8s", "--image", IMAGE, "--mem-limit", "6GiB", "--out", str(out), *flags]
    assert cli.main(argv) == 0
    capsys.readouterr()
    return [str(path) for path in sorted(out.glob("*.yaml"))]


@pytest.mark.parametrize("form", [["--kind", "job"], ["--workers", "2", "--ps", "1", "--jobset"]])
def test_plan_budgets_the_same_with_or_without_shm(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], form: list[str]
) -> None:
    reports = []
    for shm in ("1Gi", "none"):
        files = _rendered(tmp_path, capsys, *form, "--shm-size", shm)
        code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
        assert code == 0, errors(report)
        reports.append(json.dumps(report).replace(str(Path(files[0]).parent), "OUT"))
    assert reports[0] == reports[1]


def test_plan_says_when_kubernetes_ends_a_job(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _rendered(tmp_path, capsys, "--kind", "job", "--deadline", "2h")
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert (
        "Job/tfgpu-train: ended by Kubernetes 2h after it starts (activeDeadlineSeconds), "
        "whatever its state"
    ) in report["notes"]


def test_plan_says_a_jobsets_deadline_restarts_with_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = _rendered(tmp_path, capsys, "--kind", "job", "--workers", "2", "--jobset",
                      "--deadline", "90m")  # fmt: skip
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert (
        "Job/tfgpu-train-worker: ended by Kubernetes 90m after it starts (activeDeadlineSeconds), "
        "whatever its state; each gang restart of JobSet tfgpu-train makes a new Job, with 90m "
        "again"
    ) in report["notes"]


def test_plan_says_a_trainjobs_deadline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    files = _rendered(tmp_path, capsys, "--kind", "job", "--workers", "2", "--trainer",
                      "--deadline", "1d")  # fmt: skip
    _, report = plan_json(capsys, files, "--gpu-memory", "16GiB")  # the TrainJob: not planned
    assert (
        "TrainJob/tfgpu-train: ended by Trainer 1d after it starts (activeDeadlineSeconds), "
        "whatever its state: its JobSet is deleted"
    ) in report["notes"]


def test_plan_says_a_cronjobs_deadline(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    [job] = render(capsys, "--kind", "job", "--mem-limit", "6GiB", "--deadline", "3601")
    cron = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "nightly"},
        "spec": {"schedule": "0 1 * * *", "jobTemplate": {"spec": job["spec"]}},
    }
    code, report = plan_json(capsys, [write(tmp_path, "cron.yaml", cron)], "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    assert (
        "CronJob/nightly: each Job it starts is ended by Kubernetes 3601s after it starts "
        "(activeDeadlineSeconds), whatever its state"
    ) in report["notes"]


@pytest.mark.parametrize("value", [-1, "2h", 1.5, True, 2**63])
def test_plan_refuses_a_deadline_kubernetes_refuses(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: object
) -> None:
    [job] = render(capsys, "--kind", "job", "--mem-limit", "6GiB")
    job["spec"]["activeDeadlineSeconds"] = value
    assert cli.main(["plan", write(tmp_path, "job.yaml", job), "--gpu-memory", "16GiB"]) == 2
    err = capsys.readouterr().err
    assert "Job/tfgpu-train activeDeadlineSeconds" in err and "Traceback" not in err
    assert "accepted: a whole number of seconds ≥ 0" in err
