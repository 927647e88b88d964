"""Teams' images FROM the kit's: every recipe of docs/teams.md (examples/teams/) is
built on the repaired and the slim 2.21 images and run on the fake GPU. The recipes that keep the
GPU path show the cap applied by TensorFlow itself (the device it creates); those that break it
fail at build (pip's constraints, `tfgpu check --build`) or at start (`tfgpu run`, exit 78), each
with its message. The slim image's recipes build FROM a local registry's copy of the image
(Debian's docker-registry on 127.0.0.1), pushed there with the kit's own push (what `build.py
build --push` calls) and pulled back.

Offline: each recipe's pip installs come from the test's own wheels (tests/runtime/dists.py),
through PIP_NO_INDEX/PIP_FIND_LINKS added right after its FROM: what a team's index would serve,
including a cuDNN and a TensorFlow of other releases (empty packages with those names and
versions: pip refuses them on their metadata, before it would install anything)."""

from __future__ import annotations

import contextlib
import json
import re
import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import pytest
from cyclonedx.schema import SchemaVersion
from cyclonedx.validation.json import JsonStrictValidator
from tfgpu.machine import pins

from tests import local_registry
from tests.gpu.harness import GpuHost
from tests.gpu.test_cap import assert_capped
from tests.kit_images import KIT_SLIM, ROOT, build_py
from tests.runtime import dists
from tfgpu_kit.image import docker_engine
from tfgpu_kit.matrix.locks import wheel_locks

RECIPES = ROOT / "examples" / "teams"
CAP = {"TF_GPU_MEM_LIMIT": "1024"}
OFFLINE = "COPY wheels/ /tmp/wheels/\nENV PIP_NO_INDEX=1 PIP_FIND_LINKS=/tmp/wheels\n"
APP = "import tensorflow as tf\nprint(tf.config.list_logical_devices('GPU'))\n"
_timings: dict[str, list[float]] = {}


@dataclass
class Build:
    ok: bool
    log: str
    tag: str
    seconds: float


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("team-wheels")
    dists.wheel(folder, "teamlib", "1.0")
    dists.wheel(folder, "needs-other-cudnn", "1.0", requires=["nvidia-cudnn-cu12==9.1.0.70"])
    dists.wheel(folder, "nvidia-cudnn-cu12", "9.1.0.70", package="nvidia_cudnn_other")
    dists.wheel(folder, "needs-other-tensorflow", "1.0", requires=["tensorflow==2.20.0"])
    dists.wheel(folder, "tensorflow", "2.20.0", package="tensorflow_other")
    dists.wheel(folder, "tf-keras", "2.21.1", package="tf_keras_other")
    return folder


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    yield from local_registry.serve(tmp_path_factory.mktemp("registry"))


@pytest.fixture(scope="module")
def published_slim(registry: str, image: str, docker_client: docker.DockerClient) -> Iterator[str]:
    """The slim image as a platform team publishes it: pushed to registry R with the kit's own
    push (`build.py build --push --registry R` calls it for every tag), its local tag dropped,
    pulled back, then FROM R's reference."""
    t0 = time.monotonic()
    ref = f"{registry}/{KIT_SLIM}"
    tested = docker_client.images.get(image)
    assert tested.tag(ref)
    docker_engine.push(docker_client, ref)
    docker_client.images.remove(ref)
    pulled = docker_client.images.pull(ref)
    digests = [d for d in pulled.attrs.get("RepoDigests", []) if d.startswith(registry)]
    assert digests, pulled.attrs.get("RepoDigests")

    def facts(img: Any) -> dict[str, str]:
        labels = img.attrs["Config"]["Labels"]
        return {k: v for k, v in labels.items() if k.startswith("io.tfgpu.")}

    # the same TensorFlow, CUDA wheels, tf-keras and base (its labels), the same image
    assert facts(pulled) == facts(tested)
    assert pulled.id == tested.id
    _timings.setdefault(f"{ref}: published (push, pull)", []).append(time.monotonic() - t0)
    yield ref
    with contextlib.suppress(docker.errors.ImageNotFound):
        docker_client.images.remove(ref)


@pytest.fixture
def base(image: str, request: pytest.FixtureRequest) -> str:
    """What the recipes are built FROM: the slim image through the registry, the repaired one
    by its local tag."""
    if image.endswith("-slim"):
        return str(request.getfixturevalue("published_slim"))
    return image


def context(tmp_path: Path, dockerfile: str, wheels: Path) -> Path:
    ctx = tmp_path / "ctx"
    ctx.mkdir(parents=True)
    lines = dockerfile.splitlines(keepends=True)
    at = next(i for i, line in enumerate(lines) if line.startswith("FROM ")) + 1
    (ctx / "Dockerfile").write_text("".join([*lines[:at], OFFLINE, *lines[at:]]))
    shutil.copytree(wheels, ctx / "wheels")
    (ctx / "requirements.txt").write_text("teamlib\n")
    (ctx / "app").mkdir()
    (ctx / "app" / "train.py").write_text(APP)
    return ctx


