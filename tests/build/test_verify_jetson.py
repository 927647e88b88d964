"""verify of a Jetson (L4T, arm64) image (tfgpu_kit/image/verify/jetson.py) on plain data: its
labels
and ENV against images/l4t.yaml, the runtime's report, and the two checks that cannot be made off a
Jetson, reported as not checked (neither passed nor failed). The real image on the arm64 stand-in:
tests/containers/test_l4t_arm64.py."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from tfgpu_kit.image.verify import jetson
from tfgpu_kit.image.verify.checks import Check, Observed, failures
from tfgpu_kit.matrix import catalog, spec

SPEC = spec.load()
IMAGE = catalog.jetson_images(SPEC)[0]
# what `tfgpu check --json` says in the x86 2.21 image, made the Jetson's: NVIDIA's wheel's version
# and Python 3.8 (the contract's shape is the same on every platform)
REPORT: dict[str, Any] = json.loads(
    (Path(__file__).parent / "fixtures" / "check-ok.json").read_text()
)
REPORT["tensorflow"]["version"] = "2.11.0+nv23.01"
REPORT["python"] = "3.8.10"


def observed(report: dict[str, Any] | None = None, **labels: str) -> Observed:
    want_labels, want_env = jetson._expected(IMAGE)
    return Observed(
        {**want_labels, **labels},
        dict(want_env),
        copy.deepcopy(REPORT) if report is None else report,
    )


def by_name(checks: list[Check]) -> dict[str, Check]:
    return {c.name: c for c in checks}


def test_the_rendered_dockerfile_gives_the_labels_and_env_verify_expects() -> None:
    """The expectations are the template's output, not a second copy that could drift."""
    from tfgpu_kit.image import render

    text = render.render_image(SPEC, IMAGE)
    labels, env = jetson._expected(IMAGE)
    for key, value in labels.items():
        if key != jetson.VERSION_LABEL:
            assert f'{key}="{value}"' in text, key
    assert f'{jetson.VERSION_LABEL}="{IMAGE.name}"' in text
    for key, value in env.items():
        assert f"{key}={value}" in text or f'{key}="{value}"' in text, key


def test_an_image_like_the_real_base_passes_and_says_what_it_could_not_check() -> None:
    checks = jetson.compare(SPEC, observed())
    assert failures(checks) == []
    skipped = [c for c in checks if not c.checked]
    assert [c.name for c in skipped] == ["CUDA libraries", "TensorFlow registers a GPU"]
    assert all(jetson.NO_JETSON in c.detail for c in skipped)
    # JSON: ok is null for those, true/false for the rest; the table says "not checked"
    assert [c.as_dict()["ok"] for c in skipped] == [None, None]
    assert {c.verdict for c in skipped} == {"not checked"}
    assert by_name(checks)["tensorflow version"].ok  # 2.11.0+nv23.01 is 2.11.0


def test_a_cpu_only_tensorflow_and_another_python_fail_by_name() -> None:
    """What the arm64 stand-in is (PyPI's aarch64 TensorFlow, Debian's Python 3.9) is found."""
    report = copy.deepcopy(REPORT)
    report["tensorflow"]["is_cuda_build"] = False
    report["python"] = "3.9.2"
    failed = {c.name: c.detail for c in failures(jetson.compare(SPEC, observed(report)))}
    assert set(failed) == {"cuda build", "python"}
    assert "not a CUDA build" in failed["cuda build"] and "3.8" in failed["python"]


def test_a_label_that_differs_from_l4t_yaml_fails() -> None:
    failed = failures(jetson.compare(SPEC, observed(**{"io.tfgpu.l4t": "35.1.0"})))
    assert [c.name for c in failed] == ["label io.tfgpu.l4t"]


def test_an_image_l4t_yaml_does_not_list_fails_alone() -> None:
    checks = jetson.compare(SPEC, observed(**{jetson.VERSION_LABEL: "9.9.9-l4t-r99.0.0-arm64"}))
    assert [c.name for c in checks] == ["image"] and not checks[0].ok
    assert IMAGE.name in checks[0].detail


def test_no_report_fails_and_the_gpu_stays_not_checked() -> None:
    obs = Observed(*jetson._expected(IMAGE), None, "exit 1; no JSON")
    checks = by_name(jetson.compare(SPEC, obs))
    assert not checks["tfgpu check"].ok and "exit 1" in checks["tfgpu check"].detail
    assert not checks["TensorFlow registers a GPU"].checked


def test_only_the_kits_arm64_l4t_images_take_this_path() -> None:
    assert jetson.is_jetson({"io.tfgpu.platform": "linux/arm64", "io.tfgpu.variant": "l4t"})
    assert not jetson.is_jetson({"io.tfgpu.variant": "gpu"})
    assert not jetson.is_jetson({})


def test_checked_checks_keep_their_json() -> None:
    """The x86 images' JSON is what it was: name, ok, detail."""
    assert Check("a", True, "b").as_dict() == {"name": "a", "ok": True, "detail": "b"}
    assert Check("a", False, "b").verdict == "FAIL"
