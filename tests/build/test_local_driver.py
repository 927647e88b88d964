"""`build.py check` without --driver: the local driver and GPU 0's architecture through NVML, read
by the runtime's reader, against the tests' `pynvml` stand-in (NOT a driver; no GPU was used)."""

from __future__ import annotations

import json
import sys
import types

import pytest

from tests.pynvml_standin import standin_pynvml
from tfgpu_kit import cli

H100 = ("NVIDIA H100 80GB HBM3", "GPU-11111111-aaaa", 81559)


def check(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fake: types.ModuleType | None,
    *args: str,
) -> tuple[int, str, str]:
    monkeypatch.setitem(sys.modules, "pynvml", fake)  # None: `import pynvml` fails
    code = cli.main(["check", "--tf", "2.21.0", *args])
    out, err = capsys.readouterr()
    return code, out, " ".join(err.split())


def test_the_local_driver_and_gpu_0s_architecture_are_judged(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = standin_pynvml([H100], driver="575.51.03", compute_capability=(9, 0))
    code, out, _ = check(monkeypatch, capsys, fake, "--json")
    report = json.loads(out)
    assert (report["driver"], report["gpu_arch"]) == ("575.51.03", "sm_90")
    assert code == 0 and report["results"][0]["tensorflow"] == "2.21.0"
    assert fake.state["init"] == 0  # NVML shut down again
    # --gpu-arch wins over the card's
    code, out, _ = check(monkeypatch, capsys, fake, "--json", "--gpu-arch", "8.0")
    assert json.loads(out)["gpu_arch"] == "sm_80"


def test_an_old_local_driver_is_a_negative_verdict(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = check(monkeypatch, capsys, standin_pynvml([H100], driver="470.82.01"))
    assert code == 1 and "driver 470.82.01" in out and "cannot run as built" in err


@pytest.mark.parametrize(
    ("fake", "message"),
    [
        (
            standin_pynvml([], missing=True),
            "no NVIDIA driver found on this machine (NVML: NVML Shared Library Not Found) "
            "hint: pass --driver VERSION",
        ),
        (
            standin_pynvml([H100], fail=("nvmlDeviceGetName", 0)),
            "NVML could not read the driver: Unknown Error",
        ),
        (None, "cannot read the local driver: nvidia-ml-py is not installed"),
    ],
    ids=["no driver", "NVML fails", "no nvidia-ml-py"],
)
def test_no_usable_driver_is_said_in_one_line(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    fake: types.ModuleType | None,
    message: str,
) -> None:
    code, out, err = check(monkeypatch, capsys, fake)
    assert code == 1 and out == ""
    assert f"error: {message}" in err and "Traceback" not in err
