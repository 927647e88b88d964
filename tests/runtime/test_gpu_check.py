"""`tfgpu check` and `tfgpu show` in-process, with the TensorFlow child and NVML replaced.

The child (`_gpu_check_child`, real TensorFlow) is replaced by a function that records the
environment it would get and returns what a child reports; NVML by the pynvml stand-in.
The real child runs in test_hook_real_tf.py.
"""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from tfgpu.commands import gpu_check, show
from tfgpu.machine import nvml

from tests.pynvml_standin import standin_pynvml

TF_OK: dict[str, Any] = {
    "tensorflow": {
        "importable": True,
        "version": "2.21.0",
        "is_cuda_build": True,
        "cuda_version": "12.5.1",
        "cudnn_version": "9",
        "error": None,
    },
    "build_info": {"is_cuda_build": False},  # no library checks in these tests
    "hook_active": True,
    "gpu_unavailable": None,
    "applied": {
        "ok": True,
        "logical_gpus": [],
        "logical_cpus": ["/device:CPU:0"],
        "memory": {},
        "error": None,
    },
}


def no_driver() -> nvml.NvmlReport:
    report = nvml.NvmlReport()
    report.driver_present, report.error = False, nvml.NO_DRIVER
    return report


@pytest.fixture
def child_envs(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, str]]:
    """Every environment check would start its TensorFlow child with."""
    seen: list[dict[str, str]] = []

    def fake_child(environ: dict[str, str]) -> dict[str, Any]:
        seen.append(dict(environ))
        if environ.get("TF_GPU_REQUIRED") == "true":  # what the hook would do in the child
            return {
                "tensorflow": {"importable": False, "error": "GpuUnavailableError: …"},
                "crash": None,
            }
        return TF_OK

    monkeypatch.setattr(gpu_check, "run_child", fake_child)
    return seen


def whats(doc: dict[str, Any], severity: str = "error") -> list[str]:
    return [p["what"] for p in doc["problems"] if p["severity"] == severity]


def test_required_without_gpu_is_reported_once_not_as_a_tensorflow_failure(
    monkeypatch: pytest.MonkeyPatch, child_envs: list[dict[str, str]]
) -> None:
    monkeypatch.setattr(nvml, "query", no_driver)
    doc, code = gpu_check.collect({"TF_GPU_REQUIRED": "true"})
    assert code == 1 and doc["ok"] is False
    assert [e["TF_GPU_REQUIRED"] for e in child_envs] == ["false"]
    assert whats(doc) == [nvml.NO_DRIVER]
    assert doc["tensorflow"]["importable"] is True
    assert not any("cannot be imported" in w for w in whats(doc))


def test_required_with_a_driver_but_no_gpu(
    monkeypatch: pytest.MonkeyPatch, child_envs: list[dict[str, str]]
) -> None:
    report = nvml.query(standin_pynvml([]))
    assert report.found and report.gpus == []
    monkeypatch.setattr(nvml, "query", lambda: report)
    doc, code = gpu_check.collect({"TF_GPU_REQUIRED": "true"})
    assert code == 1 and child_envs[0]["TF_GPU_REQUIRED"] == "false"
    assert whats(doc) == [
        "the NVIDIA driver reports no GPU (was the container started with --gpus?)"
    ]


