"""What the built images are, on stand-ins that look like the official bases: labels and ENV
against the matrix, what the kit adds (the 2.21 repair, nothing for 2.17), `build.py verify` with
TensorFlow's own verdict on the fake driver, and the public 2.18+ bug reproduced on the base."""

from __future__ import annotations

import json
from typing import Any

import docker
import pytest

from tests.base_standins import REGISTRY, gpu_tag
from tests.containers.tracked import TrackedContainer
from tests.kit_images import OLDER, VERSION, build_py
from tfgpu_kit.matrix import spec as specs

pytestmark = pytest.mark.docker

BASES = {
    "gpu": gpu_tag(VERSION),
    "gpu-jupyter": f"{REGISTRY}/tensorflow/tensorflow:{VERSION}-gpu-jupyter",
    "older": gpu_tag(OLDER),
}
# the kit's own layers add at most the variant's budget to the base (images/images.yaml)
KIT_BYTES = int(specs.load().images.variants["gpu"].max_added_mib * (1 << 20))
SITE = "/usr/local/lib/python3.11/dist-packages"


@pytest.fixture(scope="module")
def matrix_rows() -> dict[str, dict[str, Any]]:
    """The matrix, read through build.py (its public API)."""
    proc = build_py("matrix", "--json", timeout=60)
    assert proc.returncode == 0, proc.stderr
    return {row["tensorflow"]: row for row in json.loads(proc.stdout)}


def _config(client: docker.DockerClient, tag: str) -> dict[str, Any]:
    return dict(client.images.get(tag).attrs["Config"])


@pytest.mark.parametrize("which", ["gpu", "gpu-jupyter", "older"])
def test_labels_and_env_say_what_tensorflow_loads(
    docker_client: docker.DockerClient,
    kit_images: dict[str, str],
    matrix_rows: dict[str, dict[str, Any]],
    which: str,
) -> None:
    config = _config(docker_client, kit_images[which])
    labels = config["Labels"]
    env = dict(item.split("=", 1) for item in config["Env"])
    version = OLDER if which == "older" else VERSION
    row = matrix_rows[version]
    assert labels["io.tfgpu.tensorflow"] == version
    assert labels["io.tfgpu.cuda"] == row["cuda"] and labels["io.tfgpu.cudnn"] == row["cudnn"]
    assert labels["io.tfgpu.cuda.source"] == row["base"]["cuda_source"]
    assert labels["io.tfgpu.driver.min"] == row["driver_min"]
    assert labels["io.tfgpu.driver.min-compat"] == row["driver_min_compat"]
    assert env["NVIDIA_REQUIRE_CUDA"] == row["nvidia_require_cuda"]
    assert env["TFGPU_IMAGE_TF"] == version
    assert env["TF_GPU_MEMORY_GROWTH"] == "true"  # the images' default
    # Built through --base-registry: the label names the stand-in it really came from.
    assert labels["org.opencontainers.image.base.name"] == BASES[which]
    assert config["Entrypoint"] == ["tfgpu", "run", "--"]
    if which == "older":  # 2.17's base has CUDA 12.3 and cuDNN 8.9.6: enough, nothing added
        assert (labels["io.tfgpu.cuda"], labels["io.tfgpu.cudnn"]) == ("12.3.1", "8.9.6")
        assert labels["io.tfgpu.cuda.wheels"] == "" and labels["io.tfgpu.cuda.wheels-mib"] == "0"
    else:  # 2.21's base lacks CUDA 12.5 and cuDNN 9: the image adds the [and-cuda] wheels
        assert (labels["io.tfgpu.cuda"], labels["io.tfgpu.cudnn"]) == ("12.5.1", "9.3.0")
        assert labels["io.tfgpu.cuda.wheels"].split() == row["base"]["wheels"]
        assert abs(float(labels["io.tfgpu.cuda.wheels-mib"]) - row["base"]["wheels_mib"]) < 1


def _added(client: docker.DockerClient, image_ref: str, base_ref: str) -> tuple[int, str]:
    image, base = client.images.get(image_ref), client.images.get(base_ref)
    added = int(image.attrs["Size"]) - int(base.attrs["Size"])
    # History is newest first; the entries beyond the base's are the kit's.
    kit_layers = image.history()[: len(image.history()) - len(base.history())]
    layers = [
        f"{layer['Size'] / 2**20:7.2f} MiB  {layer['CreatedBy'][:110]}"
        for layer in kit_layers
        if layer["Size"]
    ]
    return added, "\n".join(layers)


def _tf_keras_bytes(row: dict[str, Any]) -> int:
    """tf-keras's unpacked size (2.16+ images carry it; matrix --json from the lock)."""
    keras = row["tf_keras"]
    return int(keras["mib"] * 2**20) if keras else 0


def test_a_base_that_is_enough_gets_no_repair(
    docker_client: docker.DockerClient,
    kit_images: dict[str, str],
    matrix_rows: dict[str, dict[str, Any]],
) -> None:
    """2.17: no CUDA wheels; the kit's layers and tf-keras (6.1 MiB), nothing else."""
    added, layers = _added(docker_client, kit_images["older"], BASES["older"])
    keras = _tf_keras_bytes(matrix_rows[OLDER])
    assert keras > 0  # 2.17's tf.keras is Keras 3: its image carries tf-keras 2.17
    assert keras < added <= keras + KIT_BYTES, (
        f"{kit_images['older']} adds {added / 2**20:.2f} MiB:\n{layers}"
    )


