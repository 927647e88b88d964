"""`build.py render [--out DIR] [--check]`: write one Dockerfile per image (dockerfiles/ by
default)."""

from __future__ import annotations

import argparse
import errno
import logging
from pathlib import Path

from tfgpu_kit import catalog, l4t, render
from tfgpu_kit import spec as specs
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED, UsageError
from tfgpu_kit.flag_values import path_flag

NAME = "render"
HELP = "render the Dockerfiles from images/ and templates/"
DESCRIPTION = """Render dockerfiles/<version>-<variant>/Dockerfile for every image. With --check,
write nothing and exit 1 naming each committed file that is missing, stale or left over (exit 5
when --out is not a folder)."""

log = logging.getLogger(__name__)


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
    spec = specs.load()
    out: Path = args.out.resolve()
    if out == specs.ROOT:
        # one folder per image next to build.py: never what was meant
        raise UsageError(
            f"--out {str(args.out)!r} is the checkout itself: accepted: a folder for the "
            "Dockerfiles; example: --out dockerfiles"
        )
    if args.check and not out.is_dir():
        # not N "missing" files: the folder to compare with is not there
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(args.out))
    rendered = render.render_all(spec, catalog.images(spec), out)
    jetson = l4t.render_all(spec.images.user, out / "l4t")  # images/l4t.yaml's, in a folder apart
    if args.check:
        problems = render.stale(rendered, out) + l4t.stale(jetson, out / "l4t")
        for problem in problems:
            print(problem)
        if problems:
            log.error(
                "%d generated file(s) out of date: run `./kit render` and commit",
                len(problems),
            )
            return EXIT_FAILED
        log.info("%d Dockerfiles up to date", len(rendered) + len(jetson))
        return 0
    written = render.write(rendered) + l4t.write(jetson)
    for path in written:
        print(path)
    log.info("%d Dockerfiles rendered, %d changed", len(rendered) + len(jetson), len(written))
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
