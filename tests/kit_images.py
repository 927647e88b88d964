"""The images the container tests run (tests/containers, tests/gpu, tests/monitoring,
tests/multiworker), the lines that make them, and the fixtures that take them from the engine.

The suite never builds them. `./kit test-images` (tests/prepare.py, CI's step before pytest) builds
the stand-in bases and then each image below with `./kit build`, as a user runs it, keeping each
build's output (`RECORDS`); the tests take the images by name. A test can be pointed at other
images with `--suite-image KEY=REF` (or `--gpu-image` for tests/gpu). An image missing from the
engine fails the test under CI=true and skips it elsewhere, naming the `./kit build` line that
makes it.

2.21.0's stand-in base lacks what its TensorFlow needs (CUDA 12.5, cuDNN 9), as the official
one does: its kit images add NVIDIA's wheels. 2.17.0's base is enough: its image adds nothing.
2.14.0 and 2.15.0 (CUDA 11.8 stand-ins) each have a repair of their own: the cu11 wheel set of
2.14 and the CUDA 12.2 set of 2.15."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import docker
import pytest

from tests.base_standins import CUDA11, REGISTRY
from tests.ci_policy import ci_or_skip
from tfgpu_kit.matrix import catalog, spec

ROOT = Path(__file__).resolve().parents[1]
VERSION = "2.21.0"
OLDER = "2.17.0"  # a version whose base has what its TensorFlow needs
KIT_REPO = "tfgpu/tensorflow"
KIT_GPU = f"{KIT_REPO}:{VERSION}-gpu"
KIT_JUPYTER = f"{KIT_REPO}:{VERSION}-gpu-jupyter"
KIT_OLDER = f"{KIT_REPO}:{OLDER}-gpu"
KIT_SLIM = f"{KIT_REPO}:{VERSION}-gpu-slim"  # the slim variant: no CUDA in its base
# The CUDA 11.8 bases' releases: one image per CUDA repair recipe of theirs
CUDA11_VERSIONS = CUDA11.tf_versions  # ("2.14.0", "2.15.0")
# The 2.21 image built with --cuda-source base (no repair: TensorFlow cannot use the GPU) has
# its own registry prefix so that it never replaces the good image's tags.
BROKEN_REGISTRY = "tfgpu-broken.local"
KIT_BROKEN = f"{BROKEN_REGISTRY}/{KIT_REPO}:{VERSION}-gpu"
# 2.17.0-gpu again through the legacy builder, for the BuildKit comparison
LEGACY_REGISTRY = "tfgpu-legacy.local"
KIT_OLDER_LEGACY = f"{LEGACY_REGISTRY}/{KIT_REPO}:{OLDER}-gpu"
L4T = catalog.jetson_images(spec.load())[0]
KIT_L4T = L4T.tags()[0]
# Where `./kit test-images` keeps each build's stdout (KEY.out) and stderr (KEY.err)
RECORDS = Path(
    os.environ.get("TFGPU_SUITE_RECORDS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "tfgpu-suite"
)
PREPARE = "./kit test-images"


@dataclass(frozen=True)
class SuiteImage:
    """One image the suite runs: its reference, the `./kit build` arguments that make it, the
    stand-ins (`python -m tests.base_standins build NAME…`) it is built FROM, its group
    (`./kit test-images GROUP`), and whether its build prints the people's table rather
    than `--json`."""

    key: str
    ref: str
    build: tuple[str, ...]
    standins: tuple[str, ...]
    group: str = "core"
    table: bool = False

    def line(self) -> str:
        return "./kit build " + " ".join(self.build)


def _kit(name: str, *more: str) -> tuple[str, ...]:
    return (name, "--base-registry", REGISTRY, *more)


# In build order: what a later image reuses of an earlier one's cache comes first.
SUITE_IMAGES = (
    SuiteImage("gpu", KIT_GPU, _kit(f"{VERSION}-gpu"), (f"gpu-{VERSION}",)),
    SuiteImage("gpu-jupyter", KIT_JUPYTER, _kit(f"{VERSION}-gpu-jupyter"), ("jupyter",)),
    SuiteImage(
        "broken",
        KIT_BROKEN,
        _kit(f"{VERSION}-gpu", "--cuda-source", "base", "--registry", BROKEN_REGISTRY),
        (f"gpu-{VERSION}",),
    ),
    SuiteImage("older", KIT_OLDER, _kit(f"{OLDER}-gpu"), (f"gpu-{OLDER}",)),
    SuiteImage(
        "older-legacy",
        KIT_OLDER_LEGACY,
        _kit(f"{OLDER}-gpu", "--registry", LEGACY_REGISTRY, "--builder", "legacy"),
        (f"gpu-{OLDER}",),
        table=True,
    ),
    SuiteImage("slim", KIT_SLIM, _kit(f"{VERSION}-gpu-slim"), ("slim",)),
    *(
        SuiteImage(f"cuda11-{v}", f"{KIT_REPO}:{v}-gpu", _kit(f"{v}-gpu"), (f"gpu-{v}",), "cuda11")
        for v in CUDA11_VERSIONS
    ),
    SuiteImage("l4t", KIT_L4T, _kit(L4T.name), ("l4t",), "arm64"),
)
BY_KEY = {image.key: image for image in SUITE_IMAGES}
GROUPS = tuple(dict.fromkeys(image.group for image in SUITE_IMAGES))


COMPOSE_MISSING = "neither `docker compose` nor `docker-compose` is installed"


def compose_command() -> list[str] | None:
    """`docker compose` (v2) when the plugin exists, else `docker-compose` (v1, Debian); None
    when neither is installed (each caller fails or skips in its own way)."""
    v2 = subprocess.run(["docker", "compose", "version"], capture_output=True, check=False)
    if v2.returncode == 0:
        return ["docker", "compose"]
    if shutil.which("docker-compose"):
        return ["docker-compose"]
    return None


def build_py(
    *args: str, timeout: float = 900, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`python build.py ARGS…` from the checkout, as a user runs it."""
    return subprocess.run(
        [sys.executable, str(ROOT / "build.py"), *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env={**os.environ, **env} if env else None,
    )


def buildkit_cli_on_path() -> str | None:
    """The first `docker` on PATH whose CLI builds through BuildKit (build.py's own choice looks
    only at the first `docker`: a host may have another CLI that has it)."""
    from tfgpu_kit.image import buildkit

    seen: set[str] = set()
    for folder in os.environ.get("PATH", "").split(os.pathsep):
        cli = Path(folder or ".") / "docker"
        real = os.path.realpath(cli)
        if real in seen or not (cli.is_file() and os.access(cli, os.X_OK)):
            continue
        seen.add(real)
        if buildkit.find_buildkit(str(cli)).kind == "buildkit":
            return str(cli)
    return None


def how_to_make(image: SuiteImage) -> str:
    return (
        f"make it with `{image.line()}` (after `python -m tests.base_standins build"
        f" {' '.join(image.standins)}`), or with every image of its group: `{PREPARE}"
        f" {image.group}`"
    )


def _missing(what: str, image: SuiteImage) -> NoReturn:
    ci_or_skip(
        f"{what}: {how_to_make(image)}",
        in_ci_because="; .ci/run builds the suite's images before pytest",
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("tfgpu suite images").addoption(
        "--suite-image",
        action="append",
        default=[],
        metavar="KEY=REF",
        help="run the container tests against REF for the suite's image KEY (one of "
        f"{', '.join(BY_KEY)}); default: the tags `{PREPARE}` builds",
    )


def pytest_configure(config: pytest.Config) -> None:
    _overrides(config)  # a bad --suite-image stops the run at once, as a usage error


def _overrides(config: pytest.Config) -> dict[str, str]:
    chosen: dict[str, str] = {}
    for item in config.getoption("--suite-image"):
        key, sep, ref = str(item).partition("=")
        if not sep or key not in BY_KEY or not ref:
            raise pytest.UsageError(
                f"--suite-image {item!r}: expected KEY=REF with KEY one of {', '.join(BY_KEY)}"
                f" (e.g. --suite-image gpu={KIT_GPU})"
            )
        chosen[key] = ref
    return chosen


def take(request: pytest.FixtureRequest, key: str) -> str:
    """The reference of the suite's image KEY, present in the engine (else fail in CI, skip
    elsewhere, naming the line that makes it)."""
    image = BY_KEY[key]
    ref = _overrides(request.config).get(key, image.ref)
    return _present(request, ref, f"the suite's image {key!r} ({ref})", image)


def take_standin(request: pytest.FixtureRequest, tag: str, key: str) -> str:
    """A stand-in base by tag, present in the engine (the same rule as `take`)."""
    return _present(request, tag, f"the stand-in base {tag}", BY_KEY[key])


def _present(request: pytest.FixtureRequest, ref: str, what: str, image: SuiteImage) -> str:
    client: docker.DockerClient = request.getfixturevalue("docker_client")
    try:
        client.images.get(ref)
    except docker.errors.ImageNotFound:
        _missing(f"{what} is not in the engine", image)
    return ref


@dataclass(frozen=True)
class BuildRecord:
    """What `./kit test-images` kept of one image's `./kit build`: the command line, its
    exit code, stdout and stderr, its inputs' key and the id of the image it made."""

    command: list[str]
    returncode: int
    stdout: str
    stderr: str
    # What the build was made from (tests/prepare.py, `inputs_key`) and the image it made: a
    # later `./kit test-images` keeps an image whose inputs are the same.
    inputs: str = ""
    image_id: str = ""


def record_path(key: str) -> Path:
    return RECORDS / f"{key}.json"


def write_record(key: str, record: BuildRecord) -> None:
    RECORDS.mkdir(parents=True, exist_ok=True)
    partial = record_path(key).with_suffix(f".{os.getpid()}")
    partial.write_text(json.dumps(record.__dict__))
    partial.replace(record_path(key))


def read_record(key: str) -> BuildRecord | None:
    """The kept build of image KEY; None when there is none."""
    path = record_path(key)
    if not path.is_file():
        return None
    data: dict[str, Any] = json.loads(path.read_text())
    return BuildRecord(**data)


def take_record(key: str) -> BuildRecord:
    """The kept build of image KEY (fail in CI, skip elsewhere when there is none)."""
    record = read_record(key)
    if record is None:
        _missing(f"no record of the build of the suite's image {key!r} in {RECORDS}", BY_KEY[key])
    return record


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    client = docker.from_env(timeout=600)
    yield client
    client.close()


@pytest.fixture(scope="session")
def kit_images(request: pytest.FixtureRequest) -> dict[str, str]:
    """The kit's 2.21 gpu and gpu-jupyter images (repaired) and its 2.17 gpu image (not)."""
    return {key: take(request, key) for key in ("gpu", "gpu-jupyter", "older")}


@pytest.fixture(scope="session")
def slim_image(request: pytest.FixtureRequest) -> str:
    """The kit's 2.21 gpu-slim image, built on the stand-in of its Python base."""
    return take(request, "slim")


@pytest.fixture(scope="session")
def broken_image(request: pytest.FixtureRequest) -> str:
    """The kit's 2.21 gpu image forced to the base's CUDA (--cuda-source base): what a team
    gets from the official 2.21 base without the repair."""
    return take(request, "broken")


@pytest.fixture(scope="session")
def cuda11_images(request: pytest.FixtureRequest) -> dict[str, str]:
    """The kit's 2.14.0 and 2.15.0 gpu images (both repaired: 2.14's cu11 wheels with cuDNN 8.7,
    2.15's CUDA 12.2 wheels), built on the CUDA 11.8 stand-ins; by version."""
    return {v: take(request, f"cuda11-{v}") for v in CUDA11_VERSIONS}


@pytest.fixture(scope="session")
def cuda11_standins(request: pytest.FixtureRequest) -> list[str]:
    """The stand-ins of the official CUDA 11.8 bases (2.14.0-gpu, 2.15.0-gpu), by tag."""
    from tests.base_standins import gpu_tag

    return [take_standin(request, gpu_tag(v), f"cuda11-{v}") for v in CUDA11_VERSIONS]
