"""`build.py build l4t` (or an L4T image's name or tag): build the Jetson images where this machine
can run arm64 build steps, and decline them, saying why, where it cannot.

Exit status: 0 when every selected L4T image was built (or, in a dry run, could be); EXIT_FAILED (1)
when none of them could be built on this machine (the reason is logged for each); with images.yaml's
images selected as well, those decide the status and a declined L4T image is a warning. `build.py
bake` writes the L4T targets whatever this machine is (`platforms: ["linux/arm64"]`)."""

from __future__ import annotations

import logging
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from tfgpu_kit import catalog, context, image_builds, l4t, wheellock
from tfgpu_kit import spec as specs
from tfgpu_kit.errors import EXIT_FAILED
from tfgpu_kit.output import print_json

log = logging.getLogger(__name__)


def dry_run(
    images: list[l4t.L4TImage],
    *,
    registry: str | None,
    base_registry: str | None,
    as_json: bool,
) -> int:
    """What would be built on this machine, judged from its own architecture and binfmt_misc (a
    dry run asks no engine); the base as the build would name it (--base-registry)."""
    capability = l4t.arm64_capability(l4t.machine_arch())
    rows = [
        {
            "name": image.name,
            "platform": image.platform,
            "base": f"{catalog.base_registry(image.base_registry, base_registry)}/{image.base_ref}",
            "tags": image.tags(registry=registry),
            "buildable": capability.can,
            "why": capability.how,
        }
        for image in images
    ]
    if as_json:
        print_json(rows)
    else:
        for row in rows:
            state = f"would build ({row['why']})" if row["buildable"] else "declined"
            print(f"{row['name']}  {row['platform']}  {row['base']}  {state}")
    if not capability.can:
        log.error("L4T images cannot be built here: %s", capability.how)
    return 0 if capability.can else EXIT_FAILED


def build(
    spec: specs.Spec,
    images: list[l4t.L4TImage],
    options: image_builds.BuildOptions,
) -> int:
    """Build each image for linux/arm64 where the engine can; otherwise decline them all with the
    reason. Returns 0 when all were built, EXIT_FAILED when none could be."""
    from tfgpu_kit import dockerbuild

    client = dockerbuild.client()
    capability = l4t.arm64_capability(l4t.engine_arch(client))
    if not capability.can:
        for image in images:
            log.error("%s: not built: %s", image.name, capability.how)
        return EXIT_FAILED
    log.info("building %d L4T image(s): %s", len(images), capability.how)
    with tempfile.TemporaryDirectory(prefix="tfgpu-l4t-") as tmp:
        for image, ctx in _contexts(spec, images, options.contexts or Path(tmp)):
            _build_one(client, image, ctx.path, options)
            if options.contexts is None:
                shutil.rmtree(ctx.path)
    return 0


def _contexts(
    spec: specs.Spec, images: list[l4t.L4TImage], root: Path
) -> Iterator[tuple[l4t.L4TImage, context.Context]]:
    """Assemble each image's build context under root/<image name>, one at a time; the runtime
    wheel is built once. The runtime and its extras are pure-Python wheels: the same files serve
    arm64."""
    lock = wheellock.load()
    root.mkdir(parents=True, exist_ok=True)
    wheel = context.build_runtime_wheel(root / ".runtime-wheel")
    for image in images:
        ctx = context.assemble(
            image,
            l4t.render_image(image, spec.images.user),
            root / image.name,
            runtime_wheel=wheel,
            runtime_extras=list(spec.images.runtime_extras),
            lock=lock,
        )
        yield image, ctx


def _build_one(
    client: Any, image: l4t.L4TImage, path: Path, options: image_builds.BuildOptions
) -> None:
    from tfgpu_kit import dockerbuild

    args = image_builds.buildargs(base_digest=None)
    args["BASE_REGISTRY"] = catalog.base_registry(image.base_registry, options.base_registry)
    tags = image.tags(registry=options.registry)
    image_id = dockerbuild.build(
        client,
        path,
        label=image.name,
        tag=tags[0],
        buildargs=args,
        no_cache=options.no_cache,
        platform=image.platform,
    )
    for ref in tags:
        dockerbuild.tag(client, image_id, ref)
        if options.push:
            dockerbuild.push(client, ref)
    log.info("%s: built %s (%s)", image.name, ", ".join(tags), image_id)


def split(selectors: list[str]) -> tuple[list[l4t.L4TImage], list[str]]:
    """`build`'s selectors: the L4T images they name, and the rest (images.yaml's)."""
    return l4t.select(l4t.images(l4t.load()), selectors)


def run(
    spec: specs.Spec, images: list[l4t.L4TImage], options: image_builds.BuildOptions, *, dry: bool
) -> int:
    """`build.py build l4t`: the dry run, or the builds (declined where arm64 cannot run)."""
    if dry:
        return dry_run(
            images,
            registry=options.registry,
            base_registry=options.base_registry,
            as_json=options.as_json,
        )
    return build(spec, images, options)


def add_to_bake(
    data: dict[str, Any],
    spec: specs.Spec,
    images: list[l4t.L4TImage],
    *,
    contexts: Path,
    registry: str | None,
    base_registry: str | None,
    assemble: bool,
) -> None:
    """The L4T targets (`platforms: ["linux/arm64"]`) in their own group `l4t`, not in `default`:
    `docker buildx bake` alone keeps building images.yaml's images; `… bake l4t` builds these
    where the builder has an arm64 node or emulation."""
    if not images:
        return
    if assemble:
        for _ in _contexts(spec, images, contexts):
            pass  # written: bake only names them
    targets = l4t.bake_targets(
        images,
        contexts=contexts,
        registry=registry,
        base_registry=base_registry,
        buildargs=image_builds.buildargs(base_digest=None),
    )
    data["target"].update(targets)
    data["group"][l4t.VARIANT] = {"targets": list(targets)}
