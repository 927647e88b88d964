"""`build.py build`: its flags checked, the images selected, refused for a driver when asked,
then listed (--dry-run) or built (BuildKit where the Docker CLI has it, else the engine's legacy
builder), each for its own platform: the per-image contexts, the build arguments and labels, tags,
pushes, and the final table with each image's size budget.

Every image goes one way: whether the engine can run its platform's build steps is checked per
image first (docker_engine.platform_capability: images/l4t.yaml's are linux/arm64), and a call
with one the engine cannot build is declined, with the reason and EXIT_FAILED, before anything is
built. An image whose record has no size budget or no locked base (l4t.yaml's) is simply not
judged by them."""

from __future__ import annotations

import functools
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfgpu_kit.image import buildkit, context, render
from tfgpu_kit.image.build_args import buildargs
from tfgpu_kit.image.verify import images as verify_images
from tfgpu_kit.matrix import catalog, compat, selectors
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.catalog import Image, base_registry
from tfgpu_kit.matrix.locks import base_lock, wheel_locks
from tfgpu_kit.matrix.spec import ROOT, CudaSource
from tfgpu_kit.matrix.versions import parse_driver
from tfgpu_kit.shared.errors import EXIT_FAILED, UsageError
from tfgpu_kit.shared.output import BYTES_PER_MIB, mib, print_json, table

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildRequest:
    """`build.py build`'s flags as given."""

    selectors: list[str] = field(default_factory=list)
    dry_run: bool = False
    push: bool = False
    registry: str | None = None
    base_registry: str | None = None
    driver: str | None = None
    force: bool = False
    no_cache: bool = False
    verify: bool = False
    contexts: Path | None = None  # keep each image's context there (default: a temporary one)
    cuda_source: str | None = None
    json: bool = False
    builder: str = "auto"  # buildkit.CHOICES


def build(request: BuildRequest) -> int:
    """`build.py build`: EXIT_FAILED when an image is refused for the driver or fails to build."""
    catalog.check_registry_flags(request.registry, request.base_registry)
    spec = specs.load()
    # No selector builds the default (newest) version, not all 20 images: a newcomer's `./kit build`
    # must not pull every base there is. `all` selects everything of images.yaml; `l4t` (or a name
    # or tag of one) images/l4t.yaml's, built where the engine can run arm64, else declined.
    images = selectors.select(catalog.every_image(spec), request.selectors, default=("latest",))
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
        refused = refuse_for_driver(spec, images, request.driver, request.force)
        if refused:
            log.error(
                "refusing to build %s (driver %s cannot run them); --force builds them anyway",
                ", ".join(i.name for i in refused),
                request.driver,
            )
            return EXIT_FAILED
    if request.dry_run:
        return dry_run(spec, images, request)
    return build_images(spec, images, request)


def refuse_for_driver(
    spec: specs.Spec, images: list[Image], driver_text: str, force: bool
) -> list[Image]:
    """The images the driver cannot run, each logged; none under --force (built anyway)."""
    driver = parse_driver(driver_text)
    level = logging.WARNING if force else logging.ERROR
    refused = []
    for image in images:
        assessment = compat.assess(spec, image.tensorflow, driver)
        if not assessment.verdict.runs:
            why = f"{assessment.verdict.value} ({'; '.join(assessment.reasons)})"
            log.log(level, "%s: driver %s: %s", image.name, driver, why)
            refused.append(image)
    return [] if force else refused


def _contexts(
    spec: specs.Spec, images: list[Image], root: Path
) -> Iterator[tuple[Image, context.Context]]:
    """Each image's build context (context.iter_contexts) with its rendered Dockerfile."""
    dockerfile = functools.partial(render.render_image, spec)
    return context.iter_contexts(images, root, dockerfile, spec.images.runtime_extras)


def _registry(image: Image, request: BuildRequest) -> str:
    """The registry the image's base is pulled from: its own, or --base-registry's mirror."""
    return base_registry(image.base_registry, request.base_registry)


# the locked layers an image adds to its base, as `--dry-run` names them
_ADDS = {"tensorflow": "TensorFlow", "cuda_wheels": "CUDA wheels", "tf_keras": "tf-keras"}


