"""TrackedContainer: run a container, wait with a timeout, always remove it, and
fail on unexpected ERROR lines in its logs (the idea of jupyter/docker-stacks'
helper of the same name, written for this kit)."""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import docker
import docker.errors
from docker.models.containers import Container


@dataclass(frozen=True)
class Allowed:
    """An ERROR line that is expected, and why."""

    pattern: str
    why: str

    def matches(self, line: str) -> bool:
        return re.search(self.pattern, line) is not None


# What the CUDA build of TensorFlow prints on a machine without GPU and driver.
# Every entry says why it is not a failure of the kit; anything else is.
TF_CPU_ONLY_ERRORS: tuple[Allowed, ...] = (
    Allowed(
        r"failed call to cuInit",
        "the CUDA build calls cuInit() when it enumerates GPUs; with no driver (no libcuda) "
        "it logs this at ERROR level and continues on the CPU",
    ),
    Allowed(
        r"Unable to register cu(DNN|FFT|BLAS) factory",
        "TensorFlow and XLA both register the same CUDA plugin factories; the second "
        "registration is logged at ERROR level and ignored (a known upstream annoyance)",
    ),
    Allowed(
        r"computation placer already registered",
        "same double registration as above, for XLA's computation placer",
    ),
)

# "ERROR" as a word, or an absl/glog line whose severity letter is E (E1129 15:55:00…).
_ERROR_LINE = re.compile(r"\bERROR\b|^E\d{4} \d\d:\d\d:\d\d")


def unexpected_errors(logs: str, allowed: Iterable[Allowed]) -> list[str]:
    allowed = tuple(allowed)
    return [
        line
        for line in logs.splitlines()
        if _ERROR_LINE.search(line) and not any(a.matches(line) for a in allowed)
    ]


@dataclass(frozen=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    seconds: float

    @property
    def logs(self) -> str:
        return self.stdout + self.stderr


@dataclass
class TrackedContainer:
    """Runs containers of one image; every container it started is removed by
    `remove_all()` (the fixture calls it), whatever the test did."""

    client: docker.DockerClient
    image: str
    allowed: tuple[Allowed, ...] = TF_CPU_ONLY_ERRORS
    defaults: dict[str, Any] = field(default_factory=dict)
    _started: list[Container] = field(default_factory=list)

    def start(self, command: str | Sequence[str] | None = None, **kwargs: Any) -> Container:
        """Start detached; the caller waits, stops or inspects it."""
        options = {**self.defaults, **kwargs}
        # No network: the images must work offline, and nothing in a test may
        # depend on a registry or index (ports need a network, so keep it then).
        if "ports" not in options:
            options.setdefault("network_mode", "none")
        container = self.client.containers.run(self.image, command, detach=True, **options)
        self._started.append(container)
        return container

    def run_and_wait(
        self,
        command: str | Sequence[str] | None = None,
        *,
        timeout: float = 120,
        expect_exit: int | None = 0,
        no_errors: bool = True,
        **kwargs: Any,
    ) -> Outcome:
        """Run to completion. Fails on a timeout, on an exit code other than
        `expect_exit` (None: any), and (with `no_errors`) on unexpected ERROR lines."""
        t0 = time.monotonic()
        container = self.start(command, **kwargs)
        try:
            result = container.wait(timeout=timeout)
        except Exception as exc:  # requests' ReadTimeout / ConnectionError
            logs = _logs(container, stdout=True, stderr=True)
            raise AssertionError(
                f"container {self.image} {command!r} did not finish in {timeout}s: {exc}\n{logs}"
            ) from exc
        outcome = Outcome(
            exit_code=int(result["StatusCode"]),
            stdout=_logs(container, stdout=True, stderr=False),
            stderr=_logs(container, stdout=False, stderr=True),
            seconds=time.monotonic() - t0,
        )
        if expect_exit is not None:
            assert outcome.exit_code == expect_exit, (
                f"{command!r} exited {outcome.exit_code}, expected {expect_exit}\n{outcome.logs}"
            )
        if no_errors:
            bad = unexpected_errors(outcome.logs, self.allowed)
            assert not bad, "unexpected ERROR lines:\n" + "\n".join(bad)
        return outcome

    def remove_all(self) -> None:
        for container in self._started:
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True, v=True)
        self._started.clear()


def _logs(container: Container, *, stdout: bool, stderr: bool) -> str:
    raw = container.logs(stdout=stdout, stderr=stderr)
    return raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
