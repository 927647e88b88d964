"""The slim variant's 2.21 image, built on the stand-in of its Python base in the same
run as the repaired one: how much smaller it is, that what it adds is its locked parts within its
budget, that `build.py verify` passes with TensorFlow's own GPU verdict on the fake driver, that it
holds one CUDA (the wheels TensorFlow loads), compiled byte code for any uid, and the security
audit of test_image_audit.py. The GPU suite (tests/gpu) runs on it too: its `image` fixture
takes both variants."""

from __future__ import annotations

import json

import docker
import pytest

from tests.base_standins import slim_tag
from tests.containers.test_image_audit import _audit
from tests.kit_images import VERSION, build_py
from tfgpu_kit.matrix import catalog, spec
from tfgpu_kit.matrix.locks import wheel_locks

pytestmark = pytest.mark.docker

SPEC = spec.load()
IMAGE = next(i for i in catalog.images(SPEC) if i.name == f"{VERSION}-gpu-slim")
SITE = "/usr/local/lib/python3.11/dist-packages"  # the stand-in's (Debian's Python; see standin)


def _size(client: docker.DockerClient, ref: str) -> int:
    return int(client.images.get(ref).attrs["Size"])


def test_the_slim_image_is_at_least_30_percent_smaller(
    docker_client: docker.DockerClient, kit_images: dict[str, str], slim_image: str
) -> None:
    repaired, slim = _size(docker_client, kit_images["gpu"]), _size(docker_client, slim_image)
    print(
        f"\nrepaired {repaired / 1e9:.2f} GB, slim {slim / 1e9:.2f} GB: {1 - slim / repaired:.1%}"
    )
    assert slim <= 0.70 * repaired, (repaired, slim)


def test_what_it_adds_is_its_locked_parts_within_its_budget(
    docker_client: docker.DockerClient, slim_image: str
) -> None:
    """Over its base: TensorFlow with its dependencies, the CUDA wheels and tf-keras by their
    locked unpacked sizes, plus at most the variant's budget (the runtime, the byte code)."""
    added = _size(docker_client, slim_image) - _size(docker_client, slim_tag())
    packages = wheel_locks.image_packages(SPEC.images.runtime_extras, IMAGE.pip)
    locked_set = wheel_locks.wheel_set(wheel_locks.load_images(), "3.11", packages, IMAGE.name)
    cuda = wheel_locks.load()
    locked = sum(e.unpacked_bytes or 0 for e in locked_set.wheels.values())
    locked += sum(cuda.wheels[p].unpacked_bytes for p in [*IMAGE.gap.wheels, IMAGE.tf_keras or ""])
    assert IMAGE.budget_mib is not None, f"{IMAGE.name} has no size budget"
    budget = IMAGE.budget_mib * 2**20
    assert locked < added <= locked + budget, (added, locked, budget)


def test_verify_passes_and_tensorflow_registers_the_gpu(slim_image: str) -> None:
    proc = build_py("verify", "--json", slim_image, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    checks = {c["name"]: c for c in json.loads(proc.stdout)[slim_image]}
    assert "Created device" in checks["TensorFlow registers a GPU"]["detail"]
    assert (
        checks["library libcudnn.so.9"]["detail"]
        == f"{SITE}/nvidia/cudnn/lib/libcudnn.so.9 (9.3.0)"
    )
    assert checks["env NVIDIA_DRIVER_CAPABILITIES"]["ok"]


def test_one_cuda_and_byte_code_for_any_uid(
    docker_client: docker.DockerClient, slim_image: str
) -> None:
    """No system CUDA or cuDNN: every CUDA library the loader knows is a wheel's. TensorFlow
    imports as an arbitrary uid from compiled byte code (no .py of it without its .pyc)."""
    script = (
        "ls -d /usr/local/cuda* 2>/dev/null; "
        "ldconfig -p | grep -E 'lib(cudnn|cublas|cudart|cufft|cusolver|cusparse)\\.so' "
        "| sed 's/.*=> //'"
    )
    out = docker_client.containers.run(
        slim_image, ["-c", script], entrypoint="sh", remove=True, network_disabled=True
    ).decode()
    paths = out.split()
    assert paths and all(p.startswith(f"{SITE}/nvidia/") for p in paths), out
    probe = (
        "import importlib.util, pathlib, tensorflow, tf_keras; "
        "root = pathlib.Path(tensorflow.__file__).parent; "
        "print(tensorflow.__version__, sum(1 for p in root.rglob('*.py') "
        "if not pathlib.Path(importlib.util.cache_from_source(str(p))).exists()))"
    )
    out = docker_client.containers.run(
        slim_image, ["python", "-c", probe], user="4321:4321", remove=True, network_disabled=True
    ).decode()
    assert out.split()[-2:] == ["2.21.0", "0"], out


def test_the_security_audit(docker_client: docker.DockerClient, slim_image: str) -> None:
    """The security audit (test_image_audit.py), on the slim image against its base."""
    image, base = _audit(docker_client, slim_image), _audit(docker_client, slim_tag())
    assert image.get("loose") == [], image.get("loose")
    assert "1777 /tmp" in image["modes"]
    assert set(image.get("setid", [])) <= set(base.get("setid", []))
