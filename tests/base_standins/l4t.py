"""The stand-in of the Jetson (L4T, arm64) base, built offline for arm64 under QEMU.

images/l4t.yaml builds FROM ``nvcr.io/nvidia/l4t-tensorflow:r35.2.1-tf2.11-py3``, which no machine
of ours can pull. This stand-in takes its place as
``tfgpu-standin.local/nvidia/l4t-tensorflow:r35.2.1-tf2.11-py3`` (``build.py build l4t
--base-registry tfgpu-standin.local``). It is an **arm64** image, built where the kernel can run
arm64 binaries (QEMU's ``qemu-aarch64`` binfmt_misc handler, or an arm64 host):

- Debian 11 (bullseye) arm64 from ``debootstrap --arch=arm64 --variant=minbase
  --include=python3,python3-pip`` (Python 3.9), kept as a tarball in the cache;
- TensorFlow of the image's minor from PyPI's aarch64 wheels, downloaded on the host with
  ``pip download --platform manylinux2014_aarch64 --python-version 3.9 --only-binary=:all:`` and
  installed on the host with ``pip install --target`` for that platform (no index, no emulated
  pip), into ``/usr/local/lib/python3.9/dist-packages`` where the real image's ``pip3 install``
  puts it; then imported once by the image's own Python (in a chroot, emulated), which writes
  the byte code of what an import needs. PyPI's
  ``tensorflow`` 2.11.0 for aarch64 is a shim whose one dependency, ``tensorflow-cpu-aws==2.11.0``,
  carries a ``platform_machine`` marker that pip evaluates on the *host*, so it is named
  explicitly; numpy is pinned below 1.24 (numpy 2 fails TensorFlow 2.11 at import);
- the real image's ENV, as NVIDIA's build sets it (``ENV`` below, with its source);
- the files the runtime reads on a Jetson (tfgpu/machine/tegra.py), for a named board, under
  ``TEGRA_ROOT``: tests point ``TFGPU_SYSROOT`` at it (``/proc`` in a container is the host's, so
  they cannot be the image's own ``/proc`` files).

Every difference from the real base is in ``DIFFERENCES`` (printed by docs/harness.md's table and
the README's Jetson section)."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import time
from pathlib import Path

import yaml

from tests.base_standins.build import (
    CACHE,
    KEY_LABEL,
    REGISTRY,
    Result,
    StandinError,
    _key,
    _run,
    _work,
    debian_mirror,
    debs_cache,
    existing_key,
    host_python,
    image_size,
    progress,
    relocate_pip_extras,
)
from tests.base_standins.cache_lock import held

ROOT = Path(__file__).resolve().parents[2]
L4T_YAML = ROOT / "images" / "l4t.yaml"
SUITE = "bullseye"  # Debian 11: Python 3.9, glibc 2.31 (the real base: Ubuntu 20.04, glibc 2.31)
ARCH = "arm64"
PLATFORM = "linux/arm64"
PYTHON = "3.9"
PY_SITE = "/usr/local/lib/python3.9/dist-packages"
# python3-pip as the real image installs it (Dockerfile.tensorflow: apt-get install python3-pip …);
# it also brings python3-distutils, which pip needs on Python 3.9 (Debian splits it out) and which
# the kit's pip step, run from its own pip wheel, fails without.
DEBIAN_PACKAGES = ("python3", "python3-pip")
WHEEL_PLATFORM = "manylinux2014_aarch64"
# tensorflow==2.11.0 on aarch64 is a shim: its dependency is this package (marker evaluated on the
# host by pip, hence named here); numpy < 1.24 (the measurement: numpy 2 fails at import
# with "Unable to convert function return value to a Python type"; 1.23.5 is the last 1.23).
TF_REQUIREMENTS = ("tensorflow=={tf}", "tensorflow-cpu-aws=={tf}")
CONSTRAINTS = ("numpy==1.23.5",)
WHEELS = CACHE / "wheels-aarch64-cp39"

# The real image's ENV. Source: dusty-nv/jetson-containers at
# 4636fc6400607d8e60729d14055a0e26ab8d3ba6 ("updated base containers for L4T R35.2.1",
# 2023-02-16): scripts/docker_build_ml.sh builds `l4t-tensorflow:r$L4T_VERSION-tf2.11-py3` for
# L4T R35.2 from Dockerfile.tensorflow with BASE_IMAGE from scripts/docker_base.sh
# (nvcr.io/nvidia/l4t-jetpack:r35.2.1) and the wheel tensorflow-2.11.0+nv23.01-cp38-cp38; the
# Dockerfile sets `ENV DEBIAN_FRONTEND=noninteractive`, `ENV
# PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=cpp`, `ENV PATH="/usr/local/cuda/bin:${PATH}"` and `ENV
# LD_LIBRARY_PATH="/usr/local/cuda/lib64:${LD_LIBRARY_PATH}"`, and no CMD. What
# l4t-jetpack:r35.2.1 itself sets (its PATH, LD_LIBRARY_PATH, NVIDIA_* variables, CMD) was not
# read: unknown. PATH below assumes Docker's default for it, LD_LIBRARY_PATH an unset one (which
# the Dockerfile's expansion leaves as a trailing ':').
ENV = {
    "DEBIAN_FRONTEND": "noninteractive",
    "PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION": "cpp",
    "PATH": "/usr/local/cuda/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:",
}
# The base's CMD: unknown (Dockerfile.tensorflow sets none; l4t-jetpack's was not read). The
# stand-in's is a shell, so that `docker run` of it alone does something; the kit's image sets
# its own CMD either way.
CMD = ["/bin/bash"]

# A named Jetson: AGX Xavier 16 GB (module P2888-0001 on the P2822 carrier board).
# - model and compatible: the device tree of the developer kit in the 5.10 kernel tree L4T R35
#   builds from, OE4T/linux-tegra-5.10 at 7886ffe8ada523c90a17fbac913ce35474ecf9b7,
#   arch/arm64/boot/dts/nvidia/tegra194-p2972-0000.dts: model "NVIDIA Jetson AGX Xavier Developer
#   Kit", compatible "nvidia,p2972-0000", "nvidia,tegra194" (/proc/device-tree/* hold them
#   NUL-terminated). L4T's own flashed device tree (tegra194-p2888-0001-p2822-0000.dtb, from
#   NVIDIA's hardware/nvidia/platform tree) was not read; its strings may differ.
# - /etc/nv_tegra_release: the format of L4T's nvidia-l4t-core (`# R35 (release), REVISION: 2.1,
#   GCID: …, BOARD: t186ref, EABI: aarch64, DATE: …`); GCID and DATE of R35.2.1 not read: left
#   out (tegra.py reads the release and revision only).
# - /proc/meminfo: MemTotal 16199680 kB = 15820 MiB, the figure the kit's docs and tests use for a
#   16 GB AGX Xavier (README: `--gpu-memory 15820`); not read from a board. MemAvailable is
#   invented (9 GiB: a desktop and L4T's services running).
JETSON = "AGX Xavier 16 GB"
TEGRA_ROOT = "/usr/share/tfgpu-standin/jetson-agx-xavier-16gb"
TEGRA_FILES = {
    "etc/nv_tegra_release": (
        "# R35 (release), REVISION: 2.1, BOARD: t186ref, EABI: aarch64\n"
        "# KERNEL_VARIANT: oot\nTARGET_USERSPACE_LIB_DIR=nvidia\n"
    ),
    "proc/device-tree/model": "NVIDIA Jetson AGX Xavier Developer Kit\0",
    "proc/device-tree/compatible": "nvidia,p2972-0000\0nvidia,tegra194\0",
    "proc/meminfo": (
        "MemTotal:       16199680 kB\n"
        "MemFree:         6291456 kB\n"
        "MemAvailable:    9437184 kB\n"
        "Buffers:          131072 kB\n"
        "Cached:          3145728 kB\n"
    ),
}
TEGRA_TOTAL_MIB = 15820
TEGRA_MODEL = "NVIDIA Jetson AGX Xavier Developer Kit"

# Every difference from nvcr.io/nvidia/l4t-tensorflow:r35.2.1-tf2.11-py3, in one place.
DIFFERENCES = (
    ("distribution", "Ubuntu 20.04 (L4T R35's root)", "Debian 11 bullseye, minbase"),
    ("Python", "3.8 (cp38 wheel)", "3.9 (bullseye's python3)"),
    (
        "TensorFlow",
        "NVIDIA's tensorflow-2.11.0+nv23.01 (CUDA build, cp38)",
        "PyPI's tensorflow 2.11.0 aarch64 shim + tensorflow-cpu-aws 2.11.0 (CPU only)",
    ),
    ("numpy, h5py, protobuf", "1.21.1, 3.6.0, protobuf built from source (cpp)", "PyPI wheels"),
    ("CUDA, cuDNN, TensorRT, VPI, OpenCV", "JetPack 5.1's (l4t-jetpack base)", "none"),
    ("NVIDIA libraries, nvidia-l4t-* packages", "present", "none"),
    ("pip", "Ubuntu's python3-pip, then whatever its pip3 installs", "Debian's python3-pip 20.3"),
    ("build tools (python3-dev, gcc, gfortran, cmake…)", "present", "none (the kit needs none)"),
    ("ENV of the l4t-jetpack base, CMD", "not read (unknown)", "Docker's PATH, CMD /bin/bash"),
    ("Tegra files", "the Jetson's own", f"a fake {JETSON} under {TEGRA_ROOT}"),
)


def spec() -> tuple[str, str, str]:
    """(TensorFlow version, base tag, python) of images/l4t.yaml's first image."""
    data = yaml.safe_load(L4T_YAML.read_text(encoding="utf-8"))
    first = data["images"][0]
    return str(first["tensorflow"]), str(first["base_tag"]), str(first["python"])


