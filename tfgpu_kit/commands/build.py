"""`build.py build [SELECTORS…]`: build, tag (and push, verify) the images with the Docker SDK."""

from __future__ import annotations

import argparse
import logging

from tfgpu_kit import catalog, image_builds, l4t_builds, name_rules, selectors
from tfgpu_kit import spec as specs
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED, UsageError
from tfgpu_kit.flag_values import path_flag
from tfgpu_kit.spec import CudaSource

NAME = "build"
HELP = "build tagged images (Docker SDK); --dry-run shows what would be built"
DESCRIPTION = """Build the selected images (default: the newest version, every variant; `all` for
every image). SELECTORS: 2.21.0-gpu, 2.21-gpu-jupyter, 2.21.0 (every variant), 2.21, gpu
(a variant), latest-gpu, all, or a regex re:^2\\.2 on the image name; `l4t` (or an L4T image's
name or tag) selects the Jetson images of images/l4t.yaml instead (arm64; built where the engine
can run arm64, else declined with the reason and exit 1).
Tags: REPO:2.21.0-gpu, REPO:2.21-gpu, REPO:latest-gpu (newest only), REPO:2.21.0-gpu-py311-cu125.
The base is used as it is when it exists locally (never pulled then); --base-registry replaces the
registry part of FROM (a mirror, or the test stand-ins)."""

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selectors", nargs="*", metavar="SELECTOR")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be built; touch nothing"
    )
    parser.add_argument("--push", action="store_true", help="push every tag after building")
    parser.add_argument(
        "--registry", help="registry to tag (and push) under, e.g. registry.example.com:5000"
    )
    parser.add_argument(
        "--base-registry", help="registry (mirror) of the base images, e.g. mirror.local:5000"
    )
    parser.add_argument("--driver", help="refuse images this driver cannot run (see `check`)")
    parser.add_argument(
        "--force", action="store_true", help="build images --driver cannot run anyway"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the build cache")
    parser.add_argument("--verify", action="store_true", help="run `verify` on each built image")
    parser.add_argument(
        "--contexts",
        type=path_flag("--contexts", ".tfgpu-contexts"),
        help="keep the build contexts in this directory (default: a temporary one)",
    )
    parser.add_argument(
        "--cuda-source",
        choices=[source.value for source in CudaSource],
        help="where the images' CUDA libraries come from: auto (the base's when enough for its"
        " TensorFlow, else the [and-cuda] wheels), base, or wheels; default: images.yaml's"
        " cuda_source",
    )
    parser.add_argument("--json", action="store_true", help="the final table (or dry run) as JSON")


def run(args: argparse.Namespace) -> int:
    for flag, value in (("--registry", args.registry), ("--base-registry", args.base_registry)):
        catalog.check_registry(flag, value)
        name_rules.registry_port(flag, value)
    spec = specs.load()
    # images/l4t.yaml's Jetson images (`l4t`, or a name or tag of one): arm64, built where the
    # engine can run arm64, else declined with the reason (tfgpu_kit/l4t_builds.py)
    jetson, args.selectors = l4t_builds.split(args.selectors)
    if jetson and args.selectors:
        raise UsageError("build the L4T (arm64) images in a call of their own: build.py build l4t")
    options = image_builds.BuildOptions(
        registry=args.registry,
        base_registry=args.base_registry,
        push=args.push,
        no_cache=args.no_cache,
        contexts=args.contexts,
        verify=args.verify,
        as_json=args.json,
    )
    if jetson:
        if args.driver is not None or args.verify or args.cuda_source:
            raise UsageError(
                "--driver, --verify and --cuda-source apply to images.yaml's images, not to the"
                " L4T (Jetson) ones",
                hint="build.py build l4t [--registry R] [--base-registry M] [--push] [--dry-run]",
            )
        return l4t_builds.run(spec, jetson, options, dry=args.dry_run)
    # No selector builds the default (newest) version, not all 20 images: a newcomer's `./kit build`
    # must not pull every base there is. `all` selects everything.
    override = CudaSource(args.cuda_source) if args.cuda_source else None
    images = selectors.select(
        catalog.images(spec, cuda_source=override), args.selectors, default=("latest",)
    )
    # before anything is fetched or built: a base whose Python the runtime does not support
    # would only fail at pip install, deep in the Docker build
    specs.check_base_python(spec, {image.tensorflow for image in images})
    if args.driver is not None:
        refused = image_builds.refuse_for_driver(spec, images, args.driver, args.force)
        if refused:
            log.error(
                "refusing to build %s (driver %s cannot run them); --force builds them anyway",
                ", ".join(i.name for i in refused),
                args.driver,
            )
            return EXIT_FAILED
    if args.dry_run:
        return image_builds.dry_run(images, options)
    return image_builds.build_images(spec, images, options)


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
