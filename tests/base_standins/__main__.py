"""`python -m tests.base_standins build [NAME …] [--force]`: NAME is cuda, gpu-2.21.0, gpu-2.17.0,
jupyter (CUDA 12.3), cuda11, gpu-2.14.0, gpu-2.15.0 (CUDA 11.8); default: all."""

from __future__ import annotations

import argparse
import sys

from tests.base_standins.build import BUILDERS, StandinError, build_all, progress


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tests.base_standins",
        description="Build the offline stand-ins for the official tensorflow/tensorflow GPU bases.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    build = sub.add_parser("build", help="build the stand-ins that are missing or out of date")
    build.add_argument("which", nargs="*", metavar="|".join(BUILDERS), help="default: all")
    build.add_argument("--force", action="store_true", help="rebuild even when up to date")
    args = parser.parse_args(argv)
    if unknown := set(args.which) - set(BUILDERS):
        parser.error(f"unknown stand-in(s): {', '.join(sorted(unknown))}")
    try:
        results = build_all(args.which or None, force=args.force)
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
