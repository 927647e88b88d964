"""`build.py bake [SELECTORS…] [--out FILE] [--assemble]`: a docker-bake.json of the same matrix."""

from __future__ import annotations

import argparse
import json
import logging
from pathlib import Path

from tfgpu_kit import bake, baselock, catalog, image_builds, l4t_builds, name_rules, selectors
from tfgpu_kit import spec as specs
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import SpecError, UsageError
from tfgpu_kit.flag_values import path_flag

NAME = "bake"
HELP = "emit a docker-bake.json for `docker buildx bake`"
DESCRIPTION = """Emit a docker-bake.json (stdout, or --out FILE) with one target per image, the
same tags and build arguments as `build`, and groups per variant. Each target's context must hold
the Dockerfile and wheels/: --assemble writes them under --contexts."""

log = logging.getLogger(__name__)


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
    for flag, value in (("--registry", args.registry), ("--base-registry", args.base_registry)):
        catalog.check_registry(flag, value)
        name_rules.registry_port(flag, value)
    if args.out is not None and args.out.is_dir():
        raise UsageError(
            f"--out {str(args.out)!r} is a folder: accepted: a file path; example: "
            "--out docker-bake.json"
        )
    spec = specs.load()
    # images/l4t.yaml's Jetson images: with `l4t` (or a name or tag of one), or with no selector
    jetson, wanted = l4t_builds.split(args.selectors or ["all", "l4t"])
    images = selectors.select(catalog.images(spec), wanted) if wanted else []
    try:
        specs.check_base_python(spec, {image.tensorflow for image in images})
    except SpecError as error:
        if args.assemble:
            raise
        # only a file is written: say which targets would fail to build, and write it
        log.warning("%s\n  (written anyway; building those targets would fail)", error)
    cuda_wheels_mib: dict[str, float] = {}
    if args.assemble:
        for image, ctx in image_builds.iter_contexts(spec, images, args.contexts):
            if image.gap.wheels:
                cuda_wheels_mib[image.name] = ctx.cuda_wheels_mib
    # the base.digest label: the digest the Dockerfile's FROM pins (the lock's), which the builder
    # resolves itself (None: bake looks at no local base); unknown for a mirror's bases
    locked = baselock.BaseDigests(baselock.load(), images, base_registry=args.base_registry)
    base_digests = {
        image.name: digest for image in images if (digest := locked.digest(image, None)) is not None
    }
    data = bake.bake_file(
        images,
        contexts=args.contexts,
        registry=args.registry,
        base_registry=args.base_registry,
        buildargs=image_builds.buildargs(base_digest=None),
        cuda_wheels_mib=cuda_wheels_mib,
        base_digests=base_digests,
        base_pin=locked.pin(),
    )
    l4t_builds.add_to_bake(
        data,
        spec,
        jetson,
        contexts=args.contexts,
        registry=args.registry,
        base_registry=args.base_registry,
        assemble=args.assemble,
    )
    text = json.dumps(data, indent=2) + "\n"
    if args.out:
        args.out.write_text(text, encoding="utf-8")
        log.info("wrote %s (%d targets)", args.out, len(data["target"]))
    else:
        print(text, end="")
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
