"""`python -m tests.base_standins build [NAME …] [--force]`: NAME is cuda, gpu-2.21.0, gpu-2.17.0,
jupyter (CUDA 12.3), cuda11, gpu-2.14.0, gpu-2.15.0 (CUDA 11.8), slim, or l4t (the arm64 Jetson
base: only where arm64 runs, so only when named); default: all but l4t."""

from __future__ import annotations

import argparse
import sys

from tests.base_standins.build import BUILDERS, Result, StandinError, build_all, progress
from tests.base_standins.l4t import build_l4t

L4T = "l4t"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.base_standins",
        description="Build the offline stand-ins for the official tensorflow/tensorflow GPU bases.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the stand-ins that are missing or out of date")
    build.add_argument(
        "which", nargs="*", metavar="|".join([*BUILDERS, L4T]), help="default: all but l4t"
    )
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    if unknown := set(args.which) - {*BUILDERS, L4T}:
        parser.error(f"unknown stand-in(s): {', '.join(sorted(unknown))}")
    x86 = [name for name in args.which if name != L4T]
    try:
        results: list[Result] = []
        if x86 or not args.which:
            results += build_all(x86 or None, force=args.force)
        if L4T in args.which:
            results.append(build_l4t(force=args.force))
    except StandinError as exc:
        print(f"standin: {exc}", file=sys.stderr)
        return 1
    for r in results:
        state = f"built in {r.seconds:.0f}s" if r.built else "up to date"
        progress(f"{r.tag}: {state}, {r.size_bytes / 2**20:.0f} MiB, key {r.key}")
    # Data on stdout: the tags, one a line.
    for r in results:
        print(r.tag)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
