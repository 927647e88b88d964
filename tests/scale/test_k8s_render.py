"""`build.py k8s`: rendered manifests validate offline against the newest Kubernetes
schemas bundled with kubernetes-validate (strict: unknown fields are errors; the PodMonitor,
a CRD, against the structural schema of tests/scale/podmonitor_schema.py), carry the kit's
contract and a clean shutdown, and `plan` accepts them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from tests.scale.helpers import errors, plan_json
from tests.scale.podmonitor_schema import validate_pod_monitor
from tfgpu_kit import cli

KUBERNETES = kubernetes_validate.latest_version()  # 1.37 with kubernetes-validate 1.37.0
KUBERNETES_MINOR = ".".join(KUBERNETES.split(".")[:2])


def render(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert cli.main(["k8s", "--image", "registry.example/tfgpu/tensorflow:2.21.0-gpu", *flags]) == 0
    return [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]


VARIANTS = [
    ["--mem-limit", "6GiB"],
    [
        "--kind",
        "deployment",
        "--mem-limit",
        "40%",
        "--memory-growth",
        "true",
        "--replicas",
        "3",
        "--namespace",
        "ml",
        "--env",
        "TF_GPU_QUIET=true",
    ],
    [
        "--kind",
        "job",
        "--virtual-devices",
        "2048,2048",
        "--gpus",
        "2",
        "--parallelism",
        "2",
        "--completions",
        "4",
        "--metrics-port",
        "0",
    ],
    ["--mem-limit", "3GiB", "--time-slicing", "4", "--replicas", "4", "--uid", "1234"],
    [
        "--mem-limit",
        "6GiB",
        "--namespace",
        "ml",
        "--pod-monitor",
        "--pod-monitor-label",
        "release=kube-prometheus-stack",
        "--grace-period",
        "120",
        "--prestop-sleep",
        "0",
    ],
]


def validate(doc: dict[str, Any]) -> str:
    """Kubernetes' own kinds against kubernetes-validate's strict schemas; the PodMonitor (a CRD
    it does not bundle) against the structural schema."""
    if doc["kind"] == "PodMonitor":
        validate_pod_monitor(doc, KUBERNETES)
        return "PodMonitor"
    return str(kubernetes_validate.validate(doc, KUBERNETES, strict=True))


@pytest.mark.parametrize("flags", VARIANTS, ids=lambda f: " ".join(f))
def test_manifests_validate_against_kubernetes_schemas(
    capsys: pytest.CaptureFixture[str], flags: list[str]
) -> None:
    docs = render(capsys, *flags)
    assert docs
    for doc in docs:
        checked = validate(doc)
        assert checked == ("PodMonitor" if doc["kind"] == "PodMonitor" else KUBERNETES_MINOR)


def test_contract_probes_security_and_resources(capsys: pytest.CaptureFixture[str]) -> None:
    deployment, job = render(capsys, "--mem-limit", "6GiB", "--memory-growth", "true")
    assert deployment["kind"] == "Deployment" and job["kind"] == "Job"
    for doc in (deployment, job):
        pod = doc["spec"]["template"]["spec"]
        (tf,) = pod["containers"]
        env = {e["name"]: e["value"] for e in tf["env"]}
        assert env == {
            "TF_GPU_MEM_LIMIT": "6GiB",
            "TF_GPU_MEMORY_GROWTH": "true",
            "TF_GPU_METRICS_PORT": "9401",
            # --kernel-cache's default: the driver's compute cache on the pod's emptyDir
            "CUDA_CACHE_PATH": "/var/cache/tfgpu/cuda",
            "CUDA_CACHE_MAXSIZE": "4294967296",
        }
        assert tf["resources"]["limits"]["nvidia.com/gpu"] == "1"
        # Kubernetes' swagger.json (Swagger 2.0) defines a Quantity as {"type": "string"}:
        # validators built on it (kubeconform, kubeval) reject a bare number
        for quantities in tf["resources"].values():
            assert all(isinstance(v, str) for v in quantities.values()), quantities
        assert tf["resources"]["requests"]["memory"] == tf["resources"]["limits"]["memory"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert tf["securityContext"]["allowPrivilegeEscalation"] is False
        assert doc["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9401"
        assert "command" not in tf  # args keep the image's ENTRYPOINT (tfgpu run --)
    serving = deployment["spec"]["template"]["spec"]["containers"][0]
    assert serving["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "http"}
    assert serving["livenessProbe"]["httpGet"]["port"] == "http"
    assert job["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_default_image_comes_from_the_spec(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["k8s", "--kind", "job", "--registry", "r.example"]) == 0
    (job,) = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    image = job["spec"]["template"]["spec"]["containers"][0]["image"]
    assert image.startswith("r.example/tfgpu/tensorflow:") and image.endswith("-gpu")


def test_plan_accepts_rendered_time_slicing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [
        "--mem-limit",
        "3GiB",
        "--time-slicing",
        "4",
        "--replicas",
        "4",
        "--out",
        str(tmp_path),
    ]
    assert cli.main(["k8s", "--image", "x/y:1", *flags]) == 0
    capsys.readouterr()
    files = sorted(str(p) for p in tmp_path.glob("*.yaml"))
    assert [Path(f).name for f in files] == ["deployment.yaml", "job.yaml", "time-slicing.yaml"]
    code, report = plan_json(capsys, files, "--gpu-memory", "16GiB")
    assert code == 0, errors(report)
    (pool,) = report["gpus"]
    assert pool["sharing"] == "time-sliced ×4 (worst case)"
    assert pool["committed_mib"] == 4 * (3072 + 500)


@pytest.mark.parametrize("namespace", [None, "nvidia-device-plugin"])
def test_time_slicing_helm_hint_names_the_configmaps_namespace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], namespace: str | None
) -> None:
    """The device plugin reads its config from its own namespace: the Helm command must install
    the chart where the ConfigMap is (NVIDIA's README: --namespace nvidia-device-plugin)."""
    flags = ["--mem-limit", "3GiB", "--time-slicing", "4", "--out", str(tmp_path)]
    flags += ["--device-plugin-namespace", namespace] if namespace else []
    assert cli.main(["k8s", "--image", "x/y:1", *flags]) == 0
    capsys.readouterr()
    text = (tmp_path / "time-slicing.yaml").read_text(encoding="utf-8")
    expected = namespace or "gpu-operator"
    header = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert (
        "helm upgrade -i nvdp nvdp/nvidia-device-plugin "
        f"--namespace {expected} --create-namespace --set config.name=tfgpu-time-slicing"
    ) in header
    assert yaml.safe_load(text)["metadata"]["namespace"] == expected


def test_plan_rejects_rendered_slices_that_do_not_fit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = [
        "--mem-limit",
        "5GiB",
        "--time-slicing",
        "4",
        "--replicas",
        "3",
        "--out",
        str(tmp_path),
    ]
    assert cli.main(["k8s", "--image", "x/y:1", *flags]) == 0
    capsys.readouterr()
    code, report = plan_json(
        capsys, sorted(map(str, tmp_path.glob("*.yaml"))), "--gpu-memory", "16GiB"
    )
    assert code == 1 and any("over-committed" in e for e in errors(report))


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--mem-limit", "6GB"], "--mem-limit '6GB' is not valid"),
        (["--virtual-devices", "a,b"], "--virtual-devices 'a,b' is not valid"),
        (["--memory-growth", "maybe"], "--memory-growth 'maybe' is not valid"),
        (["--mem-limit", "1GiB", "--virtual-devices", "512"], "exclude each other"),
        (["--time-slicing", "4"], "every pod needs a cap"),
        (
            ["--time-slicing", "4", "--mem-limit", "1GiB", "--gpus", "2"],
            "--time-slicing needs --gpus 1",
        ),
        (["--name", "Bad_Name"], "--name 'Bad_Name' is not valid"),
        (["--replicas", "-1"], "--replicas '-1' is not valid"),
        (["--port", "70000"], "--port '70000' is not valid"),
        # the hook's metrics server would bind it first and the model server could not listen
        (["--port", "9401"], "--port 9401 and --metrics-port 9401 are the same port"),
        (["--memory", "8GB"], "--memory '8GB' is not a Kubernetes quantity"),
        (["--env", "NOEQUALS"], "--env 'NOEQUALS' is not valid"),
        (["--serve-cmd", "python 'unclosed"], "is not a command line"),
        (["--grace-period", "0"], "--grace-period '0' is not valid"),
        (["--prestop-sleep", "-1"], "--prestop-sleep '-1' is not valid"),
        # the grace period includes the hook: no time would be left for the program to exit
        (["--prestop-sleep", "30"], "--prestop-sleep 30 is not shorter than --grace-period 30"),
        (["--pod-monitor", "--metrics-port", "0"], "--pod-monitor scrapes the metrics port"),
        (["--pod-monitor-label", "release=x"], "which only --pod-monitor renders"),
        (
            ["--pod-monitor", "--pod-monitor-label", "release"],
            "--pod-monitor-label 'release' is not valid",
        ),
        (
            ["--pod-monitor", "--pod-monitor-label", "a b=c"],
            "--pod-monitor-label 'a b=c' is not valid",
        ),
    ],
)
def test_bad_flags(capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    assert cli.main(["k8s", "--image", "x/y:1", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err


def test_help_on_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("plan", "k8s"):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([command, "--help"])
        assert exit_info.value.code == 0
        assert "examples:" in capsys.readouterr().out


@pytest.mark.parametrize("slices", ["2", "4", "20", "64"])
def test_time_slicing_without_cap_suggests_a_positive_cap(
    capsys: pytest.CaptureFixture[str], slices: str
) -> None:
    # 100 // 64 - 5 used to suggest `--mem-limit -4%`, which the runtime refuses
    assert cli.main(["k8s", "--image", "x/y:1", "--time-slicing", slices]) == 2
    hint = capsys.readouterr().err.split("--mem-limit ")[-1]
    assert int(hint.split("%")[0]) >= 1


@pytest.fixture
def spec_with_gid(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """images/ with a user whose gid differs from its uid (1000:2345)."""
    from tfgpu_kit.matrix import spec

    folder = tmp_path / "images"
    folder.mkdir()
    for name in ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml"):  # spec.load reads these
        text = (spec.IMAGES_DIR / name).read_text(encoding="utf-8")
        if name == "images.yaml":
            assert "  uid: 1000\n  gid: 1000\n" in text
            text = text.replace("  gid: 1000\n", "  gid: 2345\n")
        (folder / name).write_text(text, encoding="utf-8")
    monkeypatch.setattr(spec, "IMAGES_DIR", folder)


def _identity(docs: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
    out = []
    for doc in docs:
        context = doc["spec"]["template"]["spec"]["securityContext"]
        out.append((context["runAsUser"], context["runAsGroup"], context["fsGroup"]))
    return out


@pytest.mark.usefixtures("spec_with_gid")
@pytest.mark.parametrize(
    ("flags", "identity"),
    [
        ([], (1000, 2345, 2345)),  # the image's user and group from images.yaml
        (["--gid", "3000"], (1000, 3000, 3000)),
        (["--uid", "1234"], (1234, 1234, 1234)),  # --uid alone: its own group, as before
        (["--uid", "1234", "--gid", "3000"], (1234, 3000, 3000)),
    ],
)
def test_security_context_uses_the_image_users_gid(
    capsys: pytest.CaptureFixture[str], flags: list[str], identity: tuple[int, int, int]
) -> None:
    assert cli.main(["k8s", "--mem-limit", "6GiB", *flags]) == 0
    docs = [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]
    assert [d["kind"] for d in docs] == ["Deployment", "Job"]
    assert _identity(docs) == [identity, identity]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


def test_bad_gid(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["k8s", "--image", "x/y:1", "--gid", "-1"]) == 2
    assert "--gid '-1' is not valid" in capsys.readouterr().err


def test_gid_0_is_openshifts_arbitrary_uid_group(capsys: pytest.CaptureFixture[str]) -> None:
    # OpenShift runs an arbitrary uid in group 0; README shows the images under --user 12345:0
    docs = render(capsys, "--uid", "12345", "--gid", "0")
    assert _identity(docs) == [(12345, 0, 0), (12345, 0, 0)]
    for doc in docs:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)


# --- shutdown: the process ends (and gives its GPU memory back) before SIGKILL ------------------


def _pod(doc: dict[str, Any]) -> dict[str, Any]:
    pod: dict[str, Any] = doc["spec"]["template"]["spec"]
    return pod


def test_serving_pod_drains_before_sigterm_and_both_get_a_grace_period(
    capsys: pytest.CaptureFixture[str],
) -> None:
    deployment, job = render(capsys, "--mem-limit", "6GiB")
    serving, training = _pod(deployment), _pod(job)
    assert serving["terminationGracePeriodSeconds"] == 30
    assert training["terminationGracePeriodSeconds"] == 30
    # exec `sleep` (in every kit image), not the sleep action that clusters < 1.30 refuse
    assert serving["containers"][0]["lifecycle"] == {
        "preStop": {"exec": {"command": ["sleep", "5"]}}
    }
    # a Job has no endpoints to drain: SIGTERM at once
    assert "lifecycle" not in training["containers"][0]


def test_shutdown_flags(capsys: pytest.CaptureFixture[str]) -> None:
    deployment, job = render(
        capsys, "--mem-limit", "6GiB", "--grace-period", "300", "--prestop-sleep", "15"
    )
    assert [_pod(d)["terminationGracePeriodSeconds"] for d in (deployment, job)] == [300, 300]
    hook = _pod(deployment)["containers"][0]["lifecycle"]["preStop"]
    assert hook["exec"]["command"] == ["sleep", "15"]
    (deployment,) = render(capsys, "--kind", "deployment", "--prestop-sleep", "0")
    assert "lifecycle" not in _pod(deployment)["containers"][0]  # 0: no hook at all


# --- PodMonitor -------------------------------------------------------------------------------


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """A LabelSelector's matchLabels and In/NotIn/Exists/DoesNotExist expressions."""
    if any(labels.get(k) != v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for expression in selector.get("matchExpressions", []):
        key, operator, values = expression["key"], expression["operator"], expression.get("values")
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


@pytest.mark.parametrize(
    ("kind", "pods"),
    [
        ("all", ["text-serve", "text-train"]),
        ("deployment", ["text-serve"]),
        ("job", ["text-train"]),
    ],
)
def test_pod_monitor_scrapes_the_metrics_port_of_exactly_the_rendered_pods(
    capsys: pytest.CaptureFixture[str], kind: str, pods: list[str]
) -> None:
    docs = render(
        capsys,
        "--kind",
        kind,
        "--name",
        "text",
        "--namespace",
        "ml",
        "--pod-monitor",
        "--pod-monitor-label",
        "release=kube-prometheus-stack",
    )
    *workloads, monitor = docs
    assert monitor["kind"] == "PodMonitor" and monitor["apiVersion"] == "monitoring.coreos.com/v1"
    assert monitor["metadata"]["namespace"] == "ml"  # a PodMonitor sees its own namespace
    assert monitor["metadata"]["labels"]["release"] == "kube-prometheus-stack"
    (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
    assert endpoint == {"port": "metrics", "path": "/metrics"}
    selected = []
    for workload in workloads:
        assert workload["metadata"]["namespace"] == "ml"
        template = workload["spec"]["template"]
        if _selects(monitor["spec"]["selector"], template["metadata"]["labels"]):
            selected.append(workload["metadata"]["name"])
        # the endpoint's named port exists, and is TF_GPU_METRICS_PORT
        (container,) = template["spec"]["containers"]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        env = {e["name"]: e["value"] for e in container["env"]}
        assert str(ports[endpoint["port"]]) == env["TF_GPU_METRICS_PORT"] == "9401"
        # one way to be scraped: no prometheus.io/* annotations beside the PodMonitor
        assert "annotations" not in template["metadata"]
    assert selected == pods
    # ... and nothing else the kit renders (another NAME's pods) matches
    assert not _selects(monitor["spec"]["selector"], {"app.kubernetes.io/name": "other-serve"})


def test_without_pod_monitor_the_scrape_annotations_stay(
    capsys: pytest.CaptureFixture[str],
) -> None:
    docs = render(capsys, "--mem-limit", "6GiB")
    assert [d["kind"] for d in docs] == ["Deployment", "Job"]
    for doc in docs:
        annotations = doc["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"


def test_structural_schema_refuses_what_the_crd_refuses(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # the schema must be able to fail: each of these breaks a rule of the published CRD
    *_, monitor = render(capsys, "--kind", "deployment", "--pod-monitor")
    validate_pod_monitor(monitor, KUBERNETES)
    broken = [
        ("spec", "podMetricsEndpoints", 0, "port", 9401),  # the CRD's port is a string
        ("spec", "selector", "matchLabels", {"a": 1}),  # label values are strings
        ("spec", "podMetricsEndpoint", [{"port": "metrics"}]),  # misspelt field
        ("metadata", "labelz", {"a": "b"}),  # ObjectMeta is Kubernetes' own, strict
        ("apiVersion", "monitoring.coreos.com/v1alpha1"),
    ]
    for *path, value in broken:
        doc = yaml.safe_load(yaml.safe_dump(monitor))
        target = doc
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = value
        with pytest.raises(jsonschema.ValidationError):
            validate_pod_monitor(doc, KUBERNETES)
    doc = yaml.safe_load(yaml.safe_dump(monitor))
    del doc["spec"]["selector"]  # the CRD's one required field of spec
    with pytest.raises(jsonschema.ValidationError):
        validate_pod_monitor(doc, KUBERNETES)


# --- the recovery rule (TF_GPU_RECOVER_*) -------------------------------------------------------


@pytest.mark.parametrize("action", ["report", "exit"])
def test_recovery_rule_wires_the_probe_and_keeps_its_count(
    capsys: pytest.CaptureFixture[str], action: str
) -> None:
    """report: the liveness probe reads /livez on the metrics port (the serving pod's health
    path stays its readiness probe); exit: no probe is needed, the restart policy acts. Either
    way the count of recoveries lives on an emptyDir at /var/tmp, across container restarts."""
    docs = render(
        capsys,
        "--mem-limit",
        "4096",
        "--env",
        "TF_GPU_RECOVER_AT=95%",
        "--env",
        f"TF_GPU_RECOVER_ACTION={action}",
    )
    workloads = [doc for doc in docs if doc["kind"] in ("Deployment", "Job")]
    assert {doc["kind"] for doc in workloads} == {"Deployment", "Job"}
    for doc in workloads:
        pod = _pod(doc)
        [container] = pod["containers"]
        assert {"name": "TF_GPU_RECOVER_AT", "value": "95%"} in container["env"]
        assert pod["volumes"] == [
            {"name": "tfgpu-state", "emptyDir": {}},
            {"name": "kernel-cache", "emptyDir": {"sizeLimit": "5Gi"}},
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}},  # --shm-size
        ]
        assert container["volumeMounts"] == [
            {"name": "tfgpu-state", "mountPath": "/var/tmp"},
            {"name": "kernel-cache", "mountPath": "/var/cache/tfgpu/cuda"},
            {"name": "dshm", "mountPath": "/dev/shm"},
        ]
        liveness = container.get("livenessProbe")
        if action == "report":
            assert liveness["httpGet"] == {"path": "/livez", "port": "metrics"}, liveness
        else:
            assert liveness is None or liveness["httpGet"]["port"] == "http"
        if doc["kind"] == "Deployment":
            assert container["readinessProbe"]["httpGet"]["port"] == "http"
        assert validate(doc) == KUBERNETES_MINOR  # kubernetes-validate, strict


def test_no_rule_no_livez_and_no_volume(capsys: pytest.CaptureFixture[str]) -> None:
    flags = ["--mem-limit", "4096", "--kernel-cache", "none", "--shm-size", "none"]
    for doc in render(capsys, *flags):
        if doc["kind"] in ("Deployment", "Job"):
            pod = _pod(doc)
            assert "volumes" not in pod and "volumeMounts" not in pod["containers"][0]
            assert "/livez" not in yaml.safe_dump(doc)


@pytest.mark.parametrize(
    ("env", "message"),
    [
        (["TF_GPU_RECOVER_AT=95"], "--env TF_GPU_RECOVER_AT='95' is not valid"),
        (["TF_GPU_RECOVER_AT=95%"], "--env TF_GPU_RECOVER_AT='95%' is not valid (no cap"),
    ],
)
def test_a_bad_rule_is_refused_as_the_runtime_would(
    capsys: pytest.CaptureFixture[str], env: list[str], message: str
) -> None:
    flags = [x for item in env for x in ("--env", item)]
    assert cli.main(["k8s", "--image", "r.example/t:1", *flags]) == 2
    assert message in capsys.readouterr().err
