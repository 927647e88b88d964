"""Build the stand-in base images offline.

No container registry is reachable on the machines that run the tests, so the official
``tensorflow/tensorflow:X-gpu[-jupyter]`` bases cannot be pulled. These stand-ins take their place
under a local registry name, so that ``build.py build --base-registry tfgpu-standin.local``
exercises exactly the code path of a team that builds from a registry mirror.

They reproduce the layout of the real bases of recipe ``cuda12.3-ubuntu22.04`` in
images/bases.yaml (tensorflow/build, tensorflow_runtime_dockerfiles/ at 9f81388…40dbd9d, the bases
of TensorFlow 2.16.1 to 2.21.0), so that the tests meet the failures users meet:

- Python 3.11 as ``/usr/bin/python3`` and ``/usr/bin/python``, pip in
  ``/usr/local/lib/python3.11/dist-packages`` (setup.python.sh: get-pip.py), no
  ``EXTERNALLY-MANAGED`` marker;
- **system** CUDA 12.3 and cuDNN 8.9.6, as gpu.packages.txt installs them from apt: the libraries
  of NVIDIA's PyPI wheels of the same versions (the newest ``*-12-3`` packages, CUDA 12.3 Update 2,
  are the ``tensorflow[and-cuda]==2.16.1`` pins; ``libcudnn8=8.9.6.50``) copied to
  ``/usr/local/cuda-12.3/targets/x86_64-linux/lib`` and ``/usr/lib/x86_64-linux-gnu``, with the
  loader configuration of NVIDIA's packages and ``ldconfig``;
- the ``libcuda.so.1`` stub in the loader's cache (setup.cuda.sh, ``z-cuda-stubs.conf``): a tiny
  C library (cuda_stub.c) whose ``cuInit`` returns 34, CUDA_ERROR_STUB_LIBRARY, as NVIDIA's does;
- the ``nvidia/cuda:12.3.0-base-ubuntu22.04`` environment verbatim (images/bases.yaml ``env``);
- TensorFlow from a plain ``pip install tensorflow==X`` (not ``[and-cuda]``): 2.21.0, which cannot
  use this CUDA (it needs CUDA 12.5 and cuDNN 9: the public bug), and 2.17.0, which can;
- the ``jupyter`` target for 2.21.0: the real CMD, ``WORKDIR /tf``, ``EXPOSE 8888``, an
  ``/etc/bash.bashrc``, and ``jupyter matplotlib jupyter_http_over_ws`` with a prometheus-client
  older than the kit's (a Jupyter stack pins whatever was current when the image was built).

What they are not: Ubuntu (Debian bookworm from debootstrap, whose Python is also 3.11 and whose
glibc is newer); CUDA's compat package (cuda-compat-12-3: not published outside NVIDIA's apt
repository), TensorRT, the CUDA tools, build-essential. Nothing in them pretends to be a GPU.

The bases of recipe ``cuda11.8-ubuntu22.04`` (TensorFlow 2.14.0 and 2.15.0; tensorflow/build
tensorflow_runtime_dockerfiles/ at a65b114…2834) are reproduced the same way (``CUDA11``):
``FROM nvidia/cuda:11.8.0-base-ubuntu22.04`` and its ENV, system CUDA 11.8 and cuDNN 8.6.0 from the
cu11 wheels (gpu.packages.txt: the ``*-11-8`` packages, ``libcudnn8=8.6.0.163-1+cuda11.8``), the
``libcuda.so.1`` stub, and a plain ``pip install tensorflow==X`` with the dependencies of its time
(``CUDA11.pins``). There, TensorFlow 2.14 registers the GPU but finds cuDNN 8.6 where it was built
with 8.7; TensorFlow 2.15 (CUDA 12.2) cannot use the GPU at all.

The slim variant's base (bases.yaml ``slim``: Docker's ``python:3.11-slim-bookworm``, no CUDA) is
reproduced from the same Debian 12 tree (``SLIM``): the same Debian release and glibc 2.36, Python
3.11 with pip, ``python``/``python3`` in /usr/local/bin as docker-library/python links them, its
ENV (PATH, LANG) and CMD verbatim, no CUDA and no NVIDIA environment. What it is not: a Python
built from source into /usr/local (here Debian's 3.11 in /usr/bin, so packages go to
``/usr/local/lib/python3.11/dist-packages``, not ``site-packages``; the kit's template finds
either), the image's exact package list (debootstrap's minbase, not debian:bookworm-slim).

Every stand-in carries a label with a hash of its inputs; when an image with the same tag and the
same hash exists, the build is skipped.
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
import zipfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tests.base_standins.cache_lock import held

# Bump when the procedure below changes in a way the recipe data does not show;
# it is part of every key, so all stand-ins are rebuilt.
RECIPE_REVISION = 2

ROOT = Path(__file__).resolve().parents[2]
BASES_YAML = ROOT / "images" / "bases.yaml"
PY_SITE = "/usr/local/lib/python3.11/dist-packages"
MULTIARCH_LIB = "/usr/lib/x86_64-linux-gnu"
REGISTRY = "tfgpu-standin.local"
KEY_LABEL = "io.tfgpu.standin.key"


@dataclass(frozen=True)
class CudaRecipe:
    """One bases.yaml recipe as the stand-ins reproduce it: where its system CUDA goes, from which
    wheels, its loader configuration, and the TensorFlow versions built on it."""

    name: str  # the bases.yaml recipe
    cuda_home: str  # /usr/local/cuda-X.Y
    system_cuda: dict[str, str]  # wheel pin -> folder its nvidia/*/lib/*.so* files go to
    ld_so_conf: dict[str, str]  # /etc/ld.so.conf.d/NAME -> content
    what: str  # "CUDA 12.3 and cuDNN 8.9.6", for the progress lines
    tf_versions: tuple[str, ...]
    # per TensorFlow version: constraints for its `pip install` (the dependencies of its time;
    # none: today's resolution, which the 12.3 recipe's releases still install and import with)
    pins: dict[str, tuple[str, ...]]

    @property
    def cuda_lib(self) -> str:
        return f"{self.cuda_home}/targets/x86_64-linux/lib"

    @property
    def major_link(self) -> str:
        """/usr/local/cuda-12 (update-alternatives in the real packages; a plain link here)."""
        return self.cuda_home.rsplit(".", 1)[0]

    @property
    def tag(self) -> str:
        return f"{REGISTRY}/standin/{self.name}:base"


def _loader_conf(major: str) -> dict[str, str]:
    """The loader configuration NVIDIA's packages install (cuda-toolkit-config-common and
    cuda-toolkit-MAJOR-config-common, as seen in the nvidia/cuda images; the .deb files themselves
    are not reachable from here), the nvidia/cuda base's own (dist/X/ubuntu2204/base/Dockerfile)
    and setup.cuda.sh's stub entry."""
    return {
        "000_cuda.conf": "/usr/local/cuda/targets/x86_64-linux/lib\n",
        f"988_cuda-{major}.conf": f"/usr/local/cuda-{major}/targets/x86_64-linux/lib\n",
        "nvidia.conf": "/usr/local/nvidia/lib\n/usr/local/nvidia/lib64\n",
        "z-cuda-stubs.conf": "/usr/local/cuda/lib64/stubs\n",
    }


