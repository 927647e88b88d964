"""Turn `plan`'s flag values into numbers, with errors that say what is accepted."""

from __future__ import annotations

from tfgpu.errors import ConfigError
from tfgpu.settings import is_ascii_number, parse_mem_limit

from tfgpu_kit.errors import UsageError

SIZE_ACCEPTED = "a size in MiB (16384) or with a unit (16GiB, 500MiB, 16g)"


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


def count(flag: str, value: str, example: str, *, minimum: int = 1) -> int:
    text = value.strip()
    if not is_ascii_number(text) or int(text) < minimum:
        raise UsageError(
            f"{flag} {value!r} is not a whole number of at least {minimum}: "
            f"example: {flag} {example}"
        )
    return int(text)
