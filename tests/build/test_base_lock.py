"""images/bases.lock.yaml: the official bases' digests, what the build labels with them, and
`build.py lock --bases` (against a stubbed Docker client: no registry is reachable here)."""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import docker.errors
import pytest

from tfgpu_kit.image import lock_refresh
from tfgpu_kit.matrix import catalog, spec
from tfgpu_kit.matrix.locks import base_lock
from tfgpu_kit.shared.errors import SpecError

SPEC = spec.load()
IMAGES = catalog.images(SPEC)
A = "sha256:" + "a" * 64
B = "sha256:" + "b" * 64
REF = "docker.io/tensorflow/tensorflow:2.21.0-gpu"


def _image(name: str = "2.21.0-gpu") -> catalog.Image:
    return next(i for i in IMAGES if i.name == name)


def _lock(**digests: str | None) -> base_lock.BaseLock:
    """Every official base unknown, but those given (keyed by image name)."""
    bases = {ref: base_lock.LockedBase() for ref in base_lock.refs(IMAGES)}
    for name, digest in digests.items():
        bases[base_lock.official_ref(_image(name))] = base_lock.LockedBase(digest=digest)
    return base_lock.BaseLock(bases=bases)


def test_the_committed_lock_names_every_official_base_and_how_to_refresh() -> None:
    lock = base_lock.load()
    assert base_lock.missing(IMAGES, lock) == []
    assert set(lock.bases) == set(base_lock.refs(IMAGES))
    assert REF in lock.bases
    header = base_lock.lock_path().read_text().split("bases:")[0]
    assert "digest: null" in header and "./kit lock --bases" in header


def test_unknown_digests_warn_once_and_label_unknown(caplog: pytest.LogCaptureFixture) -> None:
    images = [_image("2.21.0-gpu"), _image("2.21.0-gpu-jupyter"), _image("2.20.0-gpu")]
    with caplog.at_level(logging.WARNING):
        digests = base_lock.BaseDigests(_lock(), images, base_registry=None)
        assert [digests.digest(image, []) for image in images] == [None, None, None]
    (record,) = caplog.records
    assert "does not know the digest of" in record.getMessage()
    assert REF in record.getMessage() and "./kit lock --bases" in record.getMessage()


def test_a_known_digest_is_the_label_and_a_different_local_base_is_refused(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING):
        digests = base_lock.BaseDigests(_lock(**{"2.21.0-gpu": A}), [_image()], base_registry=None)
    assert caplog.records == []
    # base not local (yet), or bake: the Dockerfile's FROM names the base by A, the engine pulls A
    assert digests.digest(_image(), None) == A
    assert digests.digest(_image(), [f"tensorflow/tensorflow@{A}"]) == A
    assert digests.pin() is None  # the Dockerfile's own BASE_PIN (@A) applies
    with pytest.raises(SpecError) as info:
        digests.digest(_image(), [f"tensorflow/tensorflow@{B}"])
    assert f"the local base {REF} is {B}, but bases.lock.yaml locks {A}" in info.value.message
    assert info.value.hint is not None and "lock --bases" in info.value.hint


def test_a_base_the_lock_lacks_stops_the_build() -> None:
    lock = _lock()
    del lock.bases[REF]
    with pytest.raises(SpecError) as info:
        base_lock.BaseDigests(lock, [_image()], base_registry=None)
    assert info.value.message == f"bases.lock.yaml has no entry for {REF}"
    assert info.value.hint is not None and "./kit lock --bases" in info.value.hint


def test_a_mirror_is_exempt_with_one_warning(caplog: pytest.LogCaptureFixture) -> None:
    images = [_image("2.21.0-gpu"), _image("2.20.0-gpu")]
    with caplog.at_level(logging.WARNING):
        digests = base_lock.BaseDigests(
            base_lock.BaseLock(), images, base_registry="tfgpu-standin.local/"
        )
        assert digests.digest(images[0], [f"tfgpu-standin.local/tensorflow/tensorflow@{B}"]) == B
        assert digests.digest(images[1], []) is None
    (record,) = caplog.records
    assert "tfgpu-standin.local (--base-registry): not checked against bases.lock.yaml" in (
        record.getMessage()
    )


class StubImages:
    """`client.images` of the Docker SDK: get_registry_data answers from a table."""

    def __init__(self, answers: dict[str, str]) -> None:
        self.answers = answers
        self.asked: list[str] = []

    def get_registry_data(self, ref: str) -> Any:
        self.asked.append(ref)
        if ref not in self.answers:
            raise docker.errors.APIError("manifest unknown", explanation="manifest unknown")
        return SimpleNamespace(id=self.answers[ref])


