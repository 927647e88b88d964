"""Find Prometheus's own binaries (`promtool`, `prometheus`) for the monitoring tests.

Order: on PATH (CI installs Debian's `prometheus` package in .ci/run), else a copy unpacked
earlier into the cache, else `apt-get download prometheus` + `dpkg -x` into the cache
(`$XDG_CACHE_HOME/tfgpu-kit/prometheus`, default ~/.cache/…): the package's binaries are static
Go programs, so unpacking is enough, without root and without its service set-up.

Raises ToolMissing when none of that works; the tests then fail under CI=true and skip, with
the reason, elsewhere (tests/monitoring/conftest.py)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.kit_images import ROOT

PACKAGE = "prometheus"  # Debian's package: /usr/bin/prometheus and /usr/bin/promtool


class ToolMissing(RuntimeError):
    """Neither on PATH nor obtainable from Debian's package."""


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "tfgpu-kit" / "prometheus"


def find(tool: str) -> Path:
    """The path of `promtool` or `prometheus`."""
    on_path = shutil.which(tool)
    if on_path:
        return Path(on_path)
    unpacked = cache_dir() / "usr" / "bin" / tool
    if not unpacked.is_file():
        _unpack_package(cache_dir())
    if not unpacked.is_file():
        raise ToolMissing(f"Debian's {PACKAGE} package has no usr/bin/{tool}")
    return unpacked


def promtool_run(
    promtool: Path, *args: str, cwd: Path = ROOT, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """`promtool ARGS…`, its output captured, never raising on a non-zero exit."""
    return subprocess.run(
        [str(promtool), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def _run(command: list[str], cwd: Path) -> None:
    try:
        done = subprocess.run(
            command, cwd=cwd, capture_output=True, text=True, timeout=300, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ToolMissing(f"`{' '.join(command)}` could not run: {exc}") from None
    if done.returncode != 0:
        raise ToolMissing(
            f"`{' '.join(command)}` exited {done.returncode}: {done.stderr.strip()[-500:]}"
        )


def _unpack_package(target: Path) -> None:
    """apt-get download + dpkg -x into `target`, atomically (a rename of a finished tree)."""
    for needed in ("apt-get", "dpkg"):
        if shutil.which(needed) is None:
            raise ToolMissing(
                f"promtool/prometheus are not on PATH and {needed} is missing: install "
                f"Prometheus (Debian: apt-get install {PACKAGE})"
            )
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as work:
        where = Path(work)
        _run(["apt-get", "download", PACKAGE], where)
        debs = sorted(where.glob(f"{PACKAGE}_*.deb"))
        if not debs:
            raise ToolMissing(f"apt-get download {PACKAGE} left no .deb in {where}")
        tree = where / "tree"
        _run(["dpkg", "-x", str(debs[-1]), str(tree)], where)
        if target.exists():  # another run finished first
            return
        tree.rename(target)