def recipe(name: str) -> str:
    return (RECIPES / name / "Dockerfile").read_text()


def build(client: docker.DockerClient, ctx: Path, base: str, name: str, tag: str) -> Build:
    """Build `ctx` with BASE=base through the engine's API, the whole log kept (also on failure)."""
    t0 = time.monotonic()
    log: list[str] = []
    ok = True
    for chunk in client.api.build(
        path=str(ctx),
        tag=tag,
        buildargs={"BASE": base},
        rm=True,
        forcerm=True,
        network_mode="none",
        decode=True,
    ):
        if "stream" in chunk:
            log.append(chunk["stream"])
        if "error" in chunk:
            ok = False
            log.append(chunk["error"])
    seconds = time.monotonic() - t0
    _timings.setdefault(f"{base}: build {name} ({'built' if ok else 'failed'})", []).append(seconds)
    return Build(ok, "".join(log), tag, seconds)


@pytest.fixture
def derive(
    docker_client: docker.DockerClient, base: str, wheels: Path, tmp_path: Path
) -> Iterator[Callable[..., Build]]:
    """derive(NAME[, DOCKERFILE]): the recipe examples/teams/NAME (or DOCKERFILE) built on
    `base`; the images made are removed when the test ends."""
    tags: list[str] = []

    def run(name: str, dockerfile: str | None = None) -> Build:
        ctx = context(tmp_path / f"{name}-{len(tags)}", dockerfile or recipe(name), wheels)
        tags.append(f"tfgpu-test.local/derived-{name}:{len(tags)}")
        return build(docker_client, ctx, base, name, tags[-1])

    yield run
    for tag in tags:
        with contextlib.suppress(docker.errors.ImageNotFound):
            docker_client.images.remove(tag, force=True)


def kept(b: Build) -> None:
    assert b.ok, b.log[-4000:]
    assert "tfgpu: the GPU path is as the image was built" in b.log


def test_the_one_page_recipe_keeps_the_cap(derive: Callable[..., Build], gpu_host: GpuHost) -> None:
    """FROM, pip install, code, USER, CMD: the guard passes and TensorFlow creates the capped GPU"""
    b = derive("recipe")
    kept(b)
    assert "Successfully installed teamlib-1.0" in b.log
    assert "as uid 1234" in b.log
    run = gpu_host.probe(b.tag, "touch", env=CAP)
    assert_capped(run, [1024])


def test_a_teams_own_entrypoint_keeps_the_cap(
    derive: Callable[..., Build], gpu_host: GpuHost, docker_client: docker.DockerClient
) -> None:
    """ENTRYPOINT ["python"]: no tfgpu run, the hook alone applies the cap"""
    b = derive("own-entrypoint")
    kept(b)
    assert docker_client.images.get(b.tag).attrs["Config"]["Entrypoint"] == ["python"]
    run = gpu_host.run(b.tag, ["/probe/probe.py", "touch"], CAP)
    assert_capped(run, [1024])
    assert "tfgpu: GPU 0" not in run.stderr  # the door's summary: not run


def test_a_venv_with_the_system_site_packages_keeps_the_cap(
    derive: Callable[..., Build], gpu_host: GpuHost
) -> None:
    """python3 -m venv --system-site-packages: its Python loads the image's hook"""
    b = derive("venv-system-site")
    kept(b)
    assert re.search(
        r"ok: \S*/opt/venv/bin/python3? \(/opt/venv/bin/python3?\) loads the hook", b.log
    ), b.log[-2000:]
    run = gpu_host.probe(b.tag, "touch", env=CAP)
    assert_capped(run, [1024])


def test_a_venv_of_its_own_fails_the_build_and_is_refused_at_start(
    derive: Callable[..., Build], gpu_host: GpuHost
) -> None:
    """A venv without the image's site-packages: the guard fails; without it, tfgpu run exits 78"""
    b = derive("venv-own")
    assert not b.ok
    assert (
        "imports TensorFlow without the tfgpu hook (it is a virtual environment without the "
        "system site-packages and without tfgpu)" in b.log
    )
    assert "--find-links /usr/share/tfgpu/wheels 'tfgpu[nvml,metrics]'" in b.log
    assert "tfgpu: error: the image's GPU path is not as it was built" in b.log
    unguarded = derive("venv-own", recipe("venv-own").replace("RUN tfgpu check --build\n", ""))
    assert unguarded.ok, unguarded.log[-3000:]
    run = gpu_host.probe(unguarded.tag, "touch", env=CAP)
    assert run.exit_code == 78, run.tail()
    assert "/opt/venv/bin/python imports TensorFlow without the tfgpu hook" in run.stderr
    assert "tfgpu: nothing was started" in run.stderr
    assert "PROBE-JSON" not in run.stdout
    allowed = gpu_host.probe(unguarded.tag, "touch", env={**CAP, "TF_GPU_REQUIRE_HOOK": "false"})
    assert allowed.exit_code == 0 and allowed.created[0].mb != 1024  # ran, uncapped, as asked


