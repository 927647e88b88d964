"""The image the multi-worker tests run: the kit's 2.21 gpu image (tests/kit_images.py).

Keras 2 for `model.fit` under MultiWorkerMirroredStrategy comes from the image itself: every
2.16+ image carries TensorFlow's tf-keras of its minor, locked in images/cuda-wheels.lock.yaml
(matrix.yaml `tf_keras`). The fixture checks that the image holds exactly that
locked version and fails otherwise: nothing is layered on for the tests.
TFGPU_MULTIWORKER_IMAGE=REF (or `--suite-image gpu=REF`) runs another image.
"""

from __future__ import annotations

import os

import docker
import pytest

from tfgpu_kit.matrix import catalog, spec


def _tf_keras_in(client: docker.DockerClient, image: str) -> str:
    """`tf-keras==X` as the image's pip metadata has it ('' when it has none)."""
    out = client.containers.run(
        image,
        entrypoint=[
            "python",
            "-c",
            "import importlib.metadata as m\n"
            "try: print('tf-keras==' + m.version('tf-keras'))\n"
            "except m.PackageNotFoundError: print('')",
        ],
        remove=True,
    )
    return bytes(out).decode().strip()


@pytest.fixture(scope="session")
def multiworker_image(docker_client: docker.DockerClient, request: pytest.FixtureRequest) -> str:
    image = (
        os.environ.get("TFGPU_MULTIWORKER_IMAGE") or request.getfixturevalue("kit_images")["gpu"]
    )
    (expected,) = {i.tf_keras for i in catalog.images(spec.load()) if i.name == "2.21.0-gpu"}
    found = _tf_keras_in(docker_client, image)
    assert found == expected, f"{image} holds {found or 'no tf-keras'}, the lock says {expected}"
    return image
