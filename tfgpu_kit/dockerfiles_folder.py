"""What `build.py render` does: every Dockerfile (images.yaml's, and images/l4t.yaml's in l4t/)
written under one folder, or compared with what is there (--check)."""

from __future__ import annotations

import errno
import logging
from pathlib import Path

from tfgpu_kit import catalog, render
from tfgpu_kit import spec as specs
from tfgpu_kit.errors import EXIT_FAILED, UsageError

log = logging.getLogger(__name__)


def render_or_check(out_arg: Path, *, check: bool) -> int:
    """`build.py render [--out DIR] [--check]`: EXIT_FAILED when --check finds a stale file."""
    spec = specs.load()
    out: Path = out_arg.resolve()
    if out == specs.ROOT:
        # one folder per image next to build.py: never what was meant
        raise UsageError(
            f"--out {str(out_arg)!r} is the checkout itself: accepted: a folder for the "
            "Dockerfiles; example: --out dockerfiles"
        )
    if check and not out.is_dir():
        # not N "missing" files: the folder to compare with is not there
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(out_arg))
    rendered = render.render_all(spec, catalog.every_image(spec), out)
    if check:
        problems = render.stale(rendered, out)
        for problem in problems:
            print(problem)
        if problems:
            log.error(
                "%d generated file(s) out of date: run `./kit render` and commit",
                len(problems),
            )
            return EXIT_FAILED
        log.info("%d Dockerfiles up to date", len(rendered))
        return 0
    written = render.write(rendered)
    for path in written:
        print(path)
    log.info("%d Dockerfiles rendered, %d changed", len(rendered), len(written))
    return 0