def test_unavailability_only_the_child_found_is_reported_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without nvidia-ml-py the preflight cannot tell; the hook in the child then refuses the
    import, and the child imports again without the requirement to report TensorFlow."""
    unknown = nvml.NvmlReport()
    unknown.error = "nvidia-ml-py is not installed"
    monkeypatch.setattr(nvml, "query", lambda: unknown)
    child = dict(TF_OK, gpu_unavailable="TensorFlow sees no GPU (no driver, …)")
    doc, code = gpu_check.collect({"TF_GPU_REQUIRED": "true"}, child=child)
    assert code == 1 and whats(doc) == ["TensorFlow sees no GPU (no driver, …)"]


def test_not_required_without_gpu_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, child_envs: list[dict[str, str]]
) -> None:
    monkeypatch.setattr(nvml, "query", no_driver)
    doc, code = gpu_check.collect({})
    assert code == 0 and doc["ok"] is True and whats(doc) == []
    assert "TF_GPU_REQUIRED" not in child_envs[0]


def test_plan_is_resolved_against_the_gpus_and_rendered(
    monkeypatch: pytest.MonkeyPatch, child_envs: list[dict[str, str]]
) -> None:
    report = nvml.query(
        standin_pynvml([("NVIDIA A10", "GPU-aaaa", 24576), ("NVIDIA A10", "GPU-bbbb", 24576)])
    )
    monkeypatch.setattr(nvml, "query", lambda: report)
    doc, code = gpu_check.collect(
        {"TF_GPU_VIRTUAL_DEVICES": "6144,25%;50%", "TF_GPU_MEMORY_GROWTH": "yes"}
    )
    assert code == 0, doc["problems"]
    assert doc["plan"] == {
        "gpu_limits_mib": [[6144, 6144.0], [12288.0]],
        "memory_growth": True,
        "env": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
        "cpu_devices": None,
        "mixed_precision": None,
        "warnings": [],
    }
    out = io.StringIO()
    gpu_check.render(doc, out)
    assert (
        "plan: GPU 0: 2 logical GPUs of 6144, 6144 MiB; GPU 1: 1 logical GPU of 12288 MiB; "
        "memory growth on (TF_FORCE_GPU_ALLOW_GROWTH=true)\n"
    ) in out.getvalue()


def test_no_plan_with_a_bad_configuration(
    monkeypatch: pytest.MonkeyPatch, child_envs: list[dict[str, str]]
) -> None:
    monkeypatch.setattr(nvml, "query", no_driver)
    doc, code = gpu_check.collect({"TF_GPU_MEM_LIMIT": "lots"})
    assert code == 78 and doc["plan"] is None
    out = io.StringIO()
    gpu_check.render(doc, out)
    assert "plan:" not in out.getvalue()


# --- tfgpu show ---------------------------------------------------------------------------


def show_json(environ: dict[str, str]) -> tuple[int, dict[str, Any]]:
    out = io.StringIO()
    code = show.show(as_json=True, environ=environ, out=out)
    return code, json.loads(out.getvalue())


def test_show_lists_the_metrics_port() -> None:
    code, doc = show_json({"TF_GPU_METRICS_PORT": "9401"})
    assert code == 0 and doc["warnings"] == []
    assert doc["settings"]["TF_GPU_METRICS_PORT"] == {"value": "9401", "source": "environment"}
    out = io.StringIO()
    show.show(environ={}, out=out)
    assert "TF_GPU_METRICS_PORT" in out.getvalue() and "(unset)" in out.getvalue()


@pytest.mark.parametrize("value", ["65536", "http", "²", "9401.0"])
def test_show_refuses_a_bad_metrics_port_as_run_does(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bad port is bad input like any other: `show` (and `run`, and the hook) exit 78."""
    code, doc = show_json({"TF_GPU_METRICS_PORT": value})
    assert code == 78 and doc["ok"] is False
    assert doc["error"].startswith(f"TF_GPU_METRICS_PORT={value!r} is not valid")
    assert f"tfgpu: error: TF_GPU_METRICS_PORT={value!r} is not valid" in capsys.readouterr().err


def test_show_metrics_port_zero_is_off_not_an_error() -> None:
    code, doc = show_json({"TF_GPU_METRICS_PORT": "0"})
    assert code == 0 and doc["ok"] is True and doc["warnings"] == []
    assert doc["settings"]["TF_GPU_METRICS_PORT"] == {"value": "0", "source": "environment"}


def test_show_json_has_the_same_keys_on_error() -> None:
    code, ok = show_json({})
    bad_code, bad = show_json({"TF_GPU_MEM_LIMIT": "lots"})
    assert (code, bad_code) == (0, 78)
    assert (
        set(bad)
        == set(ok)
        == {
            "ok",
            "enabled",
            "settings",
            "warnings",
            "error",
            "recovery",
            "cluster",
            "keras",
            "gpu_support",
            "kernel_cache",
        }
    )
    assert bad["ok"] is False and bad["warnings"] == [] and "TF_GPU_MEM_LIMIT" in bad["error"]


