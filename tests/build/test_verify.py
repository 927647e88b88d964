"""verify's comparison of `tfgpu check --json` (CONTRACTS.md), labels and ENV with the matrix."""

from __future__ import annotations

import copy
import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from tfgpu_kit.image.verify import checks as verify_checks
from tfgpu_kit.image.verify import observe
from tfgpu_kit.matrix import cudagap, spec

SPEC = spec.load()
REQ = cudagap.requirements(SPEC, "2.21.0")
REPORT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "check-ok.json").read_text()
)


def observed(report: dict[str, Any] | None = None, **overrides: str) -> verify_checks.Observed:
    labels = verify_checks.expected_labels(REQ, "gpu")
    env = verify_checks.expected_env(REQ)
    for key, value in overrides.items():
        (labels if key.startswith(("io.", "org.")) else env)[key] = value
    return verify_checks.Observed(labels, env, copy.deepcopy(REPORT) if report is None else report)


def failed(obs: verify_checks.Observed) -> list[str]:
    return [
        f"{c.name}: {c.detail}" for c in verify_checks.failures(verify_checks.compare(SPEC, obs))
    ]


def test_complete_image_passes() -> None:
    assert failed(observed()) == []


def library(report: dict[str, Any], soname: str) -> dict[str, Any]:
    return next(lib for lib in report["libraries"] if lib["soname"] == soname)


def test_missing_cudnn_is_named() -> None:
    report = copy.deepcopy(REPORT)
    library(report, "libcudnn.so.9").update(
        loaded=False, path=None, version=None, error="libcudnn.so.9: cannot open shared object file"
    )
    problems = failed(observed(report))
    assert len(problems) == 1
    assert (
        "libcudnn.so.9 cannot be loaded: the image lacks cuDNN 9"
        " that TensorFlow 2.21.0 was built for" in problems[0]
    )


def test_missing_cusolver_is_named() -> None:
    """cuSOLVER is on no RUNPATH of TensorFlow 2.21: the runtime reports it missing unless the
    image makes it findable; verify names it (TensorFlow would skip the GPU)."""
    report = copy.deepcopy(REPORT)
    library(report, "libcusolver.so.11").update(loaded=False, path=None, error="not found")
    (problem,) = failed(observed(report))
    assert problem.startswith("library libcusolver.so.11: libcusolver.so.11 cannot be loaded")
    assert "cusolver of CUDA 12 that TensorFlow 2.21.0 needs" in problem


def test_a_library_tensorflow_refuses_by_version_is_named() -> None:
    report = copy.deepcopy(REPORT)
    library(report, "libcudnn.so.9").update(
        version="9.1.0",
        error="Loaded runtime CuDNN library: 9.1.0 but source was compiled with: 9.3.",
    )
    (problem,) = failed(observed(report))
    assert "is version 9.1.0 (Loaded runtime CuDNN library: 9.1.0" in problem


@pytest.mark.parametrize(
    ("path", "value", "expected"),
    [
        (("tensorflow", "version"), "2.20.0", "tensorflow version: 2.20.0, expected 2.21.0"),
        (("tensorflow", "is_cuda_build"), False, "not a CUDA build"),
        (("tensorflow", "cuda_version"), "12.3", "cuda version: built for 12.3"),
        (("tensorflow", "cudnn_version"), "8", "cudnn version: built for 8"),
        (("hook", "active"), False, "runtime hook"),
        (("python",), "3.9.18", "python: 3.9.18"),
    ],
)
def test_each_mismatch_is_reported(path: tuple[str, ...], value: object, expected: str) -> None:
    report = copy.deepcopy(REPORT)
    target = report
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    assert any(expected in p for p in failed(observed(report))), failed(observed(report))


def test_tensorflow_not_importable() -> None:
    report = copy.deepcopy(REPORT)
    report["tensorflow"] = {"importable": False, "error": "No module named 'tensorflow'"}
    assert any("cannot be imported" in p for p in failed(observed(report)))


def test_labels_and_require_cuda_compared() -> None:
    changes: dict[str, str] = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.5", "io.tfgpu.cudnn": "8.9"}
    problems = failed(observed(None, **changes))
    assert any("env NVIDIA_REQUIRE_CUDA" in p for p in problems)
    assert any("label io.tfgpu.cudnn" in p for p in problems)


