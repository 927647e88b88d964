"""Tag computation (CONTRACTS.md) and command-line selectors."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from tfgpu_kit.matrix import catalog, selectors, spec
from tfgpu_kit.shared.errors import UsageError

SPEC = spec.load()
IMAGES = catalog.images(SPEC)
BY_NAME = {image.name: image for image in IMAGES}


def test_one_image_per_version_and_variant() -> None:
    """Every offered version in each official-base variant; the slim variant in its own list."""
    official = [v for v in SPEC.images.variants.values() if v.versions is None]
    slim = [v for v in SPEC.images.variants.values() if v.versions is not None]
    assert len(IMAGES) == len(SPEC.images.versions) * len(official) + sum(
        len(v.versions or []) for v in slim
    )
    assert IMAGES[0].name == "2.21.0-gpu"
    assert [i.name for i in IMAGES if i.slim] == [
        "2.21.0-gpu-slim", "2.20.0-gpu-slim", "2.19.0-gpu-slim", "2.18.0-gpu-slim",
        "2.15.0-gpu-slim",
    ]  # fmt: skip


def test_tags_of_the_slim_images() -> None:
    """The same scheme with the variant's suffix; latest- goes to the newest slim image."""
    assert BY_NAME["2.21.0-gpu-slim"].tags() == [
        "tfgpu/tensorflow:2.21.0-gpu-slim",
        "tfgpu/tensorflow:2.21-gpu-slim",
        "tfgpu/tensorflow:latest-gpu-slim",
        "tfgpu/tensorflow:2.21.0-gpu-slim-py311-cu125",
    ]
    assert BY_NAME["2.15.0-gpu-slim"].tags()[-1] == "tfgpu/tensorflow:2.15.0-gpu-slim-py311-cu122"
    assert not any("latest" in t for t in BY_NAME["2.20.0-gpu-slim"].tags())
    slim = BY_NAME["2.21.0-gpu-slim"]
    assert slim.base_ref == "library/python:3.11-slim-bookworm"
    assert slim.pip == ["tensorflow==2.21.0"] and slim.base_python == "3.11"


def test_tags_of_the_newest() -> None:
    assert BY_NAME["2.21.0-gpu"].tags() == [
        "tfgpu/tensorflow:2.21.0-gpu",
        "tfgpu/tensorflow:2.21-gpu",
        "tfgpu/tensorflow:latest-gpu",
        "tfgpu/tensorflow:2.21.0-gpu-py311-cu125",
    ]
    assert BY_NAME["2.21.0-gpu-jupyter"].tags()[2] == "tfgpu/tensorflow:latest-gpu-jupyter"


def test_older_versions_get_no_latest_and_registry_prefix() -> None:
    tags = BY_NAME["2.14.0-gpu"].tags(registry="reg.example:5000/", python="3.11")
    assert tags == [
        "reg.example:5000/tfgpu/tensorflow:2.14.0-gpu",
        "reg.example:5000/tfgpu/tensorflow:2.14-gpu",
        "reg.example:5000/tfgpu/tensorflow:2.14.0-gpu-py311-cu118",
    ]


def test_composite_tag_uses_the_real_python() -> None:
    assert BY_NAME["2.12.0-gpu"].composite_tag("3.8") == "2.12.0-gpu-py38-cu118"
    assert BY_NAME["2.16.1-gpu-jupyter"].composite_tag("3.11") == "2.16.1-gpu-jupyter-py311-cu123"


def test_base_reference() -> None:
    image = BY_NAME["2.21.0-gpu-jupyter"]
    assert image.base_ref == "tensorflow/tensorflow:2.21.0-gpu-jupyter"
    assert image.base_registry == "docker.io"


@pytest.mark.parametrize(
    ("selector", "names"),
    [
        ("2.21.0-gpu", ["2.21.0-gpu"]),
        ("2.21-gpu-jupyter", ["2.21.0-gpu-jupyter"]),
        ("2.21.0", ["2.21.0-gpu", "2.21.0-gpu-jupyter", "2.21.0-gpu-slim"]),
        (
            "gpu-slim",
            [
                "2.21.0-gpu-slim",
                "2.20.0-gpu-slim",
                "2.19.0-gpu-slim",
                "2.18.0-gpu-slim",
                "2.15.0-gpu-slim",
            ],
        ),
        ("2.16", ["2.16.1-gpu", "2.16.1-gpu-jupyter"]),
        ("latest-gpu", ["2.21.0-gpu"]),
        ("re:^2\\.1[23]\\.0-gpu$", ["2.13.0-gpu", "2.12.0-gpu"]),
    ],
)
def test_selectors(selector: str, names: list[str]) -> None:
    assert [i.name for i in selectors.select(IMAGES, [selector])] == names


