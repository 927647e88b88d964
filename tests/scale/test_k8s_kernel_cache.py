"""`./kit k8s --kernel-cache`: every GPU pod keeps the kernels the driver JIT-compiles from PTX on a
volume at CUDA_CACHE_PATH (images/gpus.yaml): an emptyDir (the default), a PVC or a hostPath,
validated by kubernetes-validate (strict); the parameter servers, without a GPU, get none."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from tests.scale.helpers import validate_job_templates
from tests.scale.test_k8s_multiworker import JOBSET_SCHEMA, VERSIONS
from tests.scale.test_k8s_render import KUBERNETES_MINOR, render, validate
from tfgpu_kit import cli
from tfgpu_kit.matrix import spec

CACHE = spec.load().gpus.kernel_cache


def _pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pod specs of the workloads (Deployment, Job, JobSet's replicated Jobs)."""
    pods = []
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            pods.append(doc["spec"]["template"]["spec"])
        elif doc["kind"] == "JobSet":
            pods += [
                job["template"]["spec"]["template"]["spec"] for job in doc["spec"]["replicatedJobs"]
            ]
    return pods


def _cache_of(pod: dict[str, Any]) -> tuple[dict[str, Any] | None, dict[str, str]]:
    """The pod's kernel-cache volume (None) and its container's CUDA_CACHE_* variables."""
    [container] = pod["containers"]
    volume = next((v for v in pod.get("volumes", []) if v["name"] == "kernel-cache"), None)
    mounts = {m["name"]: m["mountPath"] for m in container.get("volumeMounts", [])}
    env = {e["name"]: e.get("value") for e in container.get("env", [])}
    if volume is not None:
        assert mounts["kernel-cache"] == env["CUDA_CACHE_PATH"]  # the driver writes the volume
    return volume, {k: v for k, v in env.items() if k.startswith("CUDA_CACHE")}


@pytest.mark.parametrize(
    ("flag", "volume"),
    [
        ([], {"emptyDir": {"sizeLimit": "5Gi"}}),
        (["--kernel-cache", "emptydir"], {"emptyDir": {"sizeLimit": "5Gi"}}),
        (
            ["--kernel-cache", "pvc:tfgpu-kernels"],
            {"persistentVolumeClaim": {"claimName": "tfgpu-kernels"}},
        ),
        (
            ["--kernel-cache", "hostpath:/var/lib/tfgpu/kernels"],
            {"hostPath": {"path": "/var/lib/tfgpu/kernels", "type": "DirectoryOrCreate"}},
        ),
    ],
)
def test_every_gpu_pod_mounts_the_cache(
    capsys: pytest.CaptureFixture[str], flag: list[str], volume: dict[str, Any]
) -> None:
    docs = render(capsys, "--mem-limit", "6GiB", *flag)
    pods = _pods(docs)
    assert len(pods) == 2  # the Deployment's and the Job's
    for pod in pods:
        found, env = _cache_of(pod)
        assert found == {"name": "kernel-cache", **volume}
        assert env == {"CUDA_CACHE_PATH": CACHE.path, "CUDA_CACHE_MAXSIZE": str(CACHE.max_bytes)}
    for doc in docs:
        assert validate(doc) == KUBERNETES_MINOR


def test_none_mounts_nothing(capsys: pytest.CaptureFixture[str]) -> None:
    for pod in _pods(render(capsys, "--mem-limit", "6GiB", "--kernel-cache", "none")):
        assert _cache_of(pod) == (None, {})


@pytest.mark.parametrize("jobset", [False, True])
def test_parameter_servers_get_no_cache_the_gpu_roles_do(
    capsys: pytest.CaptureFixture[str], jobset: bool
) -> None:
    docs = render(
        capsys, "--kind", "job", "--workers", "2", "--ps", "1", "--mem-limit", "4GiB",
        *(["--jobset"] if jobset else []),
    )  # fmt: skip
    pods = _pods(docs)
    assert len(pods) == 3
    for pod in pods:
        [container] = pod["containers"]
        gpu = "nvidia.com/gpu" in container["resources"]["limits"]
        volume, env = _cache_of(pod)
        assert (volume is not None) == gpu and bool(env) == gpu
    for doc in docs:
        if doc["kind"] == "JobSet":
            jsonschema.validate(doc, JOBSET_SCHEMA)
            jobs = doc["spec"]["replicatedJobs"]  # validated as the Jobs they become (raises)
            assert len(validate_job_templates(jobs, VERSIONS)) == len(jobs) * len(VERSIONS)
        else:
            assert validate(doc) == KUBERNETES_MINOR


def test_the_users_cache_path_moves_the_mount(capsys: pytest.CaptureFixture[str]) -> None:
    docs = render(
        capsys, "--kind", "deployment", "--env", "CUDA_CACHE_PATH=/cache/cuda",
        "--env", "CUDA_CACHE_MAXSIZE=1073741824",
    )  # fmt: skip
    [pod] = _pods(docs)
    volume, env = _cache_of(pod)
    assert volume == {"name": "kernel-cache", "emptyDir": {"sizeLimit": "2Gi"}}
    assert env == {"CUDA_CACHE_PATH": "/cache/cuda", "CUDA_CACHE_MAXSIZE": "1073741824"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--kernel-cache", "disk"],
            "--kernel-cache 'disk' is not valid: accepted: emptydir, pvc:CLAIM",
        ),
        (["--kernel-cache", "pvc:"], "--kernel-cache 'pvc:' is not valid"),
        (["--kernel-cache", "pvc:Kernels"], "a claim is a DNS-1123 subdomain"),
        (["--kernel-cache", "hostpath:relative/dir"], "a node path absolute"),
        (["--kernel-cache", "hostpath:/var/../etc"], "--kernel-cache 'hostpath:/var/../etc'"),
        (["--kernel-cache", "emptydir:4Gi"], "example: --kernel-cache pvc:tfgpu-kernels"),
        (
            ["--env", "CUDA_CACHE_PATH=cache"],
            "--env CUDA_CACHE_PATH='cache' is where --kernel-cache",
        ),
        (["--env", "CUDA_CACHE_MAXSIZE=8589934592"], "--env CUDA_CACHE_MAXSIZE '8589934592'"),
    ],
)
def test_bad_values_are_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["k8s", "--image", "registry.example/t:1", *flags]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "Traceback" not in captured.err
    assert message in captured.err, captured.err
