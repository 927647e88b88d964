"""`build.py build [SELECTORS…]`: build, tag (and push, verify) the images with the Docker SDK."""

from __future__ import annotations

import argparse
import datetime
import logging
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tfgpu_kit import catalog, selectors
from tfgpu_kit import matrix as rules
from tfgpu_kit import spec as specs
from tfgpu_kit.catalog import Image
from tfgpu_kit.errors import EXIT_FAILED
from tfgpu_kit.output import print_json, table
from tfgpu_kit.spec import ROOT
from tfgpu_kit.versions import parse_driver

NAME = "build"
HELP = "build tagged images (Docker SDK); --dry-run shows what would be built"
DESCRIPTION = """Build the selected images (default: the newest version, every variant; `all` for
every image). SELECTORS: 2.21.0-gpu, 2.21-gpu-jupyter, 2.21.0 (every variant), 2.21, gpu
(a variant), latest-gpu, all, or a regex re:^2\\.2 on the image name.
Tags: REPO:2.21.0-gpu, REPO:2.21-gpu, REPO:latest-gpu (newest only), REPO:2.21.0-gpu-py311-cu125.
The base is used as it is when it exists locally (never pulled then); --base-registry replaces the
registry part of FROM (a mirror, or the test stand-ins)."""

log = logging.getLogger(__name__)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("selectors", nargs="*", metavar="SELECTOR")
    parser.add_argument(
        "--dry-run", action="store_true", help="print what would be built; touch nothing"
    )
    parser.add_argument("--push", action="store_true", help="push every tag after building")
    parser.add_argument(
        "--registry", help="registry to tag (and push) under, e.g. registry.example.com:5000"
    )
    parser.add_argument(
        "--base-registry", help="registry (mirror) of the base images, e.g. mirror.local:5000"
    )
    parser.add_argument("--driver", help="refuse images this driver cannot run (see `check`)")
    parser.add_argument(
        "--force", action="store_true", help="build images --driver cannot run anyway"
    )
    parser.add_argument("--no-cache", action="store_true", help="do not use the build cache")
    parser.add_argument("--verify", action="store_true", help="run `verify` on each built image")
    parser.add_argument(
        "--contexts",
        type=Path,
        help="keep the build contexts in this directory (default: a temporary one)",
    )
    parser.add_argument("--json", action="store_true", help="the final table (or dry run) as JSON")


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


def buildargs(*, base_digest: str | None) -> dict[str, str]:
    """The per-build ARGs of the Dockerfiles (BASE_REGISTRY is added per image)."""
    created = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0).isoformat()
    return {
        "TFGPU_CREATED": created,
        "TFGPU_REVISION": _git("rev-parse", "HEAD") or "unknown",
        "TFGPU_SOURCE": _git("remote", "get-url", "origin") or "unknown",
        "TFGPU_BASE_DIGEST": base_digest or "unknown",
    }


def refuse_for_driver(
    spec: specs.Spec, images: list[Image], driver_text: str, force: bool
) -> list[Image]:
    driver = parse_driver(driver_text)
    refused = []
    for image in images:
        verdict = rules.assess(spec, image.tensorflow, driver)
        if not verdict.verdict.runs:
            refused.append((image, verdict))
    for image, verdict in refused:
        level = logging.WARNING if force else logging.ERROR
        log.log(
            level,
            "%s: driver %s: %s (%s)",
            image.name,
            driver,
            verdict.verdict.value,
            "; ".join(verdict.reasons),
        )
    if refused and not force:
        return [image for image, _ in refused]
    return []


def assemble_contexts(spec: specs.Spec, images: list[Image], root: Path) -> dict[str, Path]:
    """Build contexts for `images` under root/<image name>; the runtime wheel is built once."""
    from tfgpu_kit import context, render

    root.mkdir(parents=True, exist_ok=True)
    wheel_dir = root / ".runtime-wheel"
    wheel = context.build_runtime_wheel(wheel_dir)
    log.info("runtime wheel %s", wheel.name)
    paths = {}
    for image in images:
        text = render.render_image(spec, image)
        ctx = context.assemble(
            image,
            text,
            root / image.name,
            runtime_wheel=wheel,
            runtime_extras=list(spec.images.runtime_extras),
        )
        log.info("%s: context %s (%s)", image.name, ctx.path, ", ".join(ctx.requirements))
        paths[image.name] = ctx.path
    return paths


def _base_registry(image: Image, override: str | None) -> str:
    return (override or image.base_registry).rstrip("/")


def dry_run(images: list[Image], args: argparse.Namespace) -> int:
    from tfgpu_kit import render

    rows = []
    for image in images:
        rows.append(
            {
                "image": image.name,
                "dockerfile": str(
                    render.dockerfile_path(render.DOCKERFILES_DIR, image).relative_to(ROOT)
                ),
                "base": f"{_base_registry(image, args.base_registry)}/{image.base_ref}",
                "tags": image.tags(registry=args.registry),
                "push": bool(args.push),
            }
        )
    if args.json:
        print_json(rows)
    else:
        table(
            "dry run: would build",
            ["image", "base", "tags"],
            [
                [str(r["image"]), str(r["base"]), "\n".join(image.tags(registry=args.registry))]
                for r, image in zip(rows, images)
            ],
        )
    log.info("dry run: %d image(s), nothing built", len(rows))
    return 0


