"""The runtime on a Jetson, without a Jetson: a fake Tegra root (TFGPU_SYSROOT) holding the files
tegra.py reads. Caps and percentages resolve against the unified memory (MemTotal), a cap above
it is refused, NVML's absence is not a warning, and check/show/metrics report Tegra's facts."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from tfgpu.act import apply, metrics
from tfgpu.commands import gpu_check, run, show
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import nvml, tegra
from tfgpu.plan.preflight import run_preflight

from tests.runtime.tf_standin import standin_tf

# An AGX Xavier 16 GB: 15820 MiB of MemTotal (the kernel keeps some of the 16 GiB for itself).
TOTAL_MIB = 15820
AVAILABLE_MIB = 9000
RELEASE = (
    "# R35 (release), REVISION: 4.1, GCID: 33958178, BOARD: t186ref, EABI: aarch64, "
    "DATE: Tue Aug  1 19:57:35 UTC 2023\n"
    "# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n"
)
MODEL = "Jetson-AGX"
NOT_TEGRA_COMPATIBLE = "raspberrypi,4-model-b\0brcm,bcm2711\0"


def make_root(
    root: Path,
    *,
    release: str | None = RELEASE,
    compatible: str | None = "nvidia,p2972-0000\0nvidia,tegra194\0",
    meminfo: str | None = None,
    dpkg: str | None = None,
) -> Path:
    """The files tegra.py reads, as a Jetson has them (None: the file is absent)."""
    files = {
        "etc/nv_tegra_release": release,
        "proc/device-tree/compatible": compatible,
        "proc/device-tree/model": MODEL + "\0",
        "proc/meminfo": meminfo
        if meminfo is not None
        else (
            f"MemTotal:       {TOTAL_MIB * 1024} kB\n"
            "MemFree:         1024000 kB\n"
            f"MemAvailable:    {AVAILABLE_MIB * 1024} kB\n"
            "HugePages_Total:       0\n"
        ),
        "var/lib/dpkg/status": dpkg,
    }
    for relative, text in files.items():
        if text is None:
            continue
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def jetson(tmp_path: Path) -> dict[str, str]:
    """An environment whose sysroot is a fake Jetson."""
    return {tegra.SYSROOT_VARIABLE: str(make_root(tmp_path / "jetson"))}


@pytest.fixture
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """NVML must not be asked on a Jetson: each call is counted (and finds no driver)."""
    calls: list[int] = []

    def query(*_: Any) -> nvml.NvmlReport:
        calls.append(1)
        report = nvml.NvmlReport()
        report.driver_present, report.error = False, nvml.NO_DRIVER
        return report

    monkeypatch.setattr(nvml, "query", query)
    return calls


# --- detection ------------------------------------------------------------------------------


def test_the_release_file_alone_makes_a_jetson(tmp_path: Path) -> None:
    root = make_root(tmp_path, compatible=None)
    report = tegra.query({tegra.SYSROOT_VARIABLE: str(root)})
    assert report is not None and report.l4t_release == "35.4.1"


def test_the_device_tree_alone_makes_a_jetson(tmp_path: Path) -> None:
    root = make_root(tmp_path, release=None)
    report = tegra.query({tegra.SYSROOT_VARIABLE: str(root)})
    assert report is not None and report.l4t_release is None and report.found


def test_another_arm_board_is_not_a_jetson(tmp_path: Path) -> None:
    root = make_root(tmp_path, release=None, compatible=NOT_TEGRA_COMPATIBLE)
    assert tegra.query({tegra.SYSROOT_VARIABLE: str(root)}) is None
    assert tegra.query({tegra.SYSROOT_VARIABLE: str(tmp_path / "empty")}) is None


def test_the_unified_memory_is_memtotal(jetson: dict[str, str]) -> None:
    report = tegra.query(jetson)
    assert report is not None
    assert (report.unified_total_mib, report.available_mib) == (TOTAL_MIB, AVAILABLE_MIB)
    assert [(g.total_mib, g.free_mib) for g in report.gpus] == [(TOTAL_MIB, AVAILABLE_MIB)]
    assert "shared with the CPU" in report.gpus[0].name


def test_jetpack_comes_from_dpkg_or_is_unknown(tmp_path: Path) -> None:
    status = (
        "Package: nvidia-l4t-core\nStatus: install ok installed\nVersion: 35.4.1-20230801124926\n"
        "\nPackage: nvidia-jetpack\nStatus: install ok installed\nVersion: 5.1.2-b104\n"
    )
    with_dpkg = tegra.query({tegra.SYSROOT_VARIABLE: str(make_root(tmp_path / "a", dpkg=status))})
    without = tegra.query({tegra.SYSROOT_VARIABLE: str(make_root(tmp_path / "b"))})
    assert with_dpkg is not None and with_dpkg.jetpack == "5.1.2"
    assert without is not None and without.jetpack is None
    assert "JetPack unknown" in tegra.describe(without)


def test_without_memtotal_the_size_is_unknown_not_invented(tmp_path: Path) -> None:
    root = make_root(tmp_path, meminfo="MemFree: 100 kB\n")
    report = tegra.query({tegra.SYSROOT_VARIABLE: str(root)})
    assert report is not None and not report.found and report.gpus == []
    assert report.error is not None and "MemTotal" in report.error


# --- caps against the unified memory ----------------------------------------------------------


@pytest.mark.parametrize(
    ("limit", "expected"),
    [("512MiB", 512.0), ("25%", float(TOTAL_MIB // 4)), ("4GiB", 4096.0)],
)
def test_caps_resolve_against_the_unified_memory(
    jetson: dict[str, str], no_nvml: list[int], limit: str, expected: float
) -> None:
    environ = {**jetson, "TF_GPU_MEM_LIMIT": limit}
    preflight = run_preflight(parse_environment(environ), environ, shm_path="/nonexistent")
    assert preflight.plan.gpu_limits == [[expected]]
    assert not any("NVML" in str(p) or "no GPU" in str(p) for p in preflight.problems)
    assert no_nvml == []


def test_a_cap_above_the_unified_memory_is_refused(
    jetson: dict[str, str], no_nvml: list[int]
) -> None:
    environ = {**jetson, "TF_GPU_MEM_LIMIT": "16GiB"}
    with pytest.raises(ConfigError) as caught:
        run_preflight(parse_environment(environ), environ)
    message = str(caught.value)
    assert "TF_GPU_MEM_LIMIT" in message and f"{TOTAL_MIB} MiB" in message
    assert "shared with the CPU" in message


def test_the_hook_applies_a_percentage_of_the_unified_memory(
    jetson: dict[str, str], no_nvml: list[int]
) -> None:
    tf = standin_tf(gpus=1)
    stderr = io.StringIO()
    plan = apply.configure_tensorflow(
        tf, {**jetson, "TF_GPU_MEM_LIMIT": "25%"}, env_out={}, stderr=stderr
    )
    assert plan is not None and plan.gpu_limits == [[float(TOTAL_MIB // 4)]]
    gpu = tf.config.list_physical_devices("GPU")[0]
    configs = tf.config.get_logical_device_configuration(gpu)
    assert [c.memory_limit for c in configs] == [TOTAL_MIB // 4]
    assert stderr.getvalue() == "" and no_nvml == []


def test_tfgpu_run_says_the_memory_is_shared_and_does_not_warn_about_nvml(
    jetson: dict[str, str], no_nvml: list[int], capsys: pytest.CaptureFixture[str]
) -> None:
    env = run.prepare({**jetson, "TF_GPU_MEM_LIMIT": "512MiB", "PATH": "/usr/bin"})
    err = capsys.readouterr().err
    assert "shared with the CPU" in err and "L4T R35.4.1" in err
    assert "NVML" not in err and "no GPU" not in err
    # (a 64 MB /dev/shm is warned about on any machine: not this test's concern)
    assert [line for line in err.splitlines() if "warning" in line and "SHMEM" not in line] == []
    assert env["TF_GPU_MEM_LIMIT"] == "512MiB"


# --- check, show, metrics -----------------------------------------------------------------------

CHILD_OK: dict[str, Any] = {
    "tensorflow": {
        "importable": True,
        "version": "2.11.0+nv23.1",
        "is_cuda_build": True,
        "cuda_version": "11.4",
        "cudnn_version": "8",
        "error": None,
    },
    "build_info": {"is_cuda_build": False},  # no library checks here
    "hook_active": True,
    "gpu_unavailable": None,
    "applied": {"ok": True, "logical_gpus": ["/device:GPU:0"], "logical_cpus": [], "error": None},
}


def test_check_reports_tegra_facts_instead_of_nvml(
    jetson: dict[str, str], no_nvml: list[int]
) -> None:
    doc, code = gpu_check.collect({**jetson, "TF_GPU_MEM_LIMIT": "25%"}, child=CHILD_OK)
    assert code == 0, doc["problems"]
    assert doc["tegra"]["l4t_release"] == "35.4.1"
    assert doc["tegra"]["unified_memory_total_mib"] == TOTAL_MIB
    assert doc["plan"]["gpu_limits_mib"] == [[float(TOTAL_MIB // 4)]]
    assert not [p for p in doc["problems"] if "NVML" in p["what"]]
    out = io.StringIO()
    gpu_check.render(doc, out)
    text = out.getvalue()
    assert "Jetson (Tegra): L4T 35.4.1, JetPack unknown" in text
    assert f"{TOTAL_MIB} MiB unified memory, shared with the CPU" in text
    assert "NVIDIA driver:" not in text and no_nvml == []


def test_show_reports_tegra_facts(jetson: dict[str, str]) -> None:
    out = io.StringIO()
    assert show.show(environ={**jetson, "TF_GPU_MEM_LIMIT": "512MiB"}, out=out) == 0
    assert "Jetson (Tegra): L4T 35.4.1" in out.getvalue()
    out = io.StringIO()
    show.show(as_json=True, environ=jetson, out=out)
    assert json.loads(out.getvalue())["tegra"]["unified_memory_total_mib"] == TOTAL_MIB


def test_show_says_nothing_of_tegra_elsewhere(tmp_path: Path) -> None:
    out = io.StringIO()
    show.show(as_json=True, environ={tegra.SYSROOT_VARIABLE: str(tmp_path)}, out=out)
    assert "tegra" not in json.loads(out.getvalue())


class Family:
    """prometheus-client's GaugeMetricFamily, reduced to what the collectors use."""

    def __init__(self, name: str, documentation: str, labels: list[str] | None = None) -> None:
        self.name, self.documentation, self.samples = name, documentation, []

    def add_metric(self, labels: list[str], value: float) -> None:
        self.samples.append((tuple(labels), value))


def test_metrics_give_meminfo_figures_not_nvml_ones(
    jetson: dict[str, str], no_nvml: list[int], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(tegra.SYSROOT_VARIABLE, jetson[tegra.SYSROOT_VARIABLE])
    families = list(metrics.TensorFlowCollector({})._cards(Family))
    assert {f.name: f.samples for f in families} == {
        "tfgpu_unified_memory_total_bytes": [(("meminfo",), TOTAL_MIB * (1 << 20))],
        "tfgpu_unified_memory_available_bytes": [(("meminfo",), AVAILABLE_MIB * (1 << 20))],
    }
    assert all("/proc/meminfo" in f.documentation for f in families) and no_nvml == []
