"""`build.py lock --bases` against a real registry: the distribution registry (Debian package
docker-registry) on 127.0.0.1, which the Docker engine treats as insecure (plain HTTP) by default.
A tiny image built here is pushed to it; the digest the lock records must be the one the push
gave the image (its RepoDigests), and the build's check must accept that image as the base."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from tests.ci_policy import ci_or_skip
from tfgpu_kit.locks import base_lock

pytestmark = pytest.mark.docker


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    binary = shutil.which("docker-registry")
    if binary is None:
        reason = "docker-registry not installed (apt-get install docker-registry; .ci/run does)"
        ci_or_skip(reason)
    root = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    process = subprocess.Popen(
        [binary, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    try:
        for _ in range(100):
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.1)
        else:
            pytest.fail(f"docker-registry did not listen on {port}", pytrace=False)
        yield f"127.0.0.1:{port}"
    finally:
        process.terminate()
        process.wait(timeout=30)


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
