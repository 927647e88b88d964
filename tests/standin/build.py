"""Build the stand-in base images offline.

No container registry is reachable on the machines that run the tests, so the
official ``tensorflow/tensorflow:2.21.0-gpu[-jupyter]`` bases cannot be pulled.
These stand-ins take their place under a local registry name, so that
``build.py build --base-registry tfgpu-standin.local`` exercises exactly the code
path of a team that builds from a registry mirror.

What a stand-in is: a ``debootstrap``ed Debian bookworm (Python 3.11, like the
real images' Python) with the **real CUDA build** of TensorFlow from PyPI and the
CUDA runtime, cuBLAS and cuDNN wheels that ``tensorflow[and-cuda]`` pins, installed
by the host's pip. ``tf.sysconfig.get_build_info()`` therefore reports CUDA 12.5 /
cuDNN 9 and the libraries really load. What it is not: Ubuntu 22.04, and there is
no GPU, no ``libcuda``, no NVML: nothing in it pretends to be a GPU.

Every stand-in carries a label with a hash of its inputs; when an image with the
same tag and the same hash exists, the build is skipped.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# Bump when the procedure below changes in a way the recipe dicts do not show;
# it is part of every key, so all stand-ins are rebuilt.
RECIPE_REVISION = 1

TF_VERSION = "2.21.0"
PY_SITE = "/usr/local/lib/python3.11/dist-packages"

REGISTRY = "tfgpu-standin.local"
NOCUDNN_REGISTRY = "tfgpu-standin-nocudnn.local"
GPU_TAG = f"{REGISTRY}/tensorflow/tensorflow:{TF_VERSION}-gpu"
JUPYTER_TAG = f"{REGISTRY}/tensorflow/tensorflow:{TF_VERSION}-gpu-jupyter"
NOCUDNN_TAG = f"{NOCUDNN_REGISTRY}/tensorflow/tensorflow:{TF_VERSION}-gpu"

KEY_LABEL = "io.tfgpu.standin.key"

SUITE = "bookworm"
# minbase keeps the tree small; ca-certificates because the real images have it.
DEBIAN_PACKAGES = ("python3", "python3-pip", "ca-certificates")

# The real CUDA build of TensorFlow, plus the lower bounds of the `[and-cuda]` pins
# of tensorflow 2.21.0 (`>=12.5.82,<13.0`, `>=12.5.3.2,<13.0`, `>=9.3.0.75,<10.0`,
# read with `pip install --dry-run --report - 'tensorflow[and-cuda]==2.21.0'`): the
# versions TensorFlow was built against (CUDA 12.5, cuDNN 9.3). Only the three
# libraries the runtime's `tfgpu check` looks for; the rest of `[and-cuda]` (cuFFT,
# cuSPARSE, NCCL, nvcc, …) would add gigabytes and is loaded only with a GPU.
GPU_REQUIREMENTS = (
    f"tensorflow=={TF_VERSION}",
    "nvidia-cuda-runtime-cu12==12.5.82",
    "nvidia-cublas-cu12==12.5.3.2",
    "nvidia-cudnn-cu12==9.3.0.75",
)
JUPYTER_REQUIREMENTS = ("notebook>=7,<8",)

BASE_ENV = {
    "PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "C.UTF-8",
    # What the nvidia/cuda bases under the real images set; they only tell the
    # NVIDIA container runtime what to mount, they make no GPU appear.
    "NVIDIA_VISIBLE_DEVICES": "all",
    "NVIDIA_DRIVER_CAPABILITIES": "compute,utility",
}
# The real -gpu-jupyter image's CMD (tensorflow/tools/dockerfiles,
# partials/jupyter.partial.Dockerfile).
JUPYTER_CMD = [
    "bash",
    "-c",
    "source /etc/bash.bashrc && jupyter notebook --notebook-dir=/tf --ip 0.0.0.0 "
    "--no-browser --allow-root",
]

CACHE = Path(os.environ.get("TFGPU_STANDIN_CACHE", Path.home() / ".cache" / "tfgpu-standin"))

_T0 = time.monotonic()


def progress(message: str) -> None:
    """One progress line on stderr, with the time since the build started."""
    print(f"[standin +{time.monotonic() - _T0:6.1f}s] {message}", file=sys.stderr, flush=True)


class StandinError(RuntimeError):
    """A step of the stand-in build failed; the message says which and why."""


@dataclass(frozen=True)
class Result:
    tag: str
    key: str
    built: bool
    seconds: float
    size_bytes: int


def _run(cmd: Sequence[str], *, what: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """Run a command, keep its output, and on failure raise with its tail."""
    proc = subprocess.run(list(cmd), text=True, capture_output=True, check=False, **kwargs)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-25:])
        raise StandinError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n{tail}")
    return proc  # type: ignore[no-any-return]


def _key(*parts: object) -> str:
    blob = json.dumps([RECIPE_REVISION, *parts], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def gpu_key() -> str:
    return _key("gpu", SUITE, DEBIAN_PACKAGES, GPU_REQUIREMENTS, BASE_ENV)


def jupyter_key() -> str:
    return _key("jupyter", gpu_key(), JUPYTER_REQUIREMENTS, JUPYTER_CMD, _JUPYTER_DOCKERFILE)


def nocudnn_key() -> str:
    return _key("nocudnn", gpu_key(), _NOCUDNN_DOCKERFILE)


def debian_mirror() -> str:
    """The Debian mirror the machine's apt already uses (override: TFGPU_STANDIN_MIRROR)."""
    if env := os.environ.get("TFGPU_STANDIN_MIRROR"):
        return env
    candidates: list[str] = []
    lists = [Path("/etc/apt/sources.list"), *sorted(Path("/etc/apt/sources.list.d").glob("*"))]
    for path in lists:
        if not path.is_file():
            continue
        text = path.read_text(errors="replace")
        if path.suffix == ".sources":  # deb822: "URIs: …" and "Suites: …" per stanza
            for stanza in re.split(r"\n\s*\n", text):
                uris = re.search(r"^URIs:\s*(.+)$", stanza, re.M)
                suites = re.search(r"^Suites:\s*(.+)$", stanza, re.M)
                if uris and suites and SUITE in suites.group(1).split():
                    candidates += uris.group(1).split()
        elif path.suffix == ".list" or path.name == "sources.list":
            for line in text.splitlines():
                m = re.match(r"^deb\s+(?:\[[^\]]*\]\s+)?(\S+)\s+(\S+)", line.strip())
                if m and m.group(2) == SUITE:
                    candidates.append(m.group(1))
    return candidates[0] if candidates else "http://deb.debian.org/debian"


