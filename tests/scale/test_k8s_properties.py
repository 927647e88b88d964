"""Property tests (Hypothesis, fixed seed) over every `build.py k8s` flag: whatever the value
(newlines, control and bidi characters, YAML and Jinja syntax, shell metacharacters, huge and
negative numbers), the command never raises anything but its own UsageError (exit 2, one
message naming the flag), answers in bounded time, and a manifest it writes has the shape of
the one rendered with a benign value: the same documents, the same kinds, the same keys and
value types. Kubernetes' kinds among the accepted outputs also pass kubernetes-validate's strict
schemas (the first few per flag: validation costs ~60 ms a set)."""

from __future__ import annotations

import time
from typing import Any

import kubernetes_validate
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.memory_bound import memory_bound
from tests.scale.podmonitor_schema import validate_pod_monitor
from tfgpu_kit import cli, k8s
from tfgpu_kit.cli.command import request
from tfgpu_kit.k8s.flags import Flags
from tfgpu_kit.shared.errors import UsageError

KUBERNETES = kubernetes_validate.latest_version()
IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
EXAMPLES = 60  # per flag: 26 flags x 60 examples in about 15 s
VALIDATED = 4  # accepted outputs per flag checked with kubernetes-validate
# one rendering (or refusal); they take about a millisecond: the bound catches a blow-up (a
# pattern gone exponential), with room for a loaded 2-core host (one took over 2 s under load)
MAX_SECONDS = 10.0

# Every document kind at once: a change of shape anywhere shows.
BASE = {
    "--mem-limit": "20%",
    "--time-slicing": "4",
    "--pod-monitor-label": "release=prom",
    "--namespace": "ml",
}
# each string flag with a benign value (the base's value where it has one)
BENIGN = {
    "--name": "text-model",
    "--namespace": "ml",
    "--image": IMAGE,
    "--serve-cmd": "python serve.py --port 8501",
    "--train-cmd": "python train.py --epochs 5",
    "--port": "8501",
    "--health-path": "/healthz",
    "--replicas": "4",
    "--parallelism": "2",
    "--completions": "3",
    "--gpus": "1",
    "--mem-limit": "20%",
    "--virtual-devices": "1024,1024",
    "--memory-growth": "true",
    "--metrics-port": "9401",
    "--time-slicing": "4",
    "--device-plugin-namespace": "nvidia-device-plugin",
    "--env": "TF_GPU_QUIET=true",
    "--grace-period": "60",
    "--prestop-sleep": "5",
    "--pod-monitor-label": "release=prom",
    "--cpu": "2",
    "--memory": "16Gi",
    "--shm-size": "2Gi",
    "--deadline": "12h",
    "--uid": "1234",
    "--gid": "0",
}
# values whose documented meaning changes the shape: --prestop-sleep 0 renders no preStop hook
ALSO_BENIGN = {"--prestop-sleep": ["0"], "--shm-size": ["none"]}  # none: no /dev/shm volume
# strings that break YAML, Jinja, terminals or shells, and numbers no count should take
HOSTILE = [
    "\n", "\r\n", "\r", "\x00", "\x1b[2J", "\x7f", "\x85", "\u2028", "\u2029", "\u202e",
    "\u2066", "\ufeff", "\u200b", "\t", " ", "{{ 7*7 }}", "{% raw %}", "{#", "}}", ": ", "- ",
    " #", "---", "...", "&a ", "*a", "!!python/object/apply:os.system", "? ", "|", ">", "'",
    '"', "\\", "$(id)", "`id`", ";", "&&", "%", "@", "/", ":", "=", ",", "[", "]", "{", "}",
    "٣", "²", "９", "-1", "0", "99999999999999999999", "1e9", "0x10", "+5", "Ki", "GiB",
    "---\nkind: ClusterRoleBinding", "\ntoken: x",
]  # fmt: skip


# free text where a flag takes it: the value part of --env and of a label
_FREE = {"--env": "EXTRA_VARIABLE=", "--pod-monitor-label": "team="}


