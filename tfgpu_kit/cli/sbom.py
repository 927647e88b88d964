"""`build.py sbom IMAGE [--out FILE]`: the SBOM an image carries, validated, to stdout or FILE."""

from __future__ import annotations

import argparse
import sys

from tfgpu_kit.cli.command import Command
from tfgpu_kit.image import sbom_export
from tfgpu_kit.shared.flag_values import path_flag
from tfgpu_kit.shared.log import stderr

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
    found = sbom_export.export(args.image, args.out)
    if args.out is None:
        sys.stdout.write(found.text)
    stderr.print(found.summary(), highlight=False, markup=False)
    return 0


COMMAND = Command("sbom", HELP, DESCRIPTION, add_arguments, run)