@pytest.mark.parametrize("variant", ["gpu", "gpu-jupyter"])
def test_the_repair_adds_the_wheels_and_nothing_else(
    docker_client: docker.DockerClient,
    kit_images: dict[str, str],
    matrix_rows: dict[str, dict[str, Any]],
    variant: str,
) -> None:
    added, layers = _added(docker_client, kit_images[variant], BASES[variant])
    wheels = int(matrix_rows[VERSION]["base"]["wheels_mib"] * 2**20)
    wheels += _tf_keras_bytes(matrix_rows[VERSION])
    assert wheels < added <= wheels + KIT_BYTES, (
        f"{kit_images[variant]} adds {added / 2**20:.2f} MiB, the wheels {wheels / 2**20:.2f}:\n"
        + layers
    )


def test_verify_passes_and_tensorflow_registers_the_gpu(kit_images: dict[str, str]) -> None:
    """verify with the GPU probe: TensorFlow 2.21 itself registers the fake GPU in the repaired
    image, having loaded cuDNN 9 and every CUDA library from NVIDIA's wheels."""
    proc = build_py("verify", "--json", kit_images["gpu"], kit_images["older"], timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    results = json.loads(proc.stdout)
    checks = {c["name"]: c for c in results[kit_images["gpu"]]}
    assert (
        "Created device /job:localhost/replica:0/task:0/device:GPU:0"
        in (checks["TensorFlow registers a GPU"]["detail"])
    )
    assert checks["library libcudnn.so.9"]["detail"] == (
        f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9 (9.3.0)"
    )
    assert checks["library libcusolver.so.11"]["detail"].startswith(f"{SITE}/nvidia/cusolver/")
    older = {c["name"]: c for c in results[kit_images["older"]]}
    # 2.17 loads the base's system libraries
    assert older["library libcudnn.so.8"]["detail"] == (
        "/usr/lib/x86_64-linux-gnu/libcudnn.so.8 (8.9.6)"
    )
    assert older["TensorFlow registers a GPU"]["ok"]


def test_the_official_base_fails_verify_naming_cudnn_9() -> None:
    """The public bug (tensorflow/build#217, #221): the 2.18+ bases ship cuDNN 8.9.6 and CUDA
    12.3, TensorFlow needs cuDNN 9 and 12.5, and skips the GPU."""
    proc = build_py("verify", BASES["gpu"], timeout=600)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 1, output
    text = " ".join(output.replace("│", " ").split())
    assert "libcudnn.so.9 cannot be loaded: the image lacks cuDNN 9" in text
    assert "Loaded CUDA runtime 12.3 is older than the CUDA 12.5.1" in text
    # and TensorFlow's own words, from the probe with the fake driver
    assert "Could not load dynamic library 'libcudnn.so.9'" in text
    assert "Cannot dlopen some GPU libraries" in text


def test_verify_fails_an_image_forced_to_the_bases_cuda(broken_image: str) -> None:
    proc = build_py("verify", broken_image, timeout=600)
    output = " ".join((proc.stdout + proc.stderr).replace("│", " ").split())
    assert proc.returncode == 1, output
    assert "libcudnn.so.9 cannot be loaded" in output and "cuDNN" in output
    assert "TensorFlow refused the GPU" in output


def test_tfgpu_check_says_the_gpu_will_not_be_used(docker_client: docker.DockerClient) -> None:
    """`tfgpu check` in the official base (the checkout's runtime mounted): exit 1, and why."""
    from tests.kit_images import ROOT

    container = TrackedContainer(docker_client, BASES["gpu"])
    try:
        out = container.run_and_wait(
            ["python3", "-m", "tfgpu", "check"],
            environment={"PYTHONPATH": "/opt/tfgpu", "PYTHONDONTWRITEBYTECODE": "1"},
            volumes={str(ROOT / "entrypoint" / "src"): {"bind": "/opt/tfgpu", "mode": "ro"}},
            expect_exit=1,
            timeout=180,
        )
    finally:
        container.remove_all()
    assert "this TensorFlow will not use the GPU here: Could not load dynamic library" in out.stdout
    assert "'libcudnn.so.9'" in out.stdout and "BROKEN" in out.stdout


def test_one_copy_of_each_package_the_kit_adds(jupyter_image: TrackedContainer) -> None:
    """The Jupyter base has an older prometheus-client; the kit's replaces it, leaving one
    .dist-info whose version is what the module is."""
    probe = (
        "import glob, importlib.metadata as md, json, prometheus_client, os;"
        f"infos = sorted(glob.glob('{SITE}/prometheus_client-*.dist-info'));"
        "print(json.dumps({'infos': infos, 'version': md.version('prometheus-client'),"
        " 'module': os.path.dirname(prometheus_client.__file__),"
        " 'has_new_api': hasattr(prometheus_client, 'disable_created_metrics')}))"
    )
    out = jupyter_image.run_and_wait(["python3", "-c", probe], timeout=120)
    data = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(data["infos"]) == 1, data
    assert data["infos"][0].endswith(f"prometheus_client-{data['version']}.dist-info")
    assert data["version"] != "0.17.1"  # the base's older one is gone
    assert data["module"] == f"{SITE}/prometheus_client"
    assert data["has_new_api"]  # the module's files are the new version's
