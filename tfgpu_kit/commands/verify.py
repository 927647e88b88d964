"""`build.py verify IMAGE…`: run `tfgpu check --json` inside each image (no GPU) and compare it
with the
matrix."""

from __future__ import annotations

import argparse
import logging
from typing import Any

from tfgpu_kit import spec as specs
from tfgpu_kit import verify
from tfgpu_kit.errors import EXIT_FAILED
from tfgpu_kit.output import print_json, table

NAME = "verify"
HELP = "check what built images really hold against the matrix"
DESCRIPTION = """Runs `tfgpu check --json` in a container of each image (no GPU, no network) and
compares TensorFlow's version and CUDA/cuDNN build, the loadable CUDA libraries, the runtime
hook, the labels and NVIDIA_REQUIRE_CUDA with images/matrix.yaml. Exits 1 naming each missing
piece."""

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "images",
        nargs="+",
        metavar="IMAGE",
        help="image reference, e.g. tfgpu/tensorflow:2.21.0-gpu",
    )
    parser.add_argument("--json", action="store_true", help="JSON on stdout")


def verify_images(spec: specs.Spec, client: Any, refs: list[str], *, as_json: bool) -> int:
    results: dict[str, list[verify.Check]] = {}
    for ref in refs:
        log.info("verifying %s", ref)
        results[ref] = verify.compare(spec, verify.collect(client, ref))
    if as_json:
        print_json({ref: [c.__dict__ for c in checks] for ref, checks in results.items()})
    else:
        for ref, checks in results.items():
            table(
                ref,
                ["check", "", "detail"],
                [[c.name, "ok" if c.ok else "FAIL", c.detail] for c in checks],
            )
    failed = False
    for ref, checks in results.items():
        for check in verify.failures(checks):
            failed = True
            log.error("%s: %s: %s", ref, check.name, check.detail)
    return EXIT_FAILED if failed else 0


def run(args: argparse.Namespace) -> int:
    from tfgpu_kit import dockerbuild

    spec = specs.load()
    return verify_images(spec, dockerbuild.client(), args.images, as_json=args.json)
