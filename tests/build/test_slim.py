"""The slim variant: its spec rules, its images, what it needs of the driver, its
Dockerfile and its build context. The image itself is proved in tests/containers/test_slim.py."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.build.test_cli import run
from tests.build.test_context import EXTRAS, FakeIndex, _image_lock, _wheel_name
from tests.build.test_spec import copy_spec, edit
from tfgpu_kit.image import context, render
from tfgpu_kit.image.verify import images as verify_images
from tfgpu_kit.image.verify.checks import Observed
from tfgpu_kit.matrix import catalog, cudagap, spec
from tfgpu_kit.matrix.locks import wheel_locks
from tfgpu_kit.shared.errors import EXIT_USAGE, SpecError

SPEC = spec.load()
IMAGES = {i.name: i for i in catalog.images(SPEC)}
SLIM = IMAGES["2.21.0-gpu-slim"]


def _slim_versions(data: dict[str, Any]) -> list[str]:
    versions: list[str] = data["variants"]["gpu-slim"]["versions"]
    return versions


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (lambda d: d.pop("slim"),
         "variants.gpu-slim.base: slim, but bases.yaml has no `slim:` base"),
        (lambda d: d["slim"].__setitem__("python", "3.13"),
         "TensorFlow 2.15.0 does not support the slim base's Python 3.13 (it supports 3.9–3.11)"),
    ],
)  # fmt: skip
def test_a_slim_base_that_does_not_serve_the_variant_is_named_by_the_variants_key(
    tmp_path: Path, change: object, expected: str
) -> None:
    """A change to bases.yaml that leaves the slim variant without a base it can use: the error
    names images.yaml, where the variant and its versions are."""
    directory = copy_spec(tmp_path)
    edit(directory / "bases.yaml", change)
    with pytest.raises(SpecError) as info:
        spec.load(directory)
    assert f"{directory / 'images.yaml'}: invalid spec" in str(info.value)
    assert expected in str(info.value)


def test_a_version_whose_base_is_enough_is_refused(tmp_path: Path) -> None:
    """2.17's official base runs its TensorFlow: a slim image of it would be no repair."""
    directory = copy_spec(tmp_path)
    edit(directory / "images.yaml", lambda d: _slim_versions(d).append("2.17.0"))
    with pytest.raises(SpecError, match=r"versions lists 2\.17\.0, whose official base provides"):
        catalog.images(spec.load(directory))


def test_the_slim_image_always_adds_the_wheels_and_needs_no_brand() -> None:
    """No CUDA in the base: the gap is every library, cuda_source cannot change it, and without
    a cuda-compat package the image's NVIDIA_REQUIRE_CUDA has no brand= alternatives."""
    gap = cudagap.assess(SPEC, "2.21.0", override=spec.CudaSource.BASE, slim=True)
    assert gap.source is spec.CudaSource.WHEELS and gap.wheels == SLIM.gap.wheels
    assert [c.base_has for c in gap.components] == [None, None]
    assert gap.describe().startswith("base has no CUDA of its own: the image adds 12 NVIDIA wheels")
    assert gap.as_json()["components"][0]["base_has"] is None  # type: ignore[index]
    req = cudagap.requirements(SPEC, "2.15.0", slim=True)
    assert req.require_cuda == "cuda>=12.0,driver>=525.60.13"
    # the official 2.15 base's cuda-compat-11-8 cannot serve CUDA 12 either, but 2.21's own
    # official image keeps its base's brands for CUDA 12.3: the slim one has none to keep
    assert (req.cuda, req.cudnn) == (IMAGES["2.15.0-gpu"].req.cuda, IMAGES["2.15.0-gpu"].req.cudnn)  # type: ignore[union-attr]