def test_variant_selector_and_no_selector() -> None:
    assert len(selectors.select(IMAGES, ["gpu-jupyter"])) == len(SPEC.images.versions)
    assert selectors.select(IMAGES, []) == IMAGES
    assert selectors.select(IMAGES, ["all"]) == IMAGES


def test_build_defaults_to_the_newest_version_only() -> None:
    # build's default: a newcomer's `./kit build` builds 2.21.0 (every variant), not 25 images
    chosen = selectors.select(IMAGES, [], default=("latest",))
    assert [i.name for i in chosen] == ["2.21.0-gpu", "2.21.0-gpu-jupyter", "2.21.0-gpu-slim"]
    assert selectors.select(IMAGES, ["all"], default=("latest",)) == IMAGES


@pytest.mark.parametrize("selector", ["2.99.0", "cpu", "re:(", "2.21.0-GPU"])
def test_bad_selectors(selector: str) -> None:
    with pytest.raises(UsageError):
        selectors.select(IMAGES, [selector])


def test_short_tag_only_on_the_newest_patch_of_a_minor(tmp_path: Path) -> None:
    # two patches of 2.15 offered: `2.15-gpu` must name 2.15.1, not both (the one built last
    # would take it, and the catalog builds newest first)
    for name in ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml"):
        shutil.copy(spec.IMAGES_DIR / name, tmp_path / name)
    matrix_path, images_path = tmp_path / "matrix.yaml", tmp_path / "images.yaml"
    data = yaml.safe_load(matrix_path.read_text())
    # 2.15.1 becomes an entry of its own, no longer a patch listed under 2.15.0
    data["tensorflow"]["2.15.0"].pop("patches")
    data["tensorflow"]["2.15.1"] = data["tensorflow"]["2.15.0"]
    matrix_path.write_text(yaml.safe_dump(data))
    data = yaml.safe_load(images_path.read_text())
    index = [v["version"] for v in data["versions"]].index("2.15.0")
    data["versions"].insert(index, {"version": "2.15.1"})
    images_path.write_text(yaml.safe_dump(data))
    bases_path = tmp_path / "bases.yaml"
    data = yaml.safe_load(bases_path.read_text())
    data["versions"]["2.15.1"] = data["versions"]["2.15.0"]
    bases_path.write_text(yaml.safe_dump(data))
    by_name = {image.name: image for image in catalog.images(spec.load(tmp_path))}
    assert "tfgpu/tensorflow:2.15-gpu" in by_name["2.15.1-gpu"].tags()
    assert "tfgpu/tensorflow:2.15-gpu" not in by_name["2.15.0-gpu"].tags()
    assert by_name["2.15.0-gpu"].tags(python="3.11") == [
        "tfgpu/tensorflow:2.15.0-gpu",
        "tfgpu/tensorflow:2.15.0-gpu-py311-cu122",
    ]


@pytest.mark.parametrize(
    "value",
    [
        "reg.example",
        "registry.example.com:5000",
        "localhost:5000/team/sub",
        "mirror.local:5000/",  # the trailing slash is stripped where it is used
        "tfgpu-standin.local",
        "myorg",  # a Docker Hub namespace
        "my_org/a__b/c-d/e.f",
        "127.0.0.1:5000",
    ],
)
def test_registry_prefix_accepted(value: str) -> None:
    catalog.check_registry("--registry", value)
    tag = BY_NAME["2.21.0-gpu"].tags(registry=value)[0]
    assert tag == f"{value.rstrip('/')}/tfgpu/tensorflow:2.21.0-gpu"


@pytest.mark.parametrize(
    "value",
    [
        "A B",
        "Registry.example",  # the engine refuses capitals in an image name
        "reg example",
        "",
        "/",
        "reg.example:port",
        "reg.example:5000:6000",
        "-reg.example",
        "reg-.example",
        "reg..example",
        "reg.example/team:tag",
        "reg.example/Team",
        "reg.example//team",
        "reg.example/team_",
        "https://reg.example",
        "reg.example@sha256",
    ],
)
def test_registry_prefix_refused(value: str) -> None:
    with pytest.raises(UsageError) as caught:
        catalog.check_registry("--base-registry", value)
    message = str(caught.value)
    assert f"--base-registry {value!r} is not a registry" in message
    assert "accepted: a lowercase host" in message
    assert "example: --base-registry registry.example.com:5000/team" in message