def _system_cuda(home: str, pins: Sequence[str], cudnn: str) -> dict[str, str]:
    lib = f"{home}/targets/x86_64-linux/lib"
    out = {pin: (f"{home}/extras/CUPTI/lib64" if "-cupti-" in pin else lib) for pin in pins}
    out[cudnn] = MULTIARCH_LIB  # libcudnn8 puts cuDNN in the multiarch folder
    return out


# System CUDA of the real base, from NVIDIA's PyPI wheels of the same versions. gpu.packages.txt
# installs the newest *-12-3 packages (CUDA 12.3 Update 2 for every image of the recipe, see
# images/bases.yaml), whose versions are the tensorflow[and-cuda]==2.16.1 pins; cuDNN is pinned
# there: libcudnn8=8.9.6.50-1+cuda12.2.
CUDA12 = CudaRecipe(
    name="cuda12.3-ubuntu22.04",
    cuda_home="/usr/local/cuda-12.3",
    system_cuda=_system_cuda(
        "/usr/local/cuda-12.3",
        (
            "nvidia-cuda-runtime-cu12==12.3.101",
            "nvidia-cublas-cu12==12.3.4.1",
            "nvidia-cufft-cu12==11.0.12.1",
            "nvidia-curand-cu12==10.3.4.107",
            "nvidia-cusolver-cu12==11.5.4.101",
            "nvidia-cusparse-cu12==12.2.0.103",
            "nvidia-nvjitlink-cu12==12.3.101",
            "nvidia-cuda-nvrtc-cu12==12.3.107",
            "nvidia-cuda-cupti-cu12==12.3.101",
        ),
        "nvidia-cudnn-cu12==8.9.6.50",
    ),
    ld_so_conf=_loader_conf("12"),
    what="CUDA 12.3 and cuDNN 8.9.6",
    tf_versions=("2.21.0", "2.17.0"),  # 2.21.0 needs the kit's repair, 2.17.0 does not
    pins={},
)
# tensorflow/build tensorflow_runtime_dockerfiles/gpu.packages.txt at a65b114 (the recipe of the
# 2.14.0 and 2.15.0 bases): cuda-libraries-11-8, cuda-nvrtc-11-8, libcufft-11-8, libcurand-11-8,
# libcusolver-11-8, libcusparse-11-8, libcublas-11-8, cuda-cupti-11-8 … unversioned (CUDA 11.8.0
# had no update, so these are the CUDA 11.8.0 libraries, the versions of the cu11 wheels below)
# and libcudnn8=8.6.0.163-1+cuda11.8. cuda-nvrtc-11-8 is the runtime package: libnvrtc.so.11.2 and
# libnvrtc-builtins.so.11.8, which is what the nvrtc wheel holds. The unversioned `libnvrtc.so`
# belongs to cuda-nvrtc-dev-11-8, which gpu.packages.txt does not list (the nvidia/cuda *devel*
# images get it through cuda-libraries-dev-11-8): the stand-in has no libnvrtc.so either.
CUDA11 = CudaRecipe(
    name="cuda11.8-ubuntu22.04",
    cuda_home="/usr/local/cuda-11.8",
    system_cuda=_system_cuda(
        "/usr/local/cuda-11.8",
        (
            "nvidia-cuda-runtime-cu11==11.8.89",
            "nvidia-cublas-cu11==11.11.3.6",
            "nvidia-cufft-cu11==10.9.0.58",
            "nvidia-curand-cu11==10.3.0.86",
            "nvidia-cusolver-cu11==11.4.1.48",
            "nvidia-cusparse-cu11==11.7.5.86",
            "nvidia-cuda-nvrtc-cu11==11.8.89",
            "nvidia-cuda-cupti-cu11==11.8.87",
        ),
        "nvidia-cudnn-cu11==8.6.0.163",
    ),
    ld_so_conf=_loader_conf("11"),
    what="CUDA 11.8 and cuDNN 8.6.0",
    tf_versions=("2.14.0", "2.15.0"),
    # The real images were built in 2023 (bases.yaml `released`): numpy 1.26 (2.x did not exist;
    # TensorFlow 2.14's metadata does not exclude it, and its C extensions fail under it), and
    # wrapt 1.14 (tensorflow needs <1.15, which has no cp311 wheel: pip built it from its sdist,
    # as the real image's build-essential did).
    pins={
        "2.14.0": ("numpy==1.26.0", "wrapt==1.14.1"),  # numpy 1.26.0: 2023-09-16
        "2.15.0": ("numpy==1.26.2", "wrapt==1.14.1"),  # numpy 1.26.2: 2023-11-12
    },
)
RECIPES = (CUDA12, CUDA11)
SOURCE_ONLY = ("wrapt==1.14.1",)  # pins with no cp311 wheel on PyPI (build_sdist_wheels)