def test_the_runtime_wheel_in_the_image_fixes_a_venv_of_its_own(
    derive: Callable[..., Build], gpu_host: GpuHost
) -> None:
    """One install line from /usr/share/tfgpu/wheels: the venv's Python loads the hook"""
    b = derive("venv-own-fixed")
    kept(b)
    run = gpu_host.probe(b.tag, "touch", env=CAP)
    assert_capped(run, [1024])


@pytest.mark.parametrize(
    ("name", "pin"),
    [
        ("another-cudnn", "nvidia-cudnn-cu12==9.3.0.75"),
        ("another-tensorflow", "tensorflow==2.21.0"),
    ],
)
def test_a_requirement_that_pulls_another_release_fails_at_pip(
    derive: Callable[..., Build], name: str, pin: str
) -> None:
    """pip refuses it, naming the package, the pin and how to override on purpose"""
    b = derive(name)
    assert not b.ok
    assert f"The user requested (constraint) {pin}" in b.log
    assert (
        f"tfgpu: this image pins {pin} (/usr/share/tfgpu/constraints.txt, through PIP_CONSTRAINT)"
        in b.log
    )
    assert "run that one install with PIP_CONSTRAINT= (empty)" in b.log


def test_a_deliberate_override_is_accepted_and_keeps_the_cap(
    derive: Callable[..., Build], gpu_host: GpuHost
) -> None:
    """PIP_CONSTRAINT= for one RUN and --accept: a warning; without --accept the guard fails"""
    b = derive("override")
    assert b.ok, b.log[-3000:]
    assert "warning: accepted: tf-keras changed: 2.21.0 → 2.21.1" in b.log
    run = gpu_host.probe(b.tag, "touch", env=CAP)
    assert_capped(run, [1024])
    silent = derive("override", recipe("override").replace(" --accept tf-keras", ""))
    assert not silent.ok
    assert (
        "error: tf-keras changed: 2.21.0 → 2.21.1 (the image pins tf-keras==2.21.0)" in silent.log
    )
    assert "`tfgpu check --build --accept tf-keras`" in silent.log


BROKEN = """\
ARG BASE
FROM ${BASE}
USER 0
RUN site="$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")" \\
    && rm -rf "$site/nvidia/cudnn" \\
    && chmod 0755 /var/tmp
ENV TF_GPU_CONFIG=off TFGPU_IMAGE_TF=
USER 1000
RUN tfgpu check --build
"""


def test_the_guard_names_each_thing_a_layer_broke(derive: Callable[..., Build]) -> None:
    """cuDNN's wheel deleted, the kit switched off, an image fact cleared, /var/tmp not writable"""
    b = derive("broken", BROKEN)
    assert not b.ok
    log = b.log
    assert re.search(
        r"error: nvidia-cudnn-cu12 9\.3\.0\.75: \d+ file\(s\) missing: /\S+/nvidia/cudnn/", log
    )
    assert "error: libcudnn.so.9 no longer loads" in log
    assert "error: TF_GPU_CONFIG='off' in the image's environment turns the kit off" in log
    assert "error: TFGPU_IMAGE_TF '2.21.0' → '': the runtime reads what the image is from it" in log
    assert "error: uid 1000 cannot write /var/tmp" in log
    assert "tfgpu: error: the image's GPU path is not as it was built" in log


def test_the_image_carries_its_pins_and_a_valid_sbom(image: str, tmp_path: Path) -> None:
    """build.py sbom: CycloneDX 1.6 by the schema; OS packages, Python distributions, and the CUDA
    wheels with the sha256 their lock names"""
    out = tmp_path / "sbom.json"
    proc = build_py("sbom", image, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "valid CycloneDX 1.6" in proc.stderr
    text = out.read_text()
    assert JsonStrictValidator(SchemaVersion.V1_6).validate_str(text) is None
    comps = json.loads(text)["components"]
    by_name = {pins.normalize(c["name"]): c for c in comps}  # tf-keras spells itself tf_keras
    props = {
        pins.normalize(c["name"]): {p["name"]: p["value"] for p in c["properties"]} for c in comps
    }
    assert props["tensorflow"]["tfgpu:role"] == "tensorflow"
    assert sum(1 for p in props.values() if p.get("tfgpu:source") == "dpkg") > 50
    lock = wheel_locks.FILE.load()
    for pin in ("nvidia-cudnn-cu12==9.3.0.75", "tf-keras==2.21.0"):
        name = pin.split("==")[0]
        assert by_name[name]["hashes"] == [{"alg": "SHA-256", "content": lock.wheels[pin].sha256}]
    assert "hashes" in by_name["tfgpu"]  # the runtime wheel built for this image


def test_zz_print_the_guards_cost(base: str) -> None:
    """(figures) seconds per derived build, by recipe (the guard alone: bench_teams.py)"""
    for what, seconds in sorted(_timings.items()):
        if what.startswith(f"{base}:"):
            print(f"{what}: {', '.join(f'{s:.1f}s' for s in seconds)}")
    assert all(s > 0 for seconds in _timings.values() for s in seconds)
