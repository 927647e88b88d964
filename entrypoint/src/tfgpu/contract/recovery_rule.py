"""The recovery rule of the environment contract: when a process that stays at its memory cap
is judged stuck, and what it then does. Pure parsing, stdlib only (imported by
tfgpu.contract.settings; the watching itself is tfgpu.act.recovery).

    TF_GPU_RECOVER_AT=95%       on: a logical GPU's in-use bytes at or above 95 % of its cap …
    TF_GPU_RECOVER_AFTER=5m     … at every sample for 5 minutes (default 5m) makes it stuck:
                                from 1s to 7d, in seconds (300, 300s), minutes (5m), hours
                                (1h) or days (7d)
    TF_GPU_RECOVER_ACTION=exit  then: `exit` = one line, exit code 75, so Docker's restart
                                policy restarts it; `report` (default) = /livez answers 503, so
                                a Kubernetes liveness probe restarts it

Off unless TF_GPU_RECOVER_AT is set. The rule is on the cap, so it needs one
(TF_GPU_MEM_LIMIT or TF_GPU_VIRTUAL_DEVICES); `report` needs TF_GPU_METRICS_PORT (the /livez
path is on that port).
"""

from __future__ import annotations

import re

from tfgpu.contract.durations import format_duration, seconds_of
from tfgpu.contract.errors import ConfigError

TYPE_CHECKING = False  # not `from typing import …`: tfgpu run imports this at start-up
if TYPE_CHECKING:
    from typing import Callable, Optional

AT = "TF_GPU_RECOVER_AT"
AFTER = "TF_GPU_RECOVER_AFTER"
ACTION = "TF_GPU_RECOVER_ACTION"
VARIABLES = (AT, AFTER, ACTION)
ACTIONS = ("report", "exit")
EXIT_STUCK = 75  # EX_TEMPFAIL (sysexits.h): "try again later": a restart is the remedy
DEFAULT_AFTER_S = 300.0
MAX_AFTER_S = 7 * 24 * 3600.0

_PERCENT = re.compile(r"(\d{1,3}(?:\.\d+)?)\s*%", re.ASCII)
AFTER_ACCEPTED = (
    "a duration from 1s to 7 days: seconds (300, 300s), minutes (5m), hours (1h) or days (7d)"
)


class RecoveryRule:
    """A process is stuck when a capped logical GPU holds at least `share` of its cap at every
    sample for `after_s` seconds; then `action`."""

    def __init__(self, share: float, after_s: float, action: str) -> None:
        self.share = share
        self.after_s = after_s
        self.action = action

    def explain(self) -> str:
        """One line for `tfgpu show`: what counts as stuck, and what then happens."""
        then = (
            f"exit {EXIT_STUCK} (a restart policy restarts the container)"
            if self.action == "exit"
            else "/livez on the metrics port answers 503 (a liveness probe restarts it)"
        )
        return (
            f"a capped GPU at >= {self.share * 100:g}% of its cap at every sample for "
            f"{format_duration(self.after_s)} is stuck; then {then}"
        )

    def describe(self) -> str:
        return (
            f"{AT}={self.share * 100:g}% {AFTER}={format_duration(self.after_s)} "
            f"{ACTION}={self.action}"
        )


def parse_share(value: str) -> float:
    m = _PERCENT.fullmatch(value.strip())
    share = float(m.group(1)) / 100 if m else 0.0
    if not 0.01 <= share <= 1.0:
        raise ConfigError(AT, value, "a percentage of the cap from 1% to 100%", "95%")
    return share


def parse_after(value: str) -> float:
    seconds = seconds_of(value, 1, MAX_AFTER_S)
    if seconds is None:
        raise ConfigError(AFTER, value, AFTER_ACCEPTED, "5m")
    return seconds


def parse_rule(
    get: Callable[[str], Optional[str]], *, capped: bool, metrics_port: Optional[int]
) -> Optional[RecoveryRule]:
    """The rule from the three variables (`get` returns a set, non-empty value or None);
    None when TF_GPU_RECOVER_AT is not set."""
    at, after, action = get(AT), get(AFTER), get(ACTION)
    if at is None:
        for name, value, example in ((AFTER, after, "5m"), (ACTION, action, "exit")):
            example = f"{example} (with {AT}=95%)"
            if value is not None:
                raise ConfigError(
                    name,
                    value,
                    f"only together with {AT}, which turns the rule on",
                    example,
                    why=f"{AT} is not set",
                )
        return None
    share = parse_share(at)
    after_s = parse_after(after) if after is not None else DEFAULT_AFTER_S
    chosen = (action or "report").strip().lower()
    if chosen not in ACTIONS:
        raise ConfigError(ACTION, action or "", " or ".join(ACTIONS), "exit")
    if not capped:
        raise ConfigError(
            AT,
            at,
            "a share of a cap: set TF_GPU_MEM_LIMIT (or TF_GPU_VIRTUAL_DEVICES) too",
            "95%",
            why="no cap is set, so there is nothing to be at",
        )
    if chosen == "report" and metrics_port is None:
        # Name the variable the user set: ACTION if given, else AT (report is the default).
        name, value = (ACTION, action) if action is not None else (AT, at)
        raise ConfigError(
            name,
            value,
            f"with {ACTION}=report (the default), also TF_GPU_METRICS_PORT: its /livez path is "
            f"what reports; or {ACTION}=exit",
            "exit" if name == ACTION else "95%",
            why="TF_GPU_METRICS_PORT is not set",
        )
    return RecoveryRule(share, after_s, chosen)