# Names kept for the tests that use the 12.3 stand-ins.
RECIPE = CUDA12.name
CUDA_TAG = CUDA12.tag
TF_VERSIONS = CUDA12.tf_versions
JUPYTER_VERSION = "2.21.0"
CUDA11_VERSIONS = CUDA11.tf_versions


def recipe_of(version: str) -> CudaRecipe:
    for r in RECIPES:
        if version in r.tf_versions:
            return r
    raise StandinError(f"no stand-in recipe builds TensorFlow {version}")


def gpu_tag(version: str) -> str:
    return f"{REGISTRY}/tensorflow/tensorflow:{version}-gpu"


def jupyter_tag(version: str = JUPYTER_VERSION) -> str:
    return f"{REGISTRY}/tensorflow/tensorflow:{version}-gpu-jupyter"


GPU_TAG = gpu_tag(JUPYTER_VERSION)
JUPYTER_TAG = jupyter_tag()

SUITE = "bookworm"
# minbase keeps the tree small; ca-certificates because the real images have it.
DEBIAN_PACKAGES = ("python3", "ca-certificates")

PIP_REQUIREMENT = "pip==25.3"  # setup.python.sh: get-pip.py, then `pip install --upgrade pip`

# The Jupyter target: jupyter.requirements.txt, plus a prometheus-client older than the kit's.
JUPYTER_REQUIREMENTS = (
    "jupyter",
    "matplotlib",
    "jupyter_http_over_ws",
    "prometheus-client==0.17.1",
)

