"""Session fixtures shared by the container tests (tests/containers) and the GPU tests
(tests/gpu), loaded once for the whole run by tests/conftest.py (`pytest_plugins`), so the
stand-in bases and the kit's images are built once: the stand-ins, the kit's images built
from them by `build.py build --base-registry …` (the code path of a team with a registry
mirror).

2.21.0's stand-in base lacks what its TensorFlow needs (CUDA 12.5, cuDNN 9), as the official
one does: its kit images add NVIDIA's wheels. 2.17.0's base is enough: its image adds nothing.
2.14.0 and 2.15.0 (CUDA 11.8 stand-ins, `cuda11_images`) each have a repair of their own: the cu11
wheel set of 2.14 and the CUDA 12.2 set of 2.15.

Disk: the CI machine's disk is limited and the suite's images are big (a repaired image's wheels
are ~3 GB, its builder stage's leftover ~5 GB), so what the session holds at once is kept down by
construction, not by the host's free space: each `build.py build` builds one image, so the builder
stage it leaves is dropped before the next; the CUDA 11.8 family (its stand-ins and images, ~13 GB)
is used by one module only, runs first (tests/conftest.py) and is removed when that module ends,
so it never sits on the disk beside the 2.21 family. tests/disk_watch.py prints the run's lowest
free space."""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests import engine_lock
from tests.base_standins import (
    CUDA11,
    CUDA11_STANDINS,
    CUDA12_STANDINS,
    REGISTRY,
    SLIM_STANDINS,
    Result,
    build_all,
    gpu_tag,
)

ROOT = Path(__file__).resolve().parents[1]
VERSION = "2.21.0"
OLDER = "2.17.0"  # a version whose base has what its TensorFlow needs
KIT_REPO = "tfgpu/tensorflow"
KIT_GPU = f"{KIT_REPO}:{VERSION}-gpu"
KIT_JUPYTER = f"{KIT_REPO}:{VERSION}-gpu-jupyter"
KIT_OLDER = f"{KIT_REPO}:{OLDER}-gpu"
KIT_SLIM = f"{KIT_REPO}:{VERSION}-gpu-slim"  # the slim variant: no CUDA in its base
# The CUDA 11.8 bases' releases: one image per CUDA repair recipe of theirs
CUDA11_VERSIONS = CUDA11.tf_versions  # ("2.14.0", "2.15.0")
# The 2.21 image built with --cuda-source base (no repair: TensorFlow cannot use the GPU) gets
# its own registry prefix so that it never replaces the good image's tags.
BROKEN_REGISTRY = "tfgpu-broken.local"
KIT_BROKEN = f"{BROKEN_REGISTRY}/{KIT_REPO}:{VERSION}-gpu"
# Where _kit_build(keep_builder=True) keeps a build's builder stage (tagged: no prune drops it)
KEPT_BUILDER = "tfgpu-test.local/kept-builder"


COMPOSE_MISSING = "neither `docker compose` nor `docker-compose` is installed"


