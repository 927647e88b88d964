"""What `build.py build` does with its flags: the registries checked, the images selected, refused
for a driver when asked, then built or listed, each for its own platform."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from tfgpu_kit import catalog, image_builds, selectors
from tfgpu_kit import spec as specs
from tfgpu_kit.errors import EXIT_FAILED, UsageError
from tfgpu_kit.spec import CudaSource

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildRequest:
    """`build.py build`'s flags as given."""

    selectors: list[str]
    dry_run: bool
    push: bool
    registry: str | None
    base_registry: str | None
    driver: str | None
    force: bool
    no_cache: bool
    verify: bool
    contexts: Path | None
    cuda_source: str | None
    json: bool


def build(request: BuildRequest) -> int:
    """`build.py build`: EXIT_FAILED when an image is refused for the driver or fails to build."""
    catalog.check_registry_flags(request.registry, request.base_registry)
    spec = specs.load()
    # No selector builds the default (newest) version, not all 20 images: a newcomer's `./kit build`
    # must not pull every base there is. `all` selects everything of images.yaml; `l4t` (or a name
    # or tag of one) images/l4t.yaml's, built where the engine can run arm64, else declined.
    images = selectors.select(catalog.every_image(spec), request.selectors, default=("latest",))
    options = image_builds.BuildOptions(
        registry=request.registry,
        base_registry=request.base_registry,
        push=request.push,
        no_cache=request.no_cache,
        contexts=request.contexts,
        verify=request.verify,
        as_json=request.json,
    )
    flag = "--driver" if request.driver is not None else "--cuda-source"
    if (request.driver is not None or request.cuda_source) and (
        unjudged := [image.name for image in images if image.req is None]
    ):
        # what the driver must run and where the CUDA comes from are matrix.yaml's facts
        raise UsageError(
            f"{flag} does not apply to {', '.join(unjudged)}: its CUDA is its base's own"
            " (JetPack's): images/matrix.yaml has no requirements of it to judge or change",
            hint="select images of images.yaml, e.g. build.py build 2.21.0-gpu"
            f" {flag} {request.driver or request.cuda_source}",
        )
    if request.cuda_source and (slim := [i.name for i in images if i.slim]):
        raise UsageError(
            f"--cuda-source {request.cuda_source} does not apply to {', '.join(slim)}: the slim"
            " base has no CUDA of its own, so its images always add the [and-cuda] wheels",
            hint="select the images of the official bases, e.g. build.py build 2.21.0-gpu"
            f" --cuda-source {request.cuda_source}",
        )
    if request.cuda_source:  # on the selected images only (catalog.with_cuda_source)
        override = CudaSource(request.cuda_source)
        images = [catalog.with_cuda_source(spec, image, override) for image in images]
    # before anything is fetched or built: a base whose Python the runtime does not support
    # would only fail at pip install, deep in the Docker build
    specs.check_base_python(spec, {image.tensorflow for image in images})
    if request.driver is not None:
        refused = image_builds.refuse_for_driver(spec, images, request.driver, request.force)
        if refused:
            log.error(
                "refusing to build %s (driver %s cannot run them); --force builds them anyway",
                ", ".join(i.name for i in refused),
                request.driver,
            )
            return EXIT_FAILED
    if request.dry_run:
        return image_builds.dry_run(spec, images, options)
    return image_builds.build_images(spec, images, options)