# --------------------------------------------------------------------------- docker


def _docker_client() -> Any:
    import docker  # imported late: `python -m tests.standin --help` works without it

    return docker.from_env(timeout=600)


def existing_key(tag: str) -> str | None:
    """The input key of the image that has this tag, or None when there is none."""
    import docker.errors

    try:
        image = _docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return None
    labels = image.attrs.get("Config", {}).get("Labels") or {}
    return labels.get(KEY_LABEL)


def image_size(tag: str) -> int:
    return int(_docker_client().images.get(tag).attrs["Size"])


def _docker_build(context: Path, tag: str, *, what: str) -> None:
    """Build with the Docker SDK (the classic builder: this engine has no buildx)."""
    import docker.errors

    client = _docker_client()
    try:
        for chunk in client.api.build(
            path=str(context), tag=tag, rm=True, forcerm=True, decode=True, network_mode="none"
        ):
            if "error" in chunk:
                raise StandinError(f"{what}: docker build failed: {chunk['error']}")
            line = str(chunk.get("stream", "")).strip()
            if line.startswith("Step "):
                progress(f"  {what}: {line}")
    except docker.errors.APIError as exc:
        raise StandinError(f"{what}: docker build failed: {exc}") from exc


# --------------------------------------------------------------------------- pieces


def _pip(python: str, *args: str, what: str) -> None:
    _run([python, "-m", "pip", *args], what=what)


def host_python() -> str:
    """A host Python 3.11: the stand-in's Debian Python is 3.11, and pip --target
    installs wheels for the interpreter that runs it."""
    # (a tuple compare mypy cannot see through: it knows which Python it checks for)
    if tuple(sys.version_info)[:2] == (3, 11):
        return sys.executable
    if found := shutil.which("python3.11"):
        return found
    raise StandinError("a host Python 3.11 is needed to install wheels for the stand-in")


def download_wheels(requirements: Iterable[str], *, constraints: Path | None = None) -> Path:
    """Fill the wheel cache (a no-op when everything is there already)."""
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    args = ["download", "-q", "--only-binary=:all:", "-d", str(wheels), *requirements]
    if constraints:
        args += ["-c", str(constraints)]
    _pip(host_python(), *args, what="pip download")
    return wheels


def pip_target(
    requirements: Iterable[str], target: Path, *, constraints: Path | None = None
) -> None:
    """Install from the wheel cache only, so a rebuild needs no index at all."""
    wheels = CACHE / "wheels"
    args = ["install", "-q", "--no-index", "--find-links", str(wheels), "--no-compile"]
    args += ["--target", str(target), *requirements]
    if constraints:
        args += ["-c", str(constraints)]
    _pip(host_python(), *args, what="pip install --target")


