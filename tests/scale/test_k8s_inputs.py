"""`build.py k8s` checks every flag as strictly as the runtime and Kubernetes would: each case
refused with exit 2 and one message naming the flag, or accepted and rendered the way the flag
means."""

from __future__ import annotations

from typing import Any

import kubernetes_validate
import pytest
import yaml

from tfgpu_kit import cli
from tfgpu_kit.k8s import render

KUBERNETES = kubernetes_validate.latest_version()
IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"


def _render(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    assert cli.main(["k8s", *flags]) == 0, capsys.readouterr().err
    return [doc for doc in yaml.safe_load_all(capsys.readouterr().out) if doc]


def _refused(capsys: pytest.CaptureFixture[str], *flags: str) -> str:
    assert cli.main(["k8s", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""  # nothing written
    assert "Traceback" not in captured.err
    return captured.err


def _container(doc: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = doc["spec"]["template"]["spec"]["containers"][0]
    return container


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        # --env values go through the runtime's own parser (tfgpu.contract.settings)
        (["--env", "TF_GPU_MEM_LIMIT=4MB"], "--env TF_GPU_MEM_LIMIT='4MB' is not valid"),
        (["--env", "TF_GPU_QUIET=maybe"], "--env TF_GPU_QUIET='maybe' is not valid"),
        (["--env", "TF_MIXED_PRECISION=fp8"], "--env TF_MIXED_PRECISION='fp8' is not valid"),
        (["--env", "CUDA_VISIBLE_DEVICES=all"], "--env CUDA_VISIBLE_DEVICES='all' is not valid"),
        (["--env", "TF_GPU_METRICS_PORT=70000"], "--env TF_GPU_METRICS_PORT='70000' is not"),
        (["--env", "TF_GPU_MEM_LIMIT="], "--env TF_GPU_MEM_LIMIT is empty"),
        (
            ["--env", "TF_GPU_MEMORY_GROWTH=true", "--env", "TF_FORCE_GPU_ALLOW_GROWTH=false"],
            "TF_GPU_MEMORY_GROWTH",
        ),
        (
            ["--env", "TF_GPU_MEM_LIMIT=1GiB", "--env", "TF_GPU_VIRTUAL_DEVICES=512"],
            "--env TF_GPU_MEM_LIMIT and --env TF_GPU_VIRTUAL_DEVICES exclude each other",
        ),
        # a list of caps must fit the pod's GPUs, as tfgpu.plan.device_plan requires
        (["--mem-limit", "4096,2048"], "--mem-limit '4096,2048' is not valid (2 values for"),
        (["--gpus", "2", "--virtual-devices", "1024;1024;1024"], "(3 values for --gpus 2)"),
        # a flag and --env for the same variable: an error naming both
        (
            ["--mem-limit", "4GiB", "--env", "TF_GPU_MEM_LIMIT=2GiB"],
            "--mem-limit '4GiB' and --env TF_GPU_MEM_LIMIT='2GiB' set the same variable",
        ),
        (
            ["--metrics-port", "9401", "--env", "TF_GPU_METRICS_PORT=9999"],
            "--metrics-port '9401' and --env TF_GPU_METRICS_PORT='9999' set the same variable",
        ),
        (
            ["--memory-growth", "true", "--env", "TF_GPU_MEMORY_GROWTH=false"],
            "--memory-growth 'true' and --env TF_GPU_MEMORY_GROWTH='false'",
        ),
        (["--env", "A=1", "--env", "A=2"], "--env A is given twice"),
        (["--env", "1A=x"], "--env '1A=x' is not valid"),
        # Kubernetes' and Docker's name rules
        (["--namespace", "UPPER"], "--namespace 'UPPER' is not valid"),
        (["--namespace", "a" * 64], "is not valid: accepted: a DNS-1123 label"),
        (["--device-plugin-namespace", "Gpu_Operator"], "--device-plugin-namespace 'Gpu_"),
        (["--image", "Bad Image"], "--image 'Bad Image' is not valid"),
        (["--image", "Registry.example/Team/x:1"], "--image 'Registry.example/Team/x:1'"),
        (["--image", "reg.example:99999/x:1"], "(a registry port is from 1 to 65535)"),
        (["--image", "x:" + "t" * 129], "is not valid: accepted: an image reference"),
        (["--health-path", "/a b"], "--health-path '/a b' is not valid"),
        # flags the rendered manifests would not use are refused, not ignored
        (["--kind", "job", "--replicas", "3"], "--replicas shapes the deployment"),
        (["--kind", "job", "--serve-cmd", "python s.py"], "--serve-cmd shapes the deployment"),
        (["--kind", "job", "--prestop-sleep", "2"], "--prestop-sleep shapes the deployment"),
        (["--kind", "deployment", "--parallelism", "2"], "--parallelism shapes the job"),
        (["--kind", "deployment", "--train-cmd", "python t.py"], "--train-cmd shapes the job"),
        (["--registry", "reg.example"], "--registry 'reg.example' prefixes the default image"),
        # counts bounded by the API's types (int32)
        (["--replicas", str(2**31)], f"--replicas '{2**31}' is not valid"),
        (["--completions", "99999999999999999999"], "--completions '99999999999999999999'"),
        (["--gid", "-1"], "--gid '-1' is not valid"),
        (["--uid", "0"], "--uid '0' is not valid"),
        # a label key given twice, or the kit's own, would be a duplicate YAML key
        (
            ["--pod-monitor", "--pod-monitor-label", "a=1", "--pod-monitor-label", "a=2"],
            "the label a is set twice",
        ),
    ],
)
def test_refused(capsys: pytest.CaptureFixture[str], flags: list[str], message: str) -> None:
    image = [] if "--image" in flags or "--registry" in flags else ["--image", IMAGE]
    if "--registry" in flags:
        image = ["--image", IMAGE]
    err = _refused(capsys, *image, *flags)
    assert message in err
    assert err.count("error:") == 1


def test_registry_with_a_bad_port_is_refused_before_the_spec(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = _refused(capsys, "--registry", "reg.example:0")
    assert "--registry 'reg.example:0' is not valid (port 0)" in err


@pytest.mark.parametrize(
    ("flag", "value"),
    [
        # re.match's `$` accepts a trailing newline: each value must still be refused
        ("--name", "tfgpu\n"),
        ("--cpu", "1\n"),
        ("--memory", "8Gi\n"),
        ("--namespace", "ml\n"),
        ("--device-plugin-namespace", "x\n---\nkind: ClusterRoleBinding"),
        ("--env", "A=\x7f"),
        ("--env", "A=line\u2028break"),
        ("--env", "A=next\x85line"),
        ("--serve-cmd", "python\rserve.py"),
        ("--health-path", "/ok\n"),
    ],
)
def test_control_characters_are_refused(
    capsys: pytest.CaptureFixture[str], flag: str, value: str
) -> None:
    extra = ["--pod-monitor"] if flag == "--pod-monitor-label" else []
    err = _refused(capsys, "--image", IMAGE, *extra, flag, value)
    assert f"{flag} " in err and "control character U+" in err


def test_device_plugin_namespace_cannot_add_documents(capsys: pytest.CaptureFixture[str]) -> None:
    # the namespace reaches a comment of time-slicing.yaml: a newline there adds documents
    hostile = "x\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRoleBinding"
    _refused(capsys, "--image", IMAGE, "--time-slicing", "2", "--mem-limit", "40%",
             "--device-plugin-namespace", hostile)  # fmt: skip
    docs = _render(
        capsys, "--image", IMAGE, "--time-slicing", "2", "--mem-limit", "40%",
        "--device-plugin-namespace", "nvidia-device-plugin",
    )  # fmt: skip
    assert [d["kind"] for d in docs] == ["Deployment", "Job", "ConfigMap"]


def test_comment_filter_refuses_what_would_end_a_comment() -> None:
    # the last line of defence, should a value ever reach a comment unchecked
    template = render._jinja().from_string("# {{ v | comment }}\n")
    assert template.render(v="gpu-operator") == "# gpu-operator\n"
    with pytest.raises(ValueError, match="not written into a comment"):
        template.render(v="x\nkind: Secret")


@pytest.mark.parametrize("char", ["\u2028", "\u2029", "\x85", "\x7f", "\u202e", "\x1b"])
def test_quoting_filter_keeps_every_character(char: str) -> None:
    # ensure_ascii=False let YAML read U+2028/U+0085 as line breaks (folded to spaces)
    value = f"a{char}b"
    rendered = render._jinja().from_string("v: {{ v | q }}\n").render(v=value)
    assert rendered.isascii()
    assert yaml.safe_load(rendered) == {"v": value}


def test_env_metrics_port_moves_the_port_annotations_and_monitor(
    capsys: pytest.CaptureFixture[str],
) -> None:
    deployment, job, monitor = _render(
        capsys, "--image", IMAGE, "--env", "TF_GPU_METRICS_PORT=9999", "--pod-monitor"
    )
    for doc in (deployment, job):
        container = _container(doc)
        env = [e for e in container["env"] if e["name"] == "TF_GPU_METRICS_PORT"]
        assert env == [{"name": "TF_GPU_METRICS_PORT", "value": "9999"}]
        ports = {p["name"]: p["containerPort"] for p in container["ports"]}
        assert ports["metrics"] == 9999
    assert monitor["spec"]["podMetricsEndpoints"][0]["port"] == "metrics"
    deployment, _ = _render(capsys, "--image", IMAGE, "--env", "TF_GPU_METRICS_PORT=9999")
    assert deployment["spec"]["template"]["metadata"]["annotations"]["prometheus.io/port"] == "9999"


def test_env_metrics_port_0_turns_metrics_off(capsys: pytest.CaptureFixture[str]) -> None:
    deployment, _ = _render(
        capsys, "--image", IMAGE, "--env", "TF_GPU_METRICS_PORT=0", "--kernel-cache", "none"
    )
    container = _container(deployment)
    assert "env" not in container  # nothing else was asked for: no `env:` left null
    assert [p["name"] for p in container["ports"]] == ["http"]
    kubernetes_validate.validate(deployment, KUBERNETES, strict=True)
    assert "annotations" not in deployment["spec"]["template"]["metadata"]


def test_env_cap_counts_as_the_cap_time_slicing_needs(capsys: pytest.CaptureFixture[str]) -> None:
    docs = _render(capsys, "--image", IMAGE, "--time-slicing", "4", "--env", "TF_GPU_MEM_LIMIT=20%")
    env = _container(docs[0])["env"]
    assert [e for e in env if e["name"] == "TF_GPU_MEM_LIMIT"] == [
        {"name": "TF_GPU_MEM_LIMIT", "value": "20%"}
    ]
    # TF_GPU_CONFIG=off: the runtime applies no cap, so time-slicing has none
    err = _refused(
        capsys, "--image", IMAGE, "--time-slicing", "4", "--mem-limit", "20%",
        "--env", "TF_GPU_CONFIG=off",
    )  # fmt: skip
    assert "every pod needs a cap" in err


def test_caps_per_gpu_fit_the_gpu_count(capsys: pytest.CaptureFixture[str]) -> None:
    docs = _render(capsys, "--image", IMAGE, "--gpus", "2", "--mem-limit", "4096,2048")
    assert {"name": "TF_GPU_MEM_LIMIT", "value": "4096,2048"} in _container(docs[0])["env"]


def test_time_slicing_configmap_follows_name(capsys: pytest.CaptureFixture[str]) -> None:
    docs = _render(
        capsys, "--image", IMAGE, "--name", "small", "--time-slicing", "4", "--mem-limit", "20%"
    )
    config = docs[-1]
    assert config["kind"] == "ConfigMap"
    assert config["metadata"]["name"] == "small-time-slicing"
    kubernetes_validate.validate(config, KUBERNETES, strict=True)


@pytest.mark.parametrize(
    "image",
    [
        "tfgpu/tensorflow:2.21.0-gpu",
        "localhost:5000/team/x",
        "Registry.Example.com:443/a/b__c/d-e:TAG_1.0",
        "x@sha256:" + "a" * 64,
        "[::1]:5000/x:1",
    ],
)
def test_image_references_docker_accepts(capsys: pytest.CaptureFixture[str], image: str) -> None:
    deployment, _ = _render(capsys, "--image", image)
    assert _container(deployment)["image"] == image


def test_kind_specific_flags_with_their_kind(capsys: pytest.CaptureFixture[str]) -> None:
    (job,) = _render(capsys, "--image", IMAGE, "--kind", "job", "--parallelism", "3")
    assert job["spec"]["parallelism"] == 3
    (deployment,) = _render(capsys, "--image", IMAGE, "--kind", "deployment", "--replicas", "3")
    assert deployment["spec"]["replicas"] == 3