def test_refresh_records_each_digest_and_where_it_came_from(tmp_path: Path) -> None:
    other = "docker.io/tensorflow/tensorflow:2.20.0-gpu"
    client = SimpleNamespace(images=StubImages({REF: A}))
    new, failed = base_lock.refresh(client, [REF, other], base_lock.BaseLock())
    assert client.images.asked == [REF, other]
    assert failed == [other]
    assert new.bases[REF].digest == A
    assert new.bases[REF].source == "registry docker.io, via the Docker engine"
    assert new.bases[REF].checked is not None
    assert new.bases[other] == base_lock.LockedBase()  # unreadable: recorded as unknown
    base_lock.write(new, tmp_path)
    assert base_lock.load(tmp_path) == new
    # a later failure keeps the digest read before
    again, failed = base_lock.refresh(SimpleNamespace(images=StubImages({})), [REF], new)
    assert failed == [REF] and again.bases[REF].digest == A


def test_the_lock_refuses_a_malformed_digest(tmp_path: Path) -> None:
    (tmp_path / "bases.lock.yaml").write_text(f"bases:\n  {REF}:\n    digest: sha256:abc\n")
    with pytest.raises(SpecError, match="digest"):
        base_lock.load(tmp_path)


def test_lock_check_names_what_a_lock_lacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`build.py lock --check` (CI): exit 0 with the committed locks, 1 naming a missing base."""
    assert lock_refresh.check(SPEC) == 0
    trimmed = _lock()
    del trimmed.bases[REF]
    base_lock.write(trimmed, tmp_path)
    monkeypatch.setattr(
        base_lock.FILE, "path", lambda directory=None: tmp_path / base_lock.LOCK_NAME
    )
    assert lock_refresh.check(SPEC) == 1
    assert f"bases.lock.yaml: {REF} has no entry (run `build.py lock --bases`)" in caplog.text


def test_a_local_base_without_a_registry_digest_is_refused_when_the_lock_knows_one() -> None:
    """`digest(image, [])` must not return the locked digest for a local base that has no
    RepoDigest (built or `docker load`ed here): the label would claim a digest nobody checked."""
    digests = base_lock.BaseDigests(_lock(**{"2.21.0-gpu": A}), [_image()], base_registry=None)
    with pytest.raises(SpecError) as info:
        digests.digest(_image(), [])
    assert f"the local base {REF} has no registry digest" in info.value.message
    assert info.value.hint is not None and f"docker pull {REF}@{A}" in info.value.hint
    # unknown in the lock: nothing to refuse, the label says unknown
    unknown = base_lock.BaseDigests(_lock(), [_image()], base_registry=None)
    assert unknown.digest(_image(), []) is None and unknown.digest(_image(), None) is None


def test_a_known_digest_pins_the_from_lines_and_a_mirror_unpins_them() -> None:
    from tfgpu_kit.image import render
    from tfgpu_kit.matrix import spec as specs

    spec = specs.load()
    image = _image()
    pinned = render.render_image(spec, image, lock=_lock(**{"2.21.0-gpu": A}))
    plain = render.render_image(spec, image, lock=_lock())
    assert f"ARG BASE_PIN=@{A}\n" in pinned and "BASE_PIN" not in plain
    froms = [line for line in pinned.splitlines() if line.startswith("FROM ")]
    assert froms == [
        f"FROM ${{BASE_REGISTRY}}/{image.base_ref}${{BASE_PIN}} AS tfgpu-runtime",
        f"FROM ${{BASE_REGISTRY}}/{image.base_ref}${{BASE_PIN}}",
    ]
    # the committed Dockerfiles follow the committed lock (all null today: no pin)
    assert (
        render.render_image(spec, image)
        == (render.DOCKERFILES_DIR / image.name / "Dockerfile").read_text()
    )
    mirror = base_lock.BaseDigests(
        _lock(**{"2.21.0-gpu": A}), [image], base_registry="mirror.local"
    )
    assert mirror.pin() == ""  # FROM by tag: the lock does not vouch for a mirror's copy


def test_bake_unpins_a_mirrors_bases_and_keeps_the_pin_otherwise(tmp_path: Path) -> None:
    from tfgpu_kit.image import bake

    image = _image()
    mirrored = bake.bake_file(
        [image],
        contexts=tmp_path,
        registry=None,
        buildargs={},
        base_registry="m.local",
        base_pin="",
    )
    official = bake.bake_file(
        [image], contexts=tmp_path, registry=None, buildargs={}, base_registry=None, base_pin=None
    )
    assert mirrored["target"]["2_21_0-gpu"]["args"]["BASE_PIN"] == ""
    assert "BASE_PIN" not in official["target"]["2_21_0-gpu"]["args"]