def relocate_pip_extras(target: Path, usr_local: Path) -> None:
    """pip --target leaves console scripts in TARGET/bin and data files in
    TARGET/share and TARGET/etc; move them to /usr/local/{bin,share,etc} and point
    the scripts' shebangs at the image's Python instead of the host's."""
    for sub in ("bin", "share", "etc"):
        src = target / sub
        if not src.is_dir():
            continue
        dest = usr_local / sub
        dest.mkdir(parents=True, exist_ok=True)
        for item in src.iterdir():
            shutil.move(str(item), str(dest / item.name))
        src.rmdir()
    bindir = usr_local / "bin"
    if bindir.is_dir():
        for script in bindir.iterdir():
            if not script.is_file() or script.is_symlink():
                continue
            data = script.read_bytes()
            if data.startswith(b"#!") and b"python" in data.split(b"\n", 1)[0]:
                script.write_bytes(b"#!/usr/bin/python3" + data[data.index(b"\n") :])


def compile_site(site: Path) -> None:
    """Byte-compile with the image's paths in the .pyc files (fresh containers would
    otherwise recompile TensorFlow on every start, and tracebacks would name the
    host's build directory)."""
    _run(
        [host_python(), "-m", "compileall", "-q", "-j0", "-s", str(site), "-p", PY_SITE, str(site)],
        what="compileall",
    )


def debootstrap(rootfs: Path) -> None:
    debs = CACHE / "debs"
    debs.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    progress(f"debootstrap {SUITE} (minbase, {', '.join(DEBIAN_PACKAGES)}) from {mirror}")
    _run(
        [
            "debootstrap",
            "--variant=minbase",
            f"--include={','.join(DEBIAN_PACKAGES)}",
            f"--cache-dir={debs}",
            SUITE,
            str(rootfs),
            mirror,
        ],
        what="debootstrap",
    )


def docker_import(rootfs: Path, tag: str, *, key: str, env: dict[str, str], cmd: list[str]) -> None:
    changes = [f"ENV {k}={v}" for k, v in env.items()]
    changes += [f"CMD {json.dumps(cmd)}", f"LABEL {KEY_LABEL}={key}"]
    changes.append(
        'LABEL org.opencontainers.image.description="tfgpu test stand-in for '
        f'tensorflow/tensorflow:{TF_VERSION}-gpu (Debian {SUITE}, no GPU)"'
    )
    import_cmd = ["docker", "import"]
    for change in changes:
        import_cmd += ["--change", change]
    import_cmd += ["-", tag]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE
    )
    try:
        _run(import_cmd, what="docker import", stdin=tar.stdout)
    finally:
        assert tar.stdout is not None
        tar.stdout.close()
        if tar.wait() != 0:
            raise StandinError(f"tar of {rootfs} failed (exit {tar.returncode})")


def _frozen_site(tag: str) -> str:
    """`pip freeze` of the image's /usr/local site, run inside the image (no network)."""
    out = _docker_client().containers.run(
        tag,
        ["python3", "-m", "pip", "freeze", "--path", PY_SITE],
        remove=True,
        network_mode="none",
        stderr=False,
    )
    return out.decode() if isinstance(out, bytes) else str(out)


# --------------------------------------------------------------------------- images