def _capabilities(images: list[Image], engine_arch: str | None) -> dict[str, Any]:
    """Whether the engine can build each image's platform (docker_engine.platform_capability)."""
    from tfgpu_kit.image import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    return {
        image.name: docker_engine.platform_capability(image.platform, engine_arch)
        for image in images
    }


def dry_run(spec: specs.Spec, images: list[Image], request: BuildRequest) -> int:
    """What `build` would do, judged on this machine (a dry run asks no engine: its own
    architecture and binfmt_misc say which platforms it can build); EXIT_FAILED if it cannot
    build one of them."""
    from tfgpu_kit.image import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    capabilities = _capabilities(images, docker_engine.machine_arch())
    rows = []
    cuda_lock, images_lock = wheel_locks.load(), wheel_locks.load_images()
    for image in images:
        adds, kit_mib = catalog.locked_additions(spec, image, cuda_lock, images_lock)
        dockerfile = render.dockerfile_path(render.DOCKERFILES_DIR, image).relative_to(ROOT)
        capability = capabilities[image.name]
        locked_mib = round(adds.total / BYTES_PER_MIB, 1)
        rows.append(
            {
                "image": image.name,
                "dockerfile": str(dockerfile),
                "platform": image.platform,
                "base": f"{_registry(image, request)}/{image.base_ref}",
                "tags": image.tags(registry=request.registry),
                "push": bool(request.push),
                "cuda": dict(image.cuda.detail),
                # what it adds to its base, by layer, from the locks (the base's own size is not
                # in them: `build` and `verify` measure it on the engine)
                "adds_mib": {
                    **{key: round(getattr(adds, key) / BYTES_PER_MIB, 1) for key in _ADDS},
                    "kit_at_most": kit_mib,
                    "at_most": round(adds.total / BYTES_PER_MIB + kit_mib, 1)
                    if kit_mib is not None
                    else None,
                    **({} if kit_mib is not None else {"locked": locked_mib}),
                },
                "buildable": capability.can,
                "why": capability.how,
            }
        )
    if request.json:
        print_json(rows)
    else:
        table(
            "dry run: would build",
            ["image", "base", "CUDA", "adds to the base (locks)", "tags"],
            [
                [
                    f"{r['image']}\n{r['platform']}" + ("" if r["buildable"] else " (declined)"),
                    str(r["base"]),
                    f"{image.cuda.source}: {image.cuda.summary}",
                    _adds_cell(r["adds_mib"]),
                    "\n".join(map(str, r["tags"])),
                ]
                for r, image in zip(rows, images, strict=True)
            ],
        )
    log.info("dry run: %d image(s), nothing built", len(rows))
    return _declined(images, capabilities)


def _declined(images: list[Image], capabilities: dict[str, Any]) -> int:
    """Log each image the engine cannot build for its platform; EXIT_FAILED if any."""
    declined = [image for image in images if not capabilities[image.name].can]
    for image in declined:
        log.error(
            "%s (%s): not built: %s", image.name, image.platform, capabilities[image.name].how
        )
    return EXIT_FAILED if declined else 0


def _adds_cell(adds: object) -> str:
    """`TensorFlow 1234 + CUDA wheels 2900 + tf-keras 4 + kit ≤ 300 = ≤ 4438 MiB`."""
    assert isinstance(adds, dict)
    parts = [f"{name} {adds[key]:.0f}" for key, name in _ADDS.items() if adds[key]]
    if adds["kit_at_most"] is None:  # no size budget: the locked layers alone
        return " + ".join(parts) + (" = " if parts else "") + f"{adds['locked']:.0f} MiB, no budget"
    return (
        " + ".join([*parts, f"kit ≤ {adds['kit_at_most']:g}"]) + f" = ≤ {adds['at_most']:.0f} MiB"
    )


@dataclass
class Built:
    image: Image
    image_id: str
    tags: list[str]
    size: int
    added: int | None
    seconds: float
    cuda_wheels_mib: float = 0.0  # unpacked size of the NVIDIA wheels the image adds
    tf_keras_mib: float = 0.0  # unpacked size of tf-keras (TensorFlow 2.16+)
    tensorflow_mib: float = 0.0  # on the slim base: TensorFlow and its dependencies, unpacked

    @property
    def budget_mib(self) -> float | None:
        """What the image may add to its base: the variant's budget for the kit's own layers,
        plus the locked wheels' unpacked size (NVIDIA's CUDA wheels, tf-keras, and on the slim
        base TensorFlow with its dependencies) when it adds them; None: the image has none."""
        if self.image.budget_mib is None:
            return None
        locked = self.cuda_wheels_mib + self.tf_keras_mib + self.tensorflow_mib
        return self.image.budget_mib + locked

    @property
    def added_mib(self) -> float | None:
        return self.added / BYTES_PER_MIB if self.added is not None else None