def test_labels_are_judged_by_the_cuda_source_the_image_used() -> None:
    """An image built with --cuda-source base says so; its labels must then name the base's
    CUDA 12.3 and cuDNN 8.9.6 (what TensorFlow loads there), not the wheels'."""
    base = cudagap.requirements(SPEC, "2.21.0", override=spec.CudaSource.BASE)
    labels = verify_checks.expected_labels(base, "gpu")
    assert labels["io.tfgpu.cuda"] == "12.3.1" and labels["io.tfgpu.cudnn"] == "8.9.6"
    obs = verify_checks.Observed(labels, verify_checks.expected_env(base), copy.deepcopy(REPORT))
    assert failed(obs) == []
    wrong = verify_checks.Observed(
        {**labels, "io.tfgpu.cuda": "12.5.1"},
        verify_checks.expected_env(base),
        copy.deepcopy(REPORT),
    )
    assert failed(wrong) == ["label io.tfgpu.cuda: '12.5.1', expected '12.3.1'"]


def test_no_report_and_foreign_image() -> None:
    obs = verify_checks.Observed(
        verify_checks.expected_labels(REQ, "gpu"), verify_checks.expected_env(REQ), None, "exit 127"
    )
    assert any("tfgpu check: the runtime gave no report: exit 127" in p for p in failed(obs))
    assert failed(verify_checks.Observed({}, {}, None, "exit 1")) == [
        "image: no TensorFlow version found: exit 1"
    ]


def test_an_image_not_built_by_the_kit_is_judged_on_its_tensorflow() -> None:
    """An official base (no kit labels, no hook): its TensorFlow, libraries and GPU are checked;
    labels, ENV and the hook are not asked for."""
    report = copy.deepcopy(REPORT)
    report["hook"] = {"installed": False, "pth": None, "active": False}
    obs = verify_checks.Observed({}, {}, report)
    checks = verify_checks.compare(SPEC, obs)
    assert (
        checks[0].name == "image" and checks[0].ok and "not built by this kit" in checks[0].detail
    )
    assert not any(c.name.startswith(("label", "env", "runtime hook")) for c in checks)
    assert failed(obs) == []
    library(report, "libcudnn.so.9").update(loaded=False, path=None, error="not found")
    assert any(
        "libcudnn.so.9 cannot be loaded" in p
        for p in failed(verify_checks.Observed({}, {}, report))
    )


def test_parse_report_takes_the_json_line() -> None:
    report, error = observe.parse_report("some log line\n" + json.dumps(REPORT) + "\n")
    assert error is None and report is not None and report["tfgpu_version"] == "0.1.0"
    assert observe.parse_report("Traceback ...")[0] is None


FIXTURES = Path(__file__).parent / "fixtures"


def test_runtime_error_problem_fails_the_self_check() -> None:
    # every specific check passes; only the runtime's own verdict says the image is broken
    report = json.loads((FIXTURES / "check-error.json").read_text())
    # the real report: with a bad setting the check's TensorFlow child runs with the kit off, so
    # the hook did not fire; that is said once by the hook check, not the point here
    assert report["hook"]["active"] is False
    report["hook"]["active"] = True
    problems = failed(observed(report))
    assert problems == [
        "runtime self-check: tfgpu check reports: TF_GPU_MEMORY_GROWTH='maybe' is not valid:"
        + report["problems"][0]["what"].split("is not valid:", 1)[1]
        + f" (fix: {report['problems'][0]['fix']})"
    ]
    assert "accepted: true/false" in problems[0]


def test_each_error_problem_is_named_and_warnings_pass() -> None:
    report = copy.deepcopy(REPORT)
    report["problems"] = [
        {"severity": "warning", "what": "no GPU: NVML library not found", "fix": ""},
        {"severity": "warning", "what": "The SHMEM allocation limit is 64MB", "fix": "--shm-size"},
    ]
    assert failed(observed(report)) == []
    report["problems"] += [
        {"severity": "error", "what": "first broken thing", "fix": "do A"},
        {"severity": "error", "what": "second broken thing", "fix": ""},
    ]
    (problem,) = failed(observed(report))
    assert problem.startswith("runtime self-check: ")
    assert "first broken thing (fix: do A)" in problem and "second broken thing" in problem
    assert "SHMEM" not in problem and "no GPU" not in problem


def test_settings_not_applied_fails() -> None:
    report = copy.deepcopy(REPORT)
    report["applied"].update(ok=False, error="Virtual devices cannot be modified after init")
    assert failed(observed(report)) == [
        "settings applied: applying the settings in TensorFlow failed:"
        " Virtual devices cannot be modified after init"
    ]


def test_self_check_runs_when_tensorflow_cannot_be_imported() -> None:
    report = copy.deepcopy(REPORT)
    report["tensorflow"] = {"importable": False, "error": "No module named 'tensorflow'"}
    report["problems"] = [
        {"severity": "error", "what": "TF_GPU_MEM_LIMIT='x' is not valid", "fix": "fix it"}
    ]
    assert any("TF_GPU_MEM_LIMIT='x'" in p for p in failed(observed(report)))


