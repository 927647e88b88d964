"""What `build.py bake` does with its flags: a docker-bake.json of the selected images (with no
selector every image, the Jetson ones of images/l4t.yaml too), with the build contexts when asked
to assemble them."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

from tfgpu_kit import bake, catalog, image_builds, selectors
from tfgpu_kit import spec as specs
from tfgpu_kit.errors import SpecError, UsageError
from tfgpu_kit.locks import base_lock

log = logging.getLogger(__name__)


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
        for image, ctx in image_builds.iter_contexts(spec, chosen, request.contexts):
            if image.cuda_wheels:
                cuda_wheels_mib[image.name] = ctx.cuda_wheels_mib
    # the base.digest label: the digest the Dockerfile's FROM pins (the lock's), which the builder
    # resolves itself (None: bake looks at no local base); unknown for a mirror's bases
    locked = base_lock.BaseDigests(base_lock.load(), images, base_registry=request.base_registry)
    base_digests = {
        image.name: digest for image in images if (digest := locked.digest(image, None)) is not None
    }
    data = bake.bake_file(
        chosen,
        contexts=request.contexts,
        registry=request.registry,
        base_registry=request.base_registry,
        buildargs=image_builds.buildargs(base_digest=None),
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