# /etc/bash.bashrc: the real one (tensorflow_runtime_dockerfiles/bashrc) prints a banner and runs
# ldconfig, but only in interactive shells: its first line returns when PS1 is empty, which is the
# case in the jupyter target's `bash -c "source /etc/bash.bashrc && jupyter …"`. This one keeps
# that behaviour in our own words.
BASHRC = """\
# Stand-in for the TensorFlow images' /etc/bash.bashrc: nothing happens in a non-interactive shell.
[ -z "$PS1" ] && return
export PS1="tf-docker \\w > "
echo "TensorFlow stand-in image (tfgpu tests)"
"""
TUTORIALS_README = "Stand-in for the TensorFlow tutorials folder of the real jupyter image.\n"

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


def recipe(name: str = RECIPE) -> dict[str, Any]:
    """The bases.yaml recipe a stand-in reproduces (its env is used verbatim)."""
    data = yaml.safe_load(BASES_YAML.read_text(encoding="utf-8"))
    return dict(data["recipes"][name])


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


def cuda_key(r: CudaRecipe = CUDA12) -> str:
    stub = (Path(__file__).parent / "cuda_stub.c").read_text(encoding="utf-8")
    return _key(
        "cuda", SUITE, DEBIAN_PACKAGES, r.system_cuda, r.ld_so_conf, PIP_REQUIREMENT, BASHRC,
        stub, recipe(r.name),
    )  # fmt: skip


def gpu_key(version: str) -> str:
    r = recipe_of(version)
    parts: list[object] = ["gpu", cuda_key(r), version, _tf_dockerfile(version)]
    if version in r.pins:  # (the 12.3 keys stay what they were: those stand-ins are not rebuilt)
        parts.append(r.pins[version])
    return _key(*parts)


def jupyter_key() -> str:
    return _key("jupyter", gpu_key(JUPYTER_VERSION), JUPYTER_REQUIREMENTS, _jupyter_dockerfile())


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
    import docker  # imported late: `python -m tests.base_standins --help` works without it

    return docker.from_env(timeout=900)


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


def download_wheels(
    requirements: Iterable[str],
    *,
    constraints: Path | None = None,
    no_deps: bool = False,
    local: bool = False,
) -> Path:
    """Fill the wheel cache (a no-op when everything is there already); `local`: the wheels
    built into the cache (build_sdist_wheels) count as candidates too."""
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    args = ["download", "-q", "--only-binary=:all:", "-d", str(wheels), *requirements]
    if local:
        args += ["--find-links", str(wheels)]
    if constraints:
        args += ["-c", str(constraints)]
    if no_deps:
        args.append("--no-deps")
    with held(CACHE, "wheels"):
        _pip(host_python(), *args, what="pip download")
    return wheels


