"""A local distribution registry for the tests: Debian's docker-registry package, on 127.0.0.1
(which the Docker engine treats as insecure, plain HTTP, by default), stopped when the tests
that use it end. Used by the base lock's test and by the publishing of a kit image that teams
build FROM (tests/gpu/test_derived_images.py)."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.ci_policy import ci_or_skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve(root: Path) -> Iterator[str]:
    """Run docker-registry with its storage under `root`; yields its address, host:port."""
    binary = shutil.which("docker-registry")
    if binary is None:
        ci_or_skip("docker-registry not installed (apt-get install docker-registry; .ci/run does)")
    port = _free_port()
    config = root / "config.yml"
    config.write_text(
        "version: 0.1\n"
        "log: {level: error}\n"
        f"storage: {{filesystem: {{rootdirectory: {root / 'data'}}}}}\n"
        f"http: {{addr: 127.0.0.1:{port}}}\n"
    )
    assert binary is not None
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
        # a pushed kit image is GBs of compressed layers: not left for pytest's kept temp folders
        shutil.rmtree(root / "data", ignore_errors=True)
