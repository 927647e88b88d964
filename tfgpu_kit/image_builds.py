"""Building the selected images with the Docker SDK: the per-image contexts, the build arguments
and labels, tags, pushes, and the final table with each image's size budget. `build.py build` is
the command over it; `bake` shares its contexts and build arguments.

Every image goes one way, for its own platform: whether the engine can run that platform's build
steps is checked per image first (docker_engine.platform_capability: images/l4t.yaml's are
linux/arm64), and a call with one the engine cannot build is declined, with the reason and
EXIT_FAILED, before anything is built. An image whose record has no size budget or no locked base
(l4t.yaml's) is simply not judged by them."""

from __future__ import annotations

import datetime
import logging
import re
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfgpu_kit import catalog, context, render
from tfgpu_kit import compat_rules as rules
from tfgpu_kit import spec as specs
from tfgpu_kit.catalog import Image, base_registry
from tfgpu_kit.errors import EXIT_FAILED, SpecError
from tfgpu_kit.locks import base_lock, wheel_locks
from tfgpu_kit.output import BYTES_PER_MIB, mib, print_json, table
from tfgpu_kit.spec import ROOT
from tfgpu_kit.verify import images as verify_images
from tfgpu_kit.versions import parse_driver

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BuildOptions:
    """What `build` was asked to do beyond which images."""

    registry: str | None = None
    base_registry: str | None = None
    push: bool = False
    no_cache: bool = False
    contexts: Path | None = None
    verify: bool = False
    as_json: bool = False


