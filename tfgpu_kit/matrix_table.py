"""The compatibility table `build.py matrix` prints: per TensorFlow version, what it was built with,
what the kit's image of it loads, the drivers that run that, and what its base lacks."""

from __future__ import annotations

from tfgpu_kit import cudagap as rules
from tfgpu_kit import spec as specs
from tfgpu_kit.locks import wheel_locks
from tfgpu_kit.output import print_json, table


def rows(spec: specs.Spec) -> list[dict[str, object]]:
    offered = {v.version for v in spec.images.versions}
    # the slim variants' images of each version (images.yaml variants.<name>.versions)
    slim = {
        version: f"{version}-{name}"
        for name, variant in spec.images.variants.items()
        if variant.base is specs.VariantBase.SLIM
        for version in variant.versions or []
    }
    lock = wheel_locks.load()
    result: list[dict[str, object]] = []
    for tf, build in spec.matrix.tensorflow.items():
        req = rules.requirements(spec, tf)
        gap = None
        if req.gap is not None:
            gap = req.gap.as_json()
            gap["wheels_mib"] = _mib(lock, req.gap.wheels)
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
                # Keras 2 the image carries beside Keras 3 (TF_USE_LEGACY_KERAS=1), from the lock
                "tf_keras": {"pin": req.tf_keras, "mib": _mib(lock, [req.tf_keras])}
                if req.tf_keras is not None
                else None,
                # the slim image of it (TensorFlow and the same wheels on bases.yaml's slim base)
                "slim": slim.get(tf),
            }
        )
    return result


def _mib(lock: wheel_locks.Lock, pins: tuple[str, ...] | list[str]) -> float | None:
    mib = wheel_locks.size(lock, pins).mib
    return round(mib, 1) if mib is not None else None


def _adds(row: dict[str, object]) -> str:
    base = row["base"]
    if not isinstance(base, dict):
        return "base unknown (not in bases.yaml)"
    keras = row["tf_keras"]
    plus = f"; + {keras['pin']}" if isinstance(keras, dict) else ""
    if row.get("slim"):
        plus += f"; slim: {row['slim']} (TensorFlow and these wheels on a Python base)"
    if not base["wheels"]:
        return f"{base['summary']}{plus}"
    size = base["wheels_mib"]
    return f"{base['summary']}; {f'{size:.0f} MiB' if size is not None else 'size unknown'}{plus}"


def show(spec: specs.Spec, *, as_json: bool) -> None:
    """`build.py matrix`: the rows as one JSON array, or as a table."""
    data = rows(spec)
    if as_json:
        print_json(data)
        return

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
