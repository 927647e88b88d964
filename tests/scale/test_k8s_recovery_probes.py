"""The recovery rule's probes as `k8s` renders them: a program still starting is never
restarted, one stuck at its cap still is, and a probe that cannot be reached is refused.

The kubelet's loop is emulated (tests/kubelet_probes.py) over timelines of what /livez answers;
the same loop runs against real containers in tests/gpu/test_recovery_probes.py."""

from __future__ import annotations

from typing import Any

import pytest

from tests import kubelet_probes
from tests.scale.test_k8s_render import render, validate
from tfgpu_kit import cli

RECOVERY = ["--mem-limit", "4GiB", "--env", "TF_GPU_RECOVER_AT=95%"]


def rendered(capsys: pytest.CaptureFixture[str], *flags: str) -> list[dict[str, Any]]:
    """The containers of the Deployment and the Job, each document validated first."""
    docs = render(capsys, *RECOVERY, *flags)
    out = []
    for doc in docs:
        assert validate(doc)  # kubernetes-validate, strict
        if doc["kind"] in ("Deployment", "Job"):
            out.append(doc["spec"]["template"]["spec"]["containers"][0])
    return out


class Timeline:
    """What /livez answers `at` seconds after the container started: refused before the
    program imports TensorFlow, 200 after, 503 once stuck. A fake clock drives the loop."""

    def __init__(self, up_at: float, stuck_at: float | None = None) -> None:
        self.now = 0.0
        self.up_at, self.stuck_at = up_at, stuck_at

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds

    def check(self, probe: kubelet_probes.Probe) -> bool:
        assert probe.port == "metrics" and probe.path in ("/livez", None)
        listening = self.up_at <= self.now
        if probe.path is None:  # a TCP connect: the port listens
            return listening
        return listening and (self.stuck_at is None or self.now < self.stuck_at)


def outcome(container: dict[str, Any], timeline: Timeline, until_s: float) -> Any:
    return kubelet_probes.watch(
        container, timeline.check, until_s, clock=timeline.clock, sleep=timeline.sleep
    )


# the liveness probe alone, from the container's start: what the startup probe guards against
LIVENESS_ONLY = {
    "livenessProbe": {
        "httpGet": {"path": "/livez", "port": "metrics"},
        "periodSeconds": 10,
        "failureThreshold": 3,
    }
}


def test_a_program_that_imports_tensorflow_late_is_not_restarted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """/livez listens only once the program imported TensorFlow; the liveness probe alone
    (period 10, threshold 3) restarts any program slower than ~30 s to get there, for ever.
    The startup probe holds the liveness probe back until /livez answers."""
    containers = rendered(capsys, "--kind", "all")
    assert len(containers) == 2
    for container in containers:
        startup, liveness = kubelet_probes.probes(container)
        assert startup is not None and liveness is not None
        budget = startup.period_s * startup.failures
        assert budget >= 600, budget  # ten minutes to reach `import tensorflow`
        for up_at in (0.5, 30, 60, 300, budget - startup.period_s):
            found = outcome(container, Timeline(up_at=up_at), until_s=budget + 120)
            assert found.restarted_at_s is None, (up_at, found.answers)
        # what is still restarted: a program that never gets there within the budget
        never = outcome(container, Timeline(up_at=10**9), until_s=budget + 120)
        assert never.restarted_at_s is not None and never.restarted_at_s < budget
    # the same 60 s of preparation under the probes rendered before: restarted at 20 s
    before = outcome(LIVENESS_ONLY, Timeline(up_at=60), until_s=300)
    assert before.restarted_at_s == 20


@pytest.mark.parametrize(("up_at", "stuck_after"), [(5.0, 300.0), (60.0, 300.0), (60.0, 0.0)])
def test_a_process_stuck_at_its_cap_is_still_restarted(
    capsys: pytest.CaptureFixture[str], up_at: float, stuck_after: float
) -> None:
    """Stuck after TF_GPU_RECOVER_AFTER's default (5 min at the cap), or already when /livez first
    answers (a program that fills its cap at once, with a short period): the liveness probe
    restarts it within its failures, not after the startup probe's whole budget."""
    for container in rendered(capsys, "--kind", "all"):
        _, liveness = kubelet_probes.probes(container)
        assert liveness is not None
        stuck_at = up_at + stuck_after
        found = outcome(container, Timeline(up_at=up_at, stuck_at=stuck_at), until_s=3600)
        assert found.restarted_at_s is not None, found.answers
        # within the liveness probe's failures (and one period of phase) of the verdict
        window = liveness.period_s * (liveness.failures + 2)
        assert stuck_at <= found.restarted_at_s <= stuck_at + window, found.restarted_at_s


