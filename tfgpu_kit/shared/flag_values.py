"""Turn the commands' flag values into numbers, with errors that name the flag and the value and
say what is accepted, with an example. Numbers are ASCII digits only (`"²".isdigit()` is True),
by the runtime's own test; sizes by the runtime's own amount grammar; durations as the runtime
spells TF_GPU_RECOVER_AFTER."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from tfgpu.contract import durations
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import is_ascii_number, parse_mem_limit

from tfgpu_kit.shared.errors import UsageError

SIZE_ACCEPTED = "a size in MiB (16384) or with a unit (16GiB, 500MiB, 16g)"
MAX_DIGITS = 30  # far above any count or size a flag takes
DURATION_FORMS = "whole seconds (3600, 3600s), minutes (90m), hours (12h) or days (2d)"


def _shown(value: str) -> str:
    """repr(value), cut to 80 characters (a 5000-digit value need not be repeated in full)."""
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "…'"


def whole_number(
    flag: str, value: str, example: str, *, low: int = 1, high: int | None = None
) -> int:
    """`value` as a whole number from `low` to `high` (no upper bound when None)."""
    text = str(value).strip()
    # Python refuses int() of more than 4300 digits (a ValueError, not a usage error); no flag
    # means anything that long, so the length is checked first.
    number = int(text) if is_ascii_number(text) and len(text) <= MAX_DIGITS else None
    if number is None or number < low or (high is not None and number > high):
        bounds = f"of at least {low}" if high is None else f"from {low} to {high}"
        raise UsageError(
            f"{flag} {_shown(value)} is not valid: accepted: a whole number {bounds}; "
            f"example: {flag} {example}"
        )
    return number


def duration_seconds(flag: str, value: str, example: str, *, high: int) -> int:
    """`value`, a duration (DURATION_FORMS: the runtime's own grammar, tfgpu.contract.durations), as
    whole seconds from 1 to `high`."""
    seconds = durations.seconds_of(str(value), 1, high)
    if seconds is None:
        raise UsageError(
            f"{flag} {_shown(value)} is not valid: accepted: a duration from 1s to "
            f"{duration_text(high)}, in {DURATION_FORMS}; example: {flag} {example}"
        )
    return int(seconds)


def duration_text(seconds: int) -> str:
    """`seconds` in the largest unit that divides it: 2h, 90m, 3601s."""
    return durations.format_duration(seconds)


def size_mib(flag: str, value: str, example: str) -> float:
    """A size flag, parsed by the runtime's own amount grammar (a bare number is MiB)."""
    try:
        amounts = parse_mem_limit(value, variable=flag)
    except ConfigError as error:
        why = f" ({error.why})" if error.why else ""
        raise UsageError(
            f"{flag} {_shown(value)} is not a size{why}: accepted: {SIZE_ACCEPTED}; "
            f"example: {flag} {example}"
        ) from None
    if len(amounts) != 1 or amounts[0].mib is None:
        raise UsageError(
            f"{flag} {_shown(value)} is not a single absolute size: accepted: {SIZE_ACCEPTED} "
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
