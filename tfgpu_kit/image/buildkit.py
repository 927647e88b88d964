"""Building a context through BuildKit with the Docker CLI (`docker build`), as users' engines
build by default, and which builder a command uses: BuildKit where the CLI has it, else the
engine's legacy builder through the Docker SDK (docker_engine.build), said once.

The Docker SDK speaks only the legacy build API, so BuildKit goes through the CLI: the BuildKit
client is the CLI's (built in before Docker 23, the buildx plugin since). Progress is BuildKit's
own, on stderr; stdout stays the command's (tables, --json)."""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections import deque
from dataclasses import dataclass
from pathlib import Path

from tfgpu_kit.shared.errors import DockerError, UsageError

log = logging.getLogger(__name__)

CHOICES = ("auto", "buildkit", "legacy")
# From Docker 23 the CLI's BuildKit client is the buildx plugin: `docker build` is an alias of
# `docker buildx build` (moby/moby v23.0.0 release notes, docker/cli#3314); a CLI without buildx
# refuses DOCKER_BUILDKIT=1. Older CLIs (18.09-22) carry BuildKit's client themselves.
FIRST_CLI_WITHOUT_BUILTIN = 23
_VERSION = re.compile(r"Docker version ((\d+)\.[^,\s]*)")
_PROBE_TIMEOUT_S = 20
# lines of BuildKit's output kept to report a failed step
_TAIL = 60
# BuildKit's lines when the FROM image cannot be had (`[internal] load metadata for REF`)
# BuildKit's words when the base cannot be had: its error summary (" > ") names the failed
# metadata load; a successful build prints "#N [internal] load metadata for" too.
_BASE_FAILURE = re.compile(
    r"^\s*> \[internal\] load metadata for|failed to resolve source metadata|pull access denied"
)
# Any builder's words when the engine's disk is full (the kernel's ENOSPC message)
DISK_FULL = re.compile(r"no space left on device")
DISK_HINT = (
    "the Docker engine's disk is full: free space (`docker builder prune`, `docker image prune`)"
    " or give its data root more room (`docker info` names it)"
)


@dataclass(frozen=True)
class Builder:
    """How images are built: `cli` is None for the legacy builder (the SDK)."""

    kind: str  # "buildkit" or "legacy"
    why: str  # one line: the CLI and its BuildKit, or why there is none
    cli: str | None = None
    buildx: bool = False