def build_sdist_wheels(pins: Iterable[str]) -> None:
    """Wheels, into the cache, of the pins that PyPI has as source only for Python 3.11 (wrapt
    1.14: the real images compiled it with their build-essential; here the host's gcc)."""
    wheels = CACHE / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    for pin in pins:
        name, _, version = pin.partition("==")
        with held(CACHE, "wheels"):
            if not list(wheels.glob(f"{name.replace('-', '_')}-{version}-*.whl")):
                progress(f"building a wheel of {pin} (source only on PyPI for Python 3.11)")
                _pip(host_python(), "wheel", "-q", "--no-deps", "-w", str(wheels), pin, what=pin)


def pip_target(
    requirements: Iterable[str], target: Path, *, constraints: Path | None = None
) -> None:
    """Install from the wheel cache only, so a rebuild needs no index at all."""
    wheels = CACHE / "wheels"
    args = ["install", "-q", "--no-index", "--find-links", str(wheels), "--no-compile"]
    args += ["--target", str(target), *requirements]
    if constraints:
        args += ["-c", str(constraints)]
    with held(CACHE, "wheels"):
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


def debs_cache(suite: str, arch: str) -> Path:
    """debootstrap's --cache-dir, one per suite and architecture: two debootstraps never write
    one folder (each runs under its rootfs tarball's lock, cache_lock.py)."""
    return CACHE / "debs" / f"{suite}-{arch}"


def debootstrap(rootfs: Path) -> None:
    debs = debs_cache(SUITE, "amd64")
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


def _wheel_file(pin: str) -> Path:
    name, _, version = pin.partition("==")
    prefix = f"{name.replace('-', '_')}-{version}-"
    found = sorted((CACHE / "wheels").glob(f"{prefix}*.whl"))
    if not found:
        raise StandinError(f"{pin}: no wheel in {CACHE / 'wheels'} after pip download")
    return found[-1]


def install_system_cuda(rootfs: Path, r: CudaRecipe) -> None:
    """The base's CUDA and cuDNN as system libraries (see CudaRecipe.system_cuda)."""
    download_wheels(r.system_cuda, no_deps=True)
    for pin, dest in r.system_cuda.items():
        target = rootfs / dest.lstrip("/")
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(_wheel_file(pin)) as wheel:
            for info in wheel.infolist():
                if re.match(r"^nvidia/[^/]+/lib/lib[^/]+\.so[.0-9]*$", info.filename):
                    path = target / Path(info.filename).name
                    with wheel.open(info) as src, open(path, "wb") as out:
                        shutil.copyfileobj(src, out)
                    path.chmod(0o755)
    home = rootfs / r.cuda_home.lstrip("/")
    (home / "lib64").symlink_to("targets/x86_64-linux/lib")
    # /usr/local/cuda and /usr/local/cuda-MAJOR point at the toolkit (update-alternatives in the
    # real packages; plain links here)
    (rootfs / "usr/local/cuda").symlink_to(r.cuda_home)
    (rootfs / r.major_link.lstrip("/")).symlink_to(r.cuda_home)


def install_stub(rootfs: Path, r: CudaRecipe) -> None:
    """setup.cuda.sh: the driver stub as libcuda.so.1 in the loader's cache."""
    stubs = rootfs / r.cuda_lib.lstrip("/") / "stubs"
    stubs.mkdir(parents=True, exist_ok=True)
    _run(
        [
            "gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-Wl,-soname,libcuda.so.1",
            "-o", str(stubs / "libcuda.so"), str(Path(__file__).parent / "cuda_stub.c"),
        ],
        what="compiling the libcuda stub (gcc; Debian: apt-get install gcc)",
    )  # fmt: skip
    (stubs / "libcuda.so.1").symlink_to("libcuda.so")
    conf = rootfs / "etc/ld.so.conf.d"
    for name, text in r.ld_so_conf.items():
        (conf / name).write_text(text)
    _run(["ldconfig", "-r", str(rootfs)], what="ldconfig in the stand-in")