def _git(*command: str) -> str | None:
    try:
        out = subprocess.run(
            ["git", "-C", str(ROOT), *command],
            capture_output=True,
            text=True,
            check=False,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def source_url(remote: str | None) -> str | None:
    """The origin remote as a URL for org.opencontainers.image.source, or None: a clone's origin
    can be a local path (/home/dev/kit), which means nothing to the image's users. scp-like
    `git@host:org/repo.git` becomes https://host/org/repo.

    The label ships in every pushed image, so only scheme, host, port and path are kept: the
    userinfo (`gitlab-ci-token:TOKEN@`, `user@`) of every scheme, a query and a fragment are
    dropped (a CI clone's origin carries its job token there)."""
    if not remote or any(ord(ch) < 0x20 or ch == "\x7f" for ch in remote):
        return None
    if m := re.fullmatch(r"[^@/:\s]+(?::[^@/\s]*)?@([\w.-]+):(?!/)([^?#\s]+?)(?:\.git)?/?", remote):
        return f"https://{m[1]}/{m[2]}"
    try:
        parts = urllib.parse.urlsplit(remote)
        port = parts.port  # ValueError on a port that is not a number
    except ValueError:
        return None
    if parts.scheme not in ("http", "https", "ssh", "git", "git+ssh") or not parts.hostname:
        return None
    path = parts.path.removesuffix("/").removesuffix(".git")
    if not path.strip("/"):
        return None
    scheme = parts.scheme if parts.scheme in ("http", "https") else "https"
    # an ssh port is not the web server's: only http(s) keep theirs
    netloc = parts.hostname + (f":{port}" if port is not None and scheme == parts.scheme else "")
    return f"{scheme}://{netloc}{path}"


def buildargs(*, base_digest: str | None, cuda_wheels_mib: float | None = None) -> dict[str, str]:
    """The per-build ARGs of the Dockerfiles (BASE_REGISTRY is added per image)."""
    created = datetime.datetime.now(datetime.UTC).replace(microsecond=0).isoformat()
    args = {
        "TFGPU_CREATED": created,
        "TFGPU_REVISION": _git("rev-parse", "HEAD") or "unknown",
        "TFGPU_SOURCE": source_url(_git("remote", "get-url", "origin")) or "unknown",
        "TFGPU_BASE_DIGEST": base_digest or "unknown",
    }
    if cuda_wheels_mib is not None:
        args["TFGPU_CUDA_WHEELS_MIB"] = mib(cuda_wheels_mib)
    return args


def refuse_for_driver(
    spec: specs.Spec, images: list[Image], driver_text: str, force: bool
) -> list[Image]:
    """The images the driver cannot run, each logged; none under --force (built anyway)."""
    driver = parse_driver(driver_text)
    level = logging.WARNING if force else logging.ERROR
    refused = []
    for image in images:
        assessment = rules.assess(spec, image.tensorflow, driver)
        if not assessment.verdict.runs:
            why = f"{assessment.verdict.value} ({'; '.join(assessment.reasons)})"
            log.log(level, "%s: driver %s: %s", image.name, driver, why)
            refused.append(image)
    return [] if force else refused


def iter_contexts(
    spec: specs.Spec, images: list[Image], root: Path
) -> Iterator[tuple[Image, context.Context]]:
    """Assemble the build context of each image under root/<image name>, one at a time (an
    image that adds NVIDIA's CUDA wheels has gigabytes of them); the runtime wheel is built once."""
    lock = wheel_locks.load()
    pins = [pin for image in images for pin in (*image.cuda_wheels, image.tf_keras) if pin]
    if missing := [pin for pin in pins if pin not in lock.wheels]:
        raise SpecError(
            f"{wheel_locks.LOCK_NAME} has no entry for {', '.join(sorted(set(missing)))}",
            hint="run `build.py lock` after changing and_cuda or tf_keras in images/matrix.yaml",
        )
    root.mkdir(parents=True, exist_ok=True)
    wheel = context.build_runtime_wheel(root / ".runtime-wheel")
    log.info("runtime wheel %s", wheel.name)
    for image in images:
        ctx = context.assemble(
            image,
            render.render_image(spec, image),
            root / image.name,
            runtime_wheel=wheel,
            runtime_extras=list(spec.images.runtime_extras),
            lock=lock,
        )
        log.info("%s: context %s (%s)", image.name, ctx.path, ", ".join(ctx.requirements))
        if image.cuda_wheels:
            log.info(
                "%s: %s; %.0f MiB unpacked",
                image.name,
                image.cuda.summary if image.cuda else "",
                ctx.cuda_wheels_mib,
            )
        yield image, ctx


def _registry(image: Image, options: BuildOptions) -> str:
    """The registry the image's base is pulled from: its own, or --base-registry's mirror."""
    return base_registry(image.base_registry, options.base_registry)


# the locked layers an image adds to its base, as `--dry-run` names them
_ADDS = {"tensorflow": "TensorFlow", "cuda_wheels": "CUDA wheels", "tf_keras": "tf-keras"}


def _capabilities(images: list[Image], engine_arch: str | None) -> dict[str, Any]:
    """Whether the engine can build each image's platform (docker_engine.platform_capability)."""
    from tfgpu_kit import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    return {
        image.name: docker_engine.platform_capability(image.platform, engine_arch)
        for image in images
    }


def dry_run(spec: specs.Spec, images: list[Image], options: BuildOptions) -> int:
    """What `build` would do, judged on this machine (a dry run asks no engine: its own
    architecture and binfmt_misc say which platforms it can build); EXIT_FAILED if it cannot
    build one of them."""
    from tfgpu_kit import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    capabilities = _capabilities(images, docker_engine.machine_arch())
    rows = []
    cuda_lock, images_lock = wheel_locks.load(), wheel_locks.load_images()
    for image in images:
        adds, kit_mib = catalog.locked_additions(spec, image, cuda_lock, images_lock)
        dockerfile = render.dockerfile_path(render.DOCKERFILES_DIR, image).relative_to(ROOT)
        capability = capabilities[image.name]
        assert image.cuda is not None  # every catalog row has it
        locked_mib = round(adds.total / BYTES_PER_MIB, 1)
        rows.append(
            {
                "image": image.name,
                "dockerfile": str(dockerfile),
                "platform": image.platform,
                "base": f"{_registry(image, options)}/{image.base_ref}",
                "tags": image.tags(registry=options.registry),
                "push": bool(options.push),
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
    if options.as_json:
        print_json(rows)
    else:
        table(
            "dry run: would build",
            ["image", "base", "CUDA", "adds to the base (locks)", "tags"],
            [
                [
                    f"{r['image']}\n{r['platform']}" + ("" if r["buildable"] else " (declined)"),
                    str(r["base"]),
                    f"{image.cuda.source}: {image.cuda.summary}" if image.cuda else "",
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


def _cuda(b: Built) -> catalog.Cuda:
    assert b.image.cuda is not None  # every catalog row has it
    return b.image.cuda


def _cuda_cell(b: Built) -> str:
    cuda = _cuda(b)
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
            "cuda_source": _cuda(b).source,
            "cuda": _cuda(b).cuda,
            "cudnn": _cuda(b).cudnn,
            "cuda_wheels": list(_cuda(b).wheels),
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
    options: BuildOptions,
    digests: base_lock.BaseDigests,
) -> Built:
    from tfgpu_kit import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    start = time.monotonic()
    base_ref = f"{_registry(image, options)}/{image.base_ref}"
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
    bargs["BASE_REGISTRY"] = _registry(image, options)
    if (pin := digests.pin()) is not None:
        bargs["BASE_PIN"] = pin
    first = image.tags(registry=options.registry)[0]
    image_id = docker_engine.build(
        client,
        ctx.path,
        label=image.name,
        tag=first,
        buildargs=bargs,
        no_cache=options.no_cache,
        platform=image.platform,
        sent=_dropper(ctx, options),
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
    tags = image.tags(registry=options.registry, python=python)
    for ref in tags:
        docker_engine.tag(client, image_id, ref)
    size = int(client.images.get(image_id).attrs.get("Size", 0))
    added = size - int(base.attrs.get("Size", 0)) if base is not None else None
    if options.push:
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


def _dropper(ctx: context.Context, options: BuildOptions) -> Callable[[], None] | None:
    """A temporary context (gigabytes of wheels) is removed as soon as the engine holds it (before
    the steps write their layers: less disk at the build's peak); `--contexts` keeps them."""
    if options.contexts is not None:
        return None
    return lambda: shutil.rmtree(ctx.path)


def build_images(spec: specs.Spec, images: list[Image], options: BuildOptions) -> int:
    """Build, tag (push, verify) each image for its platform, one context at a time; print the
    final table. Returns the exit status: EXIT_FAILED when the engine cannot build an image's
    platform (before anything is built), or an image is over its size budget or fails verify."""
    from tfgpu_kit import docker_engine  # imports the Docker SDK: 45-90 ms of every command

    client = docker_engine.client()
    if status := _declined(images, _capabilities(images, docker_engine.engine_arch(client))):
        return status
    # before any context: a base the lock lacks stops the build; one warning for unknown digests
    locked = [image for image in images if image.base_locked]
    digests = base_lock.BaseDigests(base_lock.load(), locked, base_registry=options.base_registry)
    for image in images:  # and a base the engine cannot get (offline, a typo of a mirror)
        docker_engine.refuse_unpullable(
            client, image.name, f"{_registry(image, options)}/{image.base_ref}"
        )
    results = []
    with tempfile.TemporaryDirectory(prefix="tfgpu-build-") as tmp:
        for image, ctx in iter_contexts(spec, images, options.contexts or Path(tmp)):
            results.append(_build_one(client, image, ctx, options, digests))

    status = report(results, as_json=options.as_json)
    if options.verify:
        refs = [b.tags[0] for b in results]
        status = verify_images.verify_images(spec, client, refs, as_json=False) or status
    return status