def test_the_slim_dockerfile() -> None:
    text = render.render_image(SPEC, SLIM)
    assert "FROM ${BASE_REGISTRY}/library/python:3.11-slim-bookworm AS tfgpu-runtime\n" in text
    assert 'ENV NVIDIA_VISIBLE_DEVICES="all" \\\n' in text
    assert 'NVIDIA_DRIVER_CAPABILITIES="compute,utility"' in text
    assert 'LD_LIBRARY_PATH="/usr/local/nvidia/lib:/usr/local/nvidia/lib64"' in text
    assert 'NVIDIA_REQUIRE_CUDA="cuda>=12.0,driver>=525.60.13"\n' in text  # no brand=…
    # all of TensorFlow's byte code, as pip compiles it in the official bases
    assert "-name '*-packages' -prune" in text and "compileall -q -j 0" in text
    assert 'io.tfgpu.base.cuda="none"' in text and 'io.tfgpu.variant="gpu-slim"' in text
    official = render.render_image(SPEC, IMAGES["2.21.0-gpu"])
    assert "NVIDIA_VISIBLE_DEVICES" not in official and "-name '*-packages' -prune" not in official


def test_the_committed_lock_holds_each_slim_set_with_its_sizes() -> None:
    """TensorFlow and its dependencies by version, file, sha256 and unpacked size: the size of
    most of a slim image, known before it is built."""
    lock = wheel_locks.load_images()
    for image in (i for i in IMAGES.values() if i.slim):
        packages = wheel_locks.image_packages(SPEC.images.runtime_extras, image.pip)
        locked = wheel_locks.wheel_set(lock, image.base_python, packages, image.name)
        assert f"tensorflow=={image.tensorflow}" in locked.wheels
        assert all(entry.unpacked_bytes for entry in locked.wheels.values()), image.name
        assert sum(e.unpacked_bytes or 0 for e in locked.wheels.values()) > 1 << 30


@pytest.mark.parametrize("pin", ["certifi==2026.10.19.post1", "wheel==0.45.1", "a-b==1.0rc1"])
def test_a_locked_set_takes_any_pep440_version(pin: str) -> None:
    wheel_locks.WheelSet(packages=["x"], wheels={pin: {"file": "x.whl", "sha256": "0" * 64}})


@pytest.mark.parametrize("pin", ["certifi", "Certifi==1.0", "x==1.0 ; os", "x==not a version"])
def test_a_locked_set_refuses_what_is_no_exact_pin(pin: str) -> None:
    with pytest.raises(ValueError, match="pinned exactly"):
        wheel_locks.WheelSet(packages=["x"], wheels={pin: {"file": "x.whl", "sha256": "0" * 64}})


def test_the_slim_context_counts_tensorflow_in_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """TensorFlow's set is fetched with the wide platforms (its 2.21 wheel is manylinux_2_27)
    and its locked unpacked size is the image's to add; the CUDA wheels keep theirs."""
    assert SLIM.req is not None
    image = catalog.with_requirements(SPEC, SLIM, dataclasses.replace(SLIM.req, tf_keras=None))
    pins = ["nvidia-ml-py==13.615.71", "prometheus-client==0.26.0", "tensorflow==2.21.0"]
    images_lock = _image_lock(sorted(image.pip + EXTRAS), pins)
    sized = {
        pin: entry.model_copy(update={"unpacked_bytes": 1000})
        for pin, entry in images_lock.pythons["3.11"].sets[0].wheels.items()
    }
    images_lock.pythons["3.11"].sets[0].wheels.update(sized)
    cuda: dict[str, wheel_locks.LockedWheel] = {}
    for pin in image.gap.wheels:
        file = tmp_path / _wheel_name(pin)
        file.write_bytes(pin.encode())
        cuda[pin] = wheel_locks.describe(file, 10)
    index = FakeIndex()
    monkeypatch.setattr(context, "download", index)
    runtime = tmp_path / "tfgpu-0.1.0-py3-none-any.whl"
    runtime.write_bytes(b"runtime")
    ctx = context.assemble(
        image,
        "FROM x\n",
        tmp_path / "ctx",
        runtime_wheel=runtime,
        runtime_extras=EXTRAS,
        lock=wheel_locks.Lock(wheels=cuda),
        images_lock=images_lock,
    )
    assert ctx.tensorflow_bytes == 1000 * len(pins)
    assert ctx.cuda_wheels_bytes == 10 * len(image.gap.wheels)
    assert index.platforms["tensorflow==2.21.0"] == context.IMAGE_WHEEL_PLATFORMS
    assert index.platforms[image.gap.wheels[0]] == context.WHEEL_PLATFORMS
    assert "manylinux_2_27_x86_64" in context.IMAGE_WHEEL_PLATFORMS
    line = f"tensorflow==2.21.0 --hash=sha256:{hashlib.sha256(b'tensorflow==2.21.0').hexdigest()}"
    assert line in (ctx.path / "wheels" / "requirements.txt").read_text().splitlines()


