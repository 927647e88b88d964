"""The Jetson (L4T, arm64) images of images/l4t.yaml: they render with the shared templates (the
committed files are the goldens), pass hadolint, ask the NVIDIA runtime for something its CSV mode
accepts, carry their platform in tags and bake targets, and are built only where arm64 can run."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests import nvidia_require_oracle
from tfgpu_kit.image import bake, docker_engine, render
from tfgpu_kit.matrix import catalog, nvidia_require, selectors, spec
from tfgpu_kit.matrix.catalog import Image
from tfgpu_kit.shared.errors import SpecError, UsageError

ROOT = Path(__file__).resolve().parents[2]
SPEC = spec.load()
IMAGES = catalog.jetson_images(SPEC)
HADOLINT = shutil.which("hadolint") or str(Path(sys.executable).parent / "hadolint")


def test_committed_l4t_dockerfiles_are_up_to_date() -> None:
    rendered = render.render_all(SPEC, catalog.every_image(SPEC))
    assert render.stale(rendered) == []
    jetson = [item.path.parent.parent for item in rendered if item.image.jetson]
    assert jetson and set(jetson) == {render.DOCKERFILES_DIR / "l4t"}


def test_a_leftover_l4t_dockerfile_is_named(tmp_path: Path) -> None:
    out = tmp_path / "dockerfiles"
    rendered = render.render_all(SPEC, IMAGES, out)
    render.write(rendered)
    (out / "l4t" / "9.9.9-l4t-r99.0.0-arm64").mkdir()
    (out / "l4t" / "9.9.9-l4t-r99.0.0-arm64" / "Dockerfile").write_text("FROM scratch\n")
    assert render.stale(rendered, out) == [
        "dockerfiles/l4t/9.9.9-l4t-r99.0.0-arm64/Dockerfile: no such image in images/l4t.yaml any"
        " more"
    ]


def test_the_spec_reads_l4t_yaml_and_the_catalog_lists_its_images_last() -> None:
    assert SPEC.jetson is not None and IMAGES
    every = catalog.every_image(SPEC)
    assert every == catalog.images(SPEC) + IMAGES
    assert all(i.platform == "linux/arm64" and i.variant_name == "l4t" for i in IMAGES)
    assert all(i.platform == "linux/amd64" and i.jetson is None for i in catalog.images(SPEC))
    # one record for both files: l4t.yaml's rows name their own partials and have no base lock
    assert all(i.partials == catalog.partials("l4t-", apt=False, jupyter=False) for i in IMAGES)
    assert not any(i.base_locked or i.in_all or i.budget_mib for i in IMAGES)
    # JetPack brings the CUDA: no NVIDIA wheels, no tf-keras (its TensorFlow 2.11 has Keras 2)
    assert all(i.cuda_wheels == () and i.tf_keras is None and i.pip == [] for i in IMAGES)


def test_a_folder_without_l4t_yaml_has_no_jetson_images(tmp_path: Path) -> None:
    for name in ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml"):
        shutil.copy(spec.IMAGES_DIR / name, tmp_path / name)
    loaded = spec.load(tmp_path)
    assert loaded.jetson is None and catalog.jetson_images(loaded) == []


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_hadolint_every_l4t_dockerfile(image: Image) -> None:
    path = render.dockerfile_path(render.DOCKERFILES_DIR, image)
    result = subprocess.run([HADOLINT, "--no-color", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_the_dockerfile_is_the_l4t_one(image: Image) -> None:
    assert image.jetson is not None
    text = render.dockerfile_path(render.DOCKERFILES_DIR, image).read_text()
    assert text == render.render_image(SPEC, image)
    assert f"FROM ${{BASE_REGISTRY}}/{image.base_ref}\n" in text
    assert "ARG BASE_REGISTRY=nvcr.io\n" in text
    assert f'NVIDIA_REQUIRE_CUDA="{image.jetson.require_cuda}"' in text
    assert 'io.tfgpu.platform="linux/arm64"' in text
    # nothing of the x86 images' CUDA gap: no NVIDIA wheels, no brand alternatives
    assert "nvidia/*/lib" not in text and "brand=" not in text


@pytest.mark.parametrize("image", IMAGES, ids=lambda i: i.name)
def test_require_cuda_passes_the_csv_mode_parser_and_a_jetpack_of_that_cuda(
    image: Image,
) -> None:
    assert image.jetson is not None
    require = image.jetson.require_cuda
    assert nvidia_require.go_parser_accepts(require)
    # the Jetson's CUDA driver reports the JetPack's CUDA: the container starts; an older one not
    same = nvidia_require_oracle.evaluate(require, cuda=image.jetson.cuda, driver="35.2.1")
    older = nvidia_require_oracle.evaluate(require, cuda="10.2", driver="32.7.1")
    assert same.ok and not older.ok


def test_a_require_cuda_the_csv_mode_refuses_is_a_spec_error(tmp_path: Path) -> None:
    text = (ROOT / "images" / "l4t.yaml").read_text()
    bad = text.replace('require_cuda: "cuda>=11.4"', 'require_cuda: "cuda>=11.04"')
    assert bad != text
    (tmp_path / "l4t.yaml").write_text(bad)
    with pytest.raises(SpecError) as caught:
        spec.load_jetson(tmp_path)
    assert "images.0.require_cuda" in str(caught.value) and "CSV" in str(caught.value)


def test_tags_name_the_l4t_release_and_the_platform() -> None:
    image = next(i for i in IMAGES if i.name == "2.11.0-l4t-r35.2.1-arm64")
    assert image.tags(registry="reg.example:5000/") == [
        "reg.example:5000/tfgpu/tensorflow:2.11.0-l4t-r35.2.1-arm64",
        "reg.example:5000/tfgpu/tensorflow:2.11-l4t-r35-arm64",
    ]


def test_selectors_pick_l4t_images_by_l4t_or_a_tag_only() -> None:
    every = catalog.every_image(SPEC)
    chosen = selectors.select(every, ["l4t", "2.21.0-gpu"])
    assert chosen == [*[i for i in every if i.name == "2.21.0-gpu"], *IMAGES]
    chosen = selectors.select(every, ["2.11-l4t-r35-arm64"])
    assert [i.name for i in chosen] == ["2.11.0-l4t-r35.2.1-arm64"]
    # `all`, versions, regexes and the default keep selecting images.yaml's images alone
    for wanted in (["all"], ["re:.*"], ["2.21.0"], []):
        assert not [i for i in selectors.select(every, wanted) if i.jetson], wanted
    with pytest.raises(UsageError, match=r"'2\.11\.0' matches no image"):
        selectors.select(every, ["2.11.0"])


def test_bake_targets_are_arm64_and_out_of_the_default_group(tmp_path: Path) -> None:
    x86 = catalog.images(SPEC)[:1]
    data = bake.bake_file(
        x86 + IMAGES,
        contexts=tmp_path,
        registry=None,
        base_registry=None,
        buildargs={"A": "1"},
        base_pin="",
    )
    target = data["target"]["2_11_0-l4t-r35_2_1-arm64"]
    assert target["platforms"] == ["linux/arm64"]
    assert target["args"] == {"A": "1", "BASE_REGISTRY": "nvcr.io"}  # no BASE_PIN: no base lock
    assert target["context"] == str(tmp_path / "2.11.0-l4t-r35.2.1-arm64")
    assert data["group"]["default"] == {"targets": [bake.target_name(x86[0].name)]}
    assert data["group"]["l4t"] == {"targets": ["2_11_0-l4t-r35_2_1-arm64"]}
    assert "platforms" not in data["target"][bake.target_name(x86[0].name)]


def test_bake_without_selectors_writes_the_l4t_group_too() -> None:
    result = subprocess.run(
        [sys.executable, "build.py", "bake"], cwd=ROOT, capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert list(data["group"])[-1] == "l4t"
    assert data["group"]["l4t"]["targets"] == ["2_11_0-l4t-r35_2_1-arm64"]
    assert "2_11_0-l4t-r35_2_1-arm64" not in data["group"]["default"]["targets"]


@pytest.mark.parametrize(
    "args", [["l4t", "--driver", "535.104.05"], ["l4t", "2.21.0-gpu", "--cuda-source", "base"]]
)
def test_driver_and_cuda_source_are_refused_for_images_without_matrix_requirements(
    args: list[str],
) -> None:
    """JetPack brings their CUDA: there is nothing of matrix.yaml to judge a driver by or change."""
    result = subprocess.run(
        [sys.executable, "build.py", "build", "--dry-run", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2, result.stderr
    assert f"{args[-2]} does not apply to 2.11.0-l4t-r35.2.1-arm64" in result.stderr


def test_one_call_can_build_images_of_both_files_each_for_its_platform() -> None:
    """One build path: a dry run of an x86 image and the L4T one together, each with its platform
    and whether this machine's engine can build it."""
    result = subprocess.run(
        [sys.executable, "build.py", "build", "--dry-run", "--json", "2.21.0-gpu", "l4t"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    rows = {row["image"]: row for row in json.loads(result.stdout)}
    assert rows["2.21.0-gpu"]["platform"] == "linux/amd64"
    assert rows["2.11.0-l4t-r35.2.1-arm64"]["platform"] == "linux/arm64"
    capability = docker_engine.arm64_capability(docker_engine.machine_arch())
    assert rows["2.11.0-l4t-r35.2.1-arm64"]["buildable"] is capability.can
    assert result.returncode == (0 if capability.can else 1), result.stderr


# --- where arm64 can be built --------------------------------------------------------------------


def test_an_arm64_engine_builds_natively(tmp_path: Path) -> None:
    assert docker_engine.arm64_capability("aarch64", tmp_path) == docker_engine.Capability(
        True, "native"
    )


def test_an_enabled_qemu_handler_means_emulation(tmp_path: Path) -> None:
    (tmp_path / "qemu-aarch64").write_text("enabled\ninterpreter /usr/bin/qemu-aarch64-static\n")
    capability = docker_engine.arm64_capability("x86_64", tmp_path)
    assert capability.can and capability.how.startswith("emulated")


@pytest.mark.parametrize("handler", [None, "disabled\ninterpreter /usr/bin/qemu-aarch64\n"])
def test_x86_without_emulation_is_declined_with_the_reason(
    tmp_path: Path, handler: str | None
) -> None:
    if handler is not None:
        (tmp_path / "qemu-aarch64").write_text(handler)
    capability = docker_engine.arm64_capability("x86_64", tmp_path)
    assert not capability.can
    assert "x86_64" in capability.how and "qemu-aarch64" in capability.how
    assert "build.py bake" in capability.how


def test_build_declines_l4t_here_or_builds_it(tmp_path: Path) -> None:
    """`build.py build l4t --dry-run` says what it would do on this machine, and why."""
    result = subprocess.run(
        [sys.executable, "build.py", "build", "l4t", "--dry-run", "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    capability = docker_engine.arm64_capability(docker_engine.machine_arch())
    rows = json.loads(result.stdout)
    assert [row["image"] for row in rows] == [i.name for i in IMAGES]
    if capability.can:
        assert result.returncode == 0 and all(row["buildable"] for row in rows)
    else:
        assert result.returncode == 1, result.stderr
        assert all(not row["buildable"] and "arm64" in row["why"] for row in rows)
    assert [row["base"] for row in rows] == [f"{i.base_registry}/{i.base_ref}" for i in IMAGES]


def test_the_dry_run_names_the_base_the_build_would_use() -> None:
    """--base-registry (a mirror, `mirror.local/` with its slash) changes the FROM of the build,
    so the dry run shows that base, not the spec's."""
    mirror = ["--base-registry", "mirror.local/"]
    result = subprocess.run(
        [sys.executable, "build.py", "build", "l4t", "--dry-run", "--json", *mirror],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    rows = json.loads(result.stdout)
    assert [row["base"] for row in rows] == [f"mirror.local/{i.base_ref}" for i in IMAGES]


# The image built and run where arm64 runs (QEMU's handler or an arm64 host), on the stand-in of its
# base: tests/containers/test_l4t_arm64.py (this file's tests need no engine).
