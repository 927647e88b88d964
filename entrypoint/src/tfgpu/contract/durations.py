"""Durations in the environment contract (TF_GPU_RECOVER_AFTER, TF_GPU_EXIT_GRACE): whole
seconds (300, 300s), minutes (5m), hours (1h) or days (7d). Stdlib only: `tfgpu run` reads them
at start-up."""

# No `re`: `tfgpu run` reads TF_GPU_EXIT_GRACE at every start, and `re` costs it ~2.5 ms
# (-X importtime); the grammar is small enough to read by hand.
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# At most 9 digits (leading zeros aside) before conversion, far above any bound asked (365 days
# is 31,536,000 s), so int() never meets 4,300 digits (it raises there).
_MAX_DIGITS = 9

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Optional


def seconds_of(value: str, low_s: float, high_s: float) -> "Optional[float]":
    """`value` (ASCII digits, optional spaces, an optional unit s, m, h or d, any case) in
    seconds; None when it is no duration from `low_s` to `high_s` (the caller names its variable
    in the refusal)."""
    text = value.strip().lower()
    unit = text[-1:] if text[-1:] in _SECONDS else ""
    digits = text[: len(text) - len(unit)].rstrip().lstrip("0") or ("0" if text[:1] == "0" else "")
    if not digits or len(digits) > _MAX_DIGITS or not all("0" <= c <= "9" for c in digits):
        return None
    seconds = float(int(digits) * _SECONDS[unit or "s"])
    return seconds if low_s <= seconds <= high_s else None


def format_duration(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    # whole seconds as digits (`:g` would write 1000000 as 1e+06, which no reader takes back)
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:g}s"
