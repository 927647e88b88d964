"""Turn the commands' flag values into numbers, with errors that name the flag and the value and
say what is accepted, with an example. Numbers are ASCII digits only (`"²".isdigit()` is True),
by the runtime's own test; sizes by the runtime's own amount grammar."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tfgpu.errors import ConfigError
from tfgpu.settings import is_ascii_number, parse_mem_limit

from tfgpu_kit.errors import UsageError

SIZE_ACCEPTED = "a size in MiB (16384) or with a unit (16GiB, 500MiB, 16g)"


def whole_number(
    flag: str, value: str, example: str, *, low: int = 1, high: int | None = None
) -> int:
    """`value` as a whole number from `low` to `high` (no upper bound when None)."""
    text = str(value).strip()
    if not is_ascii_number(text) or int(text) < low or (high is not None and int(text) > high):
        bounds = f"of at least {low}" if high is None else f"from {low} to {high}"
        raise UsageError(
            f"{flag} {value!r} is not valid: accepted: a whole number {bounds}; "
            f"example: {flag} {example}"
        )
    return int(text)


def size_mib(flag: str, value: str, example: str) -> float:
    """A size flag, parsed by the runtime's own amount grammar (a bare number is MiB)."""
    try:
        amounts = parse_mem_limit(value, variable=flag)
    except ConfigError as error:
        why = f" ({error.why})" if error.why else ""
        raise UsageError(
            f"{flag} {value!r} is not a size{why}: accepted: {SIZE_ACCEPTED}; "
            f"example: {flag} {example}"
        ) from None
    if len(amounts) != 1 or amounts[0].mib is None:
        raise UsageError(
            f"{flag} {value!r} is not a single absolute size: accepted: {SIZE_ACCEPTED} "
            f"(no percentage, no list); example: {flag} {example}"
        )
    return amounts[0].mib


def path_flag(flag: str, example: str) -> Callable[[str], Path]:
    """An argparse `type` for a path flag: an empty value is refused (`Path("")` is `.`, the
    current folder, which would put the output in the working directory, usually the checkout)."""

    def convert(value: str) -> Path:
        if not value.strip():
            raise argparse.ArgumentTypeError(
                f"{flag} is empty: accepted: a path; example: {flag} {example}"
            )
        return Path(value)

    return convert
