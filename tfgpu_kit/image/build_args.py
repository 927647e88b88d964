"""The per-build ARGs every Dockerfile declares (TFGPU_CREATED, TFGPU_REVISION, TFGPU_SOURCE,
TFGPU_BASE_DIGEST, TFGPU_CUDA_WHEELS_MIB), as `build` and `bake` pass them: values that change with
each build, so that the committed Dockerfiles stay the same."""

from __future__ import annotations

import datetime
import re
import subprocess
import urllib.parse

from tfgpu_kit.matrix.spec import ROOT
from tfgpu_kit.shared.output import mib


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
