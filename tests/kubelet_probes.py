"""The kubelet's probe loop for one container, as the tests need it: which probes a rendered
container spec declares, and when the kubelet would restart the container, given a way to
run one probe (an HTTP GET inside a real container, or a timeline in a unit test).

Kubernetes' rules followed (kubelet's prober: pkg/kubelet/prober/worker.go; the probe fields,
https://kubernetes.io/docs/concepts/configuration/liveness-readiness-startup-probes/):
- each probe runs every `periodSeconds`, the first after `initialDelaySeconds`;
- while a startup probe exists and has not succeeded, it alone runs; `failureThreshold`
  failures in a row restart the container; its first success ends it for the container's life;
- then the liveness probe runs; `failureThreshold` failures in a row restart the container, a
  success resets the count;
- an httpGet probe passes on an HTTP status 200-399 within `timeoutSeconds`; a tcpSocket probe
  passes when a connection is made.
Readiness probes never restart a container and are not modelled."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Probe:
    kind: str  # "startup" or "liveness"
    path: str | None  # an httpGet's path; None: a tcpSocket probe (a connection is a success)
    port: Any  # a number or a port's name, as written
    period_s: float
    timeout_s: float
    failures: int
    initial_delay_s: float = 0.0

    @classmethod
    def of(cls, kind: str, spec: dict[str, Any]) -> Probe:
        """A probe of a rendered container, with Kubernetes' defaults (10 s, 1 s, 3, 0)."""
        action = spec["httpGet"] if "httpGet" in spec else spec["tcpSocket"]
        return cls(
            kind=kind,
            path=action.get("path"),
            port=action["port"],
            period_s=float(spec.get("periodSeconds", 10)),
            timeout_s=float(spec.get("timeoutSeconds", 1)),
            failures=int(spec.get("failureThreshold", 3)),
            initial_delay_s=float(spec.get("initialDelaySeconds", 0)),
        )


def probes(container: dict[str, Any]) -> tuple[Probe | None, Probe | None]:
    """(startup, liveness) of a rendered container spec; None where it declares none."""
    startup, liveness = container.get("startupProbe"), container.get("livenessProbe")
    return (
        None if startup is None else Probe.of("startup", startup),
        None if liveness is None else Probe.of("liveness", liveness),
    )


@dataclass
class Outcome:
    restarted_at_s: float | None = None  # seconds from the start; None: not restarted
    answers: list[tuple[float, str, bool]] = field(default_factory=list)  # (at, kind, passed)


def watch(
    container: dict[str, Any],
    check: Callable[[Probe], bool],
    until_s: float,
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
    enough: Callable[[Outcome], bool] | None = None,
) -> Outcome:
    """Probe as the kubelet would from now (the container's start) for `until_s` seconds, or
    until it would restart the container, or until `enough` says the answers so far settle
    what the caller asks (a test needs no more periods once it has seen what it checks)."""
    startup, liveness = probes(container)
    outcome = Outcome()
    start = clock()
    started = startup is None
    failures = 0
    first = startup if startup is not None else liveness
    if first is None:
        return outcome
    next_at = first.initial_delay_s
    while True:
        probe = liveness if started else startup
        if probe is None:  # started, and no liveness probe: nothing restarts it
            return outcome
        now = clock() - start
        if next_at >= until_s:
            return outcome
        if now < next_at:
            sleep(next_at - now)
            continue
        passed = check(probe)
        outcome.answers.append((next_at, probe.kind, passed))
        if enough is not None and enough(outcome):
            return outcome
        if passed:
            failures = 0
            if not started:
                started = True
                if liveness is not None:  # its next tick: one period on, not before its delay
                    next_at = max(next_at + liveness.period_s, liveness.initial_delay_s)
                continue
        else:
            failures += 1
            if failures >= probe.failures:
                outcome.restarted_at_s = next_at
                return outcome
        next_at += probe.period_s
