"""`build.py render [--out DIR] [--check]`: write one Dockerfile per image (dockerfiles/ by
default)."""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command
from tfgpu_kit.image import render
from tfgpu_kit.shared.flag_values import path_flag

HELP = "render the Dockerfiles from images/ and templates/"
DESCRIPTION = """Render dockerfiles/<version>-<variant>/Dockerfile for every image. With --check,
write nothing and exit 1 naming each committed file that is missing, stale or left over (exit 5
when --out is not a folder)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--out",
        type=path_flag("--out", "dockerfiles"),
        default=render.DOCKERFILES_DIR,
        help="output directory (default: dockerfiles/)",
    )
    parser.add_argument(
        "--check",
        action="store_true",
        help="fail when the files under --out are not what render would write",
    )


def run(args: argparse.Namespace) -> int:
    return render.render_or_check(args.out, check=args.check)


COMMAND = Command("render", HELP, DESCRIPTION, add_arguments, run)