def install_python(rootfs: Path) -> None:
    """setup.python.sh: python3.11 as python3 and python, pip from its wheel into dist-packages."""
    # Debian 12 marks its Python externally managed (PEP 668); the real images have no marker.
    (rootfs / "usr/lib/python3.11/EXTERNALLY-MANAGED").unlink(missing_ok=True)
    (rootfs / "usr/bin/python3").unlink()
    (rootfs / "usr/bin/python3").symlink_to("/usr/bin/python3.11")
    (rootfs / "usr/bin/python").symlink_to("/usr/bin/python3.11")
    download_wheels([PIP_REQUIREMENT], no_deps=True)
    site = rootfs / PY_SITE.lstrip("/")
    pip_target([PIP_REQUIREMENT], site)
    relocate_pip_extras(site, rootfs / "usr/local")
    bashrc = rootfs / "etc/bash.bashrc"
    bashrc.write_text(BASHRC)
    bashrc.chmod(0o777)  # gpu.Dockerfile: chmod a+rwx /etc/bash.bashrc


def docker_import(
    rootfs: Path,
    tag: str,
    *,
    key: str,
    env: dict[str, str],
    cmd: list[str],
    name: str,
    of: str = "recipe of tensorflow/tensorflow",
) -> None:
    changes = [f"ENV {k}={json.dumps(v) if ' ' in v else v}" for k, v in env.items()]
    changes += [f"CMD {json.dumps(cmd)}", f"LABEL {KEY_LABEL}={key}"]
    changes.append(
        'LABEL org.opencontainers.image.description="tfgpu test stand-in for the '
        f'{name} {of} (Debian {SUITE}, no GPU)"'
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


def _work(prefix: str) -> tempfile.TemporaryDirectory[str]:
    work = CACHE / "work"
    work.mkdir(parents=True, exist_ok=True)
    return tempfile.TemporaryDirectory(dir=work, prefix=prefix)


# --------------------------------------------------------------------------- images


def base_rootfs(rootfs: Path) -> None:
    """Debian and Python (debootstrap, setup.python.sh): the part of the tree every recipe
    shares. The first recipe built keeps it as a tarball in the cache; the others unpack it
    instead of running debootstrap again (about 1.5 min on a 2-core machine)."""
    key = _key("rootfs", SUITE, DEBIAN_PACKAGES, PIP_REQUIREMENT, BASHRC)
    tarball = CACHE / "rootfs" / f"{SUITE}-python-{key}.tar"
    with held(CACHE, tarball.name):
        _base_rootfs(rootfs, tarball)


def _base_rootfs(rootfs: Path, tarball: Path) -> None:
    if tarball.is_file():
        progress(f"Debian {SUITE} and Python 3.11 from {tarball}")
        rootfs.mkdir(parents=True)
        _run(["tar", "--numeric-owner", "-xpf", str(tarball), "-C", str(rootfs)], what="tar -x")
        return
    debootstrap(rootfs)
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (rootfs / junk).glob("*"):
            if item.is_file():
                item.unlink()
    progress("Python 3.11 and pip (setup.python.sh)")
    install_python(rootfs)
    tarball.parent.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_name(f".{tarball.name}.{os.getpid()}")  # renamed when complete
    _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], what="tar -c")
    partial.rename(tarball)