def l4t_tag() -> str:
    data = yaml.safe_load(L4T_YAML.read_text(encoding="utf-8"))
    return f"{REGISTRY}/{data['base']['repository']}:{spec()[1]}"


def requirements() -> list[str]:
    tf = spec()[0]
    return [r.format(tf=tf) for r in TF_REQUIREMENTS]


# Bump when the procedure below changes in a way the data in the key does not show.
REVISION = 1


def l4t_key() -> str:
    return _key(
        "l4t", REVISION, SUITE, ARCH, DEBIAN_PACKAGES, requirements(), CONSTRAINTS, ENV, CMD,
        TEGRA_FILES, TEGRA_ROOT,
    )  # fmt: skip


def _platform_args() -> list[str]:
    return [
        "--only-binary=:all:", "--platform", WHEEL_PLATFORM, "--python-version", PYTHON,
        "--implementation", "cp",
    ]  # fmt: skip


def download_wheels(constraints: Path) -> None:
    """The aarch64 cp39 wheels into their own cache folder (a no-op when all are there)."""
    WHEELS.mkdir(parents=True, exist_ok=True)
    with held(CACHE, WHEELS.name):
        _run(
            [host_python(), "-m", "pip", "download", "-q", *_platform_args(), "-d", str(WHEELS),
             "-c", str(constraints), *requirements()],
            what="pip download (aarch64 wheels)",
        )  # fmt: skip


