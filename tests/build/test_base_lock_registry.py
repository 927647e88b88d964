"""`build.py lock --bases` against a real registry: the distribution registry (Debian package
docker-registry) on 127.0.0.1, which the Docker engine treats as insecure (plain HTTP) by default.
A tiny image built here is pushed to it; the digest the lock records must be the one the push
gave the image (its RepoDigests), and the build's check must accept that image as the base."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests import local_registry
from tfgpu_kit.matrix.locks import base_lock

pytestmark = pytest.mark.docker


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from local_registry.serve(tmp_path_factory.mktemp("registry"))


def test_lock_bases_reads_the_digest_the_registry_serves(registry: str, tmp_path: Path) -> None:
    client = docker.from_env()
    (tmp_path / "Dockerfile").write_text("FROM scratch\nCOPY marker /marker\n")
    (tmp_path / "marker").write_text(f"tfgpu base lock test {time.time()}\n")
    ref = f"{registry}/tfgpu-test/base:1"
    image, _ = client.images.build(path=str(tmp_path), tag=ref, rm=True)
    try:
        for line in client.images.push(
            f"{registry}/tfgpu-test/base", tag="1", stream=True, decode=True
        ):
            assert "error" not in line, line
        pushed = client.images.get(ref).attrs["RepoDigests"]
        (expected,) = [d.split("@", 1)[1] for d in pushed if d.startswith(registry)]

        lock, failed = base_lock.refresh(client, [ref], base_lock.BaseLock())
        assert failed == []
        assert lock.bases[ref].digest == expected
        assert lock.bases[ref].source == f"registry {registry}, via the Docker engine"
        # a tag nobody pushed: recorded as unknown, reported as failed
        absent = f"{registry}/tfgpu-test/base:absent"
        lock, failed = base_lock.refresh(client, [ref, absent], lock)
        assert failed == [absent] and lock.bases[absent].digest is None
        assert lock.bases[ref].digest == expected
    finally:
        client.images.remove(image.id, force=True)
