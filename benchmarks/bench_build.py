"""Benchmarks of the build side: `render` and `check` over the whole matrix.

Two views, each the median of repeated runs:
- in-process: loading the spec alone (baseline), rendering every Dockerfile, assessing every
  TensorFlow version for a driver and a GPU architecture;
- as users run it: `python build.py render --check` and `python build.py check --driver …` end to
  end, against `python -c pass` (interpreter start-up) as the baseline.

Run: .venv/bin/python benchmarks/bench_build.py [--repeat N]"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tfgpu_kit.image import render  # noqa: E402
from tfgpu_kit.matrix import catalog, compat, spec  # noqa: E402
from tfgpu_kit.matrix.versions import parse_arch, parse_driver  # noqa: E402


def median_seconds(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def load_only() -> None:
    spec.load()


def render_all() -> None:
    s = spec.load()
    render.render_all(s, catalog.images(s))


def check_all() -> None:
    s = spec.load()
    driver, arch = parse_driver("535.104.05"), parse_arch("sm_90")
    for tf in s.matrix.tensorflow:
        compat.assess(s, tf, driver, arch)


def command(*args: str) -> Callable[[], object]:
    def go() -> object:
        return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, check=False)

    return go


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    repeat = parser.parse_args().repeat
    s = spec.load()
    images = len(catalog.images(s))
    versions = len(s.matrix.tensorflow)

    base = median_seconds(load_only, repeat * 3)
    rows = [
        ("load spec only (baseline)", base, base),
        (f"render {images} Dockerfiles", median_seconds(render_all, repeat * 3), base),
        (f"check {versions} TF versions", median_seconds(check_all, repeat * 3), base),
    ]
    start_up = median_seconds(command("-c", "pass"), repeat)
    rows += [
        ("python -c pass (baseline)", start_up, start_up),
        ("build.py render --check",
         median_seconds(command("build.py", "render", "--check"), repeat), start_up),
        ("build.py check --driver … --gpu-arch sm_90",
         median_seconds(command("build.py", "check", "--driver", "535.104.05", "--gpu-arch",
                                "sm_90", "--json"), repeat), start_up),
    ]  # fmt: skip
    print(f"median of {repeat}–{repeat * 3} runs; ratio against the baseline above it")
    print(f"{'what':<46} {'median':>10} {'ratio':>7}")
    for name, seconds, baseline in rows:
        print(f"{name:<46} {seconds * 1000:>8.1f}ms {seconds / baseline:>6.1f}x")
    worst = max(seconds for name, seconds, _ in rows if name.startswith("build.py"))
    print(f"slowest command end to end: {worst:.3f} s (goal: well under 1 s)")
    return 0 if worst < 1.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