def compose_command() -> list[str] | None:
    """`docker compose` (v2) when the plugin exists, else `docker-compose` (v1, Debian); None
    when neither is installed (each caller fails or skips in its own way)."""
    v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if v2.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def build_py(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python build.py ARGS…` from the checkout, as a user runs it; a `build` holds
    engine_lock.building() (no prune by the other worker meanwhile) and uses the legacy builder
    unless it names one: the keeping and pruning below count the legacy builder's dangling images,
    and the same builder on every host keeps the cache hits the tests rely on
    (tests/containers/test_buildkit.py builds through BuildKit)."""
    if args[:1] == ("build",) and "--builder" not in args:
        args = (*args, "--builder", "legacy")
    lock = engine_lock.building() if args[:1] == ("build",) else contextlib.nullcontext()
    with lock:
        return subprocess.run(
            [sys.executable, str(ROOT / "build.py"), *args],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env={**os.environ, **env} if env else None,
        )


def buildkit_cli_on_path() -> str | None:
    """The first `docker` on PATH whose CLI builds through BuildKit (build.py's own choice looks
    only at the first `docker`: a host may have another CLI that has it)."""
    from tfgpu_kit.image import buildkit

    seen: set[str] = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        cli = Path(folder or ".") / "docker"
        real = os.path.realpath(cli)
        if real in seen or not (cli.is_file() and os.access(cli, os.X_OK)):
            continue
        seen.add(real)
        if buildkit.find_buildkit(str(cli)).kind == "buildkit":
            return str(cli)
    return None


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
    results = build_all(CUDA12_STANDINS)  # locks of its own (base_standins/cache_lock.py)
    _progress(f"stand-ins ready in {time.monotonic() - t0:.0f}s")
    return results


@pytest.fixture(scope="module")
def cuda11_standins(docker_client: docker.DockerClient) -> Iterator[list[Result]]:
    """The stand-ins of the CUDA 11.8 bases (2.14.0-gpu, 2.15.0-gpu), built or reused; removed
    when the module that uses them ends (see the module's docstring: disk)."""
    t0 = time.monotonic()
    results = build_all(CUDA11_STANDINS)
    _progress(f"CUDA 11.8 stand-ins ready in {time.monotonic() - t0:.0f}s")
    yield results
    # the TensorFlow stand-ins before the CUDA base they are built FROM
    _drop(docker_client, [*(gpu_tag(v) for v in CUDA11_VERSIONS), CUDA11.tag])


def _drop(client: docker.DockerClient, refs: list[str]) -> None:
    """Remove these images (every tag of each) and the containers made from them, then the
    dangling images, so that their layers leave the disk now."""
    data_root = str(client.info()["DockerRootDir"])  # where the layers are (the engine is local)
    before = shutil.disk_usage(data_root).free
    for ref in refs:
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            continue
        for container in client.containers.list(all=True, filters={"ancestor": image.id}):
            container.remove(force=True)
        # By tag, not by id: an id with dependent children (another build's stage 1 FROM this
        # stand-in, whose prune the other worker put off) is refused even with force (409);
        # untagged, its layers go with the next prune of dangling images, on either worker.
        for tag in image.tags:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag)
    _prune_dangling(client)
    freed = shutil.disk_usage(data_root).free - before
    _progress(f"removed {', '.join(refs)}: {freed / 2**30:.1f} GiB freed")


def _kit_build(image: str, *args: str, keep_builder: bool = False) -> None:
    """`build.py build IMAGE ARGS…`: one image per command, so that the builder stage it leaves
    (several GB) is dropped before the next image is built; unless `keep_builder`: then the
    dangling images the build made (its builder stage) are kept under KEPT_BUILDER's tags, so a
    rebuild of the same image is all cache hits, until `release_kept_builders()`."""
    args = (image, *args)
    client = docker.from_env()
    try:
        # held until the builder stage is tagged: no prune elsewhere takes it first
        with engine_lock.building():
            before = _dangling(client)
            with contextlib.suppress(docker.errors.ImageNotFound):
                before.add(client.images.get(f"{KIT_REPO}:{image}").id)  # what it replaces
            t0 = time.monotonic()
            proc = build_py("build", *args)
            command = f"build.py build {' '.join(args)}"
            output = f"{proc.stdout}\n{proc.stderr}"
            assert proc.returncode == 0, f"{command} exited {proc.returncode}\n{output}"
            _progress(f"{command}: {time.monotonic() - t0:.0f}s")
            if keep_builder:
                # (a build running elsewhere may have dangling images now: kept as well, which
                # costs disk until release_kept_builders, never the build)
                made = sorted(_dangling(client) - before)
                for n, kept in enumerate(made):
                    client.api.tag(kept, KEPT_BUILDER, str(n))
                _progress(f"kept {len(made)} dangling image(s) of the build as {KEPT_BUILDER}:N")
        freed = _prune_dangling(client)
    finally:
        client.close()
    _progress(f"dropped the images this build replaced: {_said(freed)}")


def _dangling(client: docker.DockerClient) -> set[str]:
    """The ids of the dangling images, from one listing: docker-py's images.list inspects each
    image it lists, and one removed meanwhile (the other worker's prune) raised ImageNotFound."""
    return {str(i) for i in client.api.images(filters={"dangling": True}, quiet=True)}


def release_kept_builders(client: docker.DockerClient) -> None:
    """Drop what `_kit_build(keep_builder=True)` kept (its tags, then the layers)."""
    for image in client.api.images(name=KEPT_BUILDER):
        for tag in image.get("RepoTags") or []:
            with contextlib.suppress(docker.errors.ImageNotFound):
                client.images.remove(tag, force=True)
    freed = _prune_dangling(client)
    _progress(f"released the kept builder stages: {_said(freed)}")


def _prune_dangling(client: docker.DockerClient) -> int | None:
    """Drop the dangling images, the bytes freed: a rebuilt image's predecessor (~3 GB with the
    CUDA wheels) and a build's builder stage (~5 GB), which ran the CUDA 11.8 builds out of disk.
    None: put off, as the other worker builds and the disk is not short (tests/engine_lock.py);
    the next prune on either worker takes these too."""
    free = shutil.disk_usage(str(client.info()["DockerRootDir"])).free  # the engine is local
    with engine_lock.pruning(free_bytes=free) as may:
        if not may:
            return None
        return int(client.images.prune(filters={"dangling": True}).get("SpaceReclaimed") or 0)


def _said(freed: int | None) -> str:
    if freed is None:
        return "put off (the other worker builds; the next prune takes them)"
    return f"{freed / 2**30:.1f} GiB"


@pytest.fixture(scope="session")
def kit_images(standins: list[Result]) -> dict[str, str]:
    """The kit's 2.21 gpu and gpu-jupyter images (repaired) and its 2.17 gpu image (not),
    built on the stand-ins."""
    with engine_lock.once("kit-images") as built:  # by the other worker, in this run
        if built:
            _progress("the kit's images: built in this run by the other worker")
        else:
            for image in (f"{VERSION}-gpu", f"{VERSION}-gpu-jupyter", f"{OLDER}-gpu"):
                _kit_build(image, "--base-registry", REGISTRY)
    return {"gpu": KIT_GPU, "gpu-jupyter": KIT_JUPYTER, "older": KIT_OLDER}


@pytest.fixture(scope="session")
def slim_image(kit_images: dict[str, str], docker_client: docker.DockerClient) -> Iterator[str]:
    """The kit's 2.21 gpu-slim image, built on the stand-in of its Python base (after the
    repaired images, which the size comparison needs too). Its builder stage is kept for the
    session: tests/gpu/test_derived_images.py publishes the image with `build.py build --push`,
    which is then all cache hits instead of a second run of stage 1 (~5 min)."""
    t0 = time.monotonic()
    build_all(SLIM_STANDINS)
    _progress(f"slim stand-in ready in {time.monotonic() - t0:.0f}s")
    _kit_build(f"{VERSION}-gpu-slim", "--base-registry", REGISTRY, keep_builder=True)
    yield KIT_SLIM
    release_kept_builders(docker_client)


@pytest.fixture(scope="session")
def broken_image(standins: list[Result]) -> str:
    """The kit's 2.21 gpu image forced to the base's CUDA (--cuda-source base): what a team
    gets from the official 2.21 base without the repair."""
    _kit_build(
        f"{VERSION}-gpu",
        "--cuda-source",
        "base",
        "--base-registry",
        REGISTRY,
        "--registry",
        BROKEN_REGISTRY,
    )
    return KIT_BROKEN


@pytest.fixture(scope="module")
def cuda11_images(
    docker_client: docker.DockerClient, cuda11_standins: list[Result]
) -> Iterator[dict[str, str]]:
    """The kit's 2.14.0 and 2.15.0 gpu images (both repaired: 2.14's cu11 wheels with cuDNN 8.7,
    2.15's CUDA 12.2 wheels), built on the CUDA 11.8 stand-ins; by version. Removed when the module
    that uses them ends (see the module's docstring: disk)."""
    images = {v: f"{KIT_REPO}:{v}-gpu" for v in CUDA11_VERSIONS}
    for version in CUDA11_VERSIONS:
        _kit_build(f"{version}-gpu", "--base-registry", REGISTRY)
    yield images
    _drop(docker_client, list(images.values()))