def _probe(argv: list[str]) -> subprocess.CompletedProcess[str] | None:
    try:
        return subprocess.run(
            argv,
            capture_output=True,
            text=True,
            timeout=_PROBE_TIMEOUT_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        log.debug("%s: %s", " ".join(argv), exc)
        return None


def find_buildkit(cli: str | None = None) -> Builder:
    """BuildKit through the Docker CLI `cli` (default: `docker` on PATH), or the legacy builder
    with the reason there is no BuildKit."""
    path = cli or shutil.which("docker")
    if path is None:
        return Builder("legacy", "no `docker` CLI on PATH (BuildKit's client is the CLI)")
    buildx = _probe([path, "buildx", "version"])
    if buildx is not None and buildx.returncode == 0:
        version = buildx.stdout.strip().splitlines()[0] if buildx.stdout.strip() else "buildx"
        return Builder("buildkit", f"BuildKit through {path} ({version})", path, buildx=True)
    said = _probe([path, "--version"])
    found = _VERSION.search(said.stdout) if said is not None else None
    if found is None:
        return Builder("legacy", f"{path} --version did not say which Docker CLI it is")
    version, major = found.group(1), int(found.group(2))
    if major < FIRST_CLI_WITHOUT_BUILTIN:
        return Builder("buildkit", f"BuildKit built into {path} (Docker {version})", path)
    return Builder(
        "legacy",
        f"{path} is Docker {version} without the buildx plugin (`docker buildx"
        " version` fails), which BuildKit needs since Docker 23: install it (Docker's"
        " docker-buildx-plugin package, or Debian's docker-buildx)",
    )


def choose(wanted: str, cli: str | None = None) -> Builder:
    """The builder for `--builder WANTED`: auto takes BuildKit where the CLI has it, else the
    legacy one (a warning, once per command); buildkit refuses when there is none."""
    if wanted not in CHOICES:
        raise UsageError(
            f"--builder {wanted!r} is not a builder: accepted are {', '.join(CHOICES)}"
            " (e.g. --builder buildkit)"
        )
    if wanted == "legacy":
        return Builder("legacy", "the engine's legacy builder, as --builder legacy asks")
    found = find_buildkit(cli)
    if found.kind == "buildkit":
        return found
    if wanted == "buildkit":
        raise UsageError(
            f"--builder buildkit: BuildKit is not available here: {found.why}",
            hint="install the buildx plugin, or build with --builder legacy (or auto)",
        )
    return Builder(
        "legacy",
        f"BuildKit is not available ({found.why}): using the engine's"
        " legacy builder (deprecated since Docker 23)",
    )


def argv(
    builder: Builder,
    context: Path,
    *,
    tag: str,
    buildargs: dict[str, str],
    no_cache: bool,
    platform: str | None,
    iidfile: Path,
    progress: str,
) -> list[str]:
    """The `docker build` line: the same tag, build arguments and Dockerfile as the legacy build,
    never pulling the base (a local one is used as it is), the image loaded into the engine."""
    assert builder.cli is not None
    line = [builder.cli, *(["buildx", "build", "--load"] if builder.buildx else ["build"])]
    line += ["--progress", progress, "--iidfile", str(iidfile), "--tag", tag]
    line += ["--file", str(context / "Dockerfile")]
    for name, value in sorted(buildargs.items()):
        line += ["--build-arg", f"{name}={value}"]
    if no_cache:
        line.append("--no-cache")
    if platform:
        line += ["--platform", platform]
    return [*line, str(context)]


def _failure_hint(tail: deque[str], base_hint: str | None) -> str | None:
    """The hint a failed build's last lines call for: a full disk, else a base that cannot be
    had, else none."""
    if any(DISK_FULL.search(out) for out in tail):
        return DISK_HINT
    if any(_BASE_FAILURE.search(out) for out in tail):
        return base_hint
    return None


def build(
    builder: Builder,
    context: Path,
    *,
    label: str,
    tag: str,
    buildargs: dict[str, str],
    no_cache: bool,
    platform: str | None = None,
    hint: str | None = None,
) -> str:
    """Build `context` with BuildKit; the image id, or DockerError with the failed step's output.
    On a terminal BuildKit draws its own progress; elsewhere (CI, logs) its plain lines stream to
    stderr and the last ones are kept for the error."""
    where = f"{label} for {platform}" if platform else label
    tty = sys.stderr.isatty()
    env = {**os.environ, "DOCKER_BUILDKIT": "1"}
    with tempfile.TemporaryDirectory(prefix="tfgpu-iid-") as tmp:
        iidfile = Path(tmp) / "iid"
        line = argv(
            builder,
            context,
            tag=tag,
            buildargs=buildargs,
            no_cache=no_cache,
            platform=platform,
            iidfile=iidfile,
            progress="auto" if tty else "plain",
        )
        log.debug("%s", " ".join(line))
        tail: deque[str] = deque(maxlen=_TAIL)
        try:
            if tty:
                status = subprocess.run(line, env=env, stdin=subprocess.DEVNULL, check=False)
                code = status.returncode
            else:
                with subprocess.Popen(
                    line,
                    env=env,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.STDOUT,
                    text=True,
                    errors="replace",
                ) as proc:
                    assert proc.stdout is not None
                    for out in proc.stdout:
                        if out.strip():  # BuildKit's blank lines between steps
                            tail.append(out.rstrip("\n"))
                            sys.stderr.write(f"{label} {out}")
                    code = proc.wait()
        except OSError as exc:
            raise DockerError(f"building {where}: cannot run {builder.cli}: {exc}") from None
        if code != 0:
            output = "\n".join(f"    {out}" for out in tail) or "    (BuildKit's output is above)"
            raise DockerError(
                f"building {where} failed (BuildKit: {builder.cli} build exited {code})\n{output}",
                hint=_failure_hint(tail, hint),
            )
        try:
            image_id = iidfile.read_text(encoding="ascii").strip()
        except OSError:
            image_id = ""
    if not image_id.startswith("sha256:"):
        raise DockerError(f"building {where}: BuildKit reported no image id")
    return image_id