def install_tensorflow(site: Path, constraints: Path) -> None:
    with held(CACHE, WHEELS.name):
        _run(
            [host_python(), "-m", "pip", "install", "-q", "--no-index", "--find-links",
             str(WHEELS), *_platform_args(), "--no-compile", "--target", str(site), "-c",
             str(constraints), *requirements()],
            what="pip install --target (aarch64 wheels)",
        )  # fmt: skip


def debootstrap_rootfs(rootfs: Path) -> None:
    """Debian bullseye arm64 with Python (emulated second stage), cached as a tarball."""
    key = _key("rootfs", SUITE, ARCH, DEBIAN_PACKAGES)
    tarball = CACHE / "rootfs" / f"{SUITE}-{ARCH}-python-{key}.tar"
    with held(CACHE, tarball.name):
        _debootstrap_rootfs(rootfs, tarball)


def _debootstrap_rootfs(rootfs: Path, tarball: Path) -> None:
    if tarball.is_file():
        progress(f"Debian {SUITE} {ARCH} and Python {PYTHON} from {tarball}")
        rootfs.mkdir(parents=True)
        _run(["tar", "--numeric-owner", "-xpf", str(tarball), "-C", str(rootfs)], what="tar -x")
        return
    debs = debs_cache(SUITE, ARCH)
    debs.mkdir(parents=True, exist_ok=True)
    mirror = debian_mirror()
    progress(
        f"debootstrap --arch={ARCH} {SUITE} (minbase, {', '.join(DEBIAN_PACKAGES)}) from {mirror}"
    )
    _run(
        ["debootstrap", f"--arch={ARCH}", "--variant=minbase",
         f"--include={','.join(DEBIAN_PACKAGES)}", f"--cache-dir={debs}", SUITE, str(rootfs),
         mirror],
        what="debootstrap (arm64; needs qemu-user-static's binfmt handler)",
    )  # fmt: skip
    for junk in ("var/cache/apt/archives", "var/lib/apt/lists"):
        for item in (rootfs / junk).glob("*"):
            if item.is_file():
                item.unlink()
    tarball.parent.mkdir(parents=True, exist_ok=True)
    partial = tarball.with_name(f".{tarball.name}.{os.getpid()}")  # renamed when complete
    _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(partial), "."], what="tar -c")
    partial.rename(tarball)


