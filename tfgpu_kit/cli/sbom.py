"""`build.py sbom IMAGE [--out FILE]`: the SBOM an image carries, validated, to stdout or FILE."""

from __future__ import annotations

import argparse
import errno
import os
import sys
import tempfile
from pathlib import Path

from tfgpu_kit import sbom_export
from tfgpu_kit.cli.command import Command
from tfgpu_kit.flag_values import path_flag
from tfgpu_kit.log import stderr
from tfgpu_kit.name_rules import image_reference

HELP = "write out the SBOM (CycloneDX JSON) an image of the kit carries"
DESCRIPTION = """Reads the SBOM the image's own build wrote (the file its io.tfgpu.sbom label names,
/usr/share/tfgpu/sbom.cdx.json) without running the image, validates it against the CycloneDX
schema (cyclonedx-python-lib), and writes it to stdout or FILE. It lists the image's OS packages
(dpkg), every Python distribution with its version, and the sha256 of each wheel the kit
installed (the locks). It is no vulnerability scan: feed it to one (docs/security.md)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("image", metavar="IMAGE", help="e.g. tfgpu/tensorflow:2.21.0-gpu")
    parser.add_argument(
        "--out",
        type=path_flag("--out", "sbom.cdx.json"),
        metavar="FILE",
        help="write here, whole or not at all (default: stdout)",
    )


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: tfgpu_kit.cli imports every command, and the Docker SDK adds
    # 45-90 ms to each command's start (python -X importtime, 2 cores: cli 0.5-0.7 s without it).
    from tfgpu_kit import docker_engine

    # the arguments first: a typo is named before the engine is asked anything
    image = image_reference("IMAGE", args.image, "tfgpu/tensorflow:2.21.0-gpu")
    if args.out is not None:
        _check_writable(args.out)
    found = sbom_export.read(docker_engine.client(), image)
    if args.out is None:
        sys.stdout.write(found.text)
    else:
        _write_whole(args.out, found.text)
    stderr.print(found.summary(), highlight=False, markup=False)
    return 0


def _check_writable(out: Path) -> None:
    """OSError (exit 5, naming the path) when FILE could not be written: a folder, or a folder
    that is missing or not writable."""
    folder = out.parent
    if out.is_dir():
        raise IsADirectoryError(errno.EISDIR, "is a folder: --out takes a file", str(out))
    if not folder.is_dir():
        raise FileNotFoundError(errno.ENOENT, "its folder does not exist", str(out))
    if not os.access(folder, os.W_OK | os.X_OK):
        raise PermissionError(errno.EACCES, "its folder is not writable", str(out))


def _write_whole(out: Path, text: str) -> None:
    """FILE as a whole or not at all: written beside it, then renamed over it."""
    fd, temp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as file:
            file.write(text)
        os.replace(temp, out)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


COMMAND = Command("sbom", HELP, DESCRIPTION, add_arguments, run)
