"""`build.py matrix [--json]`: the compatibility table, and what each image's base lacks."""

from __future__ import annotations

import argparse

from tfgpu_kit import compat_rules as rules
from tfgpu_kit import spec as specs
from tfgpu_kit import wheellock
from tfgpu_kit.commands import Command
from tfgpu_kit.output import print_json, table

NAME = "matrix"
HELP = "print the TensorFlow → CUDA/cuDNN/Python/driver/architecture table"
DESCRIPTION = """Per TensorFlow version: what it was built with (CUDA, cuDNN, Python, SASS/PTX
architectures); what its official base image ships (images/bases.yaml) and whether that is enough
(base provides), or what the kit's image adds (the [and-cuda] wheels, with their unpacked size from
images/cuda-wheels.lock.yaml); the CUDA the image's TensorFlow really loads, and the drivers that
run it (native minimum, minor-version-compatibility floor, NVIDIA_REQUIRE_CUDA)."""


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--json",
        action="store_true",
        help="print one JSON array on stdout, one object per TensorFlow version",
    )


def rows(spec: specs.Spec) -> list[dict[str, object]]:
    offered = {v.version for v in spec.images.versions}
    lock = wheellock.load()
    result: list[dict[str, object]] = []
    for tf, build in spec.matrix.tensorflow.items():
        req = rules.requirements(spec, tf)
        gap = req.gap.as_json() if req.gap else None
        if req.gap is not None:
            sized = wheellock.size(lock, req.gap.wheels)
            assert gap is not None
            gap["wheels_mib"] = round(sized.mib, 1) if sized.mib is not None else None
        result.append(
            {
                "tensorflow": tf,
                "offered": tf in offered,
                "default": tf == spec.default_version,
                # what TensorFlow was built with
                "build_cuda": str(req.build_cuda),
                "build_cudnn": str(req.build_cudnn),
                "python": list(build.python),
                "sass": build.arches.sass if build.arches else None,
                "ptx": build.arches.ptx if build.arches else None,
                # what the kit's image of it loads, and the drivers that run that
                "cuda": str(req.cuda),
                "cudnn": str(req.cudnn),
                "driver_min": str(req.driver_min),
                "driver_min_compat": str(req.compat_floor),
                "nvidia_require_cuda": req.require_cuda,
                "base": gap,
            }
        )
    return result


def _adds(row: dict[str, object]) -> str:
    base = row["base"]
    if not isinstance(base, dict):
        return "base unknown (not in bases.yaml)"
    if not base["wheels"]:
        return str(base["summary"])
    size = base["wheels_mib"]
    return f"{base['summary']}; {f'{size:.0f} MiB' if size is not None else 'size unknown'}"


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
            "built with",
            "Python",
            "SASS",
            "PTX",
            "image loads",
            "driver (native)",
            "driver (minor compat)",
            "base → image",
        ],
        [
            [
                f"{r['tensorflow']}{' (default)' if r['default'] else ''}",
                f"CUDA {r['build_cuda']}, cuDNN {r['build_cudnn']}",
                "–".join(r["python"]) if isinstance(r["python"], list) else "",
                arches(r["sass"]),
                arches(r["ptx"]),
                f"CUDA {r['cuda']}, cuDNN {r['cudnn']}",
                str(r["driver_min"]),
                str(r["driver_min_compat"]),
                _adds(r),
            ]
            for r in data
        ],
    )
    return 0


COMMAND = Command(NAME, HELP, DESCRIPTION, add_arguments, run)