@pytest.mark.parametrize(
    "before",
    [
        "",
        "tfgpu: 1 problem(s), see below\n",  # a summary line before the JSON
        "warning: something\n{not json either\n",  # a line that looks like JSON but is not
    ],
)
@pytest.mark.parametrize("indent", [None, 2])
def test_parse_report_indented_after_noise(before: str, indent: int | None) -> None:
    # `tfgpu check --json` prints `json.dumps(doc, indent=2)`: many lines, nested `{` lines
    stdout = before + json.dumps(REPORT, indent=indent) + "\ntrailing line\n"
    report, error = observe.parse_report(stdout)
    assert error is None
    assert report == REPORT


def test_parse_report_names_the_image_when_nothing_parses() -> None:
    stdout = "summary\n" + json.dumps(REPORT, indent=2)[:-40]  # cut short
    report, error = observe.parse_report(stdout, "tfgpu/tensorflow:2.21.0-gpu")
    assert report is None and error is not None
    assert "no JSON object in the output of tfgpu check --json in tfgpu/tensorflow:2.21.0-gpu" in (
        error
    )


# --- the GPU probe: TensorFlow's own verdict with the fake driver (the real logs' shapes) ---

CREATED_221 = (
    "I0000 00:00:1796090556.185191       1 gpu_device.cc:2043] Created device"
    " /job:localhost/replica:0/task:0/device:GPU:0 with 14848 MB memory:  -> device: 0, name:"
    " Fake A100-SXM4-16GB, pci bus id: 0000:07:00.0, compute capability: 8.0"
)
REFUSED_221 = "\n".join(
    [
        "I0000 00:00:1796090565.9 1 dso_loader.cc:78] Could not load dynamic library"
        " 'libcudnn.so.9'; dlerror: libcudnn.so.9: cannot open shared object file: No such file"
        " or directory; LD_LIBRARY_PATH: /usr/local/nvidia/lib:/usr/local/nvidia/lib64",
        "W0000 00:00:1796090565.924846       1 gpu_device.cc:2365] Cannot dlopen some GPU"
        " libraries. Please make sure the missing libraries mentioned above are installed"
        " properly if you would like to use GPU.",
        "Skipping registering GPU devices...",
        "[]",
    ]
)


def test_probe_registered() -> None:
    probe = observe.parse_probe(
        "noise\n" + CREATED_221 + "\n[LogicalDevice(name='/device:GPU:0')]\n"
    )
    assert probe.registered and probe.lines == (CREATED_221,)
    (check,) = verify_checks._gpu_check(probe)
    assert check.ok and "14848 MB" in check.detail


def test_probe_refused_quotes_tensorflow() -> None:
    probe = observe.parse_probe(REFUSED_221)
    assert not probe.registered
    (check,) = verify_checks._gpu_check(probe)
    assert not check.ok
    assert "Could not load dynamic library 'libcudnn.so.9'" in check.detail
    assert "Cannot dlopen some GPU libraries" in check.detail
    assert "Skipping registering GPU devices" in check.detail


def test_probe_failures_are_checks_that_fail() -> None:
    assert verify_checks._gpu_check(None) == []  # --no-gpu-probe: nothing claimed
    (check,) = verify_checks._gpu_check(verify_checks.GpuProbe(False, (), "gcc not found"))
    assert not check.ok and "the probe did not run: gcc not found" in check.detail
    (silent,) = verify_checks._gpu_check(observe.parse_probe("[]\n"))
    assert not silent.ok and "no Created device line" in silent.detail
    # the probe's verdict is part of compare()
    obs = dataclasses.replace(observed(), gpu=observe.parse_probe(REFUSED_221))
    assert [p.split(":")[0] for p in failed(obs)] == ["TensorFlow registers a GPU"]


CU11 = (
    ("cudart", "libcudart.so.11.0", "11.8"),
    ("cublas", "libcublas.so.11", None),
    ("cublasLt", "libcublasLt.so.11", None),
    ("cufft", "libcufft.so.10", None),
    ("cusolver", "libcusolver.so.11", None),
    ("cusparse", "libcusparse.so.11", None),
)
CUDNN_SHORT = (
    "Loaded runtime CuDNN library: 8.6.0 but source was compiled with: 8.7. CuDNN library needs"
    " to have matching major version and equal or higher minor version."
)


