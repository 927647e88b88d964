"""Benchmark of parameter-server training in containers: printed, not asserted.

For 1 parameter server + 2 workers + the chief, run as the parameter-server contract makes them
(tests/multiworker/ps_group.py: the contract's variables, JobSet-style pod DNS names as aliases on
one Docker network, `tfgpu server` on the workers and the ps, TensorFlow on the CPU), from all
containers started (the first `docker start`) to:
- the cluster formed: the chief's ParameterServerStrategy and ClusterCoordinator created (every
  worker's and the ps's server reached);
- the first step: the chief's first scheduled step joined (its result back from a worker).
Each figure is the median of --repeat runs; TensorFlow's import dominates both.

Run: .venv/bin/python benchmarks/parameter_servers.py [--image REF] [--repeat N]
(default image: tfgpu/tensorflow:2.21.0-gpu, as `build.py build 2.21.0-gpu` tags it)"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from tests.multiworker.group import describe, group  # noqa: E402
from tests.multiworker.ps_group import marks, start_cluster  # noqa: E402


def one_run(client: docker.DockerClient, image: str) -> tuple[float, float]:
    """(seconds to the cluster formed, seconds to the first step) for one cluster."""
    with group(client) as g:
        chief, workers, ps = start_cluster(g, image, ["1", "1"])
        code = chief.wait(600)
        if code != 0:
            raise SystemExit(f"the chief exited {code}\n{describe([chief, *workers, *ps])}")
        t0 = min(task.started for task in g.workers)
        formed = marks(chief, "workers")[0][1] - t0
        first = marks(chief, "first-round-done")[0][1] - t0
    return formed, first


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="tfgpu/tensorflow:2.21.0-gpu")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    client = docker.from_env(timeout=900)
    runs = [one_run(client, args.image) for _ in range(args.repeat)]
    formed = statistics.median(r[0] for r in runs)
    first = statistics.median(r[1] for r in runs)
    print(f"image {args.image}, 1 ps + 2 workers + chief, median of {args.repeat} runs:")
    print(
        f"cluster formed {formed:.1f} s, first step {first:.1f} s after the containers started "
        f"(runs: {', '.join(f'{a:.1f}/{b:.1f}' for a, b in runs)})"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
