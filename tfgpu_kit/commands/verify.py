"""`build.py verify IMAGE…`: what an image really holds, against the matrix, and TensorFlow's own
verdict with a fake NVIDIA driver."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import Any

from tfgpu_kit import spec as specs
from tfgpu_kit import verify
from tfgpu_kit.commands import Command
from tfgpu_kit.errors import EXIT_FAILED, KitError
from tfgpu_kit.output import print_json, table

NAME = "verify"
HELP = "check what built images really hold, and that their TensorFlow registers a GPU"
DESCRIPTION = """Runs each image twice, without a GPU and without network:
1. `tfgpu check --json` (the checkout's runtime, mounted read-only, in an image that has none,
   e.g. an official tensorflow/tensorflow base): TensorFlow's version and CUDA/cuDNN build, the
   CUDA libraries its dlopen would load and their versions against TensorFlow's rule, the hook,
   the labels and NVIDIA_REQUIRE_CUDA, against images/matrix.yaml;
2. `import tensorflow` with the tests' fake NVIDIA driver (compiled here with gcc, mounted at
   /usr/local/nvidia/lib64; docs/fakegpu.md): TensorFlow must register the GPU itself ("Created
   device …"); when it refuses, its own lines are quoted.
Exits 1 naming each missing piece."""

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "images",
        nargs="+",
        metavar="IMAGE",
        help="image reference, e.g. tfgpu/tensorflow:2.21.0-gpu",
    )
    parser.add_argument(
        "--no-gpu-probe",
        action="store_true",
        help="skip run 2 (TensorFlow with the fake driver; needs gcc on this machine)",
    )
    parser.add_argument("--json", action="store_true", help="JSON on stdout")


def fake_driver(enabled: bool) -> Path | None:
    """The compiled fake driver for the GPU probe, or None when it was turned off."""
    if not enabled:
        log.warning("--no-gpu-probe: TensorFlow's own verdict on the GPU is not checked")
        return None
    from tfgpu_kit import fakegpu

    try:
        return fakegpu.build()
    except KitError as exc:
        raise KitError(
            f"cannot compile the fake NVIDIA driver for the GPU probe: {exc.message}",
            hint=exc.hint or "install gcc, or pass --no-gpu-probe to skip the probe",
        ) from None


def verify_images(
    spec: specs.Spec, client: Any, refs: list[str], *, as_json: bool, gpu_probe: bool = True
) -> int:
    driver = fake_driver(gpu_probe)
    results: dict[str, list[verify.Check]] = {}
    for ref in refs:
        log.info("verifying %s", ref)
        results[ref] = verify.compare(spec, verify.collect(client, ref, fake_driver=driver))
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
    return verify_images(
        spec,
        dockerbuild.client(),
        args.images,
        as_json=args.json,
        gpu_probe=not args.no_gpu_probe,
    )


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
