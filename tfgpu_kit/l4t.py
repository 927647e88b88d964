"""NVIDIA Jetson images (images/l4t.yaml): the spec, the images, their Dockerfiles (the same
templates, with the l4t-* partials), their bake targets, and whether this machine can build them.

They are arm64 images on NVIDIA's L4T TensorFlow containers. A Docker engine builds them natively on
an arm64 host (a Jetson), or under emulation where QEMU's aarch64 handler is registered with the
kernel (binfmt_misc); anywhere else `build.py build` declines them with that reason, and
`build.py bake` still writes their target (`platforms: ["linux/arm64"]`) for a builder that can."""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jinja2
from pydantic import BaseModel, ConfigDict, Field

from tfgpu_kit import bake, catalog, nvidia_require, templating
from tfgpu_kit.errors import SpecError
from tfgpu_kit.spec import IMAGES_DIR, ROOT, Registry, VersionText, load_yaml, validate
from tfgpu_kit.versions import Version

log = logging.getLogger(__name__)

SPEC_NAME = "l4t.yaml"
TEMPLATES_DIR = ROOT / "templates"
# a folder of its own: `render --check` of images.yaml's images reads dockerfiles/*/Dockerfile
DOCKERFILES_DIR = ROOT / "dockerfiles" / "l4t"
VARIANT = "l4t"
ARM64 = "linux/arm64"
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
# the handler names QEMU's own scripts and tonistiigi/binfmt register for aarch64
BINFMT_AARCH64 = ("qemu-aarch64", "qemu-aarch64-static")
ARM64_MACHINES = ("aarch64", "arm64")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class L4TBase(_Strict):
    registry: Registry  # the same grammar as images.yaml base.registry (issue 22)
    repository: str = Field(min_length=1, pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")


class L4TEntry(_Strict):
    tensorflow: VersionText
    base_tag: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    l4t: VersionText
    jetpack: VersionText | None
    python: VersionText
    cuda: VersionText
    cudnn: VersionText | None
    require_cuda: str = Field(min_length=1)
    cmd: list[str] = Field(min_length=1)


class L4TSpec(_Strict):
    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    platform: str = Field(pattern=r"^linux/arm64$")
    base: L4TBase
    images: list[L4TEntry] = Field(min_length=1)


@dataclass(frozen=True)
class L4TImage:
    """One Jetson image; the attributes the shared partials (from, runtime-stage, runtime, user,
    entrypoint) and the build contexts read have the same names as catalog.Image's."""

    entry: L4TEntry
    repository: str
    platform: str
    base_registry: str
    base_repository: str

    variant_name = VARIANT
    pip: tuple[str, ...] = ()
    apt: tuple[str, ...] = ()
    jupyter = False

    @property
    def tensorflow(self) -> str:
        return self.entry.tensorflow

    @property
    def l4t(self) -> str:
        return self.entry.l4t

    @property
    def l4t_major(self) -> int:
        return Version.parse(self.entry.l4t).major

    @property
    def jetpack(self) -> str | None:
        return self.entry.jetpack

    @property
    def python(self) -> str:
        return self.entry.python

    @property
    def tf_keras(self) -> None:
        """No tf-keras: the JetPack TensorFlow releases here are 2.11, whose tf.keras is Keras 2."""
        return None

    @property
    def base_python(self) -> str:  # context.assemble's name for it
        return self.entry.python

    @property
    def cuda(self) -> str:
        return self.entry.cuda

    @property
    def cudnn(self) -> str | None:
        return self.entry.cudnn

    @property
    def require_cuda(self) -> str:
        return self.entry.require_cuda

    @property
    def gap(self) -> _NoWheels:
        """What context.assemble and the runtime partials ask of a catalog image's CUDA gap: the
        L4T bases bring JetPack's CUDA, so no NVIDIA wheels are added."""
        return _NoWheels()

    @property
    def name(self) -> str:
        """`2.11.0-l4t-r35.2.1-arm64`: the id, its dockerfiles/l4t/ folder, its first tag."""
        return f"{self.tensorflow}-{VARIANT}-r{self.l4t}-arm64"

    @property
    def base_ref(self) -> str:
        return f"{self.base_repository}:{self.entry.base_tag}"

    def tags(self, *, registry: str | None = None) -> list[str]:
        """`2.11.0-l4t-r35.2.1-arm64` and `2.11-l4t-r35-arm64` (any R35.x runs R35 images)."""
        v = Version.parse(self.tensorflow)
        names = [self.name, f"{v.major}.{v.minor}-{VARIANT}-r{self.l4t_major}-arm64"]
        repo = f"{registry.rstrip('/')}/{self.repository}" if registry else self.repository
        return [f"{repo}:{name}" for name in names]


@dataclass(frozen=True)
class _NoWheels:
    wheels: tuple[str, ...] = ()


def load(directory: Path | None = None) -> L4TSpec:
    path = (directory or IMAGES_DIR) / SPEC_NAME
    loaded = validate(L4TSpec, load_yaml(path), path)
    problems = []
    for index, entry in enumerate(loaded.images):
        error = nvidia_require.go_parse_error(entry.require_cuda)
        if error is not None:
            problems.append(
                f"  images.{index}.require_cuda: {entry.require_cuda!r}: the NVIDIA runtime's CSV"
                f" mode (Jetson) would refuse the container: {error}"
            )
    if problems:
        raise SpecError(f"{path}: invalid spec\n" + "\n".join(problems))
    return loaded


def images(spec: L4TSpec) -> list[L4TImage]:
    return [
        L4TImage(
            entry=entry,
            repository=spec.repository,
            platform=spec.platform,
            base_registry=spec.base.registry,
            base_repository=spec.base.repository,
        )
        for entry in spec.images
    ]


def select(found: list[L4TImage], selectors: list[str]) -> tuple[list[L4TImage], list[str]]:
    """The L4T images the selectors name (`l4t`, an image's name or tag), and the selectors left
    for images.yaml's images."""
    chosen: list[L4TImage] = []
    rest: list[str] = []
    for selector in selectors:
        # only `l4t` or a name or tag: `all` and regexes keep selecting images.yaml's images alone
        hits = [
            image
            for image in found
            if selector == VARIANT or selector in {t.split(":", 1)[1] for t in image.tags()}
        ]
        if not hits:
            rest.append(selector)
        chosen += [image for image in hits if image not in chosen]
    return chosen, rest


# --- Dockerfiles ---------------------------------------------------------------------------------


def dockerfile_path(image: L4TImage, out: Path = DOCKERFILES_DIR) -> Path:
    return out / image.name / "Dockerfile"


def render_image(image: L4TImage, user: Any) -> str:
    """`user`: images.yaml's non-root user (spec.images.user), the same in every image."""
    import json

    try:
        return (
            templating.environment(TEMPLATES_DIR)
            .get_template("Dockerfile.j2")
            .render(
                l4t=True,
                image=image,
                gap=image.gap,
                user=user,
                cmd_json=json.dumps(image.entry.cmd),
                unpinned_apt=False,
            )
        )
    except jinja2.TemplateError as exc:
        raise SpecError(f"templates: cannot render {image.name}: {exc}") from None


def stale(rendered: dict[Path, str], out: Path = DOCKERFILES_DIR) -> list[str]:
    """Committed files that are missing, differ, or belong to no image of l4t.yaml any more."""
    problems = []
    for path, text in rendered.items():
        where = path.relative_to(out.parent.parent)
        if not path.exists():
            problems.append(f"{where}: missing")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"{where}: stale (differs from the templates)")
    if out.is_dir():
        for path in sorted(out.glob("*/Dockerfile")):
            if path not in rendered:
                where = path.relative_to(out.parent.parent)
                problems.append(f"{where}: no such image in images/{SPEC_NAME} any more")
    return problems


