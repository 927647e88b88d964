"""`build.py build [SELECTORS…]`: build, tag (and push, verify) the images, through BuildKit where
the Docker CLI has it."""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command, request
from tfgpu_kit.image import build, buildkit
from tfgpu_kit.matrix.spec import CudaSource
from tfgpu_kit.shared.flag_values import path_flag

HELP = "build tagged images (BuildKit where the CLI has it); --dry-run shows what would be built"
DESCRIPTION = """Build the selected images (default: the newest version, every variant; `all` for
every image). SELECTORS: 2.21.0-gpu, 2.21-gpu-jupyter, 2.21.0 (every variant), 2.21, gpu
(a variant), latest-gpu, all, or a regex re:^2\\.2 on the image name; `l4t` (or an L4T image's
name or tag) selects the Jetson images of images/l4t.yaml (arm64). Each image is built for its
own platform where the engine can run it (natively or under QEMU), else the call is declined with
the reason and exit 1 before anything is built.
Tags: REPO:2.21.0-gpu, REPO:2.21-gpu, REPO:latest-gpu (newest only), REPO:2.21.0-gpu-py311-cu125.
The base is used as it is when it exists locally (never pulled then); --base-registry replaces the
registry part of FROM (a mirror, or the test stand-ins).
Builder: BuildKit through the Docker CLI (`docker build`, built in before Docker 23, the buildx
plugin since) where it has it, else the engine's legacy builder through the Docker SDK, with a
warning; --builder buildkit|legacy asks for one (buildkit is refused where there is none)."""


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
        help="keep the build contexts in this directory (default: temporary ones, each removed as "
        "soon as the engine holds it)",
    )
    parser.add_argument(
        "--cuda-source",
        choices=[source.value for source in CudaSource],
        help="where the images' CUDA libraries come from: auto (the base's when enough for its"
        " TensorFlow, else the [and-cuda] wheels), base, or wheels; default: images.yaml's"
        " cuda_source",
    )
    parser.add_argument(
        "--builder",
        choices=buildkit.CHOICES,
        default="auto",
        help="auto (default): BuildKit where the Docker CLI has it, else the legacy builder;"
        " buildkit: refuse to build without it; legacy: the engine's legacy builder (Docker SDK)",
    )
    parser.add_argument("--json", action="store_true", help="the final table (or dry run) as JSON")


def run(args: argparse.Namespace) -> int:
    return build.build(request(build.BuildRequest, args))


COMMAND = Command("build", HELP, DESCRIPTION, add_arguments, run)
