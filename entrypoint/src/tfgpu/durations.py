"""Durations in the environment contract (TF_GPU_RECOVER_AFTER, TF_GPU_EXIT_GRACE): whole
seconds (300, 300s), minutes (5m), hours (1h) or days (7d). Stdlib only: `tfgpu run` reads them
at start-up."""

import re

# At most 9 digits before conversion, far above any bound asked (365 days is 31,536,000 s), so
# int() never meets 4,300 digits (it raises there).
_DURATION = re.compile(r"0*(\d{1,9})\s*(s|m|h|d)?", re.ASCII | re.IGNORECASE)
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


def seconds_of(value: str, low_s: float, high_s: float) -> "Optional[float]":
    """`value` in seconds; None when it is no duration from `low_s` to `high_s` (the caller
    names its variable in the refusal)."""
    m = _DURATION.fullmatch(value.strip())
    seconds = float(int(m.group(1)) * _SECONDS[(m.group(2) or "s").lower()]) if m else -1.0
    return seconds if low_s <= seconds <= high_s else None


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"