def write_tegra_root(rootfs: Path) -> None:
    base = rootfs / TEGRA_ROOT.lstrip("/")
    for relative, text in TEGRA_FILES.items():
        path = base / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def docker_load(rootfs: Path, tag: str, key: str, work: Path) -> None:
    """The tree as a one-layer arm64 image, loaded with `docker load`. Not `docker import
    --platform linux/arm64`: Debian's engine (20.10) ignores the architecture there and records
    the host's, and then `build.py build` for linux/arm64 does not find its base. The archive is
    the format `docker save` writes (manifest.json, the config, the layer's tar)."""
    layer = work / "layer.tar"
    _run(["tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(layer), "."], what="tar -c")
    digest = hashlib.sha256()
    with open(layer, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    diff_id = digest.hexdigest()
    description = (
        "tfgpu test stand-in for nvcr.io/nvidia/l4t-tensorflow"
        f" (Debian {SUITE} arm64, PyPI TensorFlow, no CUDA)"
    )
    created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    config = {
        "architecture": ARCH,
        "variant": "v8",
        "os": "linux",
        "created": created,
        "config": {
            "Env": [f"{k}={v}" for k, v in ENV.items()],
            "Cmd": CMD,
            "Labels": {KEY_LABEL: key, "org.opencontainers.image.description": description},
        },
        "rootfs": {"type": "layers", "diff_ids": [f"sha256:{diff_id}"]},
        "history": [{"created": created, "created_by": "tests/base_standins/l4t.py"}],
    }
    config_bytes = json.dumps(config).encode()
    config_name = f"{hashlib.sha256(config_bytes).hexdigest()}.json"
    manifest = [{"Config": config_name, "RepoTags": [tag], "Layers": [f"{diff_id}/layer.tar"]}]
    load = subprocess.Popen(
        ["docker", "load", "-q"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=False
    )
    assert load.stdin is not None
    try:
        with tarfile.open(fileobj=load.stdin, mode="w|") as archive:
            for name, data in (
                (config_name, config_bytes),
                ("manifest.json", json.dumps(manifest).encode()),
            ):
                info = tarfile.TarInfo(name)
                info.size = len(data)
                archive.addfile(info, io.BytesIO(data))
            archive.add(str(layer), arcname=f"{diff_id}/layer.tar")
    finally:
        load.stdin.close()
        out = load.stdout.read().decode(errors="replace") if load.stdout else ""
        if load.wait() != 0:
            raise StandinError(f"docker load of {tag} failed (exit {load.returncode}): {out}")
    layer.unlink()


def build_l4t(*, force: bool = False) -> Result:
    """Build (or reuse) the L4T stand-in. Needs root (debootstrap, chroot) and arm64 emulation."""
    with held(CACHE, "image-l4t"):  # one builder of it at a time (cache_lock.py)
        return _build_l4t(force)


def _build_l4t(force: bool) -> Result:
    tag, key, t0 = l4t_tag(), l4t_key(), time.monotonic()
    if not force and existing_key(tag) == key:
        progress(f"{tag} is up to date (key {key})")
        return Result(tag, key, False, 0.0, image_size(tag))
    if shutil.which("debootstrap") is None:
        raise StandinError("debootstrap is not installed (Debian: apt-get install debootstrap)")
    progress(f"building {tag} (key {key}, {PLATFORM})")
    with _work("l4t-") as tmp:
        work = Path(tmp)
        rootfs = work / "rootfs"
        debootstrap_rootfs(rootfs)
        constraints = work / "constraints.txt"
        constraints.write_text("".join(f"{pin}\n" for pin in CONSTRAINTS))
        site = work / "site"
        try:  # from the cache alone when it holds every wheel (no index asked: ~40 s saved)
            install_tensorflow(site, constraints)
        except StandinError:
            shutil.rmtree(site, ignore_errors=True)
            progress(f"downloading {', '.join(requirements())} (aarch64, cp39) into {WHEELS}")
            download_wheels(constraints)
            install_tensorflow(site, constraints)
        relocate_pip_extras(site, rootfs / "usr/local")
        target = rootfs / PY_SITE.lstrip("/")  # Debian's python3 has it already (empty)
        target.mkdir(parents=True, exist_ok=True)
        for item in site.iterdir():
            shutil.move(str(item), str(target / item.name))
        # One `import tensorflow` by the image's Python writes the byte code of every module it
        # imports (what each container's start needs): about 40 s emulated, where compileall of
        # the whole tree takes 2.5 min (one process: its -j needs a /dev/shm the chroot lacks).
        progress("import tensorflow with the image's Python (chroot, emulated): its byte code")
        _run(
            ["chroot", str(rootfs), "env", *(f"{k}={v}" for k, v in ENV.items()), "python3",
             "-c", "import tensorflow"],
            what="import tensorflow in the arm64 root (chroot)",
        )  # fmt: skip
        write_tegra_root(rootfs)
        progress("docker load (a one-layer linux/arm64 image)")
        docker_load(rootfs, tag, key, work)
    seconds = time.monotonic() - t0
    size = image_size(tag)
    progress(f"built {tag} in {seconds:.0f}s, {size / 2**20:.0f} MiB")
    return Result(tag, key, True, seconds, size)
