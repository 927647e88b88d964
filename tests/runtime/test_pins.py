"""The pins an image carries (tfgpu.machine.pins): which installed distributions its GPU path
depends on, the constraints file, and the judge of versions against them; with real pip and uv, that
the constraints refuse a replacement naming the package and pin, and leave unrelated installs
alone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.specifiers import SpecifierSet
from packaging.version import Version
from tfgpu.machine import pins

from tests.runtime import dists

TF_REQUIRES = [
    'nvidia-cudnn-cu12==9.3.0.75; extra == "and-cuda"',
    'nvidia-cublas-cu12==12.5.3.2; extra == "and-cuda"',
    "keras>=3.10.0",
    "numpy<2.2.0,>=1.26.0",
    'tensorflow-io-gcs-filesystem>=0.23.1; python_version < "3.12"',
]


def image_site(tmp_path: Path) -> Path:
    """A site directory as the kit's repaired 2.21 image has it."""
    site = tmp_path / "site"
    dists.install(
        site,
        "tensorflow",
        "2.21.0",
        requires=TF_REQUIRES,
        top_level="tensorflow",
        files={"tensorflow/__init__.py": b""},
    )
    dists.install(site, "nvidia-cudnn-cu12", "9.3.0.75", files={"nvidia/cudnn/lib/x.so": b"so"})
    dists.install(site, "nvidia-nccl-cu12", "2.27.7")  # not in the extra above: still pinned
    dists.install(site, "keras", "3.12.0")
    dists.install(site, "tf-keras", "2.21.0")
    dists.install(site, "tfgpu", "0.1.0")
    dists.install(site, "numpy", "2.1.3")  # TensorFlow's, but not the GPU path: not pinned
    return site


def test_the_pinned_set_is_read_from_what_is_installed(tmp_path: Path) -> None:
    pinned = pins.pinned(pins.installed([str(image_site(tmp_path))]))
    assert [(p.name, p.spec, p.role, p.installed) for p in pinned] == [
        ("tensorflow", "==2.21.0", "tensorflow", "2.21.0"),
        ("nvidia-cublas-cu12", "==12.5.3.2", "cuda", None),  # TensorFlow's pin: not installed
        ("nvidia-cudnn-cu12", "==9.3.0.75", "cuda", "9.3.0.75"),
        ("nvidia-nccl-cu12", "==2.27.7", "cuda", "2.27.7"),
        ("keras", ">=3.10.0", "keras", "3.12.0"),  # TensorFlow's range, not the installed one
        ("tf-keras", "==2.21.0", "tf-keras", "2.21.0"),
        ("tfgpu", "==0.1.0", "runtime", "0.1.0"),
    ]


def test_the_arm64_shim_and_the_distribution_that_ships_tensorflow_are_both_pinned(
    tmp_path: Path,
) -> None:
    # PyPI's aarch64 `tensorflow` 2.11.0 is a shim requiring tensorflow-cpu-aws, which ships it
    site = tmp_path / "site"
    dists.install(
        site,
        "tensorflow",
        "2.11.0",
        requires=['tensorflow-cpu-aws==2.11.0; platform_machine != "x86_64"'],
    )
    dists.install(
        site,
        "tensorflow-cpu-aws",
        "2.11.0",
        top_level="tensorflow",
        files={"tensorflow/__init__.py": b""},
        requires=["keras<2.12,>=2.11.0"],
    )
    pinned = {p.name: p.spec for p in pins.pinned(pins.installed([str(site)]))}
    assert pinned == {
        "tensorflow": "==2.11.0",
        "tensorflow-cpu-aws": "==2.11.0",
        "keras": "<2.12,>=2.11.0",
    }


def test_the_real_tensorflow_metadata_gives_its_and_cuda_set_and_keras_range() -> None:
    # .venv's tensorflow-cpu 2.21.0 (requirements/test.lock): the same Requires-Dist as `tensorflow`
    pinned = {p.name: p for p in pins.pinned(pins.installed())}
    assert pinned["tensorflow-cpu"].spec == "==2.21.0"
    cuda = sorted(n for n, p in pinned.items() if p.role == pins.CUDA)
    assert "nvidia-cudnn-cu12" in cuda and "nvidia-cusolver-cu12" in cuda and len(cuda) >= 10
    assert pinned["keras"].spec.startswith(">=3.")
    assert pinned["tfgpu"].role == pins.RUNTIME


@pytest.mark.parametrize(
    ("version", "spec", "verdict"),
    [
        ("2.15.0", "<2.16,>=2.15.0", True),
        ("2.16.0", "<2.16,>=2.15.0", False),
        ("3.12.0", ">=3.10.0", True),
        ("3.9.9", ">=3.10.0", False),
        ("9.3.0.75", "==9.3.0.75", True),
        ("9.1.0.70", "==9.3.0.75", False),
        ("2.11.0+nv23.1", "==2.11.0+nv23.1", True),
        ("2.15", "==2.15.0", True),
        ("3.10.0rc1", ">=3.10.0", None),  # a pre-release: not judged, never passed
        ("1.0", "~=1.0", None),
        ("1.0", "==1.*", None),
    ],
)
def test_satisfies(version: str, spec: str, verdict: bool | None) -> None:
    assert pins.satisfies(version, spec) is verdict


releases = st.lists(st.integers(0, 30), min_size=1, max_size=4).map(lambda p: ".".join(map(str, p)))


