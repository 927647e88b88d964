#!/usr/bin/env python3
"""What the GPU-generation check (tfgpu.contract.gpu_support: native, PTX JIT and its kernel cache,
known failures) adds to `tfgpu run`'s start, measured in a kit image on the fake NVIDIA driver (a
script that prints figures, not a test).

In one container of IMAGE, with the fake driver and a GPU of each capability (FAKEGPU_CC: 8.0
native, 9.0 PTX JIT with the kernel cache inspected, 12.0 a known failure), three commands run
interleaved (A, B, C, A, B, C…): `python3 -c pass` (the interpreter's floor), `tfgpu run -- true`
of the baseline runtime (BASE, a commit without the check: `git archive BASE entrypoint`) and of
this checkout's runtime, each installed in a folder of its own and put first on PYTHONPATH, so
the same interpreter, image, driver and GPU serve both. Medians of N runs, and the differences of
medians taken in the same run.

Usage: .venv/bin/python benchmarks/bench_gpu_check.py --image tfgpu/tensorflow:2.21.0-gpu
       [--runs 40] [--baseline 33c809f]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
import docker  # noqa: E402

import fakegpu  # noqa: E402
from tfgpu_kit.image.context import build_runtime_wheel  # noqa: E402

# The last commit whose runtime has no GPU-generation check.
BASELINE = "33c809f"
MIN_RUNS = 10
CARDS = {
    "8.0 (A100: native)": fakegpu.FakeCard("Fake A100", 16384, cc="8.0"),
    "9.0 (H100: PTX JIT)": fakegpu.FakeCard("Fake H100", 16384, cc="9.0"),
    "12.0 (RTX 5090: known failure of 2.17-2.20, XLA's of 2.21)": fakegpu.FakeCard(
        "Fake RTX 5090", 16384, cc="12.0"
    ),
}
# Runs in the container: medians of the three commands, interleaved, as one JSON line.
TIMER = """
import json, os, statistics, subprocess, sys, time
runs = int(sys.argv[1])
base = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
door = ["python3", "-m", "tfgpu", "run", "--", "/bin/true"]
commands = {
    "python -c pass": (["python3", "-c", "pass"], base),
    "baseline": (door, {**base, "PYTHONPATH": "/bench/old"}),
    "this checkout": (door, {**base, "PYTHONPATH": "/bench/new"}),
}
def timed(cmd, env):
    t = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - t) * 1000
for _ in range(3):
    for cmd, env in commands.values():
        timed(cmd, env)
times = {name: [] for name in commands}
for _ in range(runs):
    for name, (cmd, env) in commands.items():
        times[name].append(timed(cmd, env))
print(json.dumps({name: statistics.median(t) for name, t in times.items()}))
"""


def install(source: Path, dest: Path, work: Path) -> None:
    """The runtime wheel built from `source` (a copy of entrypoint/), unpacked into `dest`."""
    wheel = build_runtime_wheel(work, source)
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--target", str(dest), str(wheel)],
        check=True,
    )  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--image", required=True, help="a kit image, e.g. tfgpu/tensorflow:2.21.0-gpu"
    )
    parser.add_argument("--runs", type=int, default=40, help=f"at least {MIN_RUNS}")
    parser.add_argument(
        "--baseline", default=BASELINE, help=f"git ref of the baseline (default {BASELINE})"
    )
    args = parser.parse_args()
    if args.runs < MIN_RUNS:
        parser.error(f"--runs {args.runs}: at least {MIN_RUNS}, for medians worth reading")
    client = docker.from_env()
    try:
        client.images.get(args.image)
    except docker.errors.ImageNotFound:
        parser.error(f"--image {args.image}: no such image here; build it first (./kit build)")
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        old_source = t / "old-src"
        old_source.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "entrypoint"],
            capture_output=True, check=False,
        )  # fmt: skip
        if archive.returncode != 0:
            parser.error(f"--baseline {args.baseline}: {archive.stderr.decode().strip()}")
        subprocess.run(["tar", "-x", "-C", str(old_source)], input=archive.stdout, check=True)
        install(old_source / "entrypoint", t / "old", t / "wheels-old")
        install(ROOT / "entrypoint", t / "new", t / "wheels-new")
        (t / "timer.py").write_text(TIMER, encoding="utf-8")
        t.chmod(0o755)
        driver = fakegpu.build()
        print(f"image {args.image}, fake NVIDIA driver 580.65.06, baseline {args.baseline}; "
              f"medians of {args.runs} interleaved runs in one container (ms)")  # fmt: skip
        for label, card in CARDS.items():
            output = client.containers.run(
                args.image,
                ["python3", "/bench/timer.py", str(args.runs)],
                entrypoint=[],
                environment=fakegpu.environment([card], driver="580.65.06"),
                volumes={
                    str(driver): {"bind": "/usr/local/nvidia/lib64", "mode": "ro"},
                    str(t): {"bind": "/bench", "mode": "ro"},
                },
                devices=["/dev/null:/dev/nvidiactl:rwm"],
                network_disabled=True,
                remove=True,
            )
            m = json.loads(output.decode().strip().splitlines()[-1])
            floor, base, new = m["python -c pass"], m["baseline"], m["this checkout"]
            print(f"compute capability {label}")
            print(f"  python3 -c pass            {floor:8.2f}")
            print(f"  tfgpu run -- true, base    {base:8.2f}  ({base - floor:+.2f} over python)")
            print(f"  tfgpu run -- true, now     {new:8.2f}  ({new - floor:+.2f} over python)")
            print(f"  the check adds             {new - base:+8.2f}  (ratio {new / base:.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