def _values(flag: str, benign: str) -> st.SearchStrategy[str]:
    pieces = st.sampled_from([*HOSTILE, benign])
    free = _FREE.get(flag, benign)
    return st.one_of(
        st.just(benign),
        st.lists(pieces, min_size=1, max_size=5).map(lambda parts: free + "".join(parts)),
        st.lists(pieces, min_size=1, max_size=5).map("".join),
        st.tuples(pieces, pieces).map(lambda ends: ends[0] + benign + ends[1]),
        st.text(max_size=40),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
    )


def _argv(flag: str, value: str) -> list[str]:
    flags = {**BASE, flag: value}
    if flag == "--virtual-devices":
        del flags["--mem-limit"]
    argv = ["k8s"] + ([] if flag == "--image" else ["--image", IMAGE])
    for name, given_value in flags.items():
        argv.append(f"{name}={given_value}")  # `=`: a value starting with '-' stays a value
    return [*argv, "--pod-monitor"]


def _render(flag: str, value: str) -> list[dict[str, Any]] | UsageError:
    args = cli.parser().parse_args(_argv(flag, value))
    try:
        outputs = k8s.manifests(request(Flags, args))
    except UsageError as error:
        return error
    return [doc for _, text in outputs for doc in yaml.safe_load_all(text) if doc is not None]


_MAPS = ("labels", "matchLabels", "annotations")  # their keys are the user's, not the schema's


def _shape(node: Any, key: str = "") -> Any:
    """The structure without the values: keys, value types, and the shapes a list's items take."""
    if isinstance(node, dict):
        if key in _MAPS:
            assert all(isinstance(k, str) and isinstance(v, str) for k, v in node.items())
            return "string map"
        return {k: _shape(v, k) for k, v in node.items()}
    if isinstance(node, list):
        return sorted({repr(_shape(item)) for item in node})
    return type(node).__name__


def _flag_named(flag: str, error: UsageError) -> bool:
    text = str(error)
    return flag in text or (flag == "--pod-monitor-label" and "--pod-monitor" in text)


COUNTS: dict[str, dict[str, int]] = {}


@pytest.mark.parametrize("flag", list(BENIGN))
def test_any_value_is_refused_cleanly_or_keeps_the_shape(flag: str) -> None:
    expected = []
    for benign in [BENIGN[flag], *ALSO_BENIGN.get(flag, [])]:
        reference = _render(flag, benign)
        assert not isinstance(reference, UsageError), reference
        assert [d["kind"] for d in reference] == ["Deployment", "Job", "PodMonitor", "ConfigMap"]
        expected.append([_shape(doc) for doc in reference])
    counts = COUNTS.setdefault(flag, {"refused": 0, "rendered": 0})

    @settings(
        derandomize=True,
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(value=_values(flag, BENIGN[flag]))
    def check(value: str) -> None:
        start = time.monotonic()
        with memory_bound():  # at most 1 GiB more per example, or MemoryError fails the test
            result = _render(flag, value)
        assert time.monotonic() - start < MAX_SECONDS
        if isinstance(result, UsageError):
            counts["refused"] += 1
            assert _flag_named(flag, result), (value, str(result))
            assert "\n" not in result.message  # one line (a hint may follow on its own)
            return
        counts["rendered"] += 1
        assert [_shape(doc) for doc in result] in expected, value
        if counts["rendered"] <= VALIDATED:
            for doc in result:
                if doc["kind"] == "PodMonitor":
                    validate_pod_monitor(doc, KUBERNETES)
                else:
                    kubernetes_validate.validate(doc, KUBERNETES, strict=True)

    check()
    total = counts["refused"] + counts["rendered"]
    print(f"{flag}: {total} examples ({counts['refused']} refused, {counts['rendered']} rendered)")
    assert total >= EXAMPLES // 2  # Hypothesis ran the examples (it stops early on small spaces)


def test_refusal_through_the_command_line_is_exit_2_without_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    for flag in BENIGN:
        assert cli.main(_argv(flag, "x\n---\n{{ 7*7 }}")) == 2
        captured = capsys.readouterr()
        assert captured.out == "" and "Traceback" not in captured.err
        assert captured.err.startswith("error: "), captured.err