def render_all(user: Any, out: Path = DOCKERFILES_DIR) -> dict[Path, str]:
    return {dockerfile_path(i, out): render_image(i, user) for i in images(load())}


# --- bake --------------------------------------------------------------------------------------


def bake_targets(
    found: list[L4TImage],
    *,
    contexts: Path,
    registry: str | None,
    base_registry: str | None,
    buildargs: dict[str, str],
) -> dict[str, Any]:
    """docker-bake.json targets: one per image, `platforms: ["linux/arm64"]`."""
    targets: dict[str, Any] = {}
    for image in found:
        args = dict(buildargs)
        args["BASE_REGISTRY"] = catalog.base_registry(image.base_registry, base_registry)
        targets[bake.target_name(image.name)] = {
            "context": str(contexts / image.name),
            "dockerfile": "Dockerfile",
            "tags": image.tags(registry=registry),
            "args": args,
            "platforms": [image.platform],
        }
    return targets


# --- can this machine build arm64? ----------------------------------------------------------------


@dataclass(frozen=True)
class Capability:
    can: bool
    how: str  # "native", "emulated", or why not


def arm64_capability(engine_arch: str | None, binfmt_dir: Path = BINFMT_DIR) -> Capability:
    """Whether the Docker engine can run arm64 build steps: natively when it runs on arm64 (its
    `docker info` Architecture), or under QEMU when the kernel has an enabled aarch64 binfmt_misc
    handler (the build's RUN steps execute arm64 binaries)."""
    if engine_arch is not None and engine_arch.lower() in ARM64_MACHINES:
        return Capability(True, "native")
    for name in BINFMT_AARCH64:
        handler = binfmt_dir / name
        try:
            text = handler.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.splitlines()[:1] == ["enabled"]:
            return Capability(True, f"emulated (binfmt_misc handler {handler})")
    where = engine_arch or "an unknown architecture"
    registered = "is not mounted" if not binfmt_dir.is_dir() else "has no enabled qemu-aarch64"
    return Capability(
        False,
        f"the Docker engine runs on {where} and cannot run arm64 build steps: {binfmt_dir}"
        f" {registered} handler (no QEMU emulation). Build on a Jetson or another arm64 host,"
        " or register QEMU's handler (e.g. `docker run --privileged --rm tonistiigi/binfmt"
        " --install arm64`); `build.py bake` writes the target with platforms"
        f' ["{ARM64}"] for a builder that can',
    )


def engine_arch(client: Any) -> str | None:
    try:
        return str(client.info().get("Architecture") or "") or None
    except Exception as exc:  # the engine answered nothing usable: say so, do not guess
        log.debug("docker info failed: %s", exc)
        return None


def machine_arch() -> str:
    return os.uname().machine


def write(rendered: dict[Path, str]) -> list[Path]:
    """Write the files whose content changed; returns the paths written."""
    written = []
    for path, text in rendered.items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    return written
