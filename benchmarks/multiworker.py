"""Benchmark of multi-worker training in containers: printed, not asserted.

For 2 and 3 workers run as `build.py k8s --workers N` makes them (tests/multiworker/group.py:
the manifest's env, the pod DNS names as aliases on one Docker network, TensorFlow on the CPU):
- from all containers started (the first `docker start`) to the cluster formed (the last worker
  past MultiWorkerMirroredStrategy's constructor, which waits for every task) and to the first
  training step (the last worker past step 0);
- with 2 workers, the time the survivor takes to exit after its peer is killed (SIGKILL).
Each figure is the median of --repeat runs. TensorFlow's import dominates the first two.

Run: .venv/bin/python benchmarks/multiworker.py [--image REF] [--repeat N]
(default image: tfgpu/tensorflow:2.21.0-gpu, as `build.py build 2.21.0-gpu` tags it)"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from tests.multiworker.group import group, render, run_all, wait_for  # noqa: E402


def formation(client: docker.DockerClient, image: str, workers: int) -> tuple[float, float]:
    """(seconds to the cluster formed, seconds to the first step) for one group."""
    with tempfile.TemporaryDirectory() as out:
        rendered = render(Path(out), "--workers", str(workers), "--metrics-port", "0")
    with group(client) as g:
        started = g.start(image, rendered, ["loop", "3"])
        codes = run_all(g, started, 600)
        if codes != [0] * workers:
            raise SystemExit(f"a worker failed: {codes}\n{started[codes.index(max(codes))].logs()}")
        t0 = min(w.started for w in started)
        formed = max(w.marks("cluster-formed")[0][1] for w in started) - t0
        first = max(w.marks("step 0")[0][1] for w in started) - t0
    return formed, first


def survivor_exit(client: docker.DockerClient, image: str) -> float:
    """Seconds from killing worker 1 to worker 0's exit."""
    with tempfile.TemporaryDirectory() as out:
        rendered = render(Path(out), "--workers", "2", "--metrics-port", "0")
    with group(client) as g:
        survivor, victim = g.start(image, rendered, ["loop", "100000", "1", "0.05"])
        wait_for(survivor, "step 5 ", 600)
        victim.container.kill()
        t0 = time.monotonic()
        code = survivor.wait(600)
        took = time.monotonic() - t0
        if code == 0:
            raise SystemExit("the survivor exited 0 after its peer was killed")
        said = [
            line for line in survivor.logs().splitlines() if "lost " in line and "tfgpu" in line
        ]
        print(f"  survivor exit {code} after {took:.1f} s: {said[-1] if said else '(no kit line)'}")
    return took


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="tfgpu/tensorflow:2.21.0-gpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=900)
    print(f"image {args.image}, median of {args.repeat} runs")
    for workers in (2, 3):
        runs = [formation(client, args.image, workers) for _ in range(args.repeat)]
        formed = statistics.median(r[0] for r in runs)
        first = statistics.median(r[1] for r in runs)
        print(
            f"{workers} workers: cluster formed {formed:.1f} s, first step {first:.1f} s "
            "after the containers started"
        )
    exits = [survivor_exit(client, args.image) for _ in range(args.repeat)]
    print(
        f"2 workers, one killed: the survivor exited {statistics.median(exits):.1f} s later "
        f"(runs: {', '.join(f'{t:.1f}' for t in exits)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
