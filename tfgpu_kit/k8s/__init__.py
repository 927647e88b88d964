"""`build.py k8s`: Kubernetes manifests for an image built by the kit. The flags are declared once
(flags.py), refused or accepted in one pass (check.py, with env.py, limits.py and workers.py), and
the checked values rendered (render.py)."""

from __future__ import annotations

from tfgpu_kit.k8s import check, render
from tfgpu_kit.k8s.flags import Flags


def manifests(flags: Flags) -> list[tuple[str, str]]:
    """(file name, YAML) of each manifest the flags ask for; UsageError names a bad flag."""
    return render.manifests(check.check(flags))
