"""`build.py plan` on Kubernetes manifests: exclusive GPUs, time-slicing (ConfigMap or
flag), replicas/parallelism, ConfigMap-sourced env, and what cannot be resolved."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scale.helpers import errors, plan_json, write

SLICING_CONFIG = """\
version: v1
sharing:
  timeSlicing:
    resources:
      - name: nvidia.com/gpu
        replicas: 4
"""


def container(
    variables: dict[str, str] | None = None, gpus: int | None = 1, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {"name": "tf", "image": "tfgpu/tensorflow:2.21.0-gpu", **extra}
    if variables is not None:
        out["env"] = [{"name": k, "value": v} for k, v in variables.items()]
    if gpus is not None:
        out["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return out


def deployment(name: str, *containers: dict[str, Any], replicas: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"containers": list(containers)},
            },
        },
    }


def job(
    name: str, *containers: dict[str, Any], parallelism: int = 1, completions: int | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "template": {"spec": {"containers": list(containers), "restartPolicy": "Never"}},
    }
    if completions is not None:
        spec["completions"] = completions
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name}, "spec": spec}


def config_map(name: str, data: dict[str, str], namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


SLICING = config_map("time-slicing", {"any": SLICING_CONFIG}, "gpu-operator")


def annotated(doc: dict[str, Any], **annotations: str) -> dict[str, Any]:
    """`doc` with these annotations on its pod template."""
    template = doc["spec"]["template"]
    template.setdefault("metadata", {})["annotations"] = annotations
    return doc


CAP3 = {"TF_GPU_MEM_LIMIT": "3GiB"}

# (id, documents, flags, ok, expected error substrings, worst-case committed MiB of the pool)
CASES: list[tuple[str, list[dict[str, Any]], list[str], bool, list[str], float | None]] = [
    (
        "exclusive GPUs are never shared: uncapped is fine",
        [
            deployment("a", container({}), replicas=3),
            job("train", container({"TF_GPU_MEM_LIMIT": "10GiB"}), parallelism=2),
        ],
        [],
        True,
        [],
        None,
    ),
    (
        "exclusive cap larger than the card",
        [
            deployment("a", container({"TF_GPU_MEM_LIMIT": "20GiB"})),
        ],
        [],
        False,
        ["TF_GPU_MEM_LIMIT='20GiB' is not valid", "at most the GPU's memory"],
        None,
    ),
    (
        "time-slicing ConfigMap: any 4 pods fit",
        [
            SLICING,
            deployment("small", container({"TF_GPU_MEM_LIMIT": "3GiB"}), replicas=6),
        ],
        [],
        True,
        [],
        4 * (3072 + 500),
    ),
    (
        "time-slicing ConfigMap: worst case over-commits",
        [
            SLICING,
            deployment("small", container({"TF_GPU_MEM_LIMIT": "3GiB"}), replicas=3),
            job("train", container({"TF_GPU_MEM_LIMIT": "8GiB"})),
        ],
        [],
        False,
        ["any nvidia.com/gpu is over-committed", "lower the time-slicing replicas"],
        8692 + 3 * 3572,
    ),
    (
        "time-slicing flag, percentages",
        [
            deployment("p", container({"TF_GPU_MEM_LIMIT": "20%"}), replicas=8),
        ],
        ["--time-slicing", "4"],
        True,
        [],
        4 * (3276 + 500),
    ),
    (
        "time-sliced pod without a cap",
        [
            SLICING,
            deployment("small", container({"TF_GPU_MEM_LIMIT": "3GiB"})),
            deployment("greedy", container({"TF_GPU_MEMORY_GROWTH": "true"})),
        ],
        [],
        False,
        ["Deployment/greedy[tf]: has no memory cap on any nvidia.com/gpu"],
        None,
    ),
    (
        "Job parallelism counts, limited by completions",
        [
            job("train", container({"TF_GPU_MEM_LIMIT": "4GiB"}), parallelism=5, completions=3),
        ],
        ["--time-slicing", "3"],
        True,
        [],
        3 * (4096 + 500),
    ),
    (
        "renamed shared resource",
        [
            config_map(
                "ts",
                {
                    "a100": SLICING_CONFIG.replace(
                        "    resources:", "    renameByDefault: true\n    resources:"
                    )
                },
            ),
            deployment(
                "s",
                container(
                    {"TF_GPU_MEM_LIMIT": "5GiB"},
                    gpus=None,
                    resources={"limits": {"nvidia.com/gpu.shared": 1}},
                ),
                replicas=4,
            ),
        ],
        [],
        False,
        ["any nvidia.com/gpu.shared is over-committed"],
        4 * 5620,
    ),
    (
        "env from a ConfigMap in the input",
        [
            SLICING,
            config_map("caps", {"TF_GPU_MEM_LIMIT": "6GiB"}),
            deployment(
                "cm", container(None, envFrom=[{"configMapRef": {"name": "caps"}}]), replicas=4
            ),
        ],
        [],
        False,
        ["over-committed"],
        4 * 6644,
    ),
    (
        "configMapKeyRef resolves",
        [
            config_map("caps", {"cap": "2GiB"}),
            deployment(
                "cm",
                container(
                    None,
                    env=[
                        {
                            "name": "TF_GPU_MEM_LIMIT",
                            "valueFrom": {"configMapKeyRef": {"name": "caps", "key": "cap"}},
                        }
                    ],
                ),
                replicas=4,
            ),
        ],
        ["--time-slicing", "4"],
        True,
        [],
        4 * 2548,
    ),
    (
        "a Secret is reported, not guessed",
        [
            deployment(
                "s",
                container(
                    None,
                    env=[
                        {
                            "name": "TF_GPU_MEM_LIMIT",
                            "valueFrom": {"secretKeyRef": {"name": "x", "key": "y"}},
                        }
                    ],
                ),
            ),
        ],
        ["--time-slicing", "2"],
        False,
        ["its cap is unknown: TF_GPU_MEM_LIMIT", "secretKeyRef"],
        None,
    ),
    (
        "$(VAR) expansion is reported",
        [
            deployment("s", container({"TF_GPU_MEM_LIMIT": "$(CAP)"})),
        ],
        [],
        False,
        ["expands $(…) at run time"],
        None,
    ),
    (
        "NVIDIA_VISIBLE_DEVICES without a GPU limit is unknown placement",
        [
            deployment(
                "sneaky",
                container({"NVIDIA_VISIBLE_DEVICES": "all", "TF_GPU_MEM_LIMIT": "1GiB"}, gpus=None),
            ),
        ],
        [],
        False,
        ["which GPUs it uses is unknown", "device plugin does not account"],
        None,
    ),
    (
        "negative replicas are reported, counted as 1",
        [deployment("neg", container(CAP3), replicas=-2)],
        ["--time-slicing", "4"],
        False,
        ["how many run at once is unknown: replicas '-2' is not a whole number ≥ 0; counted as 1"],
        3072 + 500,
    ),
    (
        "boolean replicas are not a count",
        [deployment("yes", container(CAP3), replicas=True)],
        ["--time-slicing", "4"],
        False,
        ["how many run at once is unknown: replicas 'true' is not a whole number ≥ 0"],
        3072 + 500,
    ),
    (
        "zero replicas run nothing",
        [deployment("off", container({"TF_GPU_MEM_LIMIT": "20GiB"}), replicas=0)],
        ["--time-slicing", "4"],
        True,
        [],
        None,
    ),
    (
        "negative Job parallelism is reported",
        [job("train", container(CAP3), parallelism=-1)],
        ["--time-slicing", "4"],
        False,
        ["how many run at once is unknown: parallelism '-1' is not a whole number ≥ 0"],
        3072 + 500,
    ),
    (
        "boolean Job completions are reported",
        [job("train", container(CAP3), parallelism=3, completions=True)],
        ["--time-slicing", "4"],
        False,
        ["how many run at once is unknown: completions 'true' is not a whole number ≥ 0"],
        3 * (3072 + 500),
    ),
    (
        "processes annotation counts CUDA contexts",
        [annotated(deployment("w", container(CAP3), replicas=2), **{"tfgpu.io/processes": "2"})],
        ["--time-slicing", "4"],
        True,
        [],
        2 * 2 * (3072 + 500),
    ),
    (
        "non-numeric processes annotation is reported, counted as 1",
        [annotated(deployment("w", container(CAP3)), **{"tfgpu.io/processes": "four"})],
        ["--time-slicing", "4"],
        False,
        ["how many run at once is unknown: tfgpu.io/processes 'four' is not a whole number"],
        3072 + 500,
    ),
    (
        "pods without GPUs are ignored",
        [
            deployment("web", container({}, gpus=None)),
        ],
        [],
        True,
        [],
        None,
    ),
]


@pytest.mark.parametrize(
    ("docs", "flags", "ok", "expected", "committed"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
def test_kubernetes_cases(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    docs: list[dict[str, Any]],
    flags: list[str],
    ok: bool,
    expected: list[str],
    committed: float | None,
) -> None:
    path = write(tmp_path, "manifests.yaml", *docs)
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", *flags)
    found = errors(report)
    assert report["ok"] is ok, found
    assert code == (0 if ok else 1)
    for text in expected:
        assert any(text in e for e in found), (text, found)
    if committed is not None:
        pool = next(g for g in report["gpus"] if g["sharing"].startswith("time-sliced"))
        assert pool["committed_mib"] == pytest.approx(committed, abs=2)


def test_configmap_in_another_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The device plugin's ConfigMap usually lives in its own namespace and file."""
    slicing = write(tmp_path, "slicing.yaml", SLICING)
    pods = write(
        tmp_path, "pods.yaml", deployment("a", container({"TF_GPU_MEM_LIMIT": "5GiB"}), replicas=4)
    )
    code, report = plan_json(capsys, [slicing, pods], "--gpu-memory", "16GiB")
    assert code == 1 and "time-sliced ×4" in report["gpus"][0]["sharing"]
    assert report["gpus"][0]["entries"][0]["who"] == "pods.yaml:Deployment/a[tf]"


def test_fix_names_the_workload_and_container_as_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The fix points at the container's env by the workload's and container's own names, also
    when the workload's name holds a `[` (the API server would refuse it; plan reads it anyway)."""
    bad = {"TF_GPU_MEM_LIMIT": "lots"}  # refused at start: the fix names where to mend it
    pods = write(
        tmp_path, "pods.yaml", deployment("a[b", container(bad)), deployment("c", container(bad))
    )
    code, report = plan_json(capsys, [pods], "--gpu-memory", "16GiB")
    fixes = sorted(p["fix"] for p in report["problems"] if p["severity"] == "error")
    assert code == 1
    assert any("in Deployment/a[b container 'tf': env" in fix for fix in fixes), fixes
    assert any("in Deployment/c container 'tf': env" in fix for fix in fixes), fixes
