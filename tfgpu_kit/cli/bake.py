"""`build.py bake [SELECTORS…] [--out FILE] [--assemble]`: a docker-bake.json of the same matrix."""

from __future__ import annotations

import argparse
from pathlib import Path

from tfgpu_kit.cli.command import Command, request
from tfgpu_kit.image import bake
from tfgpu_kit.shared.flag_values import path_flag

HELP = "emit a docker-bake.json for `docker buildx bake`"
DESCRIPTION = """Emit a docker-bake.json (stdout, or --out FILE) with one target per image, the
same tags and build arguments as `build`, and groups per variant. Each target's context must hold
the Dockerfile and wheels/: --assemble writes them under --contexts."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selectors", nargs="*", metavar="SELECTOR")
    parser.add_argument(
        "--out",
        type=path_flag("--out", "docker-bake.json"),
        help="write the file here instead of stdout",
    )
    parser.add_argument(
        "--contexts",
        type=path_flag("--contexts", ".tfgpu-contexts"),
        default=Path(".tfgpu-contexts"),
        help="directory of the build contexts (default: .tfgpu-contexts)",
    )
    parser.add_argument("--assemble", action="store_true", help="write the build contexts too")
    parser.add_argument("--registry", help="push registry prefixed to the tags")
    parser.add_argument("--base-registry", help="registry mirror for the base images")


def run(args: argparse.Namespace) -> int:
    return bake.write_bake_file(request(bake.BakeRequest, args))


COMMAND = Command("bake", HELP, DESCRIPTION, add_arguments, run)
