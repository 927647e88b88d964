"""Reading one field of an untrusted compose file or manifest: its type checked, never coerced,
and a refusal that names the file, the field, the value, what is accepted and an example.

A value is only ever shown through `describe`: a scalar escaped and shortened (yamlfile.shown), a
mapping or list by its kind alone, so no message (and no processing) turns a non-scalar into text
(`str()` of an alias bomb would reach MemoryError)."""

from __future__ import annotations

import datetime
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard

from tfgpu.contract.settings import is_ascii_number

from tfgpu_kit.plan.model import Unresolved
from tfgpu_kit.shared.errors import UsageError
from tfgpu_kit.shared.yamlfile import shown

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
    if isinstance(value, bool):
        return "'true'" if value else "'false'"
    if isinstance(value, str) or (isinstance(value, int) and value.bit_length() <= 64):
        return f"'{shown(str(value))}'"
    if isinstance(value, float) and math.isfinite(value):
        return f"'{value!r}'"
    return describe(value)


def _digits(value: int) -> int:
    return int(abs(value).bit_length() * math.log10(2)) + 1


def is_scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def is_whole(value: object) -> TypeGuard[int]:
    """An integer, YAML `true` and `false` not among them."""
    return isinstance(value, int) and not isinstance(value, bool)


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


def texts(source: str, where: str, value: object, example: str) -> list[str]:
    """A list of strings (null: none), each item checked as `where[]`."""
    items = sequence(source, where, value, example)
    return [text(source, f"{where}[]", item, example) for item in items]


def mappings(source: str, where: str, value: object, example: str) -> Iterator[Mapping[Any, Any]]:
    """The items of a list of mappings (null: none), each checked as `where[]` when reached."""
    for item in sequence(source, where, value, example):
        yield mapping(source, f"{where}[]", item, example)


def scalar(source: str, where: str, value: object, example: str, rule: str = "") -> object:
    if not is_scalar(value):
        raise refuse(source, where, value, f"a string, number, boolean or null{rule}", example)
    return value


def count_of(value_text: str, raw: object, what: str, unresolved: list[Unresolved]) -> int:
    """A count (replicas, processes) given as text; else 1, and `what` is reported unknown."""
    if is_ascii_number(value_text) and len(value_text) <= 10 and int(value_text) <= MAX_COUNT:
        return int(value_text)
    unresolved.append(Unresolved(what, f"{quoted(raw)} is not a whole number; counted as 1"))
    return 1
