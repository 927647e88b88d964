"""Session fixtures of the container tests: the stand-in bases, the kit's images
built from them by `build.py build --base-registry …` (the code path of a team with
a registry mirror), and a TrackedContainer per test."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest
import yaml

from tests.containers.tracked import TrackedContainer
from tests.standin import NOCUDNN_REGISTRY, REGISTRY, Result, build_all

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2.21.0"
KIT_REPO = "tfgpu/tensorflow"
KIT_GPU = f"{KIT_REPO}:{VERSION}-gpu"
KIT_JUPYTER = f"{KIT_REPO}:{VERSION}-gpu-jupyter"
# The image built on the cuDNN-less stand-in gets its own registry prefix so that it
# never replaces the good image's tags (which compose.yaml and the other tests use).
BROKEN_REGISTRY = "tfgpu-broken.local"
KIT_BROKEN = f"{BROKEN_REGISTRY}/{KIT_REPO}:{VERSION}-gpu"


def build_py(*args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """`python build.py ARGS…` from the checkout, as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _progress(message: str) -> None:
    # Visible with -s, and in CI's log on failure; long session fixtures say what they do.
    print(f"[containers] {message}", file=sys.stderr, flush=True)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env(timeout=600)
    yield client
    client.close()


@pytest.fixture(scope="session")
def standins(docker_client: docker.DockerClient) -> list[Result]:
    """Build the stand-in bases, or reuse them when their inputs have not changed."""
    t0 = time.monotonic()
    results = build_all()
    _progress(f"stand-ins ready in {time.monotonic() - t0:.0f}s")
    return results


def _kit_build(*args: str) -> None:
    t0 = time.monotonic()
    proc = build_py("build", *args)
    assert proc.returncode == 0, (
        f"build.py build {' '.join(args)} exited {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
    )
    _progress(f"build.py build {' '.join(args)}: {time.monotonic() - t0:.0f}s")


@pytest.fixture(scope="session")
def kit_images(standins: list[Result]) -> dict[str, str]:
    """The kit's gpu and gpu-jupyter images, built on the stand-ins."""
    _kit_build(f"{VERSION}-gpu", f"{VERSION}-gpu-jupyter", "--base-registry", REGISTRY)
    return {"gpu": KIT_GPU, "gpu-jupyter": KIT_JUPYTER}


@pytest.fixture(scope="session")
def broken_image(standins: list[Result]) -> str:
    """The kit's gpu image built on the stand-in whose cuDNN is missing."""
    _kit_build(f"{VERSION}-gpu", "--base-registry", NOCUDNN_REGISTRY, "--registry", BROKEN_REGISTRY)
    return KIT_BROKEN


@pytest.fixture
def gpu_image(
    docker_client: docker.DockerClient, kit_images: dict[str, str]
) -> Iterator[TrackedContainer]:
    tracked = TrackedContainer(docker_client, kit_images["gpu"])
    yield tracked
    tracked.remove_all()


@pytest.fixture
def jupyter_image(
    docker_client: docker.DockerClient, kit_images: dict[str, str]
) -> Iterator[TrackedContainer]:
    tracked = TrackedContainer(docker_client, kit_images["gpu-jupyter"])
    yield tracked
    tracked.remove_all()


@pytest.fixture(scope="session")
def image_user() -> str:
    """The non-root user the images create (images/images.yaml, `user.name`)."""
    spec = yaml.safe_load((ROOT / "images" / "images.yaml").read_text())
    return str(spec["user"]["name"])
