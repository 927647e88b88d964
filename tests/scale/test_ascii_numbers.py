"""Counts are ASCII digits only, everywhere (issue: `"²".isdigit()` is True and `int("²")` raises
a traceback, `int("٣")` is 3); compose's `count: -1` means all GPUs; an unwritable path has its
own exit code."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scale.helpers import plan_json, write
from tests.scale.test_plan_compose import gpu, service
from tfgpu_kit import cli
from tfgpu_kit.plan import devices

NOT_ASCII = ["²", "٣", "３"]  # superscript two, Arabic-Indic three, fullwidth three


@pytest.mark.parametrize("value", NOT_ASCII)
@pytest.mark.parametrize(
    "args",
    [
        ["k8s", "--image", "x/y:1", "--gpus"],
        ["plan", "compose.yaml", "--gpu-memory", "16GiB", "--gpu-count"],
    ],
    ids=["k8s --gpus", "plan --gpu-count"],
)
def test_a_non_ascii_count_flag_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], args: list[str], value: str
) -> None:
    assert cli.main([*args, value]) == 2
    err = capsys.readouterr().err
    assert f"{args[-1]} {value!r}" in err or f"{args[-1]} '{value}'" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("value", NOT_ASCII)
def test_non_ascii_compose_replicas_are_reported_not_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    path = write(
        tmp_path,
        "compose.yaml",
        {"services": {"a": service({"TF_GPU_MEM_LIMIT": 4096}, {**gpu("0"), "replicas": value})}},
    )
    _, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    text = str(report)
    assert f"{value!r} is not a whole number" in text
    [gpu0] = report["gpus"]
    assert [e["instances"] for e in gpu0["entries"]] == [1]  # not 3


def test_non_ascii_cuda_visible_devices_entry_hides_the_rest() -> None:
    assert devices.cuda_visible("٣", ["0", "1", "2", "3"]) == []
    assert devices.cuda_visible("1,٣,0", ["0", "1", "2", "3"]) == ["1"]


def test_compose_count_minus_one_means_all_gpus(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        "compose.yaml",
        {"services": {"a": service({"TF_GPU_MEM_LIMIT": 4096}, gpu(count=-1))}},
    )
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB", "--gpu-count", "2")
    assert code == 0, report
    assert [g["gpu"] for g in report["gpus"]] == ["0", "1"]
    assert all(g["committed_mib"] == 4096 + 500 for g in report["gpus"])


def test_an_unwritable_path_exits_5_not_1(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["render", "--out", "/proc/tfgpu-no-such-dir/x"]) == 5
    err = capsys.readouterr().err
    assert "error: /proc/tfgpu-no-such-dir" in err
    assert "Traceback" not in err
