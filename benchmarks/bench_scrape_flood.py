#!/usr/bin/env python3
"""What a scrape flood costs the training process (a script that prints figures, not a test).

A child process imports TensorFlow with TF_GPU_METRICS_PORT set (so the hook serves metrics
from it, as in every kit container) and runs a step in a loop, printing its steps per second
every window: by default Python work that holds the GIL (the Python side of a training step,
which is what the server's threads compete with), with `--loop tensorflow` a dense layer's
forward and backward pass and an SGD update on the CPU. This script reads those figures in
alternating phases of the same run: quiet, and flooded (FLOOD_CLIENTS loopback clients asking
for /metrics back to back, as fast as the server answers, from this process: the child's only
extra work is serving them). It prints the median steps/s of each kind of phase, the flooded
median as a share of the quiet one (without tfgpu.act.metrics_server's limit on collections, 8 such
clients cut a training loop's steps/s by 45 %), and (Python step only: TensorFlow's thread pools
would count too) the CPU the child's other threads, the server's, spent per second while
flooded: on a busy shared machine the steps/s swing with the neighbours' load, that figure much
less.

Usage: .venv/bin/python benchmarks/bench_scrape_flood.py [--rounds N] [--windows N] [--loop L]
(`PYTHONPATH=OTHER/entrypoint/src` measures another copy of the runtime, e.g. an older
commit's: `git worktree add /tmp/old HEAD~5`.)
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

FLOOD_CLIENTS = 8

CHILD = r"""
import sys, time
import tensorflow as tf  # the hook starts the metrics server here
import tfgpu

window_s, loop = float(sys.argv[1]), sys.argv[2]
if loop == "tensorflow":
    x = tf.random.normal([128, 128])
    w = tf.Variable(tf.random.normal([128, 128]))
    opt = tf.keras.optimizers.SGD(0.01)

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(tf.matmul(x, w)))
        opt.apply_gradients([(tape.gradient(loss, w), w)])
        return loss
else:  # the Python side of a training step (Keras' loop, a data pipeline): holds the GIL
    def step():
        return sum(i * i for i in range(2000))

step()
tf.constant(1.0) + 1  # the runtime is up: scrapes read device figures, as in training
print("ready", tfgpu.__file__, flush=True)
while True:
    start, steps = time.perf_counter(), 0
    cpu, own = time.process_time(), time.thread_time()
    while time.perf_counter() - start < window_s:
        step()
        steps += 1
    took = time.perf_counter() - start
    # CPU of every thread but the training one: the metrics server's (TensorFlow's own pools
    # are idle in the Python step)
    others = (time.process_time() - cpu) - (time.thread_time() - own)
    print(f"{steps / took:.2f} {others / took:.4f}", flush=True)
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def flood(port: int, stop: threading.Event, counts: dict[str, int]) -> None:
    url = f"http://127.0.0.1:{port}/metrics"
    while not stop.is_set():
        try:
            with urllib.request.urlopen(url, timeout=10) as response:
                response.read()
            counts["answered"] += 1
        except urllib.error.HTTPError as e:  # 429: over the server's collections per second
            counts[str(e.code)] = counts.get(str(e.code), 0) + 1
        except OSError:
            counts["refused"] += 1
            time.sleep(0.01)  # no slot: try again at once, as a flood does


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="quiet+flooded rounds (default 4)")
    parser.add_argument("--windows", type=int, default=3, help="windows per phase (default 3)")
    parser.add_argument("--window-s", type=float, default=1.0, help="seconds per window")
    parser.add_argument(
        "--loop",
        choices=["python", "tensorflow"],
        default="python",
        help="the step: Python work that holds the GIL (default), or a TensorFlow CPU step",
    )
    args = parser.parse_args()
    port = free_port()
    env = {
        **os.environ,
        "TF_GPU_METRICS_PORT": str(port),
        "TF_GPU_METRICS_ADDR": "127.0.0.1",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "CUDA_VISIBLE_DEVICES": "-1",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(args.window_s), args.loop],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert child.stdout is not None
    quiet: list[float] = []
    flooded: list[float] = []
    quiet_cpu: list[float] = []  # CPU seconds per second of the child's other threads
    flooded_cpu: list[float] = []
    counts = {"answered": 0, "refused": 0}
    flood_s = 0.0
    try:
        ready = child.stdout.readline().split()
        if ready[:1] != ["ready"]:
            print("the training child did not start", file=sys.stderr)
            return 1
        runtime = Path(ready[1]).parent

        def phase(cpu: list[float]) -> list[float]:
            assert child.stdout is not None
            child.stdout.readline()  # the window the phase began in is partly the previous one's
            windows = [child.stdout.readline().split() for _ in range(args.windows)]
            cpu += [float(w[1]) for w in windows]
            return [float(w[0]) for w in windows]

        # quiet and flooded phases alternate, so that a shared machine's drift hits both alike
        for _ in range(args.rounds):
            quiet += phase(quiet_cpu)
            stop = threading.Event()
            clients = [
                threading.Thread(target=flood, args=(port, stop, counts), daemon=True)
                for _ in range(FLOOD_CLIENTS)
            ]
            started = time.monotonic()
            for client in clients:
                client.start()
            flooded += phase(flooded_cpu)
            stop.set()
            for client in clients:
                client.join(15)
            flood_s += time.monotonic() - started
    finally:
        child.kill()
        child.wait()
    calm, loaded = statistics.median(quiet), statistics.median(flooded)
    print(
        f"runtime: {runtime}; {args.loop} step; {args.rounds} rounds of "
        f"{args.windows} quiet and {args.windows} flooded windows of {args.window_s:g} s"
    )
    print(f"quiet: median {calm:.1f} steps/s (min {min(quiet):.1f}, max {max(quiet):.1f})")
    rates = ", ".join(f"{n / flood_s:.0f} {what}/s" for what, n in sorted(counts.items()))
    print(
        f"flooded by {FLOOD_CLIENTS} loopback clients ({rates}): median {loaded:.1f} steps/s "
        f"(min {min(flooded):.1f}, max {max(flooded):.1f})"
    )
    print(f"flooded / quiet: {loaded / calm:.2f} (slowdown {1 - loaded / calm:.0%})")
    answered = counts["answered"] / flood_s
    serving = statistics.median(flooded_cpu) - statistics.median(quiet_cpu)
    if args.loop == "tensorflow":  # TensorFlow's own threads count there too: no figure
        return 0
    print(
        f"the server's CPU in the training process while flooded: {serving:.3f} s per second"
        + (f" ({serving / answered * 1000:.2f} ms per answered scrape)" if answered else "")
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
