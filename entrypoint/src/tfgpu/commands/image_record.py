"""What an image was built with, written into it by its own build (`python3 -m tfgpu.image_record`):

- `constraints.txt`: the pip constraints of its GPU path (tfgpu.machine.pins), which
  PIP_CONSTRAINT and UV_CONSTRAINT name, so that a team's `pip install` cannot replace them
  silently;
- `sbom.cdx.json`: what it holds, in CycloneDX JSON (tfgpu.machine.sbom);
- `image-record.json`: what `tfgpu check --build` compares a derived image with: the pins and
  their installed versions, the image's own environment (the contract's defaults and the
  NVIDIA_* variables by which the container runtime gives it the GPU), the CUDA/cuDNN libraries
  TensorFlow loads (path and version), the hook's .pth.

All three sit in one folder, /usr/share/tfgpu (the image labels io.tfgpu.sbom and
io.tfgpu.constraints name the files), beside wheels/ (the runtime's wheel and its extras', for a
virtual environment of a team's own: docs/teams.md).
"""

from __future__ import annotations

import json
import os
import sys

from tfgpu import __version__
from tfgpu.machine import libs, pins, sbom, tfbuild
from tfgpu.machine.interpreter import hook_pth

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Dict, List, Mapping, Optional

FOLDER = "/usr/share/tfgpu"
RECORD = "image-record.json"
CONSTRAINTS = "constraints.txt"
SBOM = "sbom.cdx.json"
INSTALLED_WHEELS = "installed-wheels.txt"  # stage 1's requirements.txt: pins with their sha256
WHEELS = "wheels"
FORMAT = 1

# The image's own environment that the GPU path depends on: the kit's contract and image facts,
# and NVIDIA's variables (NVIDIA_VISIBLE_DEVICES, _DRIVER_CAPABILITIES, _REQUIRE_CUDA: without
# them the NVIDIA container runtime gives the container no GPU or no CUDA), the loader's path.
ENV_PREFIXES = ("TF_GPU_", "TFGPU_IMAGE_", "NVIDIA_")
ENV_NAMES = ("TF_FORCE_GPU_ALLOW_GROWTH", "CUDA_VISIBLE_DEVICES", "LD_LIBRARY_PATH")


def folder(environ: Mapping[str, str]) -> str:
    """Where this image's record lives: the folder of TFGPU_IMAGE_CONSTRAINTS, else the default."""
    path = environ.get("TFGPU_IMAGE_CONSTRAINTS", "")
    return os.path.dirname(path) if path else FOLDER


def image_env(environ: Mapping[str, str]) -> Dict[str, str]:
    return {
        k: v for k, v in sorted(environ.items()) if k.startswith(ENV_PREFIXES) or k in ENV_NAMES
    }


def libraries(environ: Mapping[str, str]) -> List[Dict[str, object]]:
    """The CUDA/cuDNN libraries this TensorFlow dlopens, as found now (tfgpu.machine.libs); [] for a
    CPU build or without TensorFlow."""
    info = tfbuild.build_info()
    if not info:
        return []
    tensorflow = environ.get("TFGPU_IMAGE_TF")
    dirs = libs.search_dirs(tfbuild.tensorflow_dir(), environ)
    found = []
    for name, soname in libs.needed(info, tensorflow):
        entry = libs.try_load(name, soname, dirs)
        path = entry.get("path")
        # the file itself (sonames are links into the wheel's or the system's folder)
        entry["file"] = os.path.realpath(str(path)) if entry.get("loaded") and path else None
        found.append(entry)
    return found


def collect(environ: Mapping[str, str]) -> Dict[str, Any]:
    dists = pins.installed()
    pinned = pins.pinned(dists)
    # the image's TensorFlow as the image says it (TFGPU_IMAGE_TF), else as installed
    tensorflow = environ.get("TFGPU_IMAGE_TF") or next(
        (p.installed or "" for p in pinned if p.role == pins.TENSORFLOW), ""
    )
    return {
        "format": FORMAT,
        "tfgpu": __version__,
        "python": sys.executable,
        "prefix": sys.prefix,  # the guard judges the packages as this Python sees them
        "tensorflow": tensorflow,
        "pins": [p.as_json() for p in pinned],
        "env": image_env(environ),
        "libraries": libraries(environ),
        "hook": hook_pth(),
        # files of a pinned package already unlike its RECORD when the image was built (a base's
        # own quirks, e.g. scripts RECORD places elsewhere): the guard reports only new ones
        "unlike_record": {
            p.name: _unlike_record(dists[p.name]) for p in pinned if p.installed and p.name in dists
        },
    }


def _unlike_record(dist: pins.Installed) -> List[str]:
    missing, resized, _ = dist.unlike_record()
    return sorted([*missing, *resized])


def load(path: str) -> Dict[str, Any]:
    with open(path, encoding="utf-8") as f:
        data: Dict[str, Any] = json.load(f)
    return data


def _write(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def write(dest: str, environ: Mapping[str, str], image_name: str) -> Dict[str, Any]:
    """Write the three files into `dest`; returns the record, with the SBOM's counts."""
    os.makedirs(dest, exist_ok=True)
    record = collect(environ)
    pinned = [pins.Pin.from_json(p) for p in record["pins"]]
    what = f"TensorFlow {record['tensorflow'] or 'unknown'}, its CUDA wheels, Keras, the runtime"
    _write(os.path.join(dest, CONSTRAINTS), pins.constraints_text(pinned, what))
    doc = sbom.document(
        packages=sbom.dpkg_packages(),
        dists=pins.every(),
        pins=pinned,
        hashes=sbom.wheel_hashes(os.path.join(dest, INSTALLED_WHEELS)),
        distro=sbom.os_release(),
        image={"name": image_name, "version": record["tensorflow"]},
    )
    # compact: a few hundred components of the official bases; `jq .` reads it for people
    _write(os.path.join(dest, SBOM), json.dumps(doc, sort_keys=True, separators=(",", ":")) + "\n")
    _write(os.path.join(dest, RECORD), json.dumps(record, indent=1, sort_keys=True) + "\n")
    record["sbom_counts"] = {
        "all": sbom.count(doc),
        "dpkg": sbom.count(doc, "dpkg"),
        "python": sbom.count(doc, "python"),
    }
    return record


def main(argv: Optional[List[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(
        prog="python3 -m tfgpu.image_record",
        description="Write this image's pip constraints, SBOM and build record (run by the "
        "image's own build; docs/teams.md).",
    )
    parser.add_argument("dest", nargs="?", default=FOLDER, help=f"folder (default {FOLDER})")
    parser.add_argument("--image", default="tfgpu image", help="the image's name, for the SBOM")
    args = parser.parse_args(argv)
    record = write(args.dest, os.environ, args.image)
    counts = record["sbom_counts"]
    loaded = sum(1 for lib in record["libraries"] if lib.get("loaded"))
    sys.stdout.write(
        f"tfgpu: {len(record['pins'])} pins in {os.path.join(args.dest, CONSTRAINTS)}; "
        f"SBOM of {counts['all']} components ({counts['dpkg']} OS packages, {counts['python']} "
        f"Python distributions); {loaded} of {len(record['libraries'])} CUDA/cuDNN libraries "
        "load\n"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
