#!/usr/bin/env python3
"""What a team's derived build pays for the guard, and what each image's SBOM holds (a script
that prints figures, not a test).

1. `tfgpu check --build` inside each image (a container, no GPU, no network, as its USER): the
   median wall time of N runs, against `tfgpu --help` in the same container (a Python start with
   the runtime imported: the floor of any `tfgpu` command), interleaved run by run.
2. The SBOM the image carries (`build.py sbom`): its size, components by source (dpkg, Python),
   and how many carry the sha256 of their wheel.

Usage: .venv/bin/python benchmarks/bench_teams.py --image tfgpu/tensorflow:2.21.0-gpu [--image …]
       [--runs N]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import docker

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tfgpu_kit.image import sbom_export  # noqa: E402  (needs the checkout on sys.path)

# Runs inside the image: interleaved timings of the guard and of the floor, one JSON line.
TIMER = """
import json, statistics, subprocess, sys, time
runs = int(sys.argv[1])
out = {"guard": [], "floor": [], "guard_exit": None}
for _ in range(runs):
    for key, cmd in (("floor", ["tfgpu", "--help"]), ("guard", ["tfgpu", "check", "--build"])):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, capture_output=True)
        out[key].append(time.perf_counter() - t0)
        if key == "guard":
            out["guard_exit"] = p.returncode
print(json.dumps({k: statistics.median(v) if isinstance(v, list) else v for k, v in out.items()}))
"""


def guard_time(client: docker.DockerClient, image: str, runs: int) -> dict[str, float]:
    logs = client.containers.run(
        image,
        ["python3", "-c", TIMER, str(runs)],
        entrypoint=[],
        network_disabled=True,
        remove=True,
        stderr=False,
    )
    result: dict[str, float] = json.loads(logs.decode().strip().splitlines()[-1])
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", action="append", required=True, help="a kit image (repeatable)")
    parser.add_argument("--runs", type=int, default=5, help="guard runs per image (median)")
    args = parser.parse_args()
    client = docker.from_env(timeout=600)
    print("image | guard median | floor (tfgpu --help) | guard/floor | exit | SBOM | components")
    print("---|---|---|---|---|---|---")
    for image in args.image:
        t = guard_time(client, image, args.runs)
        found = sbom_export.read(client, image)
        n = found.counts()
        print(
            f"{image} | {t['guard']:.2f} s | {t['floor']:.3f} s | {t['guard'] / t['floor']:.1f}x | "
            f"{int(t['guard_exit'])} | {len(found.text.encode()) / 1024:.0f} KiB | {n['all']} "
            f"({n['dpkg']} OS packages, {n['python']} Python, {n['sha256']} with a wheel sha256)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
