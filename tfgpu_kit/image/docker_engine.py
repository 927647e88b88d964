"""Building with the engine's legacy builder (buildkit.py builds through BuildKit), tagging and
pushing images with the Docker SDK, streaming the build's steps to stderr, and whether the engine
can run an image's platform's build steps (natively, or under QEMU).

A failed step stops with that step's output (DockerError), never a traceback; an unreachable engine
is a DockerError saying so."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import docker
import docker.errors

from tfgpu_kit.image import buildkit
from tfgpu_kit.shared.errors import DockerError
from tfgpu_kit.shared.log import stderr

log = logging.getLogger(__name__)

BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
# per platform: the engine architectures (`docker info` Architecture, `uname -m`) that run it
# natively, and the binfmt_misc handlers QEMU's own scripts and tonistiigi/binfmt register for it
MACHINES = {"linux/amd64": ("x86_64", "amd64"), "linux/arm64": ("aarch64", "arm64")}
BINFMT_HANDLERS = {
    "linux/amd64": ("qemu-x86_64", "qemu-x86_64-static"),
    "linux/arm64": ("qemu-aarch64", "qemu-aarch64-static"),
}
BASE_HINT = (
    "the base image is neither local nor pullable: pass a mirror with "
    "--base-registry MIRROR, or `docker pull`/`docker load` the base first"
)


def _failure_hint(header: str, message: str) -> str | None:
    """A full disk, else a FROM step (the base could not be had: no registry, a typo, no login)."""
    if buildkit.DISK_FULL.search(message):
        return buildkit.DISK_HINT
    return BASE_HINT if " : FROM " in header else None


def client() -> Any:
    """A Docker client whose engine answers, or DockerError."""
    try:
        c = docker.from_env(timeout=600)
        c.ping()
    except docker.errors.DockerException as exc:
        raise DockerError(
            f"no Docker engine answers ({exc})",
            hint="start dockerd (or Docker Desktop) or set DOCKER_HOST; `docker info` must work",
        ) from None
    return c


def split_ref(ref: str) -> tuple[str, str]:
    """`reg:5000/repo/name:tag` -> (`reg:5000/repo/name`, `tag`)."""
    repo, _, tag = ref.rpartition(":")
    if not repo or "/" in tag:
        return ref, "latest"
    return repo, tag


def local_image(c: Any, ref: str) -> Any | None:
    try:
        return c.images.get(ref)
    except docker.errors.ImageNotFound:
        return None
    except docker.errors.APIError as exc:
        raise DockerError(f"cannot inspect {ref}: {exc.explanation or exc}") from None


def refuse_unpullable(c: Any, label: str, ref: str) -> None:
    """DockerError when `ref` is neither in the engine nor known to its registry, asked of the
    engine (its network, mirrors and credentials) before a build assembles gigabytes of context
    for it: offline, `build` used to find out only when the engine tried to pull."""
    if local_image(c, ref) is not None:
        return
    try:
        c.images.get_registry_data(ref)  # the registry's manifest, nothing downloaded
    except docker.errors.DockerException as exc:
        reason = getattr(exc, "explanation", None) or exc
        raise DockerError(
            f"{label}: its base {ref} is not in the engine and cannot be pulled ({reason})",
            hint=BASE_HINT,
        ) from None


def image(c: Any, ref: str) -> Any:
    """The local image `ref`, or DockerError: not found (build or pull it), or the engine refuses
    the reference."""
    try:
        return c.images.get(ref)
    except docker.errors.ImageNotFound:
        raise DockerError(
            f"image {ref} not found locally", hint="build it first (./kit build) or pull it"
        ) from None
    except (docker.errors.APIError, docker.errors.NullResource) as exc:
        explanation = getattr(exc, "explanation", None) or exc
        raise DockerError(f"cannot inspect image {ref!r}: {explanation}") from None


def repo_digest(image: Any) -> str | None:
    """The registry digest (sha256:…) of a pulled image; None for local-only images."""
    digests = image.attrs.get("RepoDigests") or []
    return digests[0].split("@", 1)[1] if digests else None


def _follow(chunks: Iterable[dict[str, Any]], label: str) -> str:
    """Stream build output; return the built image id or raise DockerError with the failing step."""
    # the build step being run and its output, kept to report a failure
    header = ""
    lines: list[str] = []
    image_id: str | None = None
    for chunk in chunks:
        if "stream" in chunk:
            for line in str(chunk["stream"]).splitlines():
                if not line.strip():
                    continue
                if line.startswith("Step "):
                    header, lines = line, []
                    stderr.print(f"[bold]{label}[/] {line}", markup=True, highlight=False)
                else:
                    lines.append(line)
                    log.debug("%s   %s", label, line)
        elif "error" in chunk or "errorDetail" in chunk:
            message = chunk.get("error") or chunk.get("errorDetail", {}).get("message", "unknown")
            output = "\n".join(f"    {line}" for line in lines[-40:]) or "    (no output)"
            raise DockerError(
                f"building {label} failed at {header or 'the start'}\n{output}\n  error: {message}",
                hint=_failure_hint(header, message),
            )
        elif "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
            image_id = str(chunk["aux"]["ID"])
    if image_id is None:
        raise DockerError(f"building {label}: the engine reported no image id")
    return image_id


def build(
    c: Any,
    context: Path,
    *,
    label: str,
    tag: str,
    buildargs: dict[str, str],
    no_cache: bool,
    platform: str | None = None,
    sent: Callable[[], None] | None = None,
) -> str:
    """Build the context (classic builder, never pulling: a local base is used as it is), for
    `platform` (e.g. linux/arm64) when given, else the engine's own. `sent` is called once the
    engine holds the whole context, before the steps run: a temporary context (gigabytes of
    wheels) can leave the disk then, instead of sitting beside the layers the steps write."""
    where = f"{label} for {platform}" if platform else label
    try:
        chunks: Iterator[dict[str, Any]] = c.api.build(
            path=str(context),
            dockerfile="Dockerfile",
            tag=tag,
            buildargs=buildargs,
            nocache=no_cache,
            pull=False,
            rm=True,
            forcerm=True,
            decode=True,
            **({"platform": platform} if platform else {}),
        )
        # the SDK returns once the engine answers the upload: the context is in the engine's hands
        if sent is not None:
            sent()
        return _follow(chunks, label)
    except docker.errors.APIError as exc:
        raise DockerError(f"building {where}: {exc.explanation or exc}") from None
    except docker.errors.DockerException as exc:
        raise DockerError(f"building {where}: {exc}") from None


def built_here(c: Any, image_id: str, cli: str) -> None:
    """DockerError unless the image the CLI built is in this client's engine: the CLI follows its
    context (`docker context use`), the SDK DOCKER_HOST, and the two may name different engines."""
    try:
        c.images.get(image_id)
    except docker.errors.ImageNotFound:
        raise DockerError(
            f"{cli} built {image_id} into another engine than the one DOCKER_HOST names",
            hint="point both at one engine (`docker context use default`, or DOCKER_HOST), or"
            " build with --builder legacy",
        ) from None
    except docker.errors.APIError as exc:
        raise DockerError(f"cannot inspect the built image {image_id}: {exc}") from None


def tag(c: Any, image_id: str, ref: str) -> None:
    repo, name = split_ref(ref)
    try:
        c.api.tag(image_id, repo, name, force=True)
    except docker.errors.APIError as exc:
        raise DockerError(f"tagging {ref}: {exc.explanation or exc}") from None


def push(c: Any, ref: str) -> None:
    repo, name = split_ref(ref)
    stderr.print(f"pushing {ref}", highlight=False)
    try:
        for chunk in c.api.push(repo, tag=name, stream=True, decode=True):
            if "error" in chunk or "errorDetail" in chunk:
                message = chunk.get("error") or chunk.get("errorDetail", {}).get("message")
                raise DockerError(f"pushing {ref} failed: {message}")
    except docker.errors.APIError as exc:
        raise DockerError(f"pushing {ref}: {exc.explanation or exc}") from None


def python_version(c: Any, image_id: str) -> str:
    """`3.11`: the Python inside the image (for the composite tag), from a throw-away container."""
    try:
        out = c.containers.run(
            image_id,
            entrypoint=["python3", "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
            command=[],
            remove=True,
            network_disabled=True,
        )
    except docker.errors.DockerException as exc:
        raise DockerError(f"cannot run python3 in the built image: {exc}") from None
    return bytes(out).decode().strip()


# --- can this engine build for the image's platform? ---------------------------------------------


@dataclass(frozen=True)
class Capability:
    can: bool
    how: str  # "native", "emulated", or why not


def platform_capability(
    platform: str, engine_arch: str | None, binfmt_dir: Path = BINFMT_DIR
) -> Capability:
    """Whether the Docker engine can run `platform`'s build steps (linux/amd64, linux/arm64):
    natively when it runs on that architecture (its `docker info` Architecture), or under QEMU
    when the kernel has an enabled binfmt_misc handler for it (the build's RUN steps execute
    that architecture's binaries)."""
    if engine_arch is not None and engine_arch.lower() in MACHINES.get(platform, ()):
        return Capability(True, "native")
    handlers = BINFMT_HANDLERS.get(platform, ())
    for name in handlers:
        handler = binfmt_dir / name
        try:
            text = handler.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        if text.splitlines()[:1] == ["enabled"]:
            return Capability(True, f"emulated (binfmt_misc handler {handler})")
    where = engine_arch or "an unknown architecture"
    arch = platform.rsplit("/", 1)[-1]
    handler_name = handlers[0] if handlers else f"{arch} emulation"
    registered = "is not mounted" if not binfmt_dir.is_dir() else f"has no enabled {handler_name}"
    return Capability(
        False,
        f"the Docker engine runs on {where} and cannot run {arch} build steps: {binfmt_dir}"
        f" {registered} handler (no QEMU emulation). Build on an {arch} host (for arm64: a"
        f" Jetson), or register QEMU's handler (e.g. `docker run --privileged --rm"
        f" tonistiigi/binfmt --install {arch}`); `build.py bake` writes the target with"
        f' platforms ["{platform}"] for a builder that can',
    )


def arm64_capability(engine_arch: str | None, binfmt_dir: Path = BINFMT_DIR) -> Capability:
    """Whether the engine can run linux/arm64 build steps (platform_capability)."""
    return platform_capability("linux/arm64", engine_arch, binfmt_dir)


def engine_arch(c: Any) -> str | None:
    try:
        return str(c.info().get("Architecture") or "") or None
    except Exception as exc:  # the engine answered nothing usable: say so, do not guess
        log.debug("docker info failed: %s", exc)
        return None


def machine_arch() -> str:
    return os.uname().machine
