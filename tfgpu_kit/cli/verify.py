"""`build.py verify IMAGE…`: what an image really holds, against the matrix, and TensorFlow's own
verdict with a fake NVIDIA driver."""

from __future__ import annotations

import argparse

from tfgpu_kit.cli.command import Command
from tfgpu_kit.image.verify import images as verify_images
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.shared import name_rules

HELP = "check what built images really hold, and that their TensorFlow registers a GPU"
DESCRIPTION = """Runs each image twice, without a GPU and without network:
1. `tfgpu check --json` (the checkout's runtime, mounted read-only, in an image that has none,
   e.g. an official tensorflow/tensorflow base): TensorFlow's version and CUDA/cuDNN build, the
   CUDA libraries its dlopen would load and their versions against TensorFlow's rule, the hook,
   the labels and NVIDIA_REQUIRE_CUDA, against images/matrix.yaml;
2. `import tensorflow` with the tests' fake NVIDIA driver (compiled here with gcc, mounted at
   /usr/local/nvidia/lib64; fakegpu/README.md): TensorFlow must register the GPU itself ("Created
   device …"); when it refuses, its own lines are quoted.
Exits 1 naming each missing piece."""


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


def run(args: argparse.Namespace) -> int:
    # Imported here, not at the top: tfgpu_kit.cli imports every command, and the Docker SDK adds
    # 45-90 ms to each command's start (python -X importtime, 2 cores: cli 0.5-0.7 s without it).
    from tfgpu_kit.image import docker_engine

    for ref in args.images:  # before the engine: '' was a traceback, 'a b' the engine's raw 400
        name_rules.image_reference("verify", ref, "tfgpu/tensorflow:2.21.0-gpu")
    return verify_images.verify_images(
        specs.load(),
        docker_engine.client(),
        args.images,
        as_json=args.json,
        gpu_probe=not args.no_gpu_probe,
    )


COMMAND = Command("verify", HELP, DESCRIPTION, add_arguments, run)
