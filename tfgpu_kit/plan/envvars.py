"""Which environment variables matter to a plan, and whether a value is known.

A value is unknown when the orchestrator fills it in at deploy time: compose
interpolates `${VAR}`/`$VAR` from the shell, Kubernetes expands `$(VAR)`. The plan
reports such values instead of guessing what they will be."""

from __future__ import annotations

import re
from collections.abc import Mapping

from tfgpu.contract.names import JOB_INDEX

# Variables that decide a process's GPUs or caps, or that the runtime reads (its contract,
# TensorFlow's, the worker index) or checks the names of (tfgpu.contract.names: `tf_gpu_mem_limit`,
# a misspelt CUDA_VISIBLE_DEVICES). Everything else is ignored, so an interpolated password or token
# never makes a plan fail.
GPU_SELECTION = ("NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
CAP_VARIABLES = ("TF_GPU_MEM_LIMIT", "TF_GPU_VIRTUAL_DEVICES")
_PREFIXES = ("TF_", "TFGPU_", "CUDA_")


def relevant(name: str) -> bool:
    return name.upper().startswith(_PREFIXES) or name in GPU_SELECTION or name == JOB_INDEX


# `$$` is compose's escape for a literal dollar; `$NAME` and `${…}` interpolate.
_COMPOSE_INTERPOLATION = re.compile(r"(?<!\$)(?:\$\$)*\$(?:\{|[A-Za-z_])")
# Kubernetes expands `$(NAME)`; `$$(NAME)` is the escape.
_KUBE_REFERENCE = re.compile(r"(?<!\$)(?:\$\$)*\$\([A-Za-z_][A-Za-z0-9_.-]*\)")


def compose_interpolated(value: str) -> bool:
    return bool(_COMPOSE_INTERPOLATION.search(value))


def kube_interpolated(value: str) -> bool:
    return bool(_KUBE_REFERENCE.search(value))


# Kubernetes' expansion (third_party/forked/golang/expansion/expand.go): `$$` is a literal `$`,
# `$(NAME)` the value of a variable defined earlier in the container, left as written if none
_KUBE_EXPANSION = re.compile(r"\$(?:\$|\(([^)]*)\))")


def kube_expand(value: str, defined: Mapping[str, str]) -> tuple[str, bool]:
    """(value as the kubelet expands it from `defined`, whether every reference was known)."""
    known = True

    def one(match: re.Match[str]) -> str:
        nonlocal known
        name = match.group(1)
        if name is None:
            return "$"
        if name in defined:
            return defined[name]
        known = False
        return match.group(0)

    return _KUBE_EXPANSION.sub(one, value), known


def scalar_text(value: object) -> str:
    """YAML scalars as compose passes them to a container (true → "true", 6144 → "6144")."""
    return ("true" if value else "false") if isinstance(value, bool) else str(value)