def base_214_report() -> dict[str, Any]:
    """What `tfgpu check --json` reports in the official 2.14.0-gpu base (its stand-in in
    tests/base_standins: system CUDA 11.8 and cuDNN 8.6.0 under a TensorFlow built with 8.7)."""
    report = copy.deepcopy(REPORT)
    report["tensorflow"].update(version="2.14.0", cuda_version="11.8", cudnn_version="8")
    lib = "/usr/local/cuda-11.8/targets/x86_64-linux/lib"
    report["libraries"] = [
        {"name": name, "soname": soname, "loaded": True, "path": f"{lib}/{soname}",
         "version": version, "error": None}
        for name, soname, version in CU11
    ] + [
        {"name": "cudnn", "soname": "libcudnn.so.8", "loaded": True,
         "path": "/usr/lib/x86_64-linux-gnu/libcudnn.so.8", "version": "8.6.0",
         "error": CUDNN_SHORT}
    ]  # fmt: skip
    report["problems"].append(
        {
            "severity": "error",
            "what": "GPU registered; cuDNN ops will fail (8.6 < 8.7): " + CUDNN_SHORT,
            "fix": "install the CUDA libraries of this build",
        }
    )
    return report


def test_an_older_cudnn_minor_is_reported_as_cudnn_ops_failing_not_as_no_gpu() -> None:
    """The official 2.14.0 base: TensorFlow registers the GPU (the probe's Created line) and its
    cuDNN 8.6 fails cuDNN's ops; verify says that, and never "will not use the GPU"."""
    created = CREATED_221.replace("2.21", "2.14")
    obs = verify_checks.Observed({}, {}, base_214_report(), gpu=observe.parse_probe(created))
    checks = verify_checks.compare(SPEC, obs)
    gpu = next(c for c in checks if c.name == "TensorFlow registers a GPU")
    assert gpu.ok
    problems = [f"{c.name}: {c.detail}" for c in verify_checks.failures(checks)]
    assert problems[0] == (
        "library libcudnn.so.8: GPU registered; cuDNN ops will fail (8.6 < 8.7): libcudnn.so.8 at"
        f" /usr/lib/x86_64-linux-gnu/libcudnn.so.8 is version 8.6.0 ({CUDNN_SHORT})"
    )
    assert problems[1].startswith(
        "runtime self-check: tfgpu check reports: GPU registered; cuDNN ops will fail (8.6 < 8.7)"
    )
    assert len(problems) == 2
    assert not any("will not use the GPU" in p for p in problems)


def test_an_older_cudnn_minor_beside_a_missing_library_is_no_gpu() -> None:
    """With a library missing TensorFlow skips the GPU: the cuDNN verdict must not claim a
    registered GPU."""
    report = base_214_report()
    library(report, "libcufft.so.10").update(loaded=False, path=None, error="not found")
    problems = failed(verify_checks.Observed({}, {}, report))
    cudnn = next(p for p in problems if p.startswith("library libcudnn.so.8"))
    assert "GPU registered" not in cudnn
    assert "is version 8.6.0" in cudnn


def test_the_probe_quotes_tensorflows_conclusion_first() -> None:
    """The official 2.15.0 base: TensorFlow names five missing CUDA 12 libraries after three
    duplicate-registration lines and TensorRT's; its conclusion is quoted first, the noise not."""
    ts = "2026-12-01 16:41:36.817676:"
    noise = [
        f"{ts} E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register"
        " cuDNN factory: Attempting to register factory for plugin cuDNN when one has already"
        " been registered",
        f"{ts} I external/local_tsl/tsl/platform/default/dso_loader.cc:63] Could not load dynamic"
        " library 'libnvinfer.so.8.6.1'; dlerror: libnvinfer.so.8.6.1: cannot open shared object"
        " file: No such file or directory",
    ]
    missing = [
        f"{ts} I external/local_tsl/tsl/platform/default/dso_loader.cc:63] Could not load dynamic"
        f" library '{soname}'; dlerror: {soname}: cannot open shared object file"
        for soname in ("libcublas.so.12", "libcublasLt.so.12", "libcufft.so.11",
                       "libcusparse.so.12", "libcudart.so.12", "libcusolver.so.11",
                       "libcurand.so.10", "libcudnn.so.8")
    ]  # fmt: skip
    conclusion = (
        f"{ts} W tensorflow/core/common_runtime/gpu/gpu_device.cc:2256] Cannot dlopen some GPU"
        " libraries. Please make sure the missing libraries mentioned above are installed"
        " properly if you would like to use GPU."
    )
    probe = observe.parse_probe(
        "\n".join([*noise, *missing, conclusion, "Skipping registering GPU devices...", "[]"])
    )
    assert not probe.registered
    assert probe.lines[:2] == (conclusion, "Skipping registering GPU devices...")
    assert probe.lines[2:] == tuple(missing[:6])
    assert not any("Attempting to register" in line or "libnvinfer" in line for line in probe.lines)
