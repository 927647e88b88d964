"""Assembling a build context on the host: the rendered Dockerfile plus wheels/ holding the tfgpu
runtime wheel, the wheels of its extras and of the image's extra pip packages, pip itself
(wheels/pip.whl, run from the wheel inside the build) and wheels/requirements.txt pinning them by
version and sha256 (the image's pip step runs with --require-hashes). The Docker build then needs
no network. Every wheel but the runtime's is locked (wheel_locks: exact
version and sha256), so a rebuild puts the same bytes into the image.

Downloaded wheels are cached per target Python under $XDG_CACHE_HOME/tfgpu-kit/wheels; a download is
first tried offline from that cache, so a warm cache also works without PyPI."""

from __future__ import annotations

import importlib.util
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from tfgpu_kit.matrix.catalog import Image, locked_wheels
from tfgpu_kit.matrix.locks import lock_file, wheel_locks
from tfgpu_kit.matrix.spec import ROOT
from tfgpu_kit.shared.errors import KitError, SpecError

log = logging.getLogger(__name__)

RUNTIME_SOURCE = ROOT / "entrypoint"
_WHEEL_NAME = re.compile(r"^(?P<name>[^-]+)-(?P<version>[^-]+)(-\d[^-]*)?-[^-]+-[^-]+-[^-]+\.whl$")


