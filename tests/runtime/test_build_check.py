"""`tfgpu check --build` (tfgpu.commands.build_check) against a record written here by
tfgpu.image_record from this Python's real distributions, then changed the way a team's layer
changes an image. The same guard in real derived images: tests/gpu/test_derived_images.py."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tfgpu.commands import build_check, image_record
from tfgpu.machine import pins

from tests.runtime import dists
from tests.runtime.conftest import SRC, Venv, clean_env

IMAGE_ENV = {
    "TF_GPU_MEMORY_GROWTH": "true",
    "TFGPU_IMAGE_TF": "2.21.0",
    "NVIDIA_VISIBLE_DEVICES": "all",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
}


@pytest.fixture
def image(tmp_path: Path) -> dict[str, str]:
    """The environment of an 'image' whose record is in tmp_path, as built."""
    record_dir = tmp_path / "share"
    image_record.write(str(record_dir), IMAGE_ENV, "test:1")
    constraints = str(record_dir / image_record.CONSTRAINTS)
    return {
        **clean_env(),
        **IMAGE_ENV,
        "TFGPU_IMAGE_CONSTRAINTS": constraints,
        "PIP_CONSTRAINT": constraints,
    }


def edit(env: dict[str, str], change: Any) -> None:
    path = Path(env["TFGPU_IMAGE_CONSTRAINTS"]).with_name(image_record.RECORD)
    record = json.loads(path.read_text())
    change(record)
    path.write_text(json.dumps(record))


def problems(doc: dict[str, Any], severity: str = "error") -> list[str]:
    return [p["what"] for p in doc["problems"] if p["severity"] == severity]


def test_as_built_it_passes(image: dict[str, str]) -> None:
    doc = build_check.collect(image, pythons=[sys.executable])
    assert doc["ok"], doc["problems"]
    assert problems(doc) == []
    assert any(
        "pinned packages as built" in line and "files checked" in line for line in doc["passed"]
    )


def test_a_replaced_pin_fails_naming_both_versions_and_accept_makes_it_a_warning(
    image: dict[str, str],
) -> None:
    def older(record: dict[str, Any]) -> None:
        for pin in record["pins"]:
            if pin["name"] == "tensorflow-cpu":
                pin["installed"], pin["spec"] = "2.20.0", "==2.20.0"

    edit(image, older)
    doc = build_check.collect(image, pythons=[sys.executable])
    assert not doc["ok"]
    found = [p for p in doc["problems"] if p["what"].startswith("tensorflow-cpu changed")]
    assert (
        found[0]["what"]
        == "tensorflow-cpu changed: 2.20.0 → 2.21.0 (the image pins tensorflow-cpu==2.20.0)"
    )
    assert (
        "PIP_CONSTRAINT= pip install" in found[0]["fix"]
        and "--accept tensorflow-cpu" in found[0]["fix"]
    )
    accepted = build_check.collect(image, pythons=[sys.executable], accept=["tensorflow_cpu"])
    assert accepted["ok"]
    assert "accepted: tensorflow-cpu changed: 2.20.0 → 2.21.0" in problems(accepted, "warning")[0]


def test_a_removed_pin_and_a_cuda_wheel_of_another_set(
    image: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    edit(
        image,
        lambda r: r["pins"].append(
            {
                "name": "nvidia-cudnn-cu12",
                "spec": "==9.3.0.75",
                "role": "cuda",
                "installed": "9.3.0.75",
            }
        ),
    )
    site = tmp_path / "extra"
    dists.install(site, "nvidia-cufft-cu11", "10.9.0.58")
    real = pins.installed

    def with_extra(path: list[str] | None = None) -> dict[str, pins.Installed]:
        return {**real(path), **real([str(site)])}

    monkeypatch.setattr(pins, "installed", with_extra)
    errors = problems(build_check.collect(image, pythons=[sys.executable]))
    assert "nvidia-cudnn-cu12 9.3.0.75 (cuda) was removed" in errors
    assert any(
        e.startswith("nvidia-cufft-cu11 10.9.0.58 was added: a CUDA wheel of another set")
        for e in errors
    )


def test_a_deleted_or_changed_file_of_a_pinned_package(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = tmp_path / "site"
    dists.install(
        site,
        "tensorflow",
        "2.21.0",
        top_level="tensorflow",
        files={
            "tensorflow/__init__.py": b"x",
            "tensorflow/libtf.so": b"12345",
            "tensorflow/gone-before.txt": b"",
        },
    )
    real = pins.installed
    monkeypatch.setattr(pins, "installed", lambda path=None: real([str(site)]))
    env = {
        **clean_env(),
        **IMAGE_ENV,
        "TFGPU_IMAGE_CONSTRAINTS": str(tmp_path / "share" / "constraints.txt"),
    }
    # already unlike RECORD when the image was built (the stand-in bases' scripts): not reported
    (site / "tensorflow" / "gone-before.txt").unlink()
    image_record.write(str(tmp_path / "share"), IMAGE_ENV, "test:1")
    (site / "tensorflow" / "__init__.py").unlink()
    (site / "tensorflow" / "libtf.so").write_bytes(b"1234567")
    errors = problems(build_check.collect(env, pythons=[sys.executable]))
    assert f"tensorflow 2.21.0: 1 file(s) missing: {site}/tensorflow/__init__.py" in errors
    assert (
        f"tensorflow 2.21.0: 1 file(s) changed: {site}/tensorflow/libtf.so (5 → 7 bytes)" in errors
    )


def test_a_library_that_no_longer_loads(image: dict[str, str]) -> None:
    lib = {
        "name": "cudnn",
        "soname": "libcudnn.so.9",
        "loaded": True,
        "path": "/x/libcudnn.so.9",
        "file": "/x/libcudnn.so.9.3.0",
        "version": "9.3.0",
        "error": None,
    }
    edit(image, lambda r: r["libraries"].append(lib))
    errors = problems(build_check.collect(image, pythons=[sys.executable]))
    assert any(
        e.startswith("libcudnn.so.9 no longer loads") and "/x/libcudnn.so.9.3.0" in e
        for e in errors
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            {"TF_GPU_CONFIG": "off"},
            "TF_GPU_CONFIG='off' in the image's environment turns the kit off",
        ),
        (
            {"TFGPU_IMAGE_TF": None},
            "TFGPU_IMAGE_TF unset: the runtime reads what the image is from it",
        ),
        (
            {"NVIDIA_VISIBLE_DEVICES": "void"},
            "NVIDIA_VISIBLE_DEVICES 'all' → 'void': the NVIDIA container runtime then mounts no",
        ),
        (
            {"NVIDIA_DRIVER_CAPABILITIES": "utility"},
            "NVIDIA_DRIVER_CAPABILITIES 'compute,utility' → 'utility': without 'compute'",
        ),
        (
            {"TF_GPU_MEM_LIMIT": "4MB"},
            "the image's environment is refused by the runtime: TF_GPU_MEM_LIMIT='4MB' is not",
        ),
    ],
)
def test_the_images_environment(
    image: dict[str, str], change: dict[str, str | None], expected: str
) -> None:
    env = dict(image)
    for k, v in change.items():
        if v is None:
            env.pop(k)
        else:
            env[k] = v
    errors = problems(build_check.collect(env, pythons=[sys.executable]))
    assert any(e.startswith(expected) for e in errors), errors


def test_a_changed_image_default_and_pip_constraint_are_warnings(image: dict[str, str]) -> None:
    env = {**image, "TF_GPU_MEMORY_GROWTH": "false", "PIP_CONSTRAINT": ""}
    doc = build_check.collect(env, pythons=[sys.executable])
    assert doc["ok"]
    warnings = problems(doc, "warning")
    assert "TF_GPU_MEMORY_GROWTH 'true' → 'false' (was the image's default)" in warnings
    assert any(w.startswith("PIP_CONSTRAINT='' does not name") for w in warnings)


def test_a_user_that_cannot_write_the_temporary_folders(
    image: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if p == "/var/tmp" else real(p, mode))
    errors = problems(build_check.collect(image, pythons=[sys.executable]))
    assert any(e.startswith(f"uid {os.getuid()} cannot write /var/tmp") for e in errors)


def test_no_record_is_an_error(tmp_path: Path) -> None:
    env = {**clean_env(), "TFGPU_IMAGE_CONSTRAINTS": str(tmp_path / "none" / "constraints.txt")}
    doc = build_check.collect(env, pythons=[sys.executable])
    assert not doc["ok"] and problems(doc)[0].startswith("no tfgpu build record at")


def tfgpu(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tfgpu", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_the_command_exits_1_with_the_fix_and_0_as_built(image: dict[str, str]) -> None:
    env = {**image, "PYTHONPATH": str(SRC)}
    ok = tfgpu("check", "--build", "--python", sys.executable, env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert ok.stdout.splitlines()[-1] == "tfgpu: the GPU path is as the image was built"
    env["TF_GPU_CONFIG"] = "off"
    broken = tfgpu("check", "--build", "--json", env=env)
    assert broken.returncode == 1
    assert json.loads(broken.stdout)["ok"] is False
    usage = tfgpu("check", "--accept", "x", env=env)
    assert usage.returncode == 2 and "--python and --accept go with --build" in usage.stderr


def test_from_another_python_the_check_runs_under_the_images_own(
    image: dict[str, str], wheel_venv: Venv
) -> None:
    # a team's venv whose own tfgpu comes first on PATH: the pins are judged as the image's Python
    # (the one that wrote the record) sees them, not as the venv sees them
    proc = subprocess.run(
        [wheel_venv.tfgpu, "check", "--build", "--json", "--python", sys.executable],
        env=image,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["python"] == sys.executable


def test_metadata_is_printed_escaped_and_the_verdict_holds_outside_a_build(
    image: dict[str, str],
) -> None:
    """A name or version from package metadata carrying a terminal escape reaches the output
    escaped; the last line says what the exit means in and out of a Dockerfile."""

    def hostile(record: dict[str, Any]) -> None:
        for pin in record["pins"]:
            if pin["name"] == "tensorflow-cpu":
                pin["installed"], pin["spec"] = "2.20.0\x1b[2J\x1b[31m", "==2.20.0"

    edit(image, hostile)
    doc = build_check.collect(image, pythons=[sys.executable])
    assert not doc["ok"]
    out = io.StringIO()
    build_check.render(doc, out)
    text = out.getvalue()
    assert "\x1b" not in text and "\\x1b[2J" in text
    assert text.splitlines()[-1] == (
        "tfgpu: error: the image's GPU path is not as it was built (1 problem(s) above): exit 1 "
        "(in a Dockerfile's RUN, the build stops there)"
    )


@pytest.mark.parametrize("version", ["1" * 5000, "2." + "9" * 4301, "2.21.0." + "0" * 30])
def test_an_absurd_version_is_not_judged_and_not_a_crash(version: str) -> None:
    assert pins.satisfies(version, "==2.21.0") is None
    assert pins.satisfies("2.21.0", f">={version}") is None