TABLE_COLUMNS = ["image", "tags", "CUDA", "size", "added to base", "budget", "duration"]


def _cuda_cell(b: Built) -> str:
    cuda = b.image.cuda
    cudnn = cuda.cudnn or "unknown"
    if cuda.wheels:
        return f"wheels: CUDA {cuda.cuda}, cuDNN {cudnn} ({mib(b.cuda_wheels_mib)} MiB)"
    return f"base: CUDA {cuda.cuda}, cuDNN {cudnn}"


def json_rows(results: list[Built]) -> list[dict[str, object]]:
    """The final table as `--json` prints it: one object per built image."""
    return [
        {
            "image": b.image.name,
            "id": b.image_id,
            "tags": b.tags,
            "cuda_source": b.image.cuda.source,
            "cuda": b.image.cuda.cuda,
            "cudnn": b.image.cuda.cudnn,
            "cuda_wheels": list(b.image.cuda.wheels),
            "cuda_wheels_mib": round(b.cuda_wheels_mib, 1),
            "tf_keras_mib": round(b.tf_keras_mib, 1),
            "tensorflow_mib": round(b.tensorflow_mib, 1),
            "size_mib": round(b.size / BYTES_PER_MIB, 1),
            "added_mib": round(b.added_mib, 2) if b.added_mib is not None else None,
            "budget_mib": round(b.budget_mib, 2) if b.budget_mib is not None else None,
            "seconds": round(b.seconds, 1),
        }
        for b in results
    ]


def table_rows(results: list[Built]) -> list[list[str]]:
    """The final table's cells (TABLE_COLUMNS): tags one per line, sizes in MiB, `?` for the
    size added when the base was not there to compare."""
    return [
        [
            b.image.name,
            "\n".join(b.tags),
            _cuda_cell(b),
            f"{mib(b.size / BYTES_PER_MIB, 1)} MiB",
            f"{mib(b.added_mib, 2)} MiB" if b.added_mib is not None else "?",
            f"{mib(b.budget_mib, 2)} MiB" if b.budget_mib is not None else "none",
            f"{b.seconds:.1f} s",
        ]
        for b in results
    ]


def over_budget(results: list[Built]) -> list[str]:
    """Images that add more to their base than their budget (Built.budget_mib)."""
    problems = []
    for b in results:
        added, budget = b.added_mib, b.budget_mib
        if added is not None and budget is not None and added > budget:
            parts = [
                (b.tensorflow_mib, "of TensorFlow and its dependencies"),
                (b.cuda_wheels_mib, "of NVIDIA wheels"),
                (b.tf_keras_mib, "of tf-keras"),
            ]
            extra = "".join(f" + {mib(size, 2)} MiB {what}" for size, what in parts if size)
            if extra:
                extra = f" = {b.image.budget_mib:g} MiB for the kit{extra}"
            problems.append(
                f"{b.image.name} adds {mib(added, 2)} MiB to its base"
                f" (budget {mib(budget, 2)} MiB{extra})"
            )
    return problems


def report(results: list[Built], *, as_json: bool) -> int:
    """Print the final table (or JSON) on stdout, log each budget overrun; EXIT_FAILED if any."""
    if as_json:
        print_json(json_rows(results))
    else:
        table("built", TABLE_COLUMNS, table_rows(results))
    problems = over_budget(results)
    for problem in problems:
        log.error("size budget exceeded: %s", problem)
    return EXIT_FAILED if problems else 0