def _libraries_loaded_with(
    monkeypatch: pytest.MonkeyPatch, versions: dict[str, str | None]
) -> None:
    """Every library the build needs loads from /usr/lib; `versions` is what cudart and cuDNN
    report (None: the library is missing)."""
    from tfgpu.machine import libs

    def load(name: str, soname: str, dirs: object = ()) -> dict[str, object]:
        if name in versions and versions[name] is None:
            error = f"{soname}: cannot open shared object file"
            return {"name": name, "soname": soname, "loaded": False, "path": None,
                    "version": None, "error": error}  # fmt: skip
        return {"name": name, "soname": soname, "loaded": True, "path": f"/usr/lib/{soname}",
                "version": versions.get(name), "error": None}  # fmt: skip

    monkeypatch.setattr(libs, "search_dirs", lambda *args: [])
    monkeypatch.setattr(libs, "try_load", load)


@pytest.mark.parametrize(
    ("tensorflow", "build", "cudnn", "verdict"),
    [
        # the official 2.14.0-gpu base: cuDNN 8.6.0, TensorFlow 2.14 built with 8.7
        ("2.14.0", ("11.8", "8"), "8.6.0", "GPU registered; cuDNN ops will fail (8.6 < 8.7)"),
        ("2.21.0", ("12.5.1", "9"), "9.1.0", "GPU registered; cuDNN ops will fail (9.1 < 9.3)"),
    ],
)
def test_an_older_cudnn_minor_is_a_cudnn_ops_failure_not_a_cpu_fallback(
    monkeypatch: pytest.MonkeyPatch,
    tensorflow: str,
    build: tuple[str, str],
    cudnn: str,
    verdict: str,
) -> None:
    """TensorFlow loads a cuDNN of its build's major (the soname is the major's) and registers
    the GPU; it refuses the older minor when it creates a cuDNN handle. The verdict says so, not
    "will not use the GPU"."""
    _libraries_loaded_with(monkeypatch, {"cudnn": cudnn, "cudart": build[0]})
    info = {"is_cuda_build": True, "cuda_version": build[0], "cudnn_version": build[1]}
    entries, problems = gpu_check.check_libraries(info, tensorflow, {})
    (problem,) = problems
    assert problem.severity == "error"
    assert problem.what.startswith(f"{verdict}: Loaded runtime CuDNN library: {cudnn} but")
    assert gpu_check.NOT_ON_GPU not in problem.what
    (refused,) = [lib for lib in entries if lib["error"]]
    assert refused["name"] == "cudnn"
    doc = {
        "tfgpu_version": "0", "python": "3.11.0", "ok": False,
        "tensorflow": {"importable": True, "version": tensorflow, "is_cuda_build": True,
                       "cuda_version": build[0], "cudnn_version": build[1]},
        "libraries": entries, "problems": [p.as_json() for p in problems],
        "driver": {"found": False, "error": "no driver"}, "gpus": [],
        "hook": {"installed": False, "pth": None, "active": False}, "settings": {},
        "plan": None, "applied": {"ok": False},
    }  # fmt: skip
    out = io.StringIO()
    gpu_check.render(doc, out)
    assert (
        f"  {refused['soname']}: loaded from {refused['path']} (version {cudnn}): REFUSED by"
        f" TensorFlow's version rule ({verdict})\n"
    ) in out.getvalue()


def test_a_missing_library_still_means_no_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The 2.15.0 base (CUDA 11.8 under a CUDA 12.2 build): TensorFlow skips the GPU, so its
    cuDNN 8.6 (< 8.9) is no "GPU registered" either."""
    _libraries_loaded_with(monkeypatch, {"cudnn": "8.6.0", "cudart": None})
    info = {"is_cuda_build": True, "cuda_version": "12.2", "cudnn_version": "8"}
    _, problems = gpu_check.check_libraries(info, "2.15.0", {})
    assert [p.what.split(":")[0] for p in problems] == [gpu_check.NOT_ON_GPU, gpu_check.NOT_ON_GPU]
    assert "Could not load dynamic library 'libcudart.so.12'" in problems[0].what
    assert "Loaded runtime CuDNN library: 8.6.0 but source was compiled with: 8.9." in (
        problems[1].what
    )
