#!/usr/bin/env python3
"""Start-up cost of the runtime package (a script that prints figures, not a test).

1. Interpreter start, `python -c pass`, in a throwaway venv with the tfgpu wheel (and so
   the .pth hook) installed vs an identical venv without it. Goal: < 2 ms added.
2. `tfgpu run -- true` (the image's entrypoint) vs `true`, and vs `python -c pass` of the same
   interpreter, which is the floor of any Python entrypoint. Goal: < 15 ms added over `true`.
   Once with no TF_GPU_* variables, once with those the images set (2b), and
   where this host lets us (root, util-linux unshare) as PID 1 of a new PID namespace (2c),
   as in a container started without --init: all three commands under `unshare --pid --fork`;
   and there (2d) what the exit grace adds to a Python command (TF_GPU_EXIT_GRACE off vs 10s).

Runs are interleaved (A, B, A, B…) so drift on a shared machine hits both sides alike;
medians of many runs, and the ratios of medians taken in the same run. Where `python -c pass`
itself takes 15 ms or more (a slow or loaded host), no Python entrypoint can meet the goal
there: the script says so, and the figure to read is what tfgpu adds over `python -c pass`.

Usage: .venv/bin/python benchmarks/bench_runtime.py [--runs N] [--runtime-source DIR]
(`--runtime-source` builds the wheel from another copy of entrypoint/, e.g. an older commit's:
`git archive HEAD~1 entrypoint | tar -x -C /tmp/old`, then `--runtime-source /tmp/old/entrypoint`).
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
from tfgpu_kit.image.context import (  # noqa: E402  (needs the checkout on sys.path)
    RUNTIME_SOURCE,
    build_runtime_wheel,
)

HOOK_GOAL_MS = 2.0
RUN_GOAL_MS = 15.0  # `tfgpu run -- true` adds at most 15 ms over `true`
MIN_RUNS = 50
# What the images set (dockerfiles/2.21.0-gpu/Dockerfile): `tfgpu run` parses all of it.
IMAGE_ENV = {
    "TF_GPU_MEMORY_GROWTH": "true",
    "TFGPU_IMAGE_TF": "2.21.0",
    "TFGPU_IMAGE_CUDA": "12.5",
    "TFGPU_IMAGE_DRIVER_MIN": "555.42.06",
    "TFGPU_IMAGE_DRIVER_MIN_COMPAT": "525.60.13",
    "TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true",
}


def timed(cmd: list[str], env: dict[str, str]) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    return (time.perf_counter() - start) * 1000


def medians(commands: dict[str, list[str]], env: dict[str, str], runs: int) -> dict[str, float]:
    """The median wall time (ms) of each command, run round-robin `runs` times."""
    for _ in range(3):  # warm the page cache and .pyc files
        for cmd in commands.values():
            timed(cmd, env)
    times: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(runs):
        for name, cmd in commands.items():
            times[name].append(timed(cmd, env))
    return {name: statistics.median(t) for name, t in times.items()}


def added(label: str, test: float, base: float, goal_ms: float | None = None) -> str:
    line = f"  {label:<34} {test - base:+7.2f} ms, ratio {test / base:6.3f}"
    if goal_ms is not None:
        verdict = "ok" if test - base < goal_ms else "OVER GOAL"
        line += f"  (goal: < {goal_ms:g} ms added) {verdict}"
    return line


def compare_hook(with_py: str, without_py: str, env: dict[str, str], runs: int) -> None:
    m = medians({"without": [without_py, "-c", "pass"], "with": [with_py, "-c", "pass"]}, env, runs)
    print("1. interpreter start: python -c pass, without vs with the tfgpu wheel (its hook)")
    print(f"  without tfgpu  median {m['without']:7.2f} ms")
    print(f"  with tfgpu     median {m['with']:7.2f} ms")
    print(added("the hook adds", m["with"], m["without"], HOOK_GOAL_MS) + f"  [{runs} runs each]")


def compare_run(
    name: str, py: str, tfgpu: str, env: dict[str, str], runs: int, prefix: tuple[str, ...] = ()
) -> None:
    true = "/bin/true" if os.path.exists("/bin/true") else "true"
    commands = {"true": [true], "python": [py, "-c", "pass"], "tfgpu": [tfgpu, "run", "--", true]}
    m = medians({k: [*prefix, *cmd] for k, cmd in commands.items()}, env, runs)
    print(name)
    print(f"  true                  median {m['true']:7.2f} ms")
    print(f"  python -c pass        median {m['python']:7.2f} ms  (tfgpu's interpreter)")
    print(f"  tfgpu run -- true     median {m['tfgpu']:7.2f} ms  [{runs} runs each, interleaved]")
    print(added("tfgpu run over true", m["tfgpu"], m["true"], RUN_GOAL_MS))
    print(added("tfgpu run over python -c pass", m["tfgpu"], m["python"]))
    print(added("python -c pass over true", m["python"], m["true"]))
    if m["python"] >= RUN_GOAL_MS:
        print(
            f"  note: this host's python -c pass alone takes {m['python']:.2f} ms, at or above "
            f"the {RUN_GOAL_MS:g} ms goal: no Python entrypoint can meet it here; read what "
            "tfgpu adds over python -c pass"
        )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=200, help=f"at least {MIN_RUNS}")
    parser.add_argument(
        "--runtime-source",
        type=Path,
        default=RUNTIME_SOURCE,
        help="the runtime package to build the wheel from (default: entrypoint/)",
    )
    args = parser.parse_args()
    if args.runs < MIN_RUNS:
        parser.error(f"--runs: at least {MIN_RUNS}, for medians worth reading")
    # absolute: the wheel is built from another working directory (a relative path failed)
    args.runtime_source = args.runtime_source.resolve()
    if not (args.runtime_source / "pyproject.toml").is_file():
        parser.error(
            f"--runtime-source {args.runtime_source}: no pyproject.toml there; accepted: a copy "
            "of entrypoint/, e.g. --runtime-source /tmp/old/entrypoint"
        )
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("TF_", "TFGPU_", "CUDA_VISIBLE"))
    }
    with tempfile.TemporaryDirectory() as tmp:
        t = Path(tmp)
        wheel = build_runtime_wheel(t / "w", args.runtime_source)  # the wheel the images get
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
            f"Python {sys.version.split()[0]}, tfgpu wheel {wheel.name} from "
            f"{args.runtime_source}, {os.cpu_count()} CPUs (shared)"
        )
        compare_hook(with_py, without_py, env, args.runs)
        tfgpu = str(t / "with" / "bin" / "tfgpu")
        compare_run("2. tfgpu run -- true (no TF_GPU_* variables)", with_py, tfgpu, env, args.runs)
        compare_run(
            "2b. tfgpu run -- true (the image's variables: TF_GPU_MEMORY_GROWTH, TFGPU_IMAGE_*)",
            with_py,
            tfgpu,
            {**env, **IMAGE_ENV},
            args.runs,
        )
        unshare = ("unshare", "--pid", "--fork")
        if subprocess.run([*unshare, "true"], capture_output=True).returncode == 0:
            compare_run(
                "2c. as PID 1, the image's variables (each command under unshare --pid --fork)",
                with_py,
                tfgpu,
                {**env, **IMAGE_ENV},
                args.runs,
                unshare,
            )
            compare_exit_watch(with_py, tfgpu, {**env, **IMAGE_ENV}, args.runs, unshare)
        else:
            print("2c. as PID 1: skipped (unshare --pid --fork needs root and util-linux)")
    return 0


def compare_exit_watch(
    py: str, tfgpu: str, env: dict[str, str], runs: int, prefix: tuple[str, ...]
) -> None:
    """What the exit grace (tfgpu.commands.exit_watch, tfgpu.act.exit_guard) costs a Python command
    as PID 1: the pipe, its SIGIO, and the hook's handler, against the same command with it off.
    `env` in front of both, so that both pay the same exec."""
    commands = {
        grace: [*prefix, "env", f"TF_GPU_EXIT_GRACE={grace}", tfgpu, "run", "--", py, "-c", "pass"]
        for grace in ("off", "10s")
    }
    m = medians(commands, env, runs)
    print("2d. as PID 1, a Python command: tfgpu run -- python -c pass, exit grace off vs 10s")
    print(f"  grace off             median {m['off']:7.2f} ms")
    print(f"  grace 10s (default)   median {m['10s']:7.2f} ms  [{runs} runs each, interleaved]")
    print(added("the exit watch adds", m["10s"], m["off"]))


if __name__ == "__main__":
    raise SystemExit(main())