@settings(max_examples=400, deadline=None)
@given(releases, st.sampled_from(["==", "!=", ">=", "<=", ">", "<"]), releases, releases)
def test_satisfies_agrees_with_packaging(version: str, op: str, want: str, upper: str) -> None:
    # packaging (PyPA's reference implementation of PEP 440) is the oracle, on final releases
    for spec in (f"{op}{want}", f"{op}{want},<{upper}"):
        assert pins.satisfies(version, spec) is (Version(version) in SpecifierSet(spec))


# --- the constraints file, with real pip and uv ------------------------------------------------


@pytest.fixture
def index(tmp_path: Path) -> Path:
    """Wheels a team's requirements might pull: another cuDNN, a library that pulls another
    TensorFlow, an unrelated package."""
    folder = tmp_path / "wheels"
    dists.wheel(folder, "nvidia-cudnn-cu12", "9.1.0.70", package="nvidia_cudnn_stub")
    dists.wheel(folder, "nvidia-cudnn-cu12", "9.3.0.75", package="nvidia_cudnn_stub")
    dists.wheel(folder, "teamlib", "1.0", requires=["tensorflow==2.20.0"])
    dists.wheel(folder, "tensorflow", "2.20.0")
    dists.wheel(folder, "requests-stub", "2.0")
    return folder


def constraints(tmp_path: Path) -> Path:
    pinned = pins.pinned(pins.installed([str(image_site(tmp_path))]))
    path = tmp_path / "constraints.txt"
    path.write_text(pins.constraints_text(pinned, "a test"))
    return path


def pip_install(
    index: Path, target: Path, *reqs: str, **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-index",
            "--find-links",
            str(index),
            "--disable-pip-version-check",
            "--target",
            str(target),
            *reqs,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )


def test_pip_refuses_a_replacement_naming_the_package_and_pin(tmp_path: Path, index: Path) -> None:
    c = str(constraints(tmp_path))
    refused = pip_install(index, tmp_path / "t1", "nvidia-cudnn-cu12==9.1.0.70", PIP_CONSTRAINT=c)
    assert refused.returncode != 0
    assert "nvidia-cudnn-cu12==9.3.0.75" in refused.stdout + refused.stderr
    pulled = pip_install(index, tmp_path / "t2", "teamlib", PIP_CONSTRAINT=c)
    assert pulled.returncode != 0
    assert "tensorflow==2.21.0" in pulled.stdout + pulled.stderr
    # the same set, or anything unrelated, installs
    assert (
        pip_install(
            index, tmp_path / "t3", "nvidia-cudnn-cu12", "requests-stub", PIP_CONSTRAINT=c
        ).returncode
        == 0
    )
    # the documented override, for one command: PIP_CONSTRAINT= (empty)
    assert (
        pip_install(
            index, tmp_path / "t4", "nvidia-cudnn-cu12==9.1.0.70", PIP_CONSTRAINT=""
        ).returncode
        == 0
    )


def test_the_hook_adds_the_override_to_pips_refusal(tmp_path: Path, index: Path) -> None:
    # .venv's pip runs with the hook (tfgpu is installed there with its .pth), as an image's does
    c = str(constraints(tmp_path))
    refused = pip_install(
        index, tmp_path / "t1", "teamlib", PIP_CONSTRAINT=c, TFGPU_IMAGE_CONSTRAINTS=c
    )
    assert refused.returncode != 0
    assert (
        f"tfgpu: this image pins tensorflow==2.21.0 ({c}, through PIP_CONSTRAINT)" in refused.stderr
    )
    assert "PIP_CONSTRAINT= (empty)" in refused.stderr
    assert "tfgpu check --build --accept tensorflow" in refused.stderr
    # a constraints file that is not the image's: pip's message alone
    other = pip_install(index, tmp_path / "t2", "teamlib", PIP_CONSTRAINT=c)
    assert other.returncode != 0 and "tfgpu:" not in other.stderr
    # pip's own refusal is unchanged: it still names the package and the pin
    assert "tensorflow==2.21.0" in other.stdout + other.stderr


def uv_install(
    index: Path, target: Path, *reqs: str, **env: str
) -> subprocess.CompletedProcess[str]:
    uv = str(Path(sys.executable).with_name("uv"))
    return subprocess.run(
        [
            uv,
            "pip",
            "install",
            "--offline",
            "--no-index",
            "--find-links",
            str(index),
            "--python",
            sys.executable,
            "--target",
            str(target),
            *reqs,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "UV_NO_CACHE": "1", **env},
    )


def test_uv_pip_honours_uv_constraint_and_not_pip_constraint(tmp_path: Path, index: Path) -> None:
    c = str(constraints(tmp_path))
    refused = uv_install(index, tmp_path / "u1", "teamlib", UV_CONSTRAINT=c)
    assert refused.returncode != 0
    assert "tensorflow==2.21.0" in refused.stderr
    # uv does not read PIP_CONSTRAINT: hence the images set UV_CONSTRAINT too
    assert uv_install(index, tmp_path / "u2", "teamlib", PIP_CONSTRAINT=c).returncode == 0
    assert uv_install(index, tmp_path / "u3", "requests-stub", UV_CONSTRAINT=c).returncode == 0
    assert uv_install(index, tmp_path / "u4", "teamlib", UV_CONSTRAINT="").returncode == 0
