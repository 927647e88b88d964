"""Multi-worker training (tfgpu.contract.tf_config): TF_CONFIG built from TF_GPU_WORKERS* and the
Indexed Job's JOB_COMPLETION_INDEX, a user's TF_CONFIG validated and never replaced,
TF_USE_LEGACY_KERAS checked; `tfgpu run` and `tfgpu show` report it. The real-TensorFlow proof
across containers is tests/multiworker/."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tfgpu.act import peer_lost
from tfgpu.commands.show import show
from tfgpu.contract import tf_config
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import DERIVED, parse_environment

from tests.runtime.conftest import SRC, clean_env

BASE = {"TF_GPU_WORKERS": "3", "TF_GPU_WORKER_HOSTS": "train-{index}.train-workers"}
EXAMPLES_RUN: list[int] = []


def _env(**extra: str) -> dict[str, str]:
    env = clean_env(**extra)
    for name in ("TF_CONFIG", "JOB_COMPLETION_INDEX", "TF_USE_LEGACY_KERAS"):
        if name not in extra:
            env.pop(name, None)
    env["PYTHONPATH"] = str(SRC)
    return env


def test_built_from_the_indexed_jobs_index() -> None:
    s = parse_environment({**BASE, "JOB_COMPLETION_INDEX": "2"})
    assert s.tf_config is not None and s.tf_config.built
    assert json.loads(s.tf_config.value) == {
        "cluster": {
            "worker": [
                "train-0.train-workers:2222",
                "train-1.train-workers:2222",
                "train-2.train-workers:2222",
            ]
        },
        "task": {"type": "worker", "index": 2},
    }
    assert s.sources["TF_CONFIG"].source == DERIVED
    assert s.sources["TF_GPU_WORKER_INDEX"].note == "from JOB_COMPLETION_INDEX"
    assert s.sources["TF_GPU_WORKER_PORT"].value == "2222"


def test_explicit_index_list_and_port() -> None:
    s = parse_environment(
        {
            "TF_GPU_WORKERS": "2",
            "TF_GPU_WORKER_HOSTS": "a, b",
            "TF_GPU_WORKER_INDEX": "1",
            "TF_GPU_WORKER_PORT": "5000",
            "JOB_COMPLETION_INDEX": "0",  # the explicit index wins
        }
    )
    assert s.tf_config is not None
    assert s.tf_config.address == "b:5000" and s.tf_config.peers == ["a:5000"]


def test_off_without_workers() -> None:
    assert parse_environment({"JOB_COMPLETION_INDEX": "3"}).tf_config is None


BAD = [
    ({**BASE, "TF_GPU_WORKERS": "0", "JOB_COMPLETION_INDEX": "0"}, "TF_GPU_WORKERS", "'0'"),
    ({**BASE, "TF_GPU_WORKERS": "two", "JOB_COMPLETION_INDEX": "0"}, "TF_GPU_WORKERS", "'two'"),
    ({**BASE, "JOB_COMPLETION_INDEX": "3"}, "JOB_COMPLETION_INDEX", "only 3 workers"),
    ({**BASE, "TF_GPU_WORKER_INDEX": "-1"}, "TF_GPU_WORKER_INDEX", "from 0 to 2"),
    ({**BASE}, "TF_GPU_WORKER_INDEX", "JOB_COMPLETION_INDEX is set"),
    (
        {**BASE, "JOB_COMPLETION_INDEX": "0", "TF_GPU_WORKER_PORT": "70000"},
        "TF_GPU_WORKER_PORT",
        "",
    ),
    (
        {**BASE, "JOB_COMPLETION_INDEX": "0", "TF_GPU_WORKER_HOSTS": "w-{index}-{index}"},
        "TF_GPU_WORKER_HOSTS",
        "one {index}",
    ),
    (
        {**BASE, "JOB_COMPLETION_INDEX": "0", "TF_GPU_WORKER_HOSTS": "w_{index}"},
        "TF_GPU_WORKER_HOSTS",
        "not a host name",
    ),
    (
        {**BASE, "JOB_COMPLETION_INDEX": "0", "TF_GPU_WORKER_HOSTS": "a,b"},
        "TF_GPU_WORKER_HOSTS",
        "2 host(s) for TF_GPU_WORKERS=3",
    ),
    ({"TF_GPU_WORKERS": "2", "JOB_COMPLETION_INDEX": "0"}, "TF_GPU_WORKERS", "HOSTS is not set"),
    ({"TF_GPU_WORKER_PORT": "2222"}, "TF_GPU_WORKER_PORT", "TF_GPU_WORKERS is not set"),
    ({"TF_CONFIG": "{not json"}, "TF_CONFIG", "not JSON"),
    (
        {"TF_CONFIG": '{"cluster":{"worker":["a:1"]},"task":{"type":"worker","index":1}}'},
        "TF_CONFIG",
        "outside",
    ),
    (
        {"TF_CONFIG": '{"cluster":{"worker":["a"]},"task":{"type":"worker","index":0}}'},
        "TF_CONFIG",
        "host:port",
    ),
    (
        {"TF_CONFIG": '{"cluster":{"worker":["a:1"]},"task":{"type":"chief","index":0}}'},
        "TF_CONFIG",
        "not a role",
    ),
    ({"TF_USE_LEGACY_KERAS": "yes"}, "TF_USE_LEGACY_KERAS", "silently"),
]


@pytest.mark.parametrize(("environ", "variable", "part"), BAD)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str, part: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_environment(environ)
    message = str(caught.value)
    assert caught.value.variable == variable
    assert message.startswith(f"{variable}=") and "accepted:" in message and "example:" in message
    assert part in message


def test_users_tf_config_is_validated_and_kept() -> None:
    mine = '{"cluster":{"worker":["x:1","y:1"]},"task":{"type":"worker","index":1}}'
    s = parse_environment({**BASE, "JOB_COMPLETION_INDEX": "0", "TF_CONFIG": mine})
    assert s.tf_config is not None and not s.tf_config.built and s.tf_config.value == mine
    assert s.sources["TF_CONFIG"].note == "yours: validated, never replaced"
    assert any("not used: TF_CONFIG is set" in w for w in s.warnings)
    out: dict[str, str] = {"TF_CONFIG": mine}
    from tfgpu.act.apply import _set_tf_config

    _set_tf_config(s, {}, out, io.StringIO())
    assert out["TF_CONFIG"] == mine


def test_a_tf_config_tfgpu_run_built_is_rebuilt() -> None:
    old = '{"cluster":{"worker":["x:1"]},"task":{"type":"worker","index":0}}'
    environ = {**BASE, "JOB_COMPLETION_INDEX": "1", "TF_CONFIG": old, "TFGPU_DERIVED": "TF_CONFIG"}
    s = parse_environment(environ)
    assert s.tf_config is not None and s.tf_config.built and s.tf_config.index == 1


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 40),
    data=st.data(),
    port=st.integers(1, 65535),
    prefix=st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True),
)
def test_built_config_is_one_the_user_check_accepts(
    workers: int, data: st.DataObject, port: int, prefix: str
) -> None:
    """Every TF_CONFIG the kit builds passes its own check of a user's TF_CONFIG, names every
    worker once and puts this worker at its index."""
    EXAMPLES_RUN.append(1)
    index = data.draw(st.integers(0, workers - 1))
    s = parse_environment(
        {
            "TF_GPU_WORKERS": str(workers),
            "TF_GPU_WORKER_HOSTS": f"{prefix}-{{index}}.svc",
            "JOB_COMPLETION_INDEX": str(index),
            "TF_GPU_WORKER_PORT": str(port),
        }
    )
    assert s.tf_config is not None
    again = tf_config.parse_user_tf_config(s.tf_config.value)
    assert again.cluster == s.tf_config.cluster and again.index == index
    assert again.address == f"{prefix}-{index}.svc:{port}"
    assert len(set(again.cluster["worker"])) == workers == len(again.peers) + 1


def test_hypothesis_examples_ran() -> None:
    # recorded for the report: the property test above runs its whole budget
    print(f"tf_config property examples: {len(EXAMPLES_RUN)}")
    assert len(EXAMPLES_RUN) >= 50 or not EXAMPLES_RUN


def test_run_sets_tf_config_and_show_below_calls_it_derived() -> None:
    env = _env(**BASE, JOB_COMPLETION_INDEX="1")
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "tfgpu",
            "run",
            "--",
            sys.executable,
            "-m",
            "tfgpu",
            "show",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    assert "tfgpu: cluster: worker 1 of 3 worker at train-1.train-workers:2222" in r.stderr
    assert "peers: train-0.train-workers:2222, train-2.train-workers:2222" in r.stderr
    doc = json.loads(r.stdout)
    assert doc["settings"]["TF_CONFIG"]["source"] == DERIVED
    assert json.loads(doc["settings"]["TF_CONFIG"]["value"])["task"]["index"] == 1
    assert doc["cluster"].startswith("worker 1 of 3")


def test_run_refuses_a_bad_index_before_starting_anything() -> None:
    env = _env(**BASE, JOB_COMPLETION_INDEX="7")
    r = subprocess.run(
        [sys.executable, "-m", "tfgpu", "run", "--", "sh", "-c", "echo started"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 78
    assert "started" not in r.stdout
    assert "JOB_COMPLETION_INDEX='7' is not valid (only 3 workers)" in r.stderr


def test_run_keeps_the_users_tf_config() -> None:
    mine = '{"cluster":{"worker":["x:1","y:1"]},"task":{"type":"worker","index":0}}'
    env = _env(TF_CONFIG=mine)
    r = subprocess.run(
        [sys.executable, "-m", "tfgpu", "run", "--", "sh", "-c", 'printf %s "$TF_CONFIG"'],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout == mine
    assert "your TF_CONFIG, validated" in r.stderr


def test_show_says_which_keras() -> None:
    out = io.StringIO()
    assert show(environ={"TF_USE_LEGACY_KERAS": "1"}, out=out) == 0
    assert "keras: tf-keras" in out.getvalue()
    out = io.StringIO()
    assert show(environ={}, out=out) == 0
    assert "TF_USE_LEGACY_KERAS=1 for tf-keras" in out.getvalue()


def test_run_warns_when_tf_keras_is_asked_for_but_missing(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "tfgpu", "run", "--", "sh", "-c", "echo ran"],
        env=_env(TF_USE_LEGACY_KERAS="1"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 0 and r.stdout.strip() == "ran"
    assert "TF_USE_LEGACY_KERAS asks for tf-keras (Keras 2), which is not installed" in r.stderr


def test_peer_lost_line_names_the_lost_task() -> None:
    class UnavailableError(Exception):  # as tensorflow.errors names it
        pass

    error = UnavailableError(
        "Collective ops is aborted by: Error reported from /job:worker/task:1: The following "
        "tasks are unhealthy (stopped sending heartbeats):\n/job:worker/replica:0/task:1\nThe "
        "tasks have crashed."
    )
    assert peer_lost.is_peer_lost(UnavailableError, error)
    assert not peer_lost.is_peer_lost(ValueError, ValueError("unhealthy"))
    line = peer_lost.message(error)
    assert line.startswith(
        "tfgpu: error: this multi-worker group lost the peer /job:worker/replica:0/task:1"
    )
    assert "BackupAndRestore" in line


def test_the_hook_sets_the_built_tf_config_and_keeps_the_users(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """configure_tensorflow (the hook, after `import tensorflow`): a built TF_CONFIG goes into the
    process environment, where the strategy reads it; a user's is left as it is; and the
    lost-peer line is installed as sys.excepthook."""
    from tfgpu.act.apply import configure_tensorflow

    from tests.runtime.tf_standin import standin_tf

    monkeypatch.setattr(sys, "excepthook", sys.excepthook)  # restored after the test
    out: dict[str, str] = {}
    err = io.StringIO()
    environ = {**BASE, "JOB_COMPLETION_INDEX": "0"}
    configure_tensorflow(standin_tf(gpus=0), environ, env_out=out, stderr=err)
    assert json.loads(out["TF_CONFIG"])["task"] == {"type": "worker", "index": 0}
    assert "tfgpu: cluster: worker 0 of 3" in err.getvalue()
    assert sys.excepthook.__module__ == "tfgpu.act.peer_lost"
    mine = '{"cluster":{"worker":["x:1"]},"task":{"type":"worker","index":0}}'
    out = {"TF_CONFIG": mine}
    configure_tensorflow(standin_tf(gpus=0), {"TF_CONFIG": mine}, env_out=out, stderr=err)
    assert out["TF_CONFIG"] == mine


def test_show_json_has_one_shape_ok_or_not() -> None:
    good, bad = io.StringIO(), io.StringIO()
    assert show(as_json=True, environ={**BASE, "JOB_COMPLETION_INDEX": "0"}, out=good) == 0
    assert show(as_json=True, environ={**BASE, "JOB_COMPLETION_INDEX": "9"}, out=bad) == 78
    ok, error = json.loads(good.getvalue()), json.loads(bad.getvalue())
    assert set(ok) == set(error)
    assert ok["cluster"].startswith("worker 0 of 3") and error["cluster"] is None
