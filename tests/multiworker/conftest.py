"""The image the multi-worker tests run: the kit's 2.21 gpu image (tests/kit_images.py).

tf-keras (Keras 2, for `model.fit` under MultiWorkerMirroredStrategy) is not yet in the kit's
images (issue 19, item 3: the lock resolves a package's dependencies, and tf-keras's is
TensorFlow itself). Until it is, this fixture adds the one locked wheel, by version and sha256,
without dependencies, in a layer over the kit's image; once the image has it, the image is used
as it is. TFGPU_MULTIWORKER_IMAGE=REF runs an image already built instead of building the kit's
(a local re-run; CI builds it).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

TF_KERAS = "tf-keras==2.21.0"
TF_KERAS_SHA256 = "f858bf3d97f892304e7fbcf5eb0942ed91674e27204f940a85de8c93cf07fe62"
LAYER_TAG = "tfgpu-test.local/multiworker:2.21.0-gpu-tf-keras"


def _has_tf_keras(client: docker.DockerClient, image: str) -> bool:
    out = client.containers.run(
        image,
        entrypoint=[
            "python",
            "-c",
            "import importlib.util as u; print(bool(u.find_spec('tf_keras')))",
        ],
        remove=True,
    )
    return bytes(out).strip() == b"True"


@pytest.fixture(scope="session")
def multiworker_image(
    docker_client: docker.DockerClient,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
) -> str:
    image = (
        os.environ.get("TFGPU_MULTIWORKER_IMAGE") or request.getfixturevalue("kit_images")["gpu"]
    )
    if _has_tf_keras(docker_client, image):
        return image
    context: Path = tmp_path_factory.mktemp("tf-keras")
    (context / "requirements.txt").write_text(f"{TF_KERAS} --hash=sha256:{TF_KERAS_SHA256}\n")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "--no-deps",
            "--require-hashes",
            "--quiet",
            "--dest",
            str(context),
            "-r",
            str(context / "requirements.txt"),
        ],
        check=True,
    )
    (wheel,) = context.glob("tf_keras-*.whl")
    (context / "Dockerfile").write_text(
        f"FROM {image}\n"
        f"COPY {wheel.name} requirements.txt /tmp/tfk/\n"
        "RUN python3 -m pip install --no-deps --no-index --no-cache-dir --require-hashes "
        f"--find-links /tmp/tfk -r /tmp/tfk/requirements.txt && rm -r /tmp/tfk\n"
    )
    docker_client.images.build(path=str(context), tag=LAYER_TAG, rm=True)
    return LAYER_TAG