def _build_one(
    client: Any,
    image: Image,
    ctx: context.Context,
    request: BuildRequest,
    digests: base_lock.BaseDigests,
    builder: buildkit.Builder,
) -> Built:
    from tfgpu_kit.image import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    start = time.monotonic()
    base_ref = f"{_registry(image, request)}/{image.base_ref}"
    base = docker_engine.local_image(client, base_ref)
    if base is None:
        log.warning(
            "%s: base %s is not present locally: the engine will try to pull it",
            image.name,
            base_ref,
        )
    else:
        log.info("%s: base %s present locally (%s)", image.name, base_ref, base.short_id)
    repo_digests = list(base.attrs.get("RepoDigests") or []) if base is not None else None
    bargs = buildargs(
        # the digest images/bases.lock.yaml locks (a mirror's: the local base's own); unknown
        # for a base the lock does not hold
        base_digest=digests.digest(image, repo_digests) if image.base_locked else None,
        cuda_wheels_mib=ctx.cuda_wheels_mib if image.cuda_wheels else None,
    )
    bargs["BASE_REGISTRY"] = _registry(image, request)
    if (pin := digests.pin()) is not None:
        bargs["BASE_PIN"] = pin
    first = image.tags(registry=request.registry)[0]
    if builder.kind == "buildkit":
        image_id = buildkit.build(
            builder,
            ctx.path,
            label=image.name,
            tag=first,
            buildargs=bargs,
            no_cache=request.no_cache,
            platform=image.platform,
            hint=docker_engine.BASE_HINT,
        )
        # BuildKit reads the context while the steps run: it may go only once the build ends
        if (drop := _dropper(ctx, request)) is not None:
            drop()
        docker_engine.built_here(client, image_id, builder.cli or "docker")
    else:
        image_id = docker_engine.build(
            client,
            ctx.path,
            label=image.name,
            tag=first,
            buildargs=bargs,
            no_cache=request.no_cache,
            platform=image.platform,
            sent=_dropper(ctx, request),
        )
    python = docker_engine.python_version(client, image_id)
    if python != image.base_python:
        log.warning(
            "%s: the base has Python %s, the spec says %s: its tags use %s",
            image.name,
            python,
            image.base_python,
            python,
        )
    tags = image.tags(registry=request.registry, python=python)
    for ref in tags:
        docker_engine.tag(client, image_id, ref)
    size = int(client.images.get(image_id).attrs.get("Size", 0))
    added = size - int(base.attrs.get("Size", 0)) if base is not None else None
    if request.push:
        for ref in tags:
            docker_engine.push(client, ref)
    return Built(
        image,
        image_id,
        tags,
        size,
        added,
        time.monotonic() - start,
        ctx.cuda_wheels_mib,
        ctx.tf_keras_mib,
        ctx.tensorflow_mib,
    )


def _dropper(ctx: context.Context, request: BuildRequest) -> Callable[[], None] | None:
    """A temporary context (gigabytes of wheels) is removed as soon as the engine holds it (before
    the steps write their layers: less disk at the build's peak); `--contexts` keeps them."""
    if request.contexts is not None:
        return None
    return lambda: shutil.rmtree(ctx.path)


def build_images(spec: specs.Spec, images: list[Image], request: BuildRequest) -> int:
    """Build, tag (push, verify) each image for its platform, one context at a time; print the
    final table. Returns the exit status: EXIT_FAILED when the engine cannot build an image's
    platform (before anything is built), or an image is over its size budget or fails verify."""
    from tfgpu_kit.image import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    client = docker_engine.client()
    if status := _declined(images, _capabilities(images, docker_engine.engine_arch(client))):
        return status
    # before any context: a base the lock lacks stops the build; one warning for unknown digests
    locked = [image for image in images if image.base_locked]
    digests = base_lock.BaseDigests(base_lock.load(), locked, base_registry=request.base_registry)
    for image in images:  # and a base the engine cannot get (offline, a typo of a mirror)
        docker_engine.refuse_unpullable(
            client, image.name, f"{_registry(image, request)}/{image.base_ref}"
        )
    builder = buildkit.choose(request.builder)
    # said once per command: a fallback to the legacy builder is a warning
    (log.warning if builder.kind == "legacy" and request.builder == "auto" else log.info)(
        "builder: %s", builder.why
    )
    results = []
    with tempfile.TemporaryDirectory(prefix="tfgpu-build-") as tmp:
        for image, ctx in _contexts(spec, images, request.contexts or Path(tmp)):
            results.append(_build_one(client, image, ctx, request, digests, builder))

    status = report(results, as_json=request.json)
    if request.verify:
        refs = [b.tags[0] for b in results]
        status = verify_images.verify_images(spec, client, refs, as_json=False) or status
    return status