@dataclass
class Built:
    image: Image
    image_id: str
    tags: list[str]
    size: int
    added: int | None
    seconds: float


_MIB = 1024 * 1024
TABLE_COLUMNS = ["image", "tags", "size", "added to base", "duration"]


def _added_mib(b: Built) -> float | None:
    return b.added / _MIB if b.added is not None else None


def json_rows(results: list[Built]) -> list[dict[str, object]]:
    """The final table as `--json` prints it: one object per built image."""
    rows: list[dict[str, object]] = []
    for b in results:
        added = _added_mib(b)
        rows.append(
            {
                "image": b.image.name,
                "id": b.image_id,
                "tags": b.tags,
                "size_mib": round(b.size / _MIB, 1),
                "added_mib": round(added, 2) if added is not None else None,
                "seconds": round(b.seconds, 1),
            }
        )
    return rows


def table_rows(results: list[Built]) -> list[list[str]]:
    """The final table's cells (TABLE_COLUMNS): tags one per line, sizes in MiB, `?` for the
    size added when the base was not there to compare."""
    rows = []
    for b in results:
        added = _added_mib(b)
        rows.append(
            [
                b.image.name,
                "\n".join(b.tags),
                f"{b.size / _MIB:.1f} MiB",
                f"{added:.2f} MiB" if added is not None else "?",
                f"{b.seconds:.1f} s",
            ]
        )
    return rows


def over_budget(results: list[Built]) -> list[str]:
    """Images whose layers add more to their base than the variant's max_added_mib."""
    problems = []
    for b in results:
        budget = b.image.variant.max_added_mib
        added = _added_mib(b)
        if added is not None and added > budget:
            problems.append(
                f"{b.image.name} adds {added:.2f} MiB to its base (budget {budget:g} MiB)"
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
    spec: specs.Spec, client: Any, image: Image, ctx: Path, args: argparse.Namespace
) -> Built:
    from tfgpu_kit import dockerbuild

    timer = dockerbuild.Timer()
    base_ref = f"{_base_registry(image, args.base_registry)}/{image.base_ref}"
    base = dockerbuild.local_image(client, base_ref)
    if base is None:
        log.warning(
            "%s: base %s is not present locally: the engine will try to pull it",
            image.name,
            base_ref,
        )
    else:
        log.info("%s: base %s present locally (%s)", image.name, base_ref, base.short_id)
    bargs = buildargs(base_digest=dockerbuild.repo_digest(base) if base is not None else None)
    bargs["BASE_REGISTRY"] = _base_registry(image, args.base_registry)
    first = image.tags(registry=args.registry)[0]
    image_id = dockerbuild.build(
        client, ctx, label=image.name, tag=first, buildargs=bargs, no_cache=args.no_cache
    )
    python = dockerbuild.python_version(client, image_id)
    if python != image.base_python:
        log.warning(
            "%s: the base has Python %s, images.yaml says %s: the composite tag uses %s",
            image.name,
            python,
            image.base_python,
            python,
        )
    tags = image.tags(registry=args.registry, python=python)
    for ref in tags:
        dockerbuild.tag(client, image_id, ref)
    built = client.images.get(image_id)
    size = int(built.attrs.get("Size", 0))
    added = size - int(base.attrs.get("Size", 0)) if base is not None else None
    if args.push:
        for ref in tags:
            dockerbuild.push(client, ref)
    return Built(image, image_id, tags, size, added, timer.seconds)


def run(args: argparse.Namespace) -> int:
    catalog.check_registry("--registry", args.registry)
    catalog.check_registry("--base-registry", args.base_registry)
    spec = specs.load()
    # No selector builds the default (newest) version, not all 20 images: a newcomer's `./kit build`
    # must not pull every base there is. `all` selects everything.
    images = selectors.select(catalog.images(spec), args.selectors, default=("latest",))
    # before anything is fetched or built: a base whose Python the runtime does not support
    # would only fail at pip install, deep in the Docker build
    specs.check_base_python(spec, {image.tensorflow for image in images})
    if args.driver is not None:
        refused = refuse_for_driver(spec, images, args.driver, args.force)
        if refused:
            log.error(
                "refusing to build %s (driver %s cannot run them); --force builds them anyway",
                ", ".join(i.name for i in refused),
                args.driver,
            )
            return EXIT_FAILED
    if args.dry_run:
        return dry_run(images, args)

    from tfgpu_kit import dockerbuild
    from tfgpu_kit.commands.verify import verify_images

    client = dockerbuild.client()
    with tempfile.TemporaryDirectory(prefix="tfgpu-build-") as tmp:
        root = args.contexts or Path(tmp)
        contexts = assemble_contexts(spec, images, root)
        results = [_build_one(spec, client, image, contexts[image.name], args) for image in images]

    status = report(results, as_json=args.json)
    if args.verify:
        status = verify_images(spec, client, [b.tags[0] for b in results], as_json=False) or status
    return status
