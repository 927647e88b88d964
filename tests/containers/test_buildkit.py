"""`build.py build --builder buildkit` against the legacy builder, on the same image.

The kit's 2.17.0-gpu image is built by the session (kit_images, the legacy builder) and here
again through BuildKit, with the Docker CLI of PATH that has it (.ci/run installs Debian's
docker.io, whose 20.10 CLI carries BuildKit's client). What matters to users must be the same:
labels (but the build time), environment, entrypoint, command, user, working folder, ports, and
the guard's verdict (`tfgpu check --build`, which teams run after their own layers).
The builder's choice and its errors, without an engine: tests/build/test_buildkit_choice.py."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from tests.base_standins import REGISTRY
from tests.ci_policy import ci_or_skip
from tests.kit_images import KIT_OLDER, KIT_REPO, OLDER, build_py, buildkit_cli_on_path

pytestmark = pytest.mark.docker

BUILDKIT_REGISTRY = "tfgpu-buildkit.local"
KIT_OLDER_BUILDKIT = f"{BUILDKIT_REGISTRY}/{KIT_REPO}:{OLDER}-gpu"
# the time of each build
VARYING_LABELS = {"org.opencontainers.image.created"}
CONFIG_KEYS = (
    "Env",
    "Entrypoint",
    "Cmd",
    "User",
    "WorkingDir",
    "ExposedPorts",
    "Volumes",
    "Healthcheck",
    "StopSignal",
)


def buildkit_cli() -> str:
    if (cli := buildkit_cli_on_path()) is not None:
        return cli
    ci_or_skip(
        "no `docker` CLI on PATH builds through BuildKit (one before Docker 23, or one with the"
        " buildx plugin)",
        in_ci_because=": .ci/run installs Debian's docker.io, whose CLI has BuildKit built in",
    )


@pytest.fixture(scope="module")
def built(
    docker_client: docker.DockerClient, kit_images: dict[str, str]
) -> Iterator[dict[str, Any]]:
    """The 2.17.0-gpu image through BuildKit (its own registry name), the build's stderr; its
    tags and BuildKit's cache are dropped afterwards (the legacy builder's images are not
    BuildKit's cache: the other tests' cache hits stay)."""
    cli = buildkit_cli()
    path = os.pathsep.join([str(Path(cli).parent), os.environ.get("PATH", "")])
    proc = build_py(
        "build",
        f"{OLDER}-gpu",
        "--base-registry",
        REGISTRY,
        "--registry",
        BUILDKIT_REGISTRY,
        "--builder",
        "buildkit",
        timeout=1800,
        env={"PATH": path},
    )
    try:
        assert proc.returncode == 0, proc.stderr[-4000:]
        yield {"stderr": proc.stderr, "cli": cli}
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            for tag in docker_client.images.get(KIT_OLDER_BUILDKIT).tags:
                with contextlib.suppress(docker.errors.ImageNotFound):
                    docker_client.images.remove(tag)
        docker_client.api.prune_builds(all=True)


def config(client: docker.DockerClient, ref: str) -> dict[str, Any]:
    attrs = client.images.get(ref).attrs
    cfg = attrs["Config"]
    labels = {k: v for k, v in (cfg.get("Labels") or {}).items() if k not in VARYING_LABELS}
    return {
        "Labels": labels,
        "Architecture": attrs.get("Architecture"),
        "Os": attrs.get("Os"),
        **{key: cfg.get(key) for key in CONFIG_KEYS},
    }


def guard(client: docker.DockerClient, ref: str) -> tuple[int, str]:
    """`tfgpu check --build` in the image, as its USER, no network: exit status and output."""
    container = client.containers.create(
        ref, entrypoint=["tfgpu"], command=["check", "--build"], network_disabled=True
    )
    try:
        container.start()
        status = int(container.wait(timeout=300)["StatusCode"])
        return status, container.logs().decode("utf-8", "replace")
    finally:
        container.remove(force=True)


def test_the_build_went_through_buildkit(built: dict[str, Any]) -> None:
    stderr = built["stderr"]
    assert f"builder: BuildKit built into {built['cli']}" in stderr or (
        f"builder: BuildKit through {built['cli']}" in stderr
    ), stderr[-3000:]
    assert "[internal] load build definition" in stderr  # BuildKit's own progress lines
    assert "Step 1/" not in stderr  # the legacy builder's
    assert "Traceback" not in stderr


def test_buildkit_and_legacy_make_the_same_image(
    built: dict[str, Any], docker_client: docker.DockerClient
) -> None:
    legacy, through_buildkit = (
        config(docker_client, KIT_OLDER),
        config(docker_client, KIT_OLDER_BUILDKIT),
    )
    assert legacy["Labels"], "the kit's image carries its labels"
    assert through_buildkit == legacy
    assert (
        docker_client.images.get(KIT_OLDER).id != docker_client.images.get(KIT_OLDER_BUILDKIT).id
    )  # two builds, not one image under two names


def test_the_guard_gives_the_same_verdict_on_both(
    built: dict[str, Any], docker_client: docker.DockerClient
) -> None:
    legacy = guard(docker_client, KIT_OLDER)
    through_buildkit = guard(docker_client, KIT_OLDER_BUILDKIT)
    assert legacy[0] == 0, legacy[1]
    assert through_buildkit == legacy
