"""`build.py plan … --prometheus-rules OUT [--gpu-uuid ID=UUID]`: the per-GPU budget as
recording rules, and clear errors for flags it cannot use. In-process, no tools needed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.scale.helpers import write
from tests.scale.test_plan_compose import gpu, service
from tests.scale.test_plan_kube import container, deployment
from tfgpu_kit import cli

UUID0 = "GPU-fa6e0000-0000-4000-8000-000000000000"
UUID1 = "GPU-fa6e0000-0000-4000-8000-000000000001"
TWO_GPUS = {
    "a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu("0")),
    "b": service({"TF_GPU_MEM_LIMIT": 2048}, gpu("0")),
    "c": service({"TF_GPU_MEM_LIMIT": 1024}, gpu("1")),
}


def recorded(path: Path) -> dict[tuple[str, str], dict[str, Any]]:
    """{(series name, gpu): rule} of a written rules file."""
    [group] = yaml.safe_load(path.read_text())["groups"]
    assert group["name"] == "tfgpu-plan"
    return {(r["record"], r["labels"]["gpu"]): r for r in group["rules"]}


def test_each_gpu_gets_its_committed_and_total_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    compose = write(tmp_path, "compose.yaml", {"services": TWO_GPUS})
    out = tmp_path / "plan.rules.yaml"
    flags = ["--gpu-memory", "16GiB", "--prometheus-rules", str(out), "--gpu-uuid", f"1={UUID1}"]
    assert cli.main(["plan", compose, *flags]) == 0
    rules = recorded(out)
    mib = 1 << 20
    assert rules[("tfgpu_plan_committed_bytes", "0")] == {
        "record": "tfgpu_plan_committed_bytes",
        "expr": f"vector({(4096 + 2048 + 2 * 500) * mib})",
        "labels": {"gpu": "0"},  # no --gpu-uuid for GPU 0: no uuid label
    }
    assert rules[("tfgpu_plan_committed_bytes", "1")]["expr"] == f"vector({(1024 + 500) * mib})"
    assert rules[("tfgpu_plan_committed_bytes", "1")]["labels"] == {"gpu": "1", "uuid": UUID1}
    assert rules[("tfgpu_plan_gpu_memory_bytes", "1")]["expr"] == f"vector({16384 * mib})"
    assert len(rules) == 4
    assert "Prometheus recording rules for 2 GPU(s)" in capsys.readouterr().out


def test_kubernetes_budgets_are_left_out_with_a_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = write(
        tmp_path, "serve.yaml", deployment("serve", container({"TF_GPU_MEM_LIMIT": "4096"}))
    )
    out = tmp_path / "plan.rules.yaml"
    assert (
        cli.main(["plan", manifest, "--gpu-memory", "16GiB", "--prometheus-rules", str(out)]) == 0
    )
    assert yaml.safe_load(out.read_text())["groups"][0]["rules"] == []
    assert "1 Kubernetes budget(s) left out" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--gpu-uuid", f"0={UUID0}"], "--gpu-uuid only labels the series of --prometheus-rules"),
        (["--prometheus-rules", "{out}", "--gpu-uuid", "0=abc"], "--gpu-uuid '0=abc' is not"),
        (["--prometheus-rules", "{out}", "--gpu-uuid", UUID0], f"--gpu-uuid '{UUID0}' is not"),
        (
            ["--prometheus-rules", "{out}", "--gpu-uuid", f"0={UUID0}", "--gpu-uuid", f"0={UUID1}"],
            "gives GPU 0 two UUIDs",
        ),
        (["--prometheus-rules", "{out}", "--gpu-uuid", f"7={UUID0}"], "names GPU 7, which no"),
    ],
)
def test_bad_uuid_flags_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    compose = write(tmp_path, "compose.yaml", {"services": TWO_GPUS})
    out = tmp_path / "plan.rules.yaml"
    flags = [f.replace("{out}", str(out)) for f in flags]
    assert cli.main(["plan", compose, "--gpu-memory", "16GiB", *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and "example: --" in err and "Traceback" not in err
    assert not out.exists()  # nothing half-written
