"""`build.py bake`: a docker-bake.json of the selected images (with no selector every image,
images/l4t.yaml's too), for teams that build with `docker buildx bake`, with the build contexts
when asked to assemble them.

Each target's context is a directory that must hold the Dockerfile and wheels/ (build.py bake
--assemble writes them, the same contexts `build.py build` uses). An image for another platform
than the engine's own (images/l4t.yaml's: `platforms: ["linux/arm64"]`) is left out of the group
`default`: `docker buildx bake` alone builds images.yaml's images; `… bake l4t` builds those where
the builder can."""

from __future__ import annotations

import functools
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfgpu_kit.image import build_args, context, render
from tfgpu_kit.matrix import catalog, selectors
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.catalog import Image
from tfgpu_kit.matrix.locks import base_lock
from tfgpu_kit.shared.errors import SpecError, UsageError

log = logging.getLogger(__name__)


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


@dataclass(frozen=True)
class BakeRequest:
    """`build.py bake`'s flags as given."""

    selectors: list[str]
    out: Path | None
    contexts: Path
    assemble: bool
    registry: str | None
    base_registry: str | None


def write_bake_file(request: BakeRequest) -> int:
    """`build.py bake`: the file on stdout or in --out."""
    catalog.check_registry_flags(request.registry, request.base_registry)
    if request.out is not None and request.out.is_dir():
        raise UsageError(
            f"--out {str(request.out)!r} is a folder: accepted: a file path; example: "
            "--out docker-bake.json"
        )
    spec = specs.load()
    # images/l4t.yaml's Jetson images: with `l4t` (or a name or tag of one), or with no selector
    chosen = selectors.select(
        catalog.every_image(spec), request.selectors, default=("all", catalog.JETSON)
    )
    images = [image for image in chosen if image.base_locked]
    try:
        specs.check_base_python(spec, {image.tensorflow for image in images})
    except SpecError as error:
        if request.assemble:
            raise
        # only a file is written: say which targets would fail to build, and write it
        log.warning("%s\n  (written anyway; building those targets would fail)", error)
    cuda_wheels_mib: dict[str, float] = {}
    if request.assemble:
        dockerfile = functools.partial(render.render_image, spec)
        runtime_extras = spec.images.runtime_extras
        for image, ctx in context.iter_contexts(
            chosen, request.contexts, dockerfile, runtime_extras
        ):
            if image.cuda_wheels:
                cuda_wheels_mib[image.name] = ctx.cuda_wheels_mib
    # the base.digest label: the digest the Dockerfile's FROM pins (the lock's), which the builder
    # resolves itself (None: bake looks at no local base); unknown for a mirror's bases
    locked = base_lock.BaseDigests(base_lock.load(), images, base_registry=request.base_registry)
    base_digests = {
        image.name: digest for image in images if (digest := locked.digest(image, None)) is not None
    }
    data = bake_file(
        chosen,
        contexts=request.contexts,
        registry=request.registry,
        base_registry=request.base_registry,
        buildargs=build_args.buildargs(base_digest=None),
        cuda_wheels_mib=cuda_wheels_mib,
        base_digests=base_digests,
        base_pin=locked.pin(),
    )
    text = json.dumps(data, indent=2) + "\n"
    if request.out:
        request.out.write_text(text, encoding="utf-8")
        log.info("wrote %s (%d targets)", request.out, len(data["target"]))
    else:
        print(text, end="")
    return 0
