"""NVML reading, visible-device matching, driver and preflight checks, against a stand-in
of `pynvml` (NOT a driver; no GPU was used)."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from tfgpu.contract.errors import ConfigError, GpuUnavailableError
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import nvml
from tfgpu.machine.driver import check_driver
from tfgpu.plan.preflight import run_preflight

from tests.pynvml_standin import standin_pynvml

A10 = ("NVIDIA A10", "GPU-11111111-aaaa", 24576)
T4 = ("Tesla T4", "GPU-22222222-bbbb", 15360)
IMAGE = {
    "TFGPU_IMAGE_CUDA": "12.5",
    "TFGPU_IMAGE_DRIVER_MIN": "555.42.06",
    "TFGPU_IMAGE_DRIVER_MIN_COMPAT": "525.60.13",
}


def test_query_reads_driver_and_gpus() -> None:
    fake = standin_pynvml([A10, T4], driver="550.54.15", cuda=12040)
    r = nvml.query(fake)
    assert r.found and r.driver_version == "550.54.15" and r.cuda_version == "12.4"
    assert [(g.name, g.total_mib) for g in r.gpus] == [("NVIDIA A10", 24576), ("Tesla T4", 15360)]
    assert fake.state["init"] == 0  # shut down again


def test_missing_library_means_no_driver() -> None:
    r = nvml.query(standin_pynvml([], missing=True))
    assert not r.found and r.driver_present is False and r.error == nvml.NO_DRIVER


@pytest.mark.parametrize(
    ("visible", "order", "names"),
    [
        (None, "PCI_BUS_ID", ["NVIDIA A10", "Tesla T4"]),
        (["1"], "PCI_BUS_ID", ["Tesla T4"]),
        (["GPU-2222"], None, ["Tesla T4"]),  # UUID prefix: exact whatever the order
        (["1"], None, [None]),  # mixed models, FASTEST_FIRST: index not trusted
        (["0", "5", "1"], "PCI_BUS_ID", ["NVIDIA A10"]),  # CUDA stops at the invalid index
    ],
)
def test_visible_gpus_matches_carefully(
    visible: list[str] | None, order: str | None, names: list[object]
) -> None:
    r = nvml.query(standin_pynvml([A10, T4]))
    gpus, _ = nvml.visible_gpus(r, visible, order)
    assert [g.name if g else None for g in gpus] == names


def test_preflight_refuses_cap_larger_than_the_visible_card() -> None:
    fake = standin_pynvml([A10, T4])
    environ = {
        "TF_GPU_MEM_LIMIT": "20GiB",
        "CUDA_VISIBLE_DEVICES": "GPU-2222",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
    }
    with pytest.raises(ConfigError, match="Tesla T4, 15360 MiB"):
        run_preflight(
            parse_environment(environ),
            environ,
            nvml_report=nvml.query(fake),
            shm_path="/nonexistent",
        )


def test_preflight_required_and_no_device() -> None:
    environ = {"TF_GPU_REQUIRED": "true", "CUDA_VISIBLE_DEVICES": ""}
    with pytest.raises(GpuUnavailableError, match="CUDA_VISIBLE_DEVICES is empty"):
        run_preflight(
            parse_environment(environ), environ, nvml_report=nvml.query(standin_pynvml([A10]))
        )
    environ = {"TF_GPU_REQUIRED": "true"}
    with pytest.raises(GpuUnavailableError, match="no NVIDIA driver"):
        run_preflight(
            parse_environment(environ),
            environ,
            nvml_report=nvml.query(standin_pynvml([], missing=True)),
        )
    with pytest.raises(GpuUnavailableError, match="CPU-only build"):
        run_preflight(
            parse_environment(environ),
            environ,
            nvml_report=nvml.query(standin_pynvml([A10])),
            build_info=lambda: {"is_cuda_build": False},
        )


def test_required_with_a_driver_but_zero_gpus_exits_69_with_the_reason(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """The driver is there (NVML starts) but reports no device: `docker run` without --gpus
    on a GPU host, or a device plugin that gave the pod none."""
    environ = {"TF_GPU_REQUIRED": "true", "PATH": "/usr/bin:/bin"}
    report = nvml.query(standin_pynvml([]))
    assert report.found and report.driver_present is True and report.gpus == []
    reason = "the NVIDIA driver reports no GPU (was the container started with --gpus?)"
    with pytest.raises(GpuUnavailableError) as info:
        run_preflight(parse_environment(environ), environ, nvml_report=report)
    assert info.value.reason == reason and info.value.exit_code == 69
    # through `tfgpu run`: 69, the reason, and the command never starts
    from tfgpu.commands import run

    monkeypatch.setattr(nvml, "query", lambda: report)
    marker = tmp_path / "ran"
    assert run.run(["touch", str(marker)], environ) == 69
    err = capsys.readouterr().err
    assert f"TF_GPU_REQUIRED=true, but no usable GPU: {reason}" in err
    assert "nothing was started" in err and not marker.exists()


@pytest.mark.parametrize(
    ("report", "reason"),
    [
        # a GPU in sight: only now is the TensorFlow build read (tfgpu.machine.tfbuild, imported
        # here)
        (standin_pynvml([A10], driver="560.28.03"), "the installed TensorFlow is a CPU-only build"),
        # a driver too old for the image's CUDA (tfgpu.machine.driver, imported only with a driver)
        (standin_pynvml([A10], driver="470.82.01"), "the NVIDIA driver is too old"),
    ],
    ids=["cpu-only-build", "old-driver"],
)
def test_run_still_reads_the_build_and_the_driver_it_imports_on_demand(
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    report: ModuleType,
    reason: str,
) -> None:
    """`tfgpu run` imports tfgpu.machine.tfbuild and tfgpu.machine.driver only when preflight needs
    them (start-up time): with TF_GPU_REQUIRED=true and a GPU, each still decides (.venv's
    TensorFlow is tensorflow-cpu), and the command never starts."""
    from tfgpu.commands import run

    environ = {"TF_GPU_REQUIRED": "true", "PATH": "/usr/bin:/bin", **IMAGE}
    found = nvml.query(report)
    monkeypatch.setattr(nvml, "query", lambda: found)

    def started(command: list[str], env: object) -> None:
        raise AssertionError(f"the command started: {command}")  # not this test process's exec

    monkeypatch.setattr(run, "exec_command", started)
    marker = tmp_path / "ran"
    assert run.run(["touch", str(marker)], environ) == 69
    err = capsys.readouterr().err
    assert f"TF_GPU_REQUIRED=true, but no usable GPU: {reason}" in err
    assert "nothing was started" in err and not marker.exists()


def test_preflight_ok_with_gpu() -> None:
    environ = {"TF_GPU_MEM_LIMIT": "4096", **IMAGE}
    pf = run_preflight(
        parse_environment(environ),
        environ,
        nvml_report=nvml.query(standin_pynvml([A10], driver="560.28.03")),
        shm_path="/nonexistent",
    )
    assert pf.plan.gpu_limits == [[4096]] and pf.problems == []


def test_old_driver_explained_nvidia_style() -> None:
    r = nvml.query(
        standin_pynvml([("NVIDIA GeForce RTX 3090", "GPU-3", 24576)], driver="470.82.01", brand=5)
    )
    [p] = check_driver("470.82.01", IMAGE, r.gpus)
    assert p.severity == "error"
    assert "built for NVIDIA driver 555.42.06 or later (CUDA 12.5" in p.what
    assert "525.60.13 or later with minor-version compatibility" in p.what
    assert "data-centre GPUs only" in p.what


def test_old_driver_messages_are_whole_sentences() -> None:
    """Both halves of the split string literals reach the user (they once were dropped)."""
    gpus = nvml.query(
        standin_pynvml([("NVIDIA GeForce RTX 3090", "GPU-3", 24576)], driver="470.82.01", brand=5)
    ).gpus
    [p] = check_driver("470.82.01", IMAGE, gpus)
    assert p.what.endswith("(NVIDIA GeForce RTX 3090 is not).")
    assert p.fix == (
        "update the host's NVIDIA driver to 555.42.06 or later, or use an image built for an "
        "older CUDA"
    )


def test_forward_compat_could_apply_on_datacentre_gpu() -> None:
    r = nvml.query(standin_pynvml([("NVIDIA A100-SXM4-40GB", "GPU-4", 40960)], driver="535.104.05"))
    [p] = check_driver("535.104.05", {**IMAGE, "TFGPU_IMAGE_DRIVER_MIN_COMPAT": "545.0"}, r.gpus)
    assert "Forward compatibility could apply" in p.what


def test_minor_version_compat_is_a_warning() -> None:
    [p] = check_driver("535.104.05", IMAGE, [])
    assert p.severity == "warning" and "minor-version compatibility" in p.what


def test_new_driver_is_fine() -> None:
    assert check_driver("560.35.03", IMAGE, []) == []


def test_shm_default_64mb_warns(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    import os

    from tfgpu.machine import shm

    class St:
        f_blocks, f_frsize = 16384, 4096  # 64 MiB

    monkeypatch.setattr(os, "statvfs", lambda p: St())
    p = shm.shm_problem("/dev/shm")
    assert p is not None and "--shm-size" in p.fix and "--ipc=host" in p.fix


def test_build_info_read_without_importing_tensorflow() -> None:
    """tfbuild reads the installed (real) tensorflow-cpu's build_info.py as text."""
    import sys

    from tfgpu.machine import tfbuild

    had_tf = "tensorflow" in sys.modules
    info = tfbuild.build_info()
    assert info == {"is_cuda_build": False, "is_rocm_build": False, "is_tensorrt_build": False}
    assert ("tensorflow" in sys.modules) == had_tf


def test_build_info_of_a_cuda_build_with_a_list_value(tmp_path: Path) -> None:
    """A CUDA build's build_info.py holds a list (cuda_compute_capabilities); reading it must
    not stop at that list's `])`, or a GPU build looks like a CPU-only one."""
    from tfgpu.machine import tfbuild

    platform = tmp_path / "python" / "platform"
    platform.mkdir(parents=True)
    (platform / "build_info.py").write_text(
        '"""Auto-generated module providing information about the build."""\n'
        "import collections\n\n"
        "build_info = collections.OrderedDict([('cpu_compiler', 'clang 18'), "
        "('cuda_compute_capabilities', ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']), "
        "('cuda_version', '12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True), "
        "('is_rocm_build', False), ('is_tensorrt_build', False)])\n"
    )
    info = tfbuild.build_info(str(tmp_path))
    assert info is not None
    assert info["is_cuda_build"] is True and info["cuda_version"] == "12.5.1"
    assert info["cuda_compute_capabilities"] == ["sm_60", "sm_70", "sm_80", "sm_89", "compute_90"]
