#!/usr/bin/env python3
"""Build times of one kit image through BuildKit and through the engine's legacy builder (the
Docker SDK's API), as `build.py build` runs them: printed, not asserted.

Each run builds the image once each way with --no-cache, interleaved (legacy, BuildKit, legacy, …)
so that a busy machine weighs on both alike; each under its own registry name, dropped afterwards
with what the build left (the legacy builder's dangling images, BuildKit's cache). Printed: the
median of the image's build (`seconds` of `build.py build --json`: the build, the Python probe and
the tags, without assembling the context), of the whole command, and BuildKit's ratio to legacy.

The base must be in the engine: the stand-ins (`python -m tests.base_standins build gpu-2.17.0`,
then --base-registry tfgpu-standin.local) or the official one.

Usage: .venv/bin/python benchmarks/bench_buildkit.py [--image 2.17.0-gpu]
       [--base-registry tfgpu-standin.local] [--runs 2] [--cli PATH]"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tests.kit_images import buildkit_cli_on_path  # noqa: E402  (needs the checkout on sys.path)
from tfgpu_kit.image import buildkit  # noqa: E402

BUILDERS = ("legacy", "buildkit")


def build_once(
    image: str, base_registry: str | None, builder: str, path: str
) -> tuple[float, float]:
    """(the image's build, the whole command) in seconds."""
    command = [sys.executable, str(ROOT / "build.py"), "build", image, "--no-cache", "--json"]
    command += ["--builder", builder, "--registry", f"bench-{builder}.local"]
    if base_registry:
        command += ["--base-registry", base_registry]
    start = time.monotonic()
    proc = subprocess.run(
        command,
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PATH": path, "NO_COLOR": "1"},
        check=False,
    )
    whole = time.monotonic() - start
    if proc.returncode != 0:
        raise SystemExit(f"{builder} build failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    (row,) = json.loads(proc.stdout)
    return float(row["seconds"]), whole


def drop(client: docker.DockerClient, builder: str) -> None:
    """The benchmark's tags, then what the build left behind."""
    for image in client.images.list(name=f"bench-{builder}.local/*"):
        for tag in image.tags:
            client.images.remove(tag)
    client.images.prune(filters={"dangling": True})
    client.api.prune_builds(all=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="2.17.0-gpu")
    parser.add_argument("--base-registry", default=None)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument(
        "--cli",
        default=None,
        help="the Docker CLI for BuildKit (default: the first on PATH that has it)",
    )
    args = parser.parse_args()
    found = buildkit.find_buildkit(args.cli or buildkit_cli_on_path())
    if found.kind != "buildkit" or found.cli is None:
        raise SystemExit(f"no BuildKit here: {found.why} (pass --cli PATH of a CLI that has it)")
    path = os.pathsep.join([str(Path(found.cli).parent), os.environ.get("PATH", "")])
    client = docker.from_env(timeout=600)
    times: dict[str, list[tuple[float, float]]] = {b: [] for b in BUILDERS}
    print(f"{args.image}: {args.runs} run(s) each way, --no-cache; BuildKit: {found.why}")
    try:
        for run in range(args.runs):
            for builder in BUILDERS:
                got = build_once(args.image, args.base_registry, builder, path)
                times[builder].append(got)
                print(
                    f"  run {run + 1} {builder:8}: build {got[0]:6.1f} s, command {got[1]:6.1f} s"
                )
                drop(client, builder)
    finally:  # a failed or interrupted build leaves no image of the benchmark's behind
        for builder in BUILDERS:
            drop(client, builder)
    medians = {
        b: (statistics.median(t[0] for t in v), statistics.median(t[1] for t in v))
        for b, v in times.items()
    }
    print(f"{'builder':10} {'build (median)':>15} {'command (median)':>17}")
    for b, (build, whole) in medians.items():
        print(f"{b:10} {build:13.1f} s {whole:15.1f} s")
    ratio = medians["buildkit"][0] / medians["legacy"][0]
    print(f"BuildKit / legacy, the image's build: {ratio:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
