"""Benchmark: how long a parameter-server run keeps its pods after it is over, before and after the
kit bounds it (TF_GPU_EXIT_GRACE, tfgpu.commands.exit_watch; the servers' end,
tfgpu.commands.chief_done). Printed, not asserted (the assertions are
tests/multiworker/test_parameter_servers.py).

In containers of the kit's 2.21 image, as `build.py k8s --workers 2 --ps 1` renders each role
(tests/multiworker/ps_group.py; TensorFlow on the CPU), the chief's script ending as a user's does
(no os._exit), for each fault:

- worker lost for good: a worker killed during training and never replaced; from the chief's last
  line to the end of its process;
- worker back after the end: the same worker started again once training is over; the same span;
- parameter server lost: the ps killed during training; from the kit's lost-peer line to the end
  of the chief's process;
- servers after the chief: no fault; from the end of the chief's process to the end of the last
  worker or parameter server (plain Jobs: nothing else ends them).

"before" runs every container with TF_GPU_EXIT_GRACE=off (no bound, no following of the chief:
the runtime as it was), "after" with the default; both in the same run, on the same image. The
two arms of a fault run at the same time, each in a cluster of its own (its own network, its own
Docker client): the "after" arm's run ends inside the "before" arm's wait for CAP_S, so a fault
costs one run's time, not two. A process still running after CAP_S is reported as "> CAP_S" and
killed.

Run: .venv/bin/python benchmarks/bench_exit_grace.py [--image REF] [--repeat N]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import docker  # noqa: E402

from tests.multiworker.group import Group, Worker, group  # noqa: E402
from tests.multiworker.ps_group import (  # noqa: E402
    finished_at,
    line_time,
    marks,
    rendered,
    start_cluster,
    start_task,
    wait_for_mark,
)

CAP_S = 30.0
ROUNDS = ["12", "4", "0.5", "plain"]  # room for a kill; the script ends as a user's does
MODES = {"before": {"TF_GPU_EXIT_GRACE": "off"}, "after": {}}


def _ended(task: Worker, timeout: float) -> bool:
    """Whether the container ended within `timeout` (killed after it, if not)."""
    try:
        task.container.wait(timeout=timeout)
        return True
    except Exception:  # requests' ReadTimeout, wrapped as ConnectionError
        task.container.kill()
        return False


def worker_lost(g: Group, image: str, env: dict[str, str], back: bool) -> float | None:
    chief, workers, _ = start_cluster(g, image, ROUNDS, extra_env=env)
    wait_for_mark(chief, "round 2", 600)
    workers[1].container.kill()
    wait_for_mark(chief, "done", 600)
    if back:
        g.remove([workers[1]])
        start_task(g, image, "worker", 1, *rendered(2, 1)["worker"], env)
    last = marks(chief, "done")[0][1]
    if not _ended(chief, CAP_S + (time.time() - last)):
        return None
    return finished_at(chief) - last


def ps_lost(g: Group, image: str, env: dict[str, str]) -> float | None:
    chief, _, ps = start_cluster(g, image, ROUNDS, extra_env=env)
    wait_for_mark(chief, "round 2", 600)
    ps[0].container.kill()
    if not _ended(chief, 120 + CAP_S):
        return None
    said = line_time(chief, "tfgpu: error: this parameter-server cluster lost")
    took = finished_at(chief) - said
    return took if took <= CAP_S else None


def servers_after_chief(g: Group, image: str, env: dict[str, str]) -> float | None:
    chief, workers, ps = start_cluster(g, image, ["3", "4", "0", "plain"], extra_env=env)
    if not _ended(chief, 600):
        raise SystemExit(f"the chief did not end\n{chief.logs()[-3000:]}")
    end = finished_at(chief)
    spans = []
    for server in (*workers, *ps):
        if not _ended(server, max(1.0, CAP_S - (time.time() - end))):
            return None
        spans.append(finished_at(server) - end)
    return max(spans)


FAULTS: dict[str, Callable[[Group, str, dict[str, str]], float | None]] = {
    "worker lost for good (chief's last line -> its end)": lambda g, i, e: worker_lost(
        g, i, e, back=False
    ),
    "worker back after the end (same)": lambda g, i, e: worker_lost(g, i, e, back=True),
    "parameter server lost (kit's line -> chief's end)": ps_lost,
    "servers after the chief (chief's end -> last server's)": servers_after_chief,
}


def shown(values: list[float | None]) -> str:
    if any(v is None for v in values):
        return f"> {CAP_S:.0f} s (still running)"
    return f"{statistics.median(v for v in values if v is not None):.1f} s"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="tfgpu/tensorflow:2.21.0-gpu")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()
    with contextlib.redirect_stdout(io.StringIO()):  # build.py k8s names the files it writes
        rendered(2, 1)
    print(f"image {args.image}, 1 ps + 2 workers + chief, median of {args.repeat} run(s) each")
    print("(the two arms of each fault run at the same time, each in a cluster of its own)")
    print(f"{'fault':58} {'before (grace off)':>20} {'after (default)':>18}", flush=True)
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(MODES)) as pool:
        for name, fault in FAULTS.items():
            arms = {
                mode: pool.submit(arm, fault, args.image, env, args.repeat)
                for mode, env in MODES.items()
            }
            figures = {mode: shown(future.result()) for mode, future in arms.items()}
            print(f"{name:58} {figures['before']:>20} {figures['after']:>18}", flush=True)
    print(f"in {time.monotonic() - started:.0f} s")
    return 0


def arm(
    fault: Callable[[Group, str, dict[str, str]], float | None],
    image: str,
    env: dict[str, str],
    repeat: int,
) -> list[float | None]:
    """One arm of a fault, `repeat` times, each in a fresh group, on a Docker client of its own
    (the other arm runs in another thread)."""
    client = docker.from_env(timeout=900)
    try:
        runs = []
        for _ in range(repeat):
            with group(client) as g:
                runs.append(fault(g, image, dict(env)))
        return runs
    finally:
        client.close()


if __name__ == "__main__":
    sys.exit(main())
