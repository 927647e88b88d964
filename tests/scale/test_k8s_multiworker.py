"""`build.py k8s --workers N`: the multi-worker training workload.

Every variant validates with kubernetes-validate --strict against Kubernetes 1.29, 1.30 and 1.31
(the versions the defaults are chosen for) and the newest it bundles; the JobSet against the
CRD's own schema: jobset_v1alpha2_schema.json is the `openAPIV3Schema` of
kubernetes-sigs/jobset config/components/crd/bases/jobset.x-k8s.io_jobsets.yaml at commit
08dfbdfd682714a9ab929633eca8dc95315187e7 (after v0.9.1), made strict here (unknown fields
refused wherever the CRD lists properties and does not preserve unknown fields, as the API
server's structural pruning would drop them silently), and its Job template also as a batch/v1
Job by kubernetes-validate. The environment each worker gets is then run through the runtime's
own parser for every index, so the TF_CONFIG each pod will build is checked here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from tfgpu.contract.settings import parse_environment

from tests.scale.helpers import errors, peers_only, plan_json, validate_job_templates
from tfgpu_kit import cli

SCHEMA = Path(__file__).with_name("jobset_v1alpha2_schema.json")
VERSIONS = ["1.29.0", "1.30.0", "1.31.0", kubernetes_validate.latest_version()]
IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
USER_TF_CONFIG = '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":0}}'

VARIANTS = [
    ["--kind", "job", "--workers", "2"],
    ["--workers", "3", "--mem-limit", "6GiB", "--checkpoint-claim", "ckpt", "--namespace", "ml"],
    ["--kind", "job", "--workers", "4", "--jobset", "--max-restarts", "5", "--worker-port", "3000"],
    [
        "--kind",
        "job",
        "--workers",
        "2",
        "--jobset",
        "--checkpoint-claim",
        "ckpt",
        "--virtual-devices",
        "2048,2048",
        "--env",
        "TF_GPU_RECOVER_AT=95%",
        "--pod-monitor",
    ],
]


def render(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 0
    return [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]


def _strict(schema: Any) -> Any:
    """The CRD's schema with unknown fields refused (see the module doc)."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if (
            "properties" in out
            and "additionalProperties" not in out
            and not out.get("x-kubernetes-preserve-unknown-fields")
        ):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


JOBSET_SCHEMA = _strict(json.loads(SCHEMA.read_text(encoding="utf-8")))


def _validate(doc: dict[str, Any]) -> list[str]:
    if doc["kind"] == "JobSet":
        jsonschema.validate(doc, JOBSET_SCHEMA)
        (replicated,) = doc["spec"]["replicatedJobs"]
        return validate_job_templates([replicated], VERSIONS)
    if doc["kind"] == "PodMonitor":
        return []
    return [str(kubernetes_validate.validate(doc, v, strict=True)) for v in VERSIONS]


def test_the_strict_schema_refuses_an_unknown_field(capsys: pytest.CaptureFixture[str]) -> None:
    (jobset,) = peers_only(render(capsys, "--kind", "job", "--workers", "2", "--jobset"), VERSIONS)
    jobset["spec"]["failurePolicy"]["maxRestart"] = 1  # a typo the API server would prune
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(jobset, JOBSET_SCHEMA)


