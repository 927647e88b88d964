"""A docker-bake.json of the same matrix, for teams that build with `docker buildx bake`.

Each target's context is a directory that must hold the Dockerfile and wheels/ (build.py bake
--assemble writes them, the same contexts `build.py build` uses). An image for another platform (the
Jetson images: `platforms: ["linux/arm64"]`) is left out of the group `default`: `docker buildx
bake` alone builds images.yaml's images; `… bake l4t` builds those where the builder can."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from tfgpu_kit import catalog
from tfgpu_kit.catalog import Image


def target_name(image_name: str) -> str:
    """Bake allows only [A-Za-z0-9_-] in target names: `2.21.0-gpu` is target `2_21_0-gpu`."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", image_name)


def bake_file(
    images: list[Image],
    *,
    contexts: Path,
    registry: str | None,
    base_registry: str | None,
    buildargs: dict[str, str],
    cuda_wheels_mib: dict[str, float] | None = None,
    base_digests: dict[str, str] | None = None,
    base_pin: str | None = None,
) -> dict[str, Any]:
    """`cuda_wheels_mib`: per image name, the unpacked size of the NVIDIA wheels its assembled
    context holds (its io.tfgpu.cuda.wheels-mib label); unknown without --assemble.
    `base_digests`: per image name, its base's digest from images/bases.lock.yaml (the
    base.digest label); an image without one is labelled `unknown`. `base_pin`: the BASE_PIN
    argument ("" for a mirror's bases: FROM by tag; None: the Dockerfile's own digest), for the
    images whose Dockerfile pins its base (not the Jetson ones)."""
    targets: dict[str, Any] = {}
    for image in images:
        args = dict(buildargs)
        if image.name in (cuda_wheels_mib or {}):
            args["TFGPU_CUDA_WHEELS_MIB"] = f"{(cuda_wheels_mib or {})[image.name]:.0f}"
        if image.name in (base_digests or {}):
            args["TFGPU_BASE_DIGEST"] = (base_digests or {})[image.name]
        args["BASE_REGISTRY"] = catalog.base_registry(image.base_registry, base_registry)
        if base_pin is not None and image.base_locked:
            args["BASE_PIN"] = base_pin
        target = targets[target_name(image.name)] = {
            "context": str(contexts / image.name),
            "dockerfile": "Dockerfile",
            "tags": image.tags(registry=registry),
            "args": args,
        }
        if image.platform != catalog.NATIVE_PLATFORM:
            target["platforms"] = [image.platform]
    native = [target_name(i.name) for i in images if i.platform == catalog.NATIVE_PLATFORM]
    groups: dict[str, Any] = {"default": {"targets": native}}
    for variant in dict.fromkeys(image.variant_name for image in images):
        names = [target_name(i.name) for i in images if i.variant_name == variant]
        groups[variant] = {"targets": names}
    return {"group": groups, "target": targets}