def build_gpu(*, force: bool = False) -> Result:
    key, t0 = gpu_key(), time.monotonic()
    if not force and existing_key(GPU_TAG) == key:
        progress(f"{GPU_TAG} is up to date (key {key})")
        return Result(GPU_TAG, key, False, 0.0, image_size(GPU_TAG))
    progress(f"building {GPU_TAG} (key {key})")
    work = CACHE / "work"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work, prefix="gpu-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        debootstrap(rootfs)
        progress("debootstrap done")
        # The real images (Ubuntu 22.04) have no EXTERNALLY-MANAGED marker, so `pip
        # install` as root works in them; Debian 12 ships one (PEP 668). Removing it
        # makes the stand-in behave like the base it replaces.
        (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
        # The real images link `python` to python3; users run `python script.py`.
        (rootfs / "usr/local/bin/python").symlink_to("/usr/bin/python3")
        for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for item in (rootfs / junk).glob("*"):
                if item.is_file():
                    item.unlink()
        progress(f"downloading wheels into {CACHE / 'wheels'}: {', '.join(GPU_REQUIREMENTS)}")
        download_wheels(GPU_REQUIREMENTS)
        site = rootfs / PY_SITE.lstrip("/")
        progress(f"pip install --target {PY_SITE}")
        pip_target(GPU_REQUIREMENTS, site)
        relocate_pip_extras(site, rootfs / "usr/local")
        progress("byte-compiling")
        compile_site(site)
        progress("docker import")
        docker_import(rootfs, GPU_TAG, key=key, env=BASE_ENV, cmd=["bash"])
    return _done(GPU_TAG, key, t0)


_JUPYTER_DOCKERFILE = f"""\
FROM {GPU_TAG}
COPY site/ {PY_SITE}/
COPY local/ /usr/local/
# As in the real image: a notebook dir anyone can write to, and a writable
# /.local for users started with an arbitrary --user uid.
RUN mkdir -p /tf /.local && chmod a+rwx /tf /.local
WORKDIR /tf
EXPOSE 8888
CMD {json.dumps(JUPYTER_CMD)}
"""

_NOCUDNN_DOCKERFILE = f"""\
FROM {GPU_TAG}
# A TensorFlow build whose cuDNN is missing, as in the reported broken 2.18.0-gpu
# images: `build.py verify` must name what is missing.
RUN rm -rf {PY_SITE}/nvidia/cudnn {PY_SITE}/nvidia_cudnn_cu12-*.dist-info
"""


def build_jupyter(*, force: bool = False) -> Result:
    key, t0 = jupyter_key(), time.monotonic()
    if not force and existing_key(JUPYTER_TAG) == key:
        progress(f"{JUPYTER_TAG} is up to date (key {key})")
        return Result(JUPYTER_TAG, key, False, 0.0, image_size(JUPYTER_TAG))
    progress(f"building {JUPYTER_TAG} (key {key})")
    work = CACHE / "work"
    work.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=work, prefix="jupyter-") as tmp:
        ctx = Path(tmp)
        # Pin everything the base already has to the base's versions, so the COPY
        # below never replaces a package TensorFlow depends on with another version.
        constraints = ctx / "constraints.txt"
        constraints.write_text(_frozen_site(GPU_TAG))
        progress(f"downloading wheels: {', '.join(JUPYTER_REQUIREMENTS)}")
        download_wheels(JUPYTER_REQUIREMENTS, constraints=constraints)
        site = ctx / "site"
        pip_target(JUPYTER_REQUIREMENTS, site, constraints=constraints)
        relocate_pip_extras(site, ctx / "local")
        (ctx / "local").mkdir(exist_ok=True)
        compile_site(site)
        constraints.unlink()
        (ctx / "Dockerfile").write_text(_JUPYTER_DOCKERFILE + f"LABEL {KEY_LABEL}={key}\n")
        progress("docker build (no network)")
        _docker_build(ctx, JUPYTER_TAG, what="jupyter stand-in")
    return _done(JUPYTER_TAG, key, t0)


def build_nocudnn(*, force: bool = False) -> Result:
    key, t0 = nocudnn_key(), time.monotonic()
    if not force and existing_key(NOCUDNN_TAG) == key:
        progress(f"{NOCUDNN_TAG} is up to date (key {key})")
        return Result(NOCUDNN_TAG, key, False, 0.0, image_size(NOCUDNN_TAG))
    progress(f"building {NOCUDNN_TAG} (key {key})")
    with tempfile.TemporaryDirectory(prefix="tfgpu-nocudnn-") as tmp:
        ctx = Path(tmp)
        (ctx / "Dockerfile").write_text(_NOCUDNN_DOCKERFILE + f"LABEL {KEY_LABEL}={key}\n")
        _docker_build(ctx, NOCUDNN_TAG, what="nocudnn stand-in")
    return _done(NOCUDNN_TAG, key, t0)


def _done(tag: str, key: str, t0: float) -> Result:
    seconds = time.monotonic() - t0
    size = image_size(tag)
    progress(f"built {tag} in {seconds:.0f}s, {size / 2**20:.0f} MiB")
    return Result(tag, key, True, seconds, size)


BUILDERS = {"gpu": build_gpu, "jupyter": build_jupyter, "nocudnn": build_nocudnn}


def build_all(
    which: Iterable[str] = ("gpu", "jupyter", "nocudnn"), *, force: bool = False
) -> list[Result]:
    """Build (or reuse) the stand-ins, the gpu one first: the others are FROM it."""
    wanted = set(which)
    results = []
    for name in BUILDERS:  # dict order: gpu, jupyter, nocudnn
        if name in wanted:
            results.append(BUILDERS[name](force=force and name in wanted))
        elif name == "gpu" and wanted & {"jupyter", "nocudnn"}:
            results.append(build_gpu())
    return results
