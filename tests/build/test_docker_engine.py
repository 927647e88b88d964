"""Docker engine tests of the build plumbing (the real-image suite lives in tests/containers/)."""

from __future__ import annotations

import io
import shutil
import tarfile
from pathlib import Path
from typing import Any

import pytest

from tfgpu_kit.image import docker_engine
from tfgpu_kit.shared.errors import DockerError

pytestmark = pytest.mark.docker

EMPTY_BASE = "tfgpu-test.local/empty:1"


@pytest.fixture(scope="module")
def client() -> Any:
    c = docker_engine.client()
    if docker_engine.local_image(c, EMPTY_BASE) is None:
        data = io.BytesIO()
        with tarfile.open(fileobj=data, mode="w") as tar:
            info = tarfile.TarInfo("marker")
            info.size = 2
            tar.addfile(info, io.BytesIO(b"ok"))
        repo, tag = docker_engine.split_ref(EMPTY_BASE)
        c.api.import_image_from_data(data.getvalue(), repository=repo, tag=tag)
    return c


def test_failed_step_is_reported_with_its_step(client: Any, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {EMPTY_BASE}\nLABEL io.tfgpu.test=1\nRUN definitely-not-a-command\n"
    )
    with pytest.raises(DockerError) as info:
        docker_engine.build(client, tmp_path, label="t", tag="tfgpu-test.local/fail:1",
                          buildargs={}, no_cache=True)  # fmt: skip
    message = str(info.value)
    assert "building t failed at Step 3/3 : RUN definitely-not-a-command" in message
    assert "error:" in message
    assert info.value.hint is None  # not a base-image problem


def test_missing_base_names_the_way_out(client: Any, tmp_path: Path) -> None:
    # what a newcomer without registry access meets on `./kit build`
    (tmp_path / "Dockerfile").write_text("FROM tfgpu-no-such-registry.invalid/none:1\n")
    with pytest.raises(DockerError) as info:
        docker_engine.build(client, tmp_path, label="t", tag="tfgpu-test.local/nobase:1",
                          buildargs={}, no_cache=True)  # fmt: skip
    assert "failed at Step 1/1 : FROM tfgpu-no-such-registry.invalid/none:1" in str(info.value)
    assert info.value.hint is not None and "--base-registry" in info.value.hint


def test_build_uses_local_base_and_tags(client: Any, tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(
        f"FROM {EMPTY_BASE}\nARG X=unset\nLABEL io.tfgpu.x=${{X}}\n"
    )
    image_id = docker_engine.build(client, tmp_path, label="t", tag="tfgpu-test.local/ok:1",
                                 buildargs={"X": "42"}, no_cache=False)  # fmt: skip
    docker_engine.tag(client, image_id, "tfgpu-test.local/ok:other")
    image = client.images.get("tfgpu-test.local/ok:other")
    assert image.labels["io.tfgpu.x"] == "42"
    assert docker_engine.repo_digest(image) is None  # local-only: base.digest stays "unknown"
    client.images.remove("tfgpu-test.local/ok:other")


def test_the_context_can_go_once_the_engine_holds_it(client: Any, tmp_path: Path) -> None:
    """`sent` runs after the upload and before the steps: the context is removed there (as a
    temporary one is) and a step still copies from it, from the engine's own copy."""
    context = tmp_path / "context"
    context.mkdir()
    (context / "Dockerfile").write_text(f"FROM {EMPTY_BASE}\nCOPY payload /payload\n")
    (context / "payload").write_text("still here")
    calls: list[bool] = []

    def sent() -> None:
        calls.append(context.exists())
        shutil.rmtree(context)

    image_id = docker_engine.build(client, context, label="t", tag="tfgpu-test.local/sent:1",
                                   buildargs={}, no_cache=True, sent=sent)  # fmt: skip
    try:
        assert calls == [True] and not context.exists()
        exported = b"".join(client.api.export(client.containers.create(image_id, "x").id))
        with tarfile.open(fileobj=io.BytesIO(exported)) as tar:
            payload = tar.extractfile("payload")
            assert payload is not None and payload.read() == b"still here"
    finally:
        for container in client.containers.list(all=True, filters={"ancestor": image_id}):
            container.remove(force=True)
        client.images.remove(image_id, force=True)
