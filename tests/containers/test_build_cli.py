"""`build.py build` end to end on the stand-in base, as users run it (moved here from tests/build
so that it runs after the session's stand-in fixture: it must never skip in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest

from tests import engine_lock
from tests.base_standins import Result
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.locks import wheel_locks

# the kit's own layers' budget per image (images/images.yaml)
KIT_MIB = specs.load().images.variants["gpu"].max_added_mib

pytestmark = pytest.mark.docker

# 2.17.0: its base is enough, so the image adds only the kit (the 2.21 repair is built by the
# kit_images fixture and checked in test_image.py)
STANDIN = "tfgpu-standin.local/tensorflow/tensorflow:2.17.0-gpu"
E2E_REGISTRY = "tfgpu-test.local/e2e"


def test_build_command_end_to_end_on_the_standin(
    docker_client: docker.DockerClient, standins: list[Result]
) -> None:
    """`build.py build` as users run it: steps streamed to stderr, the final rows on stdout,
    within the size budget. Tags under its own registry name and removes them afterwards."""
    client = docker_client
    assert client.images.get(STANDIN)  # made by the session's stand-in fixture, never pulled
    root = Path(__file__).resolve().parents[2]
    # the legacy builder: its steps are the "Step N/M" lines asserted below
    command = [sys.executable, "build.py", "build", "2.17.0-gpu",
               "--base-registry", "tfgpu-standin.local", "--registry", E2E_REGISTRY,
               "--builder", "legacy"]  # fmt: skip
    env = {**os.environ, "NO_COLOR": "1"}
    try:
        with engine_lock.building():  # no prune by the other worker meanwhile
            result = subprocess.run([*command, "--json"], cwd=root, capture_output=True,
                                    text=True, env=env, timeout=900)  # fmt: skip
        assert result.returncode == 0, result.stderr[-3000:]
        assert "2.17.0-gpu Step 1/" in result.stderr
        assert "Traceback" not in result.stderr
        rows = json.loads(result.stdout)
        assert [row["image"] for row in rows] == ["2.17.0-gpu"]
        row = rows[0]
        assert row["tags"][0] == f"{E2E_REGISTRY}/tfgpu/tensorflow:2.17.0-gpu"
        assert row["tags"][-1] == f"{E2E_REGISTRY}/tfgpu/tensorflow:2.17.0-gpu-py311-cu123"
        # the kit's layers and 2.17's tf-keras (its tf.keras is Keras 3), by the lock
        keras_mib = wheel_locks.load().wheels["tf-keras==2.17.0"].unpacked_bytes / 2**20
        assert row["tf_keras_mib"] == pytest.approx(keras_mib, abs=0.05)
        assert row["budget_mib"] == pytest.approx(KIT_MIB + keras_mib, abs=0.01)
        assert row["added_mib"] is not None and keras_mib < row["added_mib"] <= row["budget_mib"]
        assert row["cuda_source"] == "base" and row["cuda_wheels"] == []
        assert row["size_mib"] > 0 and row["seconds"] >= 0
        assert client.images.get(row["tags"][0]).id == row["id"]
        # the people's version: the same image in a table on stdout (the build cache makes it quick)
        with engine_lock.building():
            table = subprocess.run(command, cwd=root, capture_output=True, text=True, env=env,
                                   timeout=900)  # fmt: skip
        assert table.returncode == 0, table.stderr[-3000:]
        assert "built" in table.stdout and "added to base" in table.stdout
        assert f"{E2E_REGISTRY}/tfgpu/tensorflow:2.17-gpu" in table.stdout
        assert "base: CUDA 12.3.1, cuDNN 8.9.6" in table.stdout
    finally:
        for image in client.images.list(name=f"{E2E_REGISTRY}/tfgpu/tensorflow"):
            for ref in image.tags:
                if ref.startswith(f"{E2E_REGISTRY}/"):
                    client.images.remove(ref)
