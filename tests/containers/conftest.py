"""Per-test fixtures of the container tests: a TrackedContainer per image. The session
fixtures (stand-ins, the kit's images) are in tests/kit_images.py."""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest
import yaml

from tests.containers.tracked import TrackedContainer
from tests.kit_images import ROOT


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