def test_the_probes_wait_long_enough_for_a_busy_interpreter(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The kubelet's default timeout is 1 s; a training process's interpreter can hold the
    metrics thread off for longer than that (a long op holding the GIL) without being stuck."""
    for container in rendered(capsys, "--kind", "all"):
        for probe in kubelet_probes.probes(container):
            assert probe is not None and probe.timeout_s >= 5


def test_the_manifest_says_what_the_code_does(capsys: pytest.CaptureFixture[str]) -> None:
    """The comment claimed "/livez answers 200 before TensorFlow is up"; nothing listens then."""
    assert cli.main(["k8s", "--image", "r.example/t:1", "--kind", "deployment", *RECOVERY]) == 0
    text = capsys.readouterr().out
    assert "before TensorFlow is up" not in text
    assert "listens only once that process has" in text and "imported TensorFlow" in text
    assert "600 s (failureThreshold x periodSeconds)" in text


@pytest.mark.parametrize("addr", ["127.0.0.1", "127.1.2.3", "::1", " ::1 ", "::ffff:127.0.0.1"])
def test_a_probe_on_the_pods_loopback_is_refused(
    capsys: pytest.CaptureFixture[str], addr: str
) -> None:
    """TF_GPU_METRICS_ADDR=127.0.0.1 with the rule's probe: the kubelet probes the pod's IP, so
    every probe fails and the pod is restarted for ever; `k8s` rendered it anyway."""
    code = cli.main(
        ["k8s", "--image", "r.example/t:1", *RECOVERY, "--env", f"TF_GPU_METRICS_ADDR={addr}"]
    )
    err = capsys.readouterr().err
    assert code == 2, err
    assert f"--env TF_GPU_METRICS_ADDR={addr.strip()!r}" in err and "loopback" in err
    assert "example: --env TF_GPU_METRICS_ADDR=0.0.0.0" in err


@pytest.mark.parametrize(
    "env",
    [
        ["TF_GPU_METRICS_ADDR=0.0.0.0"],
        ["TF_GPU_METRICS_ADDR=::"],
        ["TF_GPU_METRICS_ADDR=127.0.0.1", "TF_GPU_RECOVER_ACTION=exit"],  # no probe to reach
    ],
)
def test_a_reachable_or_absent_probe_is_rendered(
    capsys: pytest.CaptureFixture[str], env: list[str]
) -> None:
    flags = [x for item in env for x in ("--env", item)]
    containers = rendered(capsys, *flags)
    assert containers
    exit_action = any("ACTION=exit" in item for item in env)
    for container in containers:
        assert ("startupProbe" in container) is not exit_action


def test_the_loop_ends_once_the_answers_are_enough(capsys: pytest.CaptureFixture[str]) -> None:
    """`enough` ends the watch at the answer that satisfies it, before `until_s`; without it the
    loop runs to `until_s`."""
    container = rendered(capsys, "--kind", "all")[0]
    _, liveness = kubelet_probes.probes(container)
    assert liveness is not None

    def two_passes(found: kubelet_probes.Outcome) -> bool:
        return sum(kind == "liveness" and ok for _, kind, ok in found.answers) >= 2

    timeline = Timeline(up_at=30)
    found = kubelet_probes.watch(
        container, timeline.check, 3600, clock=timeline.clock, sleep=timeline.sleep,
        enough=two_passes,
    )  # fmt: skip
    kinds = [(kind, ok) for _, kind, ok in found.answers]
    assert kinds[-2:] == [("liveness", True)] * 2 and kinds.count(("liveness", True)) == 2
    assert timeline.now < 3600 and found.restarted_at_s is None
    everything = outcome(container, Timeline(up_at=30), until_s=3600)
    assert len(everything.answers) > len(found.answers) + 100