class ContextError(KitError):
    """The build context could not be assembled (wheel build or download failed)."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfgpu-kit" / "wheels"


def _python_cache(python: str) -> Path:
    cache = cache_dir() / f"py{python}"
    cache.mkdir(parents=True, exist_ok=True)
    return cache


def _pip(args: list[str], what: str) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    log.debug("running %s", " ".join(command))
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise ContextError(f"{what} failed (pip exit {result.returncode}):\n{tail}")


def build_runtime_wheel(dest: Path, source: Path = RUNTIME_SOURCE) -> Path:
    """`pip wheel --no-deps --no-build-isolation ./entrypoint` into dest; returns the wheel.

    Without build isolation pip uses this Python's hatchling (requirements/build.lock), so the
    wheel builds offline and with the locked hatchling: the same bytes on every machine."""
    if not (source / "pyproject.toml").exists():
        raise ContextError(f"runtime package not found: {source}/pyproject.toml does not exist")
    if importlib.util.find_spec("hatchling") is None:
        raise ContextError(
            f"building the runtime wheel needs hatchling, which {sys.executable} lacks;"
            " install the build requirements: ./kit (it installs requirements/build.lock), or"
            f" {sys.executable} -m pip install -r requirements/build.lock"
        )
    dest.mkdir(parents=True, exist_ok=True)
    before = set(dest.glob("*.whl"))
    _pip(
        ["wheel", "--no-deps", "--no-build-isolation", "--quiet", str(source), "-w", str(dest)],
        f"building the runtime wheel from {source}",
    )
    made = sorted(set(dest.glob("*.whl")) - before) or sorted(dest.glob("tfgpu-*.whl"))
    if not made:
        raise ContextError(f"pip wheel {source} produced no wheel")
    return made[-1]


# The bases are glibc Linux on x86_64 (Ubuntu 20.04, glibc 2.31, for 2.12/2.13; 22.04 after).
# Without a platform pip picks wheels for the *host's* glibc, which may be too new for the base.
# manylinux2014 (glibc 2.17, also spelt manylinux_2_17) runs on every base; pip adds the older
# manylinux2010 and manylinux1 to it by itself.
WHEEL_PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64")
# The images' own package sets (image-wheels.lock.yaml: the extras, pip lists, and on the slim base
# TensorFlow with its dependencies, whose 2.21 wheel is manylinux_2_27) may use any glibc up to the
# oldest base's: Ubuntu 20.04's 2.31 (the 2.12/2.13 bases). pip does not expand a manylinux_2_X
# tag to the older ones (only the legacy aliases), so each is listed. The CUDA wheels keep
# WHEEL_PLATFORMS: their locked files are the manylinux2014 ones.
IMAGE_WHEEL_PLATFORMS = (
    *(f"manylinux_2_{minor}_x86_64" for minor in range(31, 16, -1)),
    "manylinux2014_x86_64",
)


def target_args(python: str, platforms: Sequence[str] = WHEEL_PLATFORMS) -> list[str]:
    """pip's flags selecting wheels for CPython `python` (X.Y) on the bases' platform."""
    major, minor = python.split(".")[:2]
    platforms = [arg for platform in platforms for arg in ("--platform", platform)]
    return [
        "--only-binary=:all:",
        *platforms,
        "--implementation",
        "cp",
        "--abi",
        f"cp{major}{minor}",
        "--python-version",
        python,
    ]


def _pip_download(
    packages: list[str],
    python: str,
    dest: Path | str,
    what: str,
    *,
    platforms: Sequence[str],
    deps: bool = True,
    only_from: Path | None = None,
) -> None:
    """`pip download` into `dest`; with `only_from`, from that folder alone (no index)."""
    offline = ["--no-index", "--find-links", str(only_from)] if only_from is not None else []
    no_deps = [] if deps else ["--no-deps"]
    into = [*target_args(python, platforms), "--dest", str(dest), "--quiet", *no_deps]
    _pip(["download", *offline, *into, *packages], what)


def fetch(
    packages: list[str],
    python: str,
    *,
    deps: bool = True,
    platforms: Sequence[str] = WHEEL_PLATFORMS,
) -> Path:
    """Fill the wheel cache with `packages` (and their dependencies, unless `deps` is False) for
    the target Python: offline from the cache when it has them, else from the index. Returns the
    cache directory."""
    cache = _python_cache(python)
    try:
        _pip_download(
            packages, python, cache, "offline", platforms=platforms, deps=deps, only_from=cache
        )
    except ContextError:
        what = f"downloading {', '.join(packages)} for Python {python}"
        _pip_download(packages, python, cache, what, platforms=platforms, deps=deps)
    return cache


def resolve(packages: list[str], python: str) -> list[Path]:
    """`build.py lock`: resolve an image's package set for the target Python afresh from the
    index (not the cache, which may hold older releases); the wheels of the whole resolution,
    copied into the cache (so that the build after the lock finds them offline)."""
    cache = _python_cache(python)
    with tempfile.TemporaryDirectory(prefix="tfgpu-resolve-") as tmp:
        what = f"resolving {', '.join(packages)} for Python {python}"
        _pip_download(packages, python, tmp, what, platforms=IMAGE_WHEEL_PLATFORMS)
        wheels = sorted(Path(tmp).glob("*.whl"))
        for wheel in wheels:
            shutil.copy2(wheel, cache / wheel.name)
    return [cache / wheel.name for wheel in wheels]


def pin_of(wheel: Path) -> str:
    """`name==version` of a wheel file, the name normalised (lowercase, `-`) as locks write it."""
    match = _WHEEL_NAME.match(wheel.name)
    if not match:
        raise ContextError(f"{wheel.name} is not a wheel file name (name-version-tags.whl)")
    return f"{_normalized(match['name'])}=={match['version']}"


def download(
    packages: list[str],
    python: str,
    dest: Path,
    *,
    deps: bool = True,
    platforms: Sequence[str] = WHEEL_PLATFORMS,
) -> None:
    """Wheels of `packages` (and their dependencies, unless `deps` is False) for the target
    Python, via the cache."""
    if not packages:
        return
    cache = fetch(packages, python, deps=deps, platforms=platforms)
    # copy what the (now offline-satisfiable) resolution needs: resolve again from the cache
    what = f"copying {', '.join(packages)} from the wheel cache"
    _pip_download(packages, python, dest, what, platforms=platforms, deps=deps, only_from=cache)


def wheel_for(pin: str, directory: Path) -> Path:
    """The wheel file of `name==version` in `directory` (ContextError when there is none)."""
    wanted = _normalized_pin(pin)
    for wheel in sorted(directory.glob("*.whl")):
        if _WHEEL_NAME.match(wheel.name) and pin_of(wheel) == wanted:
            return wheel
    raise ContextError(f"no wheel for {pin} in {directory}")


def pins(wheels: Path) -> list[str]:
    """`name==version` for every wheel in the directory (pip.whl excluded)."""
    names = [wheel.name for wheel in sorted(wheels.glob("*.whl")) if wheel.name != "pip.whl"]
    matches = [match for name in names if (match := _WHEEL_NAME.match(name))]
    return [f"{match['name'].replace('_', '-')}=={match['version']}" for match in matches]


def unpacked_bytes(wheel: Path) -> int:
    """What a wheel's files take once installed (the sum of their sizes in the archive)."""
    with zipfile.ZipFile(wheel) as archive:
        return sum(info.file_size for info in archive.infolist())


def _normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass(frozen=True)
class Context:
    path: Path
    requirements: list[str]
    # the NVIDIA CUDA wheels of the image (cudagap: its base lacks what TensorFlow needs), unpacked
    cuda_wheels_bytes: int = 0
    # tf-keras (matrix.yaml tf_keras), unpacked: like the CUDA wheels, locked bytes the image adds
    tf_keras_bytes: int = 0
    # on the slim base: TensorFlow and its dependencies (the image's locked set), unpacked
    tensorflow_bytes: int = 0

    @property
    def cuda_wheels_mib(self) -> float:
        return self.cuda_wheels_bytes / 2**20

    @property
    def tf_keras_mib(self) -> float:
        return self.tf_keras_bytes / 2**20

    @property
    def tensorflow_mib(self) -> float:
        return self.tensorflow_bytes / 2**20


