"""`build.py build` end to end on the stand-in base, as users run it: the builds
`./kit test-images` ran before the tests (their output kept, tests/kit_images.py), checked
here: steps streamed to stderr, the final rows on stdout, within the size budget."""

from __future__ import annotations

import json

import docker
import pytest

from tests.kit_images import KIT_OLDER, KIT_OLDER_LEGACY, LEGACY_REGISTRY, take, take_record
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.locks import wheel_locks

# the kit's own layers' budget per image (images/images.yaml)
KIT_MIB = specs.load().images.variants["gpu"].max_added_mib

pytestmark = pytest.mark.docker


def test_the_json_rows_of_a_build(
    docker_client: docker.DockerClient, request: pytest.FixtureRequest
) -> None:
    """`build 2.17.0-gpu --json`: the image's row on stdout, the steps on stderr; 2.17's base is
    enough, so it adds only the kit and 2.17's tf-keras."""
    ref = take(request, "older")
    record = take_record("older")
    assert record.returncode == 0, record.stderr[-3000:]
    assert "Traceback" not in record.stderr
    assert "2.17.0-gpu" in record.stderr  # the build's steps, named by image
    rows = json.loads(record.stdout)
    assert [row["image"] for row in rows] == ["2.17.0-gpu"]
    row = rows[0]
    assert row["tags"][0] == KIT_OLDER
    assert row["tags"][-1] == "tfgpu/tensorflow:2.17.0-gpu-py311-cu123"
    # the kit's layers and 2.17's tf-keras (its tf.keras is Keras 3), by the lock
    keras_mib = wheel_locks.load().wheels["tf-keras==2.17.0"].unpacked_bytes / 2**20
    assert row["tf_keras_mib"] == pytest.approx(keras_mib, abs=0.05)
    assert row["budget_mib"] == pytest.approx(KIT_MIB + keras_mib, abs=0.01)
    assert row["added_mib"] is not None and keras_mib < row["added_mib"] <= row["budget_mib"]
    assert row["cuda_source"] == "base" and row["cuda_wheels"] == []
    assert row["size_mib"] > 0 and row["seconds"] >= 0
    assert docker_client.images.get(ref).id == row["id"]


def test_the_peoples_table_of_a_build(request: pytest.FixtureRequest) -> None:
    """The same image without --json (through the legacy builder, under its own registry name):
    the legacy builder's steps on stderr, a table on stdout."""
    take(request, "older-legacy")
    record = take_record("older-legacy")
    assert record.returncode == 0, record.stderr[-3000:]
    assert "2.17.0-gpu Step 1/" in record.stderr
    assert "Traceback" not in record.stderr
    assert "built" in record.stdout and "added to base" in record.stdout
    assert f"{LEGACY_REGISTRY}/tfgpu/tensorflow:2.17-gpu" in record.stdout
    assert KIT_OLDER_LEGACY.startswith(LEGACY_REGISTRY)
    assert "base: CUDA 12.3.1, cuDNN 8.9.6" in record.stdout
