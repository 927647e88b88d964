"""What the built images are: labels and ENV against the matrix, the size the kit
adds, and `build.py verify` on a complete and on a broken image."""

from __future__ import annotations

import json
from typing import Any

import docker
import pytest

from tests.containers.conftest import VERSION, build_py
from tests.standin import GPU_TAG, JUPYTER_TAG

pytestmark = pytest.mark.docker

BASES = {"gpu": GPU_TAG, "gpu-jupyter": JUPYTER_TAG}
MAX_ADDED_BYTES = 1 << 20  # issue 4: the kit's layers add at most 1 MiB to the base


@pytest.fixture(scope="module")
def matrix_row() -> dict[str, Any]:
    """The matrix entry of the image's TensorFlow, read through build.py (its public API)."""
    proc = build_py("matrix", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = [row for row in json.loads(proc.stdout) if row["tensorflow"] == VERSION]
    assert len(rows) == 1, rows
    return dict(rows[0])


def _config(client: docker.DockerClient, tag: str) -> dict[str, Any]:
    return dict(client.images.get(tag).attrs["Config"])


@pytest.mark.parametrize("variant", ["gpu", "gpu-jupyter"])
def test_labels_and_env_match_the_matrix(
    docker_client: docker.DockerClient,
    kit_images: dict[str, str],
    matrix_row: dict[str, Any],
    variant: str,
) -> None:
    config = _config(docker_client, kit_images[variant])
    labels = config["Labels"]
    env = dict(item.split("=", 1) for item in config["Env"])
    assert labels["io.tfgpu.tensorflow"] == matrix_row["tensorflow"]
    assert labels["io.tfgpu.cuda"] == matrix_row["cuda"]
    assert labels["io.tfgpu.cudnn"] == matrix_row["cudnn"]
    assert labels["io.tfgpu.driver.min"] == matrix_row["driver_min"]
    assert labels["io.tfgpu.driver.min-compat"] == matrix_row["driver_min_compat"]
    assert env["NVIDIA_REQUIRE_CUDA"] == matrix_row["nvidia_require_cuda"]
    assert env["TFGPU_IMAGE_TF"] == matrix_row["tensorflow"]
    assert env["TF_GPU_MEMORY_GROWTH"] == "true"  # the image default of issue 3
    assert labels["org.opencontainers.image.version"] == f"{VERSION}-{variant}"
    # Built through --base-registry: the label names the stand-in it really came from.
    assert labels["org.opencontainers.image.base.name"] == BASES[variant]
    assert config["Entrypoint"] == ["tfgpu", "run", "--"]


@pytest.mark.parametrize("variant", ["gpu", "gpu-jupyter"])
def test_the_kit_adds_at_most_1_MiB(
    docker_client: docker.DockerClient, kit_images: dict[str, str], variant: str
) -> None:
    image = docker_client.images.get(kit_images[variant])
    base = docker_client.images.get(BASES[variant])
    added = int(image.attrs["Size"]) - int(base.attrs["Size"])
    # History is newest first; the entries beyond the base's are the kit's.
    kit_layers = image.history()[: len(image.history()) - len(base.history())]
    layers = [
        f"{layer['Size'] / 2**20:7.2f} MiB  {layer['CreatedBy'][:110]}"
        for layer in kit_layers
        if layer["Size"]
    ]
    assert added <= MAX_ADDED_BYTES, (
        f"{kit_images[variant]} adds {added / 2**20:.2f} MiB to its base; the kit's layers:\n"
        + "\n".join(layers)
    )


def test_verify_passes_on_the_complete_image(kit_images: dict[str, str]) -> None:
    proc = build_py("verify", kit_images["gpu"], timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_verify_fails_naming_cudnn_when_it_is_missing(broken_image: str) -> None:
    proc = build_py("verify", broken_image, timeout=300)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    # The missing piece by name: the cuDNN library TensorFlow was built against.
    assert "libcudnn.so.9" in output and "cuDNN" in output, output
