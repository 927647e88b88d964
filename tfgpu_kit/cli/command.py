"""The shape of every build.py sub-command: arguments → one call into the domain → output.

Each command module ends with `COMMAND = Command(...)`; tfgpu_kit/cli/__init__.py imports them by
name (not by a string), so mypy checks every command against this shape."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

Request = TypeVar("Request", bound="DataclassInstance")


@dataclasses.dataclass(frozen=True)
class Command:
    name: str
    help: str
    description: str
    add_arguments: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace], int]


def request(request_type: type[Request], args: argparse.Namespace) -> Request:
    """A command's request dataclass from its flags, whose destinations are its field names."""
    flags = vars(args)
    fields = dataclasses.fields(request_type)
    return request_type(**{field.name: flags[field.name] for field in fields})
