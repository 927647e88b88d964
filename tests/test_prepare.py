"""`./kit test-images` keeps an image whose inputs have not changed (tests/prepare.py)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import docker
import pytest

from tests import kit_images, prepare
from tests.kit_images import BY_KEY, BuildRecord


def _checkout(root: Path) -> Path:
    for name in prepare.INPUTS:
        if name != "build.py":
            (root / name).mkdir(parents=True)
    (root / "build.py").write_text("print('kit')\n")
    (root / "tfgpu_kit" / "cli.py").write_text("A = 1\n")
    (root / "entrypoint" / "src").mkdir()
    (root / "entrypoint" / "src" / "hook.py").write_text("B = 2\n")
    (root / "tests").mkdir()
    (root / "tests" / "test_x.py").write_text("def test(): pass\n")
    (root / "docs").mkdir()
    (root / "docs" / "x.md").write_text("# x\n")
    return root


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "tfgpu_kit" / "cli.py").write_text("A = 2\n"),
        lambda r: (r / "entrypoint" / "src" / "new.py").write_text(""),
        lambda r: (r / "tfgpu_kit" / "cli.py").rename(r / "tfgpu_kit" / "cli2.py"),
        lambda r: (r / "build.py").write_text("print('kit 2')\n"),
        lambda r: (r / "images" / "images.yaml").write_text("a: 1\n"),
        lambda r: (r / "dockerfiles" / "Dockerfile").write_text("FROM x\n"),
        lambda r: (r / "templates" / "Dockerfile.j2").write_text("FROM {{ x }}\n"),
    ],
    ids=["edit", "add", "rename", "build.py", "images", "dockerfiles", "templates"],
)
def test_a_change_to_an_input_changes_the_digest(tmp_path: Path, change: Any) -> None:
    root = _checkout(tmp_path)
    before = prepare.sources_digest(root)
    change(root)
    assert prepare.sources_digest(root) != before


@pytest.mark.parametrize(
    "change",
    [
        lambda r: (r / "tests" / "test_x.py").write_text("def test(): assert 0\n"),
        lambda r: (r / "docs" / "x.md").write_text("# y\n"),
        lambda r: (r / "tfgpu_kit" / "__pycache__").mkdir(),
        lambda r: (r / "entrypoint" / "src" / "hook.cpython-311.pyc").write_bytes(b"\0"),
        lambda r: (r / "entrypoint" / "tfgpu.egg-info").mkdir(),
    ],
    ids=["tests", "docs", "pycache", "pyc", "egg-info"],
)
def test_what_is_not_an_input_leaves_the_digest(tmp_path: Path, change: Any) -> None:
    root = _checkout(tmp_path)
    before = prepare.sources_digest(root)
    change(root)
    if (root / "tfgpu_kit" / "__pycache__").is_dir():
        (root / "tfgpu_kit" / "__pycache__" / "cli.cpython-311.pyc").write_bytes(b"\0")
    if (root / "entrypoint" / "tfgpu.egg-info").is_dir():
        (root / "entrypoint" / "tfgpu.egg-info" / "PKG-INFO").write_text("x")
    assert prepare.sources_digest(root) == before


def test_the_digest_does_not_depend_on_where_the_checkout_is(tmp_path: Path) -> None:
    assert prepare.sources_digest(_checkout(tmp_path / "a")) == prepare.sources_digest(
        _checkout(tmp_path / "b")
    )


def test_the_key_changes_with_each_input() -> None:
    base = (["2.21.0-gpu", "--json"], {"s/gpu:1": "k1"}, "src", "20.10")
    key = prepare.inputs_key(*base)
    assert key == prepare.inputs_key(*base)
    assert key != prepare.inputs_key(["2.21.0-gpu"], *base[1:])
    assert key != prepare.inputs_key(base[0], {"s/gpu:1": "k2"}, *base[2:])
    assert key != prepare.inputs_key(*base[:2], "src2", base[3])
    assert key != prepare.inputs_key(*base[:3], "28.2")


def _record(inputs: str = "k", image_id: str = "sha256:a", rc: int = 0) -> BuildRecord:
    return BuildRecord(["build.py"], rc, "", "", inputs, image_id)


@pytest.mark.parametrize(
    ("record", "present", "expected"),
    [
        (_record(), "sha256:a", True),
        (None, "sha256:a", False),  # never built here
        (_record(inputs="other"), "sha256:a", False),  # built from other inputs
        (_record(), "sha256:b", False),  # the tag now names another image
        (_record(), None, False),  # the image is gone
        (_record(rc=1), "sha256:a", False),  # its build failed
        (_record(image_id=""), "", False),  # a record written before ids were kept
    ],
    ids=["same", "no-record", "inputs", "retagged", "gone", "failed", "no-id"],
)
def test_an_image_is_kept_only_when_it_is_what_its_inputs_made(
    record: BuildRecord | None, present: str | None, expected: bool
) -> None:
    assert prepare.kept(record, "k", present) is expected


class _Images:
    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    def get(self, ref: str) -> Any:
        if ref not in self.ids:
            raise docker.errors.ImageNotFound(ref)
        return type("Image", (), {"id": self.ids[ref], "tags": [ref]})()


class _Client:
    def __init__(self, ids: dict[str, str]) -> None:
        self.images = _Images(ids)


def test_a_kept_image_is_not_built_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    image = BY_KEY["gpu"]
    monkeypatch.setattr(kit_images, "RECORDS", tmp_path)
    kit_images.write_record(image.key, _record(inputs="k", image_id="sha256:a"))

    def no_build(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError(f"built again: {args}")

    monkeypatch.setattr(subprocess, "run", no_build)
    client: Any = _Client({image.ref: "sha256:a"})
    assert prepare.build_image(client, image, {}, "k", rebuild=False)
    assert f"{image.ref}: kept, its inputs unchanged (key k)" in capsys.readouterr().out


@pytest.mark.parametrize("rebuild", [True, False], ids=["--rebuild", "inputs-changed"])
def test_an_image_is_built_when_asked_or_when_its_inputs_changed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rebuild: bool
) -> None:
    image = BY_KEY["gpu"]
    monkeypatch.setattr(kit_images, "RECORDS", tmp_path)
    kit_images.write_record(image.key, _record(inputs="k", image_id="sha256:a"))
    client: Any = _Client({image.ref: "sha256:a"})
    ran: list[list[str]] = []

    def build(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        ran.append(command)
        client.images.ids[image.ref] = "sha256:new"
        return subprocess.CompletedProcess(command, 0, "{}", "")

    monkeypatch.setattr(subprocess, "run", build)
    monkeypatch.setattr(prepare, "drop_replaced", lambda *a: "")
    monkeypatch.setattr(prepare, "drop_build_cache", lambda c: "cache dropped")
    inputs = "k" if rebuild else "k2"
    assert prepare.build_image(client, image, {}, inputs, rebuild=rebuild)
    assert len(ran) == 1 and ran[0][2:] == ["build", *image.build, "--json"]
    record = kit_images.read_record(image.key)
    assert record is not None and (record.inputs, record.image_id) == (inputs, "sha256:new")
