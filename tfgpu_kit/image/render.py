"""`build.py render`: one Dockerfile per image from templates/ (Jinja2, StrictUndefined), written
under one folder (dockerfiles/; dockerfiles/l4t/ for images/l4t.yaml's), and the README's GPU table
(matrix_table.gpu_table), or each compared with what is there (--check)."""

from __future__ import annotations

import errno
import json
import logging
from dataclasses import dataclass
from pathlib import Path

import jinja2

from tfgpu_kit.matrix import catalog, matrix_table
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.matrix.catalog import JETSON, Image
from tfgpu_kit.matrix.locks import base_lock
from tfgpu_kit.matrix.spec import ROOT, Spec, control_characters
from tfgpu_kit.shared import templating
from tfgpu_kit.shared.errors import EXIT_FAILED, SpecError, UsageError

log = logging.getLogger(__name__)

TEMPLATES_DIR = ROOT / "templates"
DOCKERFILES_DIR = ROOT / "dockerfiles"


def _one_line(value: object) -> object:
    """Jinja's finalize: every `{{ value }}` of the Dockerfile template passes here. A value with
    a newline (or another control, bidi or separator character) could end a comment or an
    instruction and start one of its own: refused, whatever validated it before."""
    if bad := control_characters(str(value)):
        raise SpecError(
            f"templates: refusing to render {str(value)!r} into a Dockerfile: it contains"
            f" {', '.join(bad)}; every value must be one line of printable text"
        )
    return value


def environment() -> jinja2.Environment:
    """The kit's Jinja environment (templating.environment) with `_one_line` on every value."""
    env = templating.environment(TEMPLATES_DIR)
    env.finalize = _one_line  # read when a template is compiled: set before the first one
    return env


def dockerfile_path(out: Path, image: Image) -> Path:
    # l4t.yaml's images in a folder of their own: each folder's leftovers name their spec file
    return out / image.folder / image.name / "Dockerfile"


def locked_digest(image: Image, lock: base_lock.BaseLock | None = None) -> str | None:
    """The registry digest images/bases.lock.yaml records for the image's base (None: unknown):
    the Dockerfile then names its base by digest (FROM …@sha256:…), not by its mutable tag."""
    lock = lock if lock is not None else base_lock.load()
    entry = lock.bases.get(base_lock.official_ref(image))
    return entry.digest if entry is not None else None


def render_image(
    spec: Spec,
    image: Image,
    env: jinja2.Environment | None = None,
    lock: base_lock.BaseLock | None = None,
) -> str:
    env = env or environment()
    try:
        return env.get_template("Dockerfile.j2").render(
            image=image,
            user=spec.images.user,
            cmd_json=json.dumps(list(image.cmd)),
            unpinned_apt=any("=" not in package for package in image.apt),
            base_digest=locked_digest(image, lock) if image.base_locked else None,
            **image.facts,
        )
    except jinja2.TemplateError as exc:
        where = (
            f" ({exc.filename}:{exc.lineno})" if isinstance(exc, jinja2.TemplateSyntaxError) else ""
        )
        raise SpecError(f"templates: cannot render {image.name}{where}: {exc}") from None


@dataclass(frozen=True)
class Rendered:
    image: Image
    path: Path
    text: str


def render_all(spec: Spec, images: list[Image], out: Path = DOCKERFILES_DIR) -> list[Rendered]:
    env = environment()
    lock = base_lock.load()
    return [Rendered(i, dockerfile_path(out, i), render_image(spec, i, env, lock)) for i in images]


def write(rendered: list[Rendered]) -> list[Path]:
    """Write the files whose content changed; returns the paths written."""
    written = []
    for item in rendered:
        current = item.path.read_text(encoding="utf-8") if item.path.exists() else None
        if current != item.text:
            item.path.parent.mkdir(parents=True, exist_ok=True)
            item.path.write_text(item.text, encoding="utf-8")
            written.append(item.path)
    return written


def stale(rendered: list[Rendered], out: Path = DOCKERFILES_DIR) -> list[str]:
    """Problems with the committed files: missing, different, or left over from a removed image;
    images.yaml's folder first, then the Jetson images' (dockerfiles/l4t/)."""
    problems = []
    expected = {item.path for item in rendered}
    for folder, source in ((out, "images.yaml"), (out / JETSON, f"images/{JETSON}.yaml")):
        for item in [item for item in rendered if item.path.parent.parent == folder]:
            where = item.path.relative_to(out.parent)
            if not item.path.exists():
                problems.append(f"{where}: missing")
            elif item.path.read_text(encoding="utf-8") != item.text:
                problems.append(f"{where}: stale (differs from the templates)")
        if folder.is_dir():
            problems += [
                f"{path.relative_to(out.parent)}: no such image in {source} any more"
                for path in sorted(folder.glob("*/Dockerfile"))
                if path not in expected
            ]
    return problems


def render_or_check(out_arg: Path, *, check: bool) -> int:
    """`build.py render [--out DIR] [--check]`: EXIT_FAILED when --check finds a stale file."""
    spec = specs.load()
    out: Path = out_arg.resolve()
    if out == specs.ROOT:
        # one folder per image next to build.py: never what was meant
        raise UsageError(
            f"--out {str(out_arg)!r} is the checkout itself: accepted: a folder for the "
            "Dockerfiles; example: --out dockerfiles"
        )
    if check and not out.is_dir():
        # not N "missing" files: the folder to compare with is not there
        raise FileNotFoundError(errno.ENOENT, "no such directory", str(out_arg))
    rendered = render_all(spec, catalog.every_image(spec), out)
    table = matrix_table.readme_gpu_table(spec, check=check)
    if table is not None and not check:
        raise SpecError(table)
    if check:
        problems = stale(rendered, out) + ([table] if table else [])
        for problem in problems:
            print(problem)
        if problems:
            log.error(
                "%d generated file(s) out of date: run `./kit render` and commit",
                len(problems),
            )
            return EXIT_FAILED
        log.info("%d Dockerfiles and the README's GPU table up to date", len(rendered))
        return 0
    written = write(rendered)
    for path in written:
        print(path)
    log.info("%d Dockerfiles rendered, %d changed", len(rendered), len(written))
    return 0
