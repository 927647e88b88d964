"""Each role of a parameter-server cluster gets only the variables and probes that apply to it:
a parameter server without a GPU gets no cap, no recovery rule (it needs a cap: the pod would exit
78 at start and its Job's failure policy would end the run), no TF_GPU_REQUIRED and no /livez
probe; `--env TF_GPU_PS_GPUS=true` gives it the GPU shape of the others, as docs/scale.md says;
and `plan` checks every pod, GPU or not, as its runtime will."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.scale.helpers import errors, plan_json
from tfgpu_kit import cli

IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
GPU_ONLY_SEEN = ("TF_GPU_MEM_LIMIT", "TF_GPU_RECOVER_AT", "TF_GPU_REQUIRED")


def render(tmp_path: Path, capsys: pytest.CaptureFixture[str], *flags: str) -> dict[str, Any]:
    """role -> its pod template, from the three Indexed Jobs."""
    code = cli.main(["k8s", "--image", IMAGE, "--kind", "job", "--out", str(tmp_path), *flags])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    pods = {}
    for role in ("chief", "worker", "ps"):
        job = yaml.safe_load((tmp_path / f"job-{role}.yaml").read_text())
        pods[role] = job["spec"]["template"]
    return pods


def shape(pod: dict[str, Any]) -> dict[str, Any]:
    spec = pod["spec"]
    [container] = spec["containers"]
    return {
        "env": {e["name"] for e in container.get("env", [])},
        "gpu": "nvidia.com/gpu" in container["resources"]["limits"],
        "livez": "livenessProbe" in container,
        "volumes": {v["name"] for v in spec.get("volumes", [])},
    }


def test_the_parameter_server_gets_no_recovery_rule_without_a_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    flags = ["--workers", "2", "--ps", "1", "--mem-limit", "4GiB", "--env", "TF_GPU_RECOVER_AT=95%"]
    pods = render(tmp_path, capsys, *flags, "--env", "TF_GPU_REQUIRED=true")
    for role in ("chief", "worker"):
        got = shape(pods[role])
        assert set(GPU_ONLY_SEEN) <= got["env"] and got["gpu"] and got["livez"], role
        assert {"tfgpu-state", "kernel-cache"} <= got["volumes"]
    ps = shape(pods["ps"])
    assert not set(GPU_ONLY_SEEN) & ps["env"] and not ps["gpu"] and not ps["livez"]
    assert ps["volumes"] == set()
    # and plan, reading every pod, finds nothing that would not start
    code, report = plan_json(capsys, [str(p) for p in sorted(tmp_path.glob("*.yaml"))],
                             "--gpu-memory", "16GiB")  # fmt: skip
    assert code == 0, errors(report)
    assert any("without a GPU (a parameter server)" in n for n in report["notes"])


def test_ps_gpus_true_gives_the_parameter_servers_the_gpu_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pods = render(
        tmp_path, capsys, "--workers", "2", "--ps", "1", "--mem-limit", "4GiB",
        "--env", "TF_GPU_RECOVER_AT=95%", "--env", "TF_GPU_PS_GPUS=true",
    )  # fmt: skip
    ps = shape(pods["ps"])
    assert ps["gpu"] and ps["livez"] and {"TF_GPU_MEM_LIMIT", "TF_GPU_PS_GPUS"} <= ps["env"]
    assert "tolerations" in pods["ps"]["spec"]


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ["--env", "TF_GPU_PS_GPUS=true"],
            "--env TF_GPU_PS_GPUS='true' gives the parameter servers a GPU, and there are none "
            "without --ps",
        ),
        (["--workers", "2", "--env", "TF_GPU_PS_GPUS=true"], "there are none without --ps"),
        (
            ["--workers", "2", "--ps", "1", "--env", "TF_GPU_PS_GPUS=maybe"],
            "TF_GPU_PS_GPUS='maybe'",
        ),
        (
            ["--workers", "2", "--env", "TF_GPU_REQUIRED=true", "--env", "CUDA_VISIBLE_DEVICES="],
            "the GPU pods would exit 69 at start",
        ),
    ],
)
def test_what_would_not_start_is_refused(
    capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    assert cli.main(["k8s", "--image", IMAGE, "--kind", "job", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


def test_plan_checks_pods_and_services_without_a_gpu(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "ps"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [
                        {
                            "name": "ps",
                            "image": IMAGE,
                            "env": [{"name": "TF_GPU_RECOVER_AT", "value": "95%"}],
                        }
                    ],
                }
            }
        },
    }
    path = tmp_path / "ps.yaml"
    path.write_text(yaml.safe_dump(job))
    code, report = plan_json(capsys, [str(path)], "--gpu-memory", "16GiB")
    assert code == 1 and any("TF_GPU_RECOVER_AT='95%'" in e for e in errors(report)), report
    compose = {
        "services": {
            "cpu-only": {"image": IMAGE, "environment": {"TF_GPU_MEM_LIMIT": "4MB"}},
            "prometheus": {"image": "prom/prometheus:v2.53.0"},  # nothing of the kit's
        }
    }
    path = tmp_path / "compose.yaml"
    path.write_text(yaml.safe_dump(compose))
    code, report = plan_json(capsys, [str(path)], "--gpu-memory", "16GiB")
    assert code == 1 and any("TF_GPU_MEM_LIMIT='4MB'" in e for e in errors(report)), report
    assert not any("prometheus" in e for e in errors(report))


def header(path: Path) -> str:
    """The manifest's leading comment, as one line."""
    lines = path.read_text(encoding="utf-8").splitlines()
    text = []
    for line in lines:
        if not line.startswith("#"):
            break
        text.append(line.lstrip("# "))
    return " ".join(text)


@pytest.mark.parametrize("ps_gpus", [False, True])
def test_each_manifest_header_tells_its_own_role_and_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], ps_gpus: bool
) -> None:
    """Before: the chief's and the parameter server's Jobs both said "a TensorFlow training job on
    1 GPU(s) per pod, 1 workers training one model", and the Service "each of the 1 workers"."""
    extra = ["--env", "TF_GPU_PS_GPUS=true"] if ps_gpus else []
    render(tmp_path, capsys, "--workers", "3", "--ps", "2", "--gpus", "2", *extra)
    counts = "(a chief, 3 workers, 2 parameter servers)"
    chief, worker, ps = (
        header(tmp_path / f"job-{role}.yaml") for role in ("chief", "worker", "ps")
    )
    assert f"the chief of tfgpu-train {counts}: it runs the training program, on 2 GPUs" in chief
    assert f"the 3 workers of tfgpu-train {counts}" in worker and "on 2 GPUs" in worker
    assert f"the 2 parameter servers of tfgpu-train {counts}" in ps
    assert ("on 2 GPUs" if ps_gpus else "with no GPU") in ps
    service = header(tmp_path / "service.yaml")
    assert "each of the 1 chief, 3 workers, 2 parameter servers of tfgpu-train" in service


def test_a_plain_job_header_counts_its_gpus_and_workers(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for flags, words in (
        (["--gpus", "1"], "a TensorFlow training Job on 1 GPU per pod"),
        (["--workers", "4", "--gpus", "2"], "4 TensorFlow workers training one model, 2 GPUs each"),
    ):
        out = tmp_path / str(len(flags))
        code = cli.main(["k8s", "--image", IMAGE, "--kind", "job", "--out", str(out), *flags])
        assert code == 0, capsys.readouterr().err
        assert words in header(out / "job.yaml"), header(out / "job.yaml")
    assert "each of the 4 workers of tfgpu-train" in header(tmp_path / "4" / "service.yaml")