def assemble(
    image: Image,
    dockerfile_text: str,
    dest: Path,
    *,
    runtime_wheel: Path,
    runtime_extras: list[str],
    lock: wheel_locks.Lock,
    images_lock: wheel_locks.ImageLock | None = None,
) -> Context:
    """Write a complete build context for `image` into `dest` (created; emptied first). Every wheel
    in it is locked: its NVIDIA CUDA wheels by `lock`, the runtime's extras, the image's pip
    packages (with their dependencies) and pip itself by `images_lock` (default: the committed
    images/image-wheels.lock.yaml)."""
    if images_lock is None:
        images_lock = wheel_locks.load_images()
    python = image.base_python
    locked = locked_wheels(image, runtime_extras, lock, images_lock)
    if dest.exists():
        shutil.rmtree(dest)
    wheels = dest / "wheels"
    wheels.mkdir(parents=True)
    (dest / "Dockerfile").write_text(dockerfile_text, encoding="utf-8")
    shutil.copy2(runtime_wheel, wheels / runtime_wheel.name)
    pip_dir = dest / "pip-download"
    # One loop: each part downloaded (via the wheel cache) and every file checked against its
    # lock. The image's own set may take any wheel its base's glibc runs; the CUDA wheels are the
    # manylinux2014 files their lock names; tf-keras comes alone (its one dependency, TensorFlow,
    # is the base's: the context must not carry a second one); pip goes aside, to be pip.whl.
    parts = [
        (locked.image_set, wheels, IMAGE_WHEEL_PLATFORMS, True),
        (locked.cuda_wheels, wheels, WHEEL_PLATFORMS, True),
        (locked.tf_keras, wheels, WHEEL_PLATFORMS, False),
        ((locked.pip,), pip_dir, WHEEL_PLATFORMS, True),
    ]
    for files, into, platforms, deps in parts:
        download([f.pin for f in files], python, into, platforms=platforms, deps=deps)
        for wanted in files:
            wheel_locks.verify(wanted, wheel_for(wanted.pin, into))
    shutil.move(str(wheel_for(locked.pip.pin, pip_dir)), wheels / "pip.whl")
    shutil.rmtree(pip_dir)
    requirements = pins(wheels)
    # Every line carries the wheel's sha256 and the image's pip step runs with --require-hashes,
    # so a wheel changed in the context after this check (a kept --contexts folder, bake's
    # .tfgpu-contexts) is refused at build time. The locked wheels' hashes are the
    # locks' (verified above); the runtime wheel, built here, is hashed now.
    installed = [*locked.image_set, *locked.cuda_wheels, *locked.tf_keras]
    hashes = {_normalized_pin(f.pin): f.sha256 for f in installed}
    runtime_pin = pin_of(runtime_wheel)
    hashes[_normalized_pin(runtime_pin)] = lock_file.sha256(wheels / runtime_wheel.name)
    if unlocked := [p for p in requirements if _normalized_pin(p) not in hashes]:
        raise SpecError(
            f"{image.name}: its context holds wheels no lock names: {', '.join(unlocked)}",
            hint="a locked package gained a dependency: run `build.py lock`",
        )
    lines = [f"{pin} --hash=sha256:{hashes[_normalized_pin(pin)]}" for pin in requirements]
    (wheels / "requirements.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    adds = locked.added
    return Context(dest, requirements, adds.cuda_wheels, adds.tf_keras, adds.tensorflow)


def _normalized_pin(pin: str) -> str:
    name, _, version = pin.partition("==")
    return f"{_normalized(name)}=={version}"


def iter_contexts(
    images: list[Image],
    root: Path,
    dockerfile: Callable[[Image], str],
    runtime_extras: Sequence[str],
) -> Iterator[tuple[Image, Context]]:
    """Assemble the build context of each image under root/<image name>, one at a time (an
    image that adds NVIDIA's CUDA wheels has gigabytes of them), with the Dockerfile text
    `dockerfile` gives it (render.render_image); the runtime wheel is built once."""
    lock, images_lock = wheel_locks.load(), wheel_locks.load_images()
    for image in images:  # before any context: a lock that lacks an image's wheel stops it all
        locked_wheels(image, runtime_extras, lock, images_lock)
    root.mkdir(parents=True, exist_ok=True)
    wheel = build_runtime_wheel(root / ".runtime-wheel")
    log.info("runtime wheel %s", wheel.name)
    for image in images:
        ctx = assemble(
            image,
            dockerfile(image),
            root / image.name,
            runtime_wheel=wheel,
            runtime_extras=list(runtime_extras),
            lock=lock,
            images_lock=images_lock,
        )
        log.info("%s: context %s (%s)", image.name, ctx.path, ", ".join(ctx.requirements))
        if image.cuda_wheels:
            log.info(
                "%s: %s; %.0f MiB unpacked",
                image.name,
                image.cuda.summary,
                ctx.cuda_wheels_mib,
            )
        yield image, ctx
