#!/usr/bin/env python3
"""Start-up cost of the runtime package (a script that prints figures, not a test).

1. Interpreter start, `python -c pass`, in a throwaway venv with the tfgpu wheel (and so
   the .pth hook) installed vs an identical venv without it. Goal: < 2 ms added.
2. `tfgpu run -- true` vs `true`. Goal: < 60 ms added.

Runs are interleaved (A, B, A, B…) so drift on a shared machine hits both sides alike;
medians of many runs. Usage: .venv/bin/python benchmarks/bench_runtime.py [--runs N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from tfgpu_kit.context import build_runtime_wheel  # noqa: E402  (needs the checkout on sys.path)


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def compare(
    name: str, base: list[str], test: list[str], env: dict[str, str], runs: int, goal_ms: float
) -> None:
    for _ in range(3):  # warm the page cache and .pyc files
        timed(base, env)
        timed(test, env)
    a, b = [], []
    for _ in range(runs):
        a.append(timed(base, env))
        b.append(timed(test, env))
    ma, mb = statistics.median(a), statistics.median(b)
    verdict = "ok" if mb - ma < goal_ms else "OVER GOAL"
    print(f"{name}")
    print(f"  baseline   median {ma:7.2f} ms")
    print(f"  with tfgpu median {mb:7.2f} ms")
    print(
        f"  added {mb - ma:+.2f} ms, ratio {mb / ma:.3f} (goal: < {goal_ms:g} ms added) "
        f"{verdict}  [{runs} runs each]"
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200)
    args = parser.parse_args()
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TF_", "TFGPU_", "CUDA_VISIBLE"))
    }
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        wheel = build_runtime_wheel(t / "w")  # the wheel the images get
        for name in ("with", "without"):
            subprocess.run(
                [sys.executable, "-m", "venv", "--without-pip", str(t / name)], check=True
            )
        with_py, without_py = (
            str(t / "with" / "bin" / "python"),
            str(t / "without" / "bin" / "python"),
        )
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "--python",
                with_py,
                "install",
                "-q",
                "--no-deps",
                "--no-index",
                str(wheel),
            ],
            check=True,
        )
        print(
            f"Python {sys.version.split()[0]}, tfgpu wheel {wheel.name}, {os.cpu_count()} CPUs "
            "(shared)"
        )
        compare(
            "1. interpreter start: python -c pass",
            [without_py, "-c", "pass"],
            [with_py, "-c", "pass"],
            env,
            args.runs,
            2.0,
        )
        true = "/bin/true" if os.path.exists("/bin/true") else "true"
        compare(
            "2. tfgpu run -- true vs true",
            [true],
            [str(t / "with" / "bin" / "tfgpu"), "run", "--", true],
            env,
            max(args.runs // 2, 20),
            60.0,
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
