"""The contract's durations (TF_GPU_RECOVER_AFTER, TF_GPU_EXIT_GRACE, `k8s --deadline`) are read
by hand, without `re` (start-up time); this holds the hand-written reader to the grammar as a
regular expression states it, on any text."""

from __future__ import annotations

import re

from hypothesis import example, given
from hypothesis import strategies as st
from tfgpu.contract.durations import format_duration, seconds_of

GRAMMAR = re.compile(r"0*(\d{1,9})\s*(s|m|h|d)?", re.ASCII | re.IGNORECASE)
UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400}
HIGH = 365 * 86400.0


def by_the_grammar(value: str) -> float | None:
    m = GRAMMAR.fullmatch(value.strip())
    seconds = float(int(m.group(1)) * UNIT[(m.group(2) or "s").lower()]) if m else -1.0
    return seconds if 1 <= seconds <= HIGH else None


@given(st.text(alphabet="0123456789 smhdSMHDx.-+\t\n٥²", max_size=14))
@example("0" * 30 + "5m")
@example("9" * 10)
@example("5 \t S")
@example("")
def test_the_reader_is_the_grammar(value: str) -> None:
    assert seconds_of(value, 1, HIGH) == by_the_grammar(value)


@given(st.integers(min_value=1, max_value=int(HIGH)))
def test_a_formatted_duration_reads_back(seconds: int) -> None:
    assert seconds_of(format_duration(seconds), 1, HIGH) == seconds
