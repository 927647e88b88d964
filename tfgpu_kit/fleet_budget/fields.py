"""Reading one field of an untrusted compose file or manifest: its type checked, never coerced,
and a refusal that names the file, the field, the value, what is accepted and an example.

A value is only ever shown through `describe`: a scalar escaped and shortened (yamlfile.shown), a
mapping or list by its kind alone, so no message (and no processing) turns a non-scalar into text
(issue 22: `str()` of an alias bomb reached MemoryError)."""

from __future__ import annotations

import datetime
import math
from collections.abc import Mapping
from typing import Any

from tfgpu_kit.errors import UsageError
from tfgpu_kit.yamlfile import shown

# Kubernetes' counts (replicas, parallelism, completions) are int32 in the API types
# (k8s.io/api apps/v1 DeploymentSpec.Replicas *int32); the same bound keeps compose's counts
# and the processes label/annotation to numbers any host could run, and out of float overflow.
MAX_COUNT = 2**31 - 1


def describe(value: object) -> str:
    """`value` for a message: 'text' (escaped), a number, true/false/null, or its kind."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        if value.bit_length() > 64:
            return f"a {'negative ' if value < 0 else ''}number of about {_digits(value)} digits"
        return str(value)
    if isinstance(value, float):
        return repr(value) if math.isfinite(value) else "an infinite or NaN number"
    if isinstance(value, str):
        return f"'{shown(value, 80)}'"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, datetime.date):
        return "a YAML timestamp (quote it to make it text)"
    if isinstance(value, bytes):
        return "YAML binary data"
    return f"a {type(value).__name__}"


def quoted(value: object) -> str:
    """A scalar as compose or Kubernetes would pass it on, quoted ('6144', 'true'); a huge
    number or a non-scalar as `describe` says it."""
    if (
        value is None
        or isinstance(value, bool | str)
        or (isinstance(value, int) and value.bit_length() <= 64)
    ):
        if isinstance(value, bool):
            return "'true'" if value else "'false'"
        return f"'{shown(str(value))}'" if value is not None else "null"
    if isinstance(value, float) and math.isfinite(value):
        return f"'{value!r}'"
    return describe(value)


def _digits(value: int) -> int:
    return int(abs(value).bit_length() * math.log10(2)) + 1


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def refuse(source: str, where: str, value: object, accepted: str, example: str) -> UsageError:
    """The error for `where` (e.g. `services.a.gpus[0].count`) holding `value`; `where` may hold
    names from the file, so it is escaped too."""
    return UsageError(
        f"{shown(source)}: {shown(where)} is {describe(value)}: accepted: {accepted}; "
        f"example: {example}"
    )


def mapping(source: str, where: str, value: object, example: str) -> Mapping[Any, Any]:
    """`value` when it is a mapping; null is an empty one (YAML `key:` with nothing after)."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise refuse(source, where, value, "a mapping", example)
    return value


def sequence(source: str, where: str, value: object, example: str) -> list[Any]:
    """`value` when it is a list; null is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise refuse(source, where, value, "a list", example)
    return value


def text(source: str, where: str, value: object, example: str) -> str:
    if not isinstance(value, str):
        raise refuse(source, where, value, "a string", example)
    return value
