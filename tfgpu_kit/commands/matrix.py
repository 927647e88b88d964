"""`build.py matrix [--json]`: the compatibility table."""

from __future__ import annotations

import argparse

from tfgpu_kit import matrix as rules
from tfgpu_kit import spec as specs
from tfgpu_kit.output import print_json, table

NAME = "matrix"
HELP = "print the TensorFlow → CUDA/cuDNN/Python/driver/architecture table"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json", action="store_true", help="one JSON object per TensorFlow version"
    )


def rows(spec: specs.Spec) -> list[dict[str, object]]:
    offered = {v.version for v in spec.images.versions}
    result: list[dict[str, object]] = []
    for tf, build in spec.matrix.tensorflow.items():
        req = rules.requirements(spec, tf)
        result.append(
            {
                "tensorflow": tf,
                "offered": tf in offered,
                "default": tf == spec.default_version,
                "cuda": str(req.cuda),
                "cudnn": str(req.cudnn),
                "python": list(build.python),
                "driver_min": str(req.driver_min),
                "driver_min_compat": str(req.compat_floor),
                "nvidia_require_cuda": req.require_cuda,
                "sass": build.arches.sass if build.arches else None,
                "ptx": build.arches.ptx if build.arches else None,
            }
        )
    return result


def run(args: argparse.Namespace) -> int:
    spec = specs.load()
    data = rows(spec)
    if args.json:
        print_json(data)
        return 0

    def arches(value: object) -> str:
        return ", ".join(value) if isinstance(value, list) else "unknown"

    table(
        None,
        [
            "TensorFlow",
            "CUDA",
            "cuDNN",
            "Python",
            "driver (native)",
            "driver (minor compat)",
            "SASS",
            "PTX",
        ],
        [
            [
                f"{r['tensorflow']}{' (default)' if r['default'] else ''}",
                str(r["cuda"]),
                str(r["cudnn"]),
                "–".join(r["python"]) if isinstance(r["python"], list) else "",
                str(r["driver_min"]),
                str(r["driver_min_compat"]),
                arches(r["sass"]),
                arches(r["ptx"]),
            ]
            for r in data
        ],
    )
    return 0
