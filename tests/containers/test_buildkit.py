"""`build.py build` through BuildKit against the legacy builder, on the same image.

`./kit test-images` builds the kit's 2.17.0-gpu image through BuildKit, with the Docker CLI
of PATH that has it (.ci/run installs Debian's docker.io, whose 20.10 CLI carries BuildKit's
client), and again with `--builder legacy` under its own registry name; it keeps both builds'
output. What matters to users must be the same: labels (but the build time), environment,
entrypoint, command, user, working folder, ports, and the guard's verdict (`tfgpu check --build`,
which teams run after their own layers). The builder's choice and its errors, without an engine:
tests/build/test_buildkit_choice.py."""

from __future__ import annotations

import re
from typing import Any

import docker
import pytest

from tests.ci_policy import ci_or_skip
from tests.kit_images import BuildRecord, buildkit_cli_on_path, take, take_record

pytestmark = pytest.mark.docker

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


@pytest.fixture(scope="module")
def built(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The two builds of 2.17.0-gpu: their images and their kept output."""
    if buildkit_cli_on_path() is None:
        ci_or_skip(
            "no `docker` CLI on PATH builds through BuildKit (one before Docker 23, or one with"
            " the buildx plugin)",
            in_ci_because=": .ci/run installs Debian's docker.io, whose CLI has BuildKit built in",
        )
    return {
        "buildkit": take(request, "older"),
        "legacy": take(request, "older-legacy"),
        "buildkit_record": take_record("older"),
        "legacy_record": take_record("older-legacy"),
    }


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
    record: BuildRecord = built["buildkit_record"]
    stderr = record.stderr
    assert record.returncode == 0, stderr[-3000:]
    assert re.search(r"builder: BuildKit (built into|through) /\S*docker", stderr), stderr[-3000:]
    assert "[internal] load build definition" in stderr  # BuildKit's own progress lines
    assert "Step 1/" not in stderr  # the legacy builder's
    assert "Traceback" not in stderr


def test_the_legacy_build_went_through_the_legacy_builder(built: dict[str, Any]) -> None:
    record: BuildRecord = built["legacy_record"]
    assert record.returncode == 0, record.stderr[-3000:]
    assert "Step 1/" in record.stderr
    assert "[internal] load build definition" not in record.stderr


def test_buildkit_and_legacy_make_the_same_image(
    built: dict[str, Any], docker_client: docker.DockerClient
) -> None:
    legacy, through_buildkit = (
        config(docker_client, built["legacy"]),
        config(docker_client, built["buildkit"]),
    )
    assert legacy["Labels"], "the kit's image carries its labels"
    assert through_buildkit == legacy
    ids = {docker_client.images.get(built[key]).id for key in ("legacy", "buildkit")}
    assert len(ids) == 2  # two builds, not one image under two names


def test_the_guard_gives_the_same_verdict_on_both(
    built: dict[str, Any], docker_client: docker.DockerClient
) -> None:
    legacy = guard(docker_client, built["legacy"])
    through_buildkit = guard(docker_client, built["buildkit"])
    assert legacy[0] == 0, legacy[1]
    assert through_buildkit == legacy