def test_dry_run_shows_what_each_image_adds_by_layer() -> None:
    """From the locks, before anything is downloaded: TensorFlow (slim), CUDA wheels, tf-keras
    and the kit's budget; the table says the same in one cell."""
    result = run("build", "--dry-run", "--json", "2.21.0")
    assert result.returncode == 0, result.stderr
    rows = {r["image"]: r["adds_mib"] for r in json.loads(result.stdout)}
    slim, gpu = rows["2.21.0-gpu-slim"], rows["2.21.0-gpu"]
    assert slim["tensorflow"] > 1024 and gpu["tensorflow"] == 0
    assert slim["cuda_wheels"] == gpu["cuda_wheels"] > 2048
    assert slim["tf_keras"] == gpu["tf_keras"] > 0
    assert (slim["kit_at_most"], gpu["kit_at_most"]) == (120, 3)
    parts = slim["tensorflow"] + slim["cuda_wheels"] + slim["tf_keras"] + slim["kit_at_most"]
    assert slim["at_most"] == pytest.approx(parts, abs=0.2)
    table = run("build", "--dry-run", "2.21.0-gpu-slim")
    assert "TensorFlow 1962 + CUDA wheels 2854 +" in " ".join(table.stdout.split())


def test_cuda_source_is_refused_for_a_slim_image() -> None:
    result = run("build", "--dry-run", "2.21.0-gpu-slim", "--cuda-source", "base")
    assert result.returncode == EXIT_USAGE, result.stdout
    assert "--cuda-source base does not apply to 2.21.0-gpu-slim" in " ".join(result.stderr.split())


class _Images:
    """The Docker SDK's images collection for _size_budget (which looks up only the base): sizes
    by reference."""

    def __init__(self, sizes: dict[str, int]) -> None:
        self.sizes = sizes

    def get(self, ref: str) -> Any:
        import docker.errors

        if ref not in self.sizes:
            raise docker.errors.ImageNotFound(ref)
        return SimpleNamespace(attrs={"Size": self.sizes[ref]})


@pytest.mark.parametrize(("extra_mib", "ok"), [(100, True), (130, False)])
def test_verify_checks_what_the_image_adds_against_its_budget(extra_mib: int, ok: bool) -> None:
    cuda, images = wheel_locks.load(), wheel_locks.load_images()
    adds, kit = catalog.locked_additions(SPEC, SLIM, cuda, images)
    base = "tfgpu-standin.local/library/python:3.11-slim-bookworm"
    labels = {"org.opencontainers.image.base.name": base}
    size = 170 * 2**20 + adds.total + extra_mib * 2**20
    client = SimpleNamespace(images=_Images({base: 170 * 2**20}))
    observed = Observed(labels, {}, None, size=size)
    (check,) = verify_images._size_budget(SPEC, client, "img", observed, SLIM, cuda, images)
    assert (check.name, check.ok, kit) == ("size budget", ok, 120)
    assert check.detail.startswith(f"adds {adds.total / 2**20 + extra_mib:.1f} MiB to {base}")


def test_verify_says_when_the_base_is_not_there_to_measure(
    caplog: pytest.LogCaptureFixture,
) -> None:
    labels = {"org.opencontainers.image.base.name": "docker.io/library/python:3.11-slim-bookworm"}
    client = SimpleNamespace(images=_Images({}))
    cuda, images = wheel_locks.load(), wheel_locks.load_images()
    observed = Observed(labels, {}, None, size=1)
    assert verify_images._size_budget(SPEC, client, "img", observed, SLIM, cuda, images) == []
    assert "img: size budget not checked: its base docker.io/library/python" in caplog.text
