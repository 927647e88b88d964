"""A docker-bake.json of the same matrix, for teams that build with `docker buildx bake`.

Each target's context is a directory that must hold the Dockerfile and wheels/ (build.py bake
--assemble writes them, the same contexts `build.py build` uses)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tfgpu_kit.catalog import Image


def target_name(image: Image) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", image.name)


def bake_file(
    images: list[Image],
    *,
    contexts: Path,
    registry: str | None,
    base_registry: str | None,
    buildargs: dict[str, str],
) -> dict[str, Any]:
    targets: dict[str, Any] = {}
    for image in images:
        args = dict(buildargs)
        # as `build` does: `mirror.local/` must not give FROM mirror.local//tensorflow/...
        args["BASE_REGISTRY"] = (base_registry or image.base_registry).rstrip("/")
        targets[target_name(image)] = {
            "context": str(contexts / image.name),
            "dockerfile": "Dockerfile",
            "tags": image.tags(registry=registry),
            "args": args,
        }
    groups: dict[str, Any] = {"default": {"targets": list(targets)}}
    for variant in dict.fromkeys(image.variant_name for image in images):
        groups[variant] = {"targets": [target_name(i) for i in images if i.variant_name == variant]}
    return {"group": groups, "target": targets}
