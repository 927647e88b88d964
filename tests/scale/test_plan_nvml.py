"""`build.py plan` reading GPU memory through NVML, with the tests' `pynvml` stand-in (no driver
here): no driver, a failure after nvmlInit, and two GPUs of different sizes."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from tests.pynvml_standin import gpus_of, standin_pynvml
from tests.scale.helpers import plan_json, write
from tfgpu_kit import cli
from tfgpu_kit.shared.errors import EXIT_USAGE

GIB = 1024  # MiB


def install(monkeypatch: pytest.MonkeyPatch, fake: types.ModuleType) -> Any:
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    return fake


def gpu_service(limit: str, *ids: str) -> dict[str, Any]:
    device = {"driver": "nvidia", "capabilities": ["gpu"], "device_ids": list(ids)}
    return {
        "image": "tfgpu/tensorflow:2.21.0-gpu",
        "environment": {"TF_GPU_MEM_LIMIT": limit},
        "deploy": {"resources": {"reservations": {"devices": [device]}}},
    }


@pytest.fixture
def compose(tmp_path: Path) -> str:
    return write(
        tmp_path,
        "compose.yaml",
        {
            "services": {
                "small": gpu_service("10GiB", "0"),
                "large": gpu_service("30GiB", "1"),
                "everywhere": {
                    **gpu_service("2GiB"),
                    "deploy": {
                        "resources": {
                            "reservations": {
                                "devices": [
                                    {"driver": "nvidia", "capabilities": ["gpu"], "count": "all"}
                                ]
                            }
                        }
                    },
                },
            }
        },
    )


def test_init_failure_asks_for_the_flag(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], compose: str
) -> None:
    fake = install(monkeypatch, standin_pynvml([], init_error="Driver Not Loaded"))
    assert cli.main(["plan", compose]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "--gpu-memory is needed" in err and "nvmlInit: Driver Not Loaded" in err
    assert "--gpu-memory 16GiB" in err and "Traceback" not in err
    assert "nvmlDeviceGetCount" not in fake.calls


@pytest.mark.parametrize(
    ("fail", "what"),
    [
        (("nvmlDeviceGetMemoryInfo", 1), "reading GPU 1 failed (nvmlDeviceGetMemoryInfo: Unknown"),
        (("nvmlDeviceGetUUID", 0), "reading GPU 0 failed (nvmlDeviceGetUUID: Unknown Error)"),
        (("nvmlDeviceGetCount", None), "counting the GPUs failed (nvmlDeviceGetCount: Unknown"),
    ],
)
def test_failure_after_init_is_one_clear_error(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    compose: str,
    fail: tuple[str, int | None],
    what: str,
) -> None:
    fake = install(monkeypatch, standin_pynvml(gpus_of(16 * GIB, 40 * GIB), fail=fail))
    assert cli.main(["plan", compose]) == EXIT_USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "Traceback" not in err
    assert f"cannot read the GPUs' memory through NVML: {what}" in err
    assert "pass --gpu-memory SIZE and --gpu-count N so that plan does not read NVML" in err
    assert fake.calls[-1] == "nvmlShutdown"  # NVML is released on the way out
    # with --gpu-memory given, only the missing flag is named
    assert cli.main(["plan", compose, "--gpu-memory", "40GiB"]) == EXIT_USAGE
    err = " ".join(capsys.readouterr().err.split())
    assert "hint: pass --gpu-count N so that plan does not read NVML" in err


def test_both_flags_given_nvml_is_not_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], compose: str
) -> None:
    fake = install(
        monkeypatch, standin_pynvml(gpus_of(16 * GIB), fail=("nvmlDeviceGetMemoryInfo", 0))
    )
    code, report = plan_json(capsys, [compose], "--gpu-memory", "40GiB", "--gpu-count", "2")
    assert code == 0, report["problems"]
    assert fake.calls == []


def test_two_gpus_of_different_sizes(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], compose: str
) -> None:
    install(monkeypatch, standin_pynvml(gpus_of(16 * GIB, 40 * GIB)))
    code, report = plan_json(capsys, [compose])
    gpus = {g["gpu"]: g for g in report["gpus"]}
    # each GPU is judged against its own size: 30 GiB fits on the 40 GiB GPU 1 only
    assert gpus["0"]["memory_mib"] == pytest.approx(16384)
    assert gpus["1"]["memory_mib"] == pytest.approx(40960)
    assert code == 0, report["problems"]
    # `count: all` is resolved from NVML's count: the 2 GiB service is on both GPUs
    assert {"0", "1"} <= set(gpus)
    assert any("everywhere" in e["who"] for e in gpus["1"]["entries"])
    # swap the sizes: the 30 GiB cap no longer fits GPU 1
    install(monkeypatch, standin_pynvml(gpus_of(40 * GIB, 16 * GIB)))
    code, report = plan_json(capsys, [compose])
    assert code == 1
    assert [(p["who"], p["severity"]) for p in report["problems"]] == [("large", "error")]
    assert "16384 MiB" in report["problems"][0]["what"]


def _pod(limit: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "train"},
        "spec": {
            "containers": [
                {
                    "name": "tf",
                    "image": "tfgpu/tensorflow:2.21.0-gpu",
                    "env": [{"name": "TF_GPU_MEM_LIMIT", "value": limit}],
                    "resources": {"limits": {"nvidia.com/gpu": 1}},
                }
            ]
        },
    }


def test_kubernetes_gpus_of_mixed_sizes_are_budgeted_on_the_smallest(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    install(monkeypatch, standin_pynvml(gpus_of(16 * GIB, 40 * GIB)))
    # the scheduler may give the pod the 16 GiB card: a 30 GiB cap does not fit there
    pod = write(tmp_path, "pod.yaml", _pod("30GiB"))
    code, report = plan_json(capsys, [pod])
    assert code == 1
    assert any("16384" in p["what"] for p in report["problems"] if p["severity"] == "error")
    (note,) = [n for n in report["notes"] if "differ in memory" in n]
    assert "16384 to 40960 MiB" in note and "Pod/train[tf]" in note
    assert "budgeted on the smallest (16384 MiB)" in note
    # a cap that fits the smallest card passes, on the smallest card, and says so in the table
    write(tmp_path, "pod.yaml", _pod("10GiB"))
    code, report = plan_json(capsys, [pod])
    assert code == 0, report["problems"]
    (gpu,) = report["gpus"]
    assert gpu["memory_mib"] == pytest.approx(16384)
    assert cli.main(["plan", pod]) == 0
    assert "note: the GPUs differ in memory" in " ".join(capsys.readouterr().out.split())


def test_no_note_when_every_gpu_is_known_or_alike(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    compose: str,
) -> None:
    install(monkeypatch, standin_pynvml(gpus_of(16 * GIB, 40 * GIB)))
    code, report = plan_json(capsys, [compose])  # compose names its GPUs: each its own size
    assert code == 0 and not any("differ in memory" in n for n in report["notes"])
    install(monkeypatch, standin_pynvml(gpus_of(16 * GIB, 16 * GIB)))
    code, report = plan_json(capsys, [write(tmp_path, "pod.yaml", _pod("10GiB"))])
    assert code == 0 and not any("differ in memory" in n for n in report["notes"])
