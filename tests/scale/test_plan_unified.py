"""`build.py plan --unified-memory --reserve` for a Jetson: the modules' caps must fit in what the
CPU side leaves of the shared memory; percentages stay of the whole, as the runtime takes them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.scale.helpers import errors, plan_json, write
from tfgpu_kit import cli

TOTAL = "15820"  # MemTotal of an AGX Xavier 16 GB, in MiB
JETSON = ["--gpu-memory", TOTAL, "--gpu-count", "1"]
CONTEXT = 500  # the default --context-overhead, per process


def compose(tmp_path: Path, limits: dict[str, str]) -> str:
    gpu = {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": ["0"]}
    services: dict[str, Any] = {
        name: {
            "image": "tfgpu/tensorflow:2.11.0-l4t-r35.2.1-arm64",
            "environment": {"TF_GPU_MEM_LIMIT": limit},
            "deploy": {"resources": {"reservations": {"devices": [gpu]}}},
        }
        for name, limit in limits.items()
    }
    return write(tmp_path, "compose.yaml", {"services": services})


def gpu0(report: dict[str, Any]) -> dict[str, Any]:
    [budget] = [b for b in report["gpus"] if b["gpu"] == "0"]
    return budget


def test_modules_of_512mib_fit_beside_the_reserve(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [compose(tmp_path, {"detect": "512MiB", "speech": "512MiB", "track": "25%"})]
    code, report = plan_json(capsys, files, *JETSON, "--unified-memory", "--reserve", "4GiB")
    assert code == 0, errors(report)
    budget = gpu0(report)
    assert budget["memory_mib"] == 15820 - 4096
    # 25% is of the whole, as the runtime takes it
    assert budget["committed_mib"] == 512 + 512 + 15820 // 4 + 3 * CONTEXT
    assert any("shared with the CPU" in n and "--reserve" in n for n in report["notes"])


def test_caps_that_fit_the_card_but_not_beside_the_reserve_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = [compose(tmp_path, {"detect": "6GiB", "speech": "6GiB"})]
    code, report = plan_json(capsys, files, *JETSON)
    assert code == 0, errors(report)  # 12 GiB and two contexts of 15.4 GiB: fits a card
    code, report = plan_json(capsys, files, *JETSON, "--unified-memory", "--reserve", "4GiB")
    assert code == 1 and errors(report)


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--unified-memory", "--gpu-memory", TOTAL], "--unified-memory needs --reserve SIZE"),
        (["--unified-memory", "--reserve", "4GiB"], "--unified-memory needs --gpu-memory"),
        (["--gpu-memory", TOTAL, "--reserve", "4GiB"], "applies to unified memory only"),
        (["--gpu-memory", "4GiB", "--unified-memory", "--reserve", "4GiB"], "leaves nothing"),
        (["--gpu-memory", TOTAL, "--unified-memory", "--reserve", "lots"], "--reserve"),
    ],
)
def test_bad_unified_flags_are_usage_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], flags: list[str], message: str
) -> None:
    files = [compose(tmp_path, {"detect": "512MiB"})]
    code = cli.main(["plan", *files, "--gpu-count", "1", *flags])
    err = capsys.readouterr().err
    assert code == 2 and message in err and "example:" in err