def _job_spec(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "JobSet":
        return dict(doc["spec"]["replicatedJobs"][0]["template"]["spec"])
    return dict(doc["spec"])


@pytest.mark.parametrize("flags", VARIANTS, ids=lambda f: " ".join(f))
def test_variants_validate_and_each_worker_gets_its_tf_config(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    docs = peers_only(render(capsys, *flags), VERSIONS)
    kinds = [d["kind"] for d in docs]
    jobset = "--jobset" in flags
    count = int(flags[flags.index("--workers") + 1])
    assert ("JobSet" in kinds) == jobset and ("Service" in kinds) == (not jobset)
    for doc in docs:
        assert all(v.startswith("1.") for v in _validate(doc)), doc["kind"]
    (workload,) = [
        d for d in docs if d["kind"] in ("Job", "JobSet") and "train" in d["metadata"]["name"]
    ]
    spec = _job_spec(workload)
    assert spec["completionMode"] == "Indexed"
    assert spec["parallelism"] == spec["completions"] == count
    pod = spec["template"]["spec"]
    (container,) = pod["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["TF_USE_LEGACY_KERAS"] == "1" and env["TF_GPU_WORKERS"] == str(count)
    port = int(env["TF_GPU_WORKER_PORT"])
    assert {"name": "tf-worker", "containerPort": port, "protocol": "TCP"} in container["ports"]
    name = workload["metadata"]["name"]
    if jobset:
        assert workload["spec"]["failurePolicy"]["maxRestarts"] >= 0
        assert workload["spec"]["network"]["enableDNSHostnames"] is True
        assert spec["backoffLimit"] == 0  # any failure: the JobSet restarts the group
        first = f"{name}-worker-0-0.{name}"  # jobset GenJobName + Indexed Job hostname
    else:
        (service,) = [d for d in docs if d["kind"] == "Service"]
        assert service["spec"]["clusterIP"] == "None"
        assert service["spec"]["publishNotReadyAddresses"] is True
        assert pod["subdomain"] == service["metadata"]["name"] == name
        assert service["spec"]["selector"].items() <= spec["template"]["metadata"]["labels"].items()
        assert spec["backoffLimit"] == count * 3  # three gang restarts
        assert spec["podReplacementPolicy"] == "Failed"
        first = f"{name}-0.{name}"
    rules = spec["podFailurePolicy"]["rules"]
    assert rules[0]["action"] == "FailJob" and rules[0]["onExitCodes"]["values"] == [78]
    for index in range(count):  # each pod's runtime, as it will run there
        s = parse_environment({**env, "JOB_COMPLETION_INDEX": str(index)})
        assert s.tf_config is not None and s.tf_config.index == index
        assert s.tf_config.cluster["worker"][0] == f"{first}:{port}"
    if "--checkpoint-claim" in flags:
        assert {"name": "checkpoints", "mountPath": "/checkpoints"} in container["volumeMounts"]
        claims = [v for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [{"name": "checkpoints", "persistentVolumeClaim": {"claimName": "ckpt"}}]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--workers", "0"], "--workers '0' is not valid"),
        (["--workers", "2", "--parallelism", "2"], "--workers N sets both to N"),
        (["--jobset"], "--jobset shapes a multi-worker Job, which only --workers renders"),
        (["--checkpoint-claim", "x"], "--checkpoint-claim shapes a multi-worker Job"),
        (["--workers", "2", "--worker-port", "70000"], "--worker-port '70000' is not valid"),
        (["--workers", "2", "--worker-port", "9401"], "is also the metrics port"),
        (["--workers", "2", "--checkpoint-claim", "Bad_Name"], "--checkpoint-claim 'Bad_Name'"),
        (["--workers", "2", "--env", f"TF_CONFIG={USER_TF_CONFIG}"], "--workers sets TF_CONFIG"),
        (
            ["--workers", "2", "--env", "TF_USE_LEGACY_KERAS=0"],
            "--workers sets TF_USE_LEGACY_KERAS",
        ),
        (
            ["--workers", "1000", "--jobset", "--name", "a" * 48],
            "is over 63 characters",
        ),
        (["--kind", "deployment", "--workers", "2"], "--workers shapes the job"),
    ],
)
def test_bad_flags_are_usage_errors(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("jobset", [False, True])
def test_plan_reads_the_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], jobset: bool
) -> None:
    """`build.py plan` reads both outputs, checks the last worker's environment as its runtime
    will (JOB_COMPLETION_INDEX), budgets each worker's cap on its own GPU, and says so."""
    flags = ["--kind", "job", "--workers", "3", "--mem-limit", "6GiB", "--out", str(tmp_path)]
    flags += ["--jobset"] if jobset else []
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 0
    capsys.readouterr()
    files = sorted(str(p) for p in tmp_path.glob("*.yaml"))
    expected = ["jobset.yaml"] if jobset else ["job.yaml", "service.yaml"]
    expected = sorted([*expected, "networkpolicy.yaml"])
    assert [Path(f).name for f in files] == expected
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    (pool,) = report["gpus"]
    assert pool["sharing"] == "exclusive nvidia.com/gpu" and pool["committed_mib"] == 6144 + 500
    assert any("an Indexed Job of 3 pod(s)" in note for note in report["notes"])


def test_plan_refuses_a_worker_index_out_of_range(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--kind", "job", "--workers", "3", "--mem-limit", "6GiB", "--out", str(tmp_path)]
    assert cli.main(["k8s", "--image", IMAGE, *flags]) == 0
    capsys.readouterr()
    job = tmp_path / "job.yaml"
    doc = yaml.safe_load(job.read_text(encoding="utf-8"))
    doc["spec"]["parallelism"] = doc["spec"]["completions"] = 4  # one more pod than workers
    job.write_text(yaml.safe_dump(doc), encoding="utf-8")
    code, report = plan_json(capsys, [str(job)], "--gpu-memory", "16GiB")
    assert code != 0
    assert any("JOB_COMPLETION_INDEX='3'" in e for e in errors(report)), errors(report)
