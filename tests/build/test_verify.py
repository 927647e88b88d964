"""verify's comparison of `tfgpu check --json` (CONTRACTS.md), labels and ENV with the matrix."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from tfgpu_kit import matrix, spec, verify

SPEC = spec.load()
REQ = matrix.requirements(SPEC, "2.21.0")
REPORT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "check-ok.json").read_text()
)


def observed(report: dict[str, Any] | None = None, **overrides: str) -> verify.Observed:
    labels = verify.expected_labels(REQ, "gpu")
    env = verify.expected_env(REQ)
    for key, value in overrides.items():
        (labels if key.startswith(("io.", "org.")) else env)[key] = value
    return verify.Observed(labels, env, copy.deepcopy(REPORT) if report is None else report)


def failed(obs: verify.Observed) -> list[str]:
    return [f"{c.name}: {c.detail}" for c in verify.failures(verify.compare(SPEC, obs))]


def test_complete_image_passes() -> None:
    assert failed(observed()) == []


def test_missing_cudnn_is_named() -> None:
    report = copy.deepcopy(REPORT)
    report["libraries"][2].update(
        loaded=False, path=None, error="libcudnn.so.9: cannot open shared object file"
    )
    problems = failed(observed(report))
    assert len(problems) == 1
    assert (
        "libcudnn.so.9 cannot be loaded: the image lacks cuDNN 9"
        " that TensorFlow 2.21.0 was built for" in problems[0]
    )


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


def test_no_report_and_foreign_image() -> None:
    obs = verify.Observed(
        verify.expected_labels(REQ, "gpu"), verify.expected_env(REQ), None, "exit 127"
    )
    assert any("tfgpu check: the runtime gave no report: exit 127" in p for p in failed(obs))
    assert failed(verify.Observed({}, {}, None)) == [
        "image: not built by this kit: no io.tfgpu.tensorflow label"
    ]


def test_parse_report_takes_the_json_line() -> None:
    report, error = verify.parse_report("some log line\n" + json.dumps(REPORT) + "\n")
    assert error is None and report is not None and report["tfgpu_version"] == "0.1.0"
    assert verify.parse_report("Traceback ...")[0] is None


FIXTURES = Path(__file__).parent / "fixtures"


def test_runtime_error_problem_fails_the_self_check() -> None:
    # every specific check passes; only the runtime's own verdict says the image is broken
    report = json.loads((FIXTURES / "check-error.json").read_text())
    problems = failed(observed(report))
    assert problems == [
        "runtime self-check: tfgpu check reports: TF_GPU_MEMORY_GROWTH='maybe' is not valid:"
        " accepted: true or false (fix: fix TF_GPU_MEMORY_GROWTH)"
    ]


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
    report, error = verify.parse_report(stdout)
    assert error is None
    assert report == REPORT


def test_parse_report_names_the_image_when_nothing_parses() -> None:
    stdout = "summary\n" + json.dumps(REPORT, indent=2)[:-40]  # cut short
    report, error = verify.parse_report(stdout, "tfgpu/tensorflow:2.21.0-gpu")
    assert report is None and error is not None
    assert "no JSON object in the output of tfgpu check --json in tfgpu/tensorflow:2.21.0-gpu" in (
        error
    )