def build_cuda(r: CudaRecipe = CUDA12, *, force: bool = False) -> Result:
    """The recipe up to `pip install tensorflow`: the layer every TensorFlow stand-in of the
    recipe shares."""
    tag, key, t0 = r.tag, cuda_key(r), time.monotonic()
    if not force and existing_key(tag) == key:
        progress(f"{tag} is up to date (key {key})")
        return Result(tag, key, False, 0.0, image_size(tag))
    progress(f"building {tag} (key {key})")
    with _work("cuda-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        base_rootfs(rootfs)
        progress(f"system {r.what} ({len(r.system_cuda)} wheels' libraries)")
        install_system_cuda(rootfs, r)
        progress("libcuda stub, loader configuration, ldconfig (setup.cuda.sh)")
        install_stub(rootfs, r)
        progress("docker import")
        env = dict(recipe(r.name)["env"])
        docker_import(rootfs, tag, key=key, env=env, cmd=["/bin/bash"], name=r.name)
    return _done(tag, key, t0)


def slim_tag() -> str:
    """The slim base's stand-in, under the stand-ins' registry as the kit's FROM names it."""
    slim = yaml.safe_load(BASES_YAML.read_text(encoding="utf-8"))["slim"]
    return f"{REGISTRY}/{slim['repository']}:{slim['tag']}"


def slim_key() -> str:
    slim = yaml.safe_load(BASES_YAML.read_text(encoding="utf-8"))["slim"]
    return _key("slim", SUITE, DEBIAN_PACKAGES, PIP_REQUIREMENT, BASHRC, slim)


def build_slim(*, force: bool = False) -> Result:
    """The slim variant's base: Debian 12 and Python 3.11, nothing of CUDA (see the docstring)."""
    tag, key, t0 = slim_tag(), slim_key(), time.monotonic()
    if not force and existing_key(tag) == key:
        progress(f"{tag} is up to date (key {key})")
        return Result(tag, key, False, 0.0, image_size(tag))
    progress(f"building {tag} (key {key})")
    slim = yaml.safe_load(BASES_YAML.read_text(encoding="utf-8"))["slim"]
    with _work("slim-") as tmp:
        rootfs = Path(tmp) / "rootfs"
        base_rootfs(rootfs)
        # docker-library/python links python3 (and python, pip…) in /usr/local/bin, first on PATH
        local_bin = rootfs / "usr/local/bin"
        local_bin.mkdir(parents=True, exist_ok=True)
        for name in ("python3", "python"):
            (local_bin / name).unlink(missing_ok=True)
            (local_bin / name).symlink_to("/usr/bin/python3.11")
        progress("docker import")
        docker_import(
            rootfs,
            tag,
            key=key,
            env=dict(slim["env"]),
            cmd=list(slim["cmd"]),
            name="slim",
            of=f"variant's base, {slim['repository']}:{slim['tag']}",
        )
    return _done(tag, key, t0)


def _tf_dockerfile(version: str) -> str:
    return f"""\
FROM {recipe_of(version).tag}
# gpu.Dockerfile: RUN pip install --no-cache-dir tensorflow=={version} (installed on the host
# into site/ with the same pip resolution, since the build has no network)
COPY site/ {PY_SITE}/
COPY local/ /usr/local/
"""


def build_gpu(version: str, *, force: bool = False) -> Result:
    tag, key, t0 = gpu_tag(version), gpu_key(version), time.monotonic()
    if not force and existing_key(tag) == key:
        progress(f"{tag} is up to date (key {key})")
        return Result(tag, key, False, 0.0, image_size(tag))
    progress(f"building {tag} (key {key})")
    with _work(f"tf{version}-") as tmp:
        ctx = Path(tmp)
        requirement = f"tensorflow=={version}"
        progress(f"downloading {requirement} into {CACHE / 'wheels'}")
        pins = recipe_of(version).pins.get(version, ())
        constraints = None
        if pins:
            constraints = ctx / "constraints.txt"
            constraints.write_text("".join(f"{pin}\n" for pin in pins))
            build_sdist_wheels(p for p in pins if p in SOURCE_ONLY)
        download_wheels([requirement], constraints=constraints, local=bool(pins))
        site = ctx / "site"
        pip_target([requirement], site, constraints=constraints)
        if constraints is not None:
            constraints.unlink()
        relocate_pip_extras(site, ctx / "local")
        (ctx / "local").mkdir(exist_ok=True)
        compile_site(site)
        (ctx / "Dockerfile").write_text(_tf_dockerfile(version) + f"LABEL {KEY_LABEL}={key}\n")
        progress("docker build (no network)")
        _docker_build(ctx, tag, what=f"{version} stand-in")
    return _done(tag, key, t0)


def _jupyter_dockerfile() -> str:
    target = recipe()["targets"]["jupyter"]
    return f"""\
FROM {gpu_tag(JUPYTER_VERSION)}
# gpu.Dockerfile target jupyter: pip install -U jupyter matplotlib jupyter_http_over_ws (on the
# host, into site/), then setup.jupyter.sh: a notebook folder and /.local anyone can write to, and
# the IPython kernel spec. (Its `jupyter serverextension enable` does not exist with Notebook 7 and
# fails there without stopping the build; the tutorials are downloaded there: a README here.)
COPY site/ {PY_SITE}/
COPY local/ /usr/local/
COPY README.md /tf/tensorflow-tutorials/README.md
RUN mkdir -p /.local && chmod -R a+rwx /tf /.local && python3 -m ipykernel.kernelspec
WORKDIR {target["workdir"]}
EXPOSE {" ".join(str(port) for port in target["expose"])}
CMD {json.dumps(target["cmd"])}
"""


def build_jupyter(*, force: bool = False) -> Result:
    tag, key, t0 = JUPYTER_TAG, jupyter_key(), time.monotonic()
    if not force and existing_key(tag) == key:
        progress(f"{tag} is up to date (key {key})")
        return Result(tag, key, False, 0.0, image_size(tag))
    progress(f"building {tag} (key {key})")
    with _work("jupyter-") as tmp:
        ctx = Path(tmp)
        # Pin everything the base already has to the base's versions, so the COPY
        # below never replaces a package TensorFlow depends on with another version.
        constraints = ctx / "constraints.txt"
        frozen = [
            line
            for line in _frozen_site(gpu_tag(JUPYTER_VERSION)).splitlines()
            if not line.lower().startswith("prometheus")
        ]
        constraints.write_text("\n".join(frozen) + "\n")
        progress(f"downloading wheels: {', '.join(JUPYTER_REQUIREMENTS)}")
        download_wheels(JUPYTER_REQUIREMENTS, constraints=constraints)
        site = ctx / "site"
        pip_target(JUPYTER_REQUIREMENTS, site, constraints=constraints)
        relocate_pip_extras(site, ctx / "local")
        (ctx / "local").mkdir(exist_ok=True)
        compile_site(site)
        constraints.unlink()
        (ctx / "README.md").write_text(TUTORIALS_README)
        (ctx / "Dockerfile").write_text(_jupyter_dockerfile() + f"LABEL {KEY_LABEL}={key}\n")
        progress("docker build (no network)")
        _docker_build(ctx, tag, what="jupyter stand-in")
    return _done(tag, key, t0)


def _done(tag: str, key: str, t0: float) -> Result:
    seconds = time.monotonic() - t0
    size = image_size(tag)
    progress(f"built {tag} in {seconds:.0f}s, {size / 2**20:.0f} MiB")
    return Result(tag, key, True, seconds, size)


# name -> (builder, the names it is built FROM)
BUILDERS: dict[str, tuple[Any, tuple[str, ...]]] = {
    "cuda": (lambda force: build_cuda(CUDA12, force=force), ()),
    **{
        f"gpu-{version}": ((lambda force, v=version: build_gpu(v, force=force)), ("cuda",))
        for version in CUDA12.tf_versions
    },
    "jupyter": (build_jupyter, ("cuda", f"gpu-{JUPYTER_VERSION}")),
    "slim": (lambda force: build_slim(force=force), ()),
    "cuda11": (lambda force: build_cuda(CUDA11, force=force), ()),
    **{
        f"gpu-{version}": ((lambda force, v=version: build_gpu(v, force=force)), ("cuda11",))
        for version in CUDA11.tf_versions
    },
}
# The 12.3 stand-ins (what `build_all()` builds by default: the 2.21 and 2.17 tests need no more)
CUDA12_STANDINS = ("cuda", *(f"gpu-{v}" for v in CUDA12.tf_versions), "jupyter")
CUDA11_STANDINS = ("cuda11", *(f"gpu-{v}" for v in CUDA11.tf_versions))
SLIM_STANDINS = ("slim",)


def build_all(which: Iterable[str] | None = None, *, force: bool = False) -> list[Result]:
    """Build (or reuse) the stand-ins in `which` (default: all) and what they are built FROM;
    `force` rebuilds the named ones even when up to date."""
    wanted = set(BUILDERS if which is None else which)
    needed = set(wanted)
    for name in wanted:
        needed.update(BUILDERS[name][1])
    results = []
    for name, (builder, _) in BUILDERS.items():  # dict order: parents first
        if name in needed:
            with held(CACHE, f"image-{name}"):
                results.append(builder(force=force and name in wanted))
    return results
