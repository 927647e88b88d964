"""The build commands' inputs: an override applied only to the images it selects, image
references refused by Docker's grammar before the engine is asked, an offline build stopped
before any context is assembled, `matrix` naming the slim images, and fakegpu.build taking the
str a caller naturally passes."""

from __future__ import annotations

import json
from pathlib import Path

import docker.errors
import pytest

import fakegpu
from tfgpu_kit import cli
from tfgpu_kit.image import context, docker_engine


def kit(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = cli.main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    return code, out, err


def test_cuda_source_applies_to_the_selected_images_only(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: applied to every image before selection, so every selector failed on 2.13.0
    ("matrix.yaml lists no [and-cuda] wheels"), even 2.21.0-gpu-slim's clear refusal."""
    code, _, err = kit(capsys, "build", "--cuda-source", "wheels", "2.21.0-gpu-slim", "--dry-run")
    assert code == 2 and "does not apply to 2.21.0-gpu-slim" in err and "2.13.0" not in err
    code, _, err = kit(capsys, "build", "--cuda-source", "wheels", "2.21.0-gpu", "--dry-run")
    assert code == 0 and "2.13.0" not in err, err
    # a version the override cannot serve is still refused, when it is the one asked for
    code, _, err = kit(capsys, "build", "--cuda-source", "wheels", "2.13.0-gpu", "--dry-run")
    assert code != 0 and "2.13.0" in err


@pytest.mark.parametrize("ref", ["", "a b", "tfgpu/X", "x:" + "1" * 200, "x\n"])
def test_verify_refuses_a_bad_reference_before_asking_the_engine(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, ref: str
) -> None:
    """Before: '' was a traceback (docker.errors.NullResource), 'a b' the engine's raw 400."""

    def no_engine() -> None:
        raise AssertionError("the engine was asked")

    monkeypatch.setattr(docker_engine, "client", no_engine)
    code, _, err = kit(capsys, "verify", "tfgpu/tensorflow:2.21.0-gpu", ref, "--no-gpu-probe")
    assert code == 2 and "is not valid" in err and "reference grammar" in err, err


def test_fakegpu_build_takes_a_str(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Before: `fakegpu.build(cache_dir='/tmp/x')` raised TypeError (str / str)."""
    monkeypatch.setattr(fakegpu.shutil, "which", lambda name: None)  # no compile: gcc "missing"
    with pytest.raises(fakegpu.FakeGpuError, match="gcc not found"):
        fakegpu.build(cache_dir=str(tmp_path))


def test_matrix_names_the_slim_images(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `build.py matrix` never mentioned the slim variant."""
    code, out, _ = kit(capsys, "matrix", "--json")
    rows = {row["tensorflow"]: row for row in json.loads(out)}
    assert code == 0 and rows["2.21.0"]["slim"] == "2.21.0-gpu-slim"
    assert rows["2.17.0"]["slim"] is None  # its official base serves it: no slim image
    code, out, _ = kit(capsys, "matrix")
    assert (code == 0 and "slim: 2.21.0-gpu-slim" in " ".join(out.replace("│", " ").split())) or (
        "gpu-slim" in out  # the table wraps a long cell; the name is there either way
    )


class _OfflineImages:
    """The engine's images API offline: no base locally, no registry answers."""

    def get(self, ref: str) -> object:
        raise docker.errors.ImageNotFound(f"No such image: {ref}")

    def get_registry_data(self, ref: str) -> object:
        raise docker.errors.APIError("Get https://registry-1.docker.io/v2/: dial tcp: no route")


class _OfflineEngine:
    images = _OfflineImages()

    def info(self) -> dict[str, str]:  # the engine runs on x86-64: it builds linux/amd64
        return {"Architecture": "x86_64"}


def test_an_offline_build_stops_before_assembling_any_context(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Before: every context (gigabytes of wheels) was assembled, and then the engine's pull
    failed."""

    def no_context(*args: object, **kwargs: object) -> None:
        raise AssertionError("a context was assembled")

    monkeypatch.setattr(docker_engine, "client", _OfflineEngine)
    monkeypatch.setattr(context, "iter_contexts", no_context)
    code, _, err = kit(capsys, "build", "2.21.0-gpu")
    assert code == 4, err
    assert (
        "its base docker.io/tensorflow/tensorflow:2.21.0-gpu" in err and "cannot be pulled" in err
    )
    assert "--base-registry" in err
