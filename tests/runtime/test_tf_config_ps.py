"""Parameter-server training (tfgpu.contract.tf_config): TF_CONFIG with the roles chief, worker
and ps built from TF_GPU_PS, TF_GPU_PS_HOSTS, TF_GPU_CHIEF_HOST and TF_GPU_ROLE; each bad value
refused at the door (exit 78, the variable, the value, what is accepted, an example); a parameter
server without a GPU unless TF_GPU_PS_GPUS=true; `tfgpu server` for workers and parameter
servers only. The real-TensorFlow proof across containers is
tests/multiworker/test_parameter_servers.py."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tfgpu.act import peer_lost
from tfgpu.commands import server
from tfgpu.commands.run import prepare
from tfgpu.contract import tf_config
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import DERIVED, KIT_DEFAULT, parse_environment

from tests.runtime.conftest import SRC, clean_env

PS = {
    "TF_GPU_PS": "1",
    "TF_GPU_WORKERS": "2",
    "TF_GPU_WORKER_HOSTS": "t-worker-0-{index}.t",
    "TF_GPU_PS_HOSTS": "t-ps-0-{index}.t",
    "TF_GPU_CHIEF_HOST": "t-chief-0-0.t",
}
CLUSTER = {
    "chief": ["t-chief-0-0.t:2222"],
    "worker": ["t-worker-0-0.t:2222", "t-worker-0-1.t:2222"],
    "ps": ["t-ps-0-0.t:2222"],
}
EXAMPLES_RUN: list[int] = []


def _tfgpu(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    full = clean_env(**env)
    for name in ("TF_CONFIG", "JOB_COMPLETION_INDEX"):
        if name not in env:
            full.pop(name, None)
    full["PYTHONPATH"] = str(SRC)
    return subprocess.run(
        [sys.executable, "-m", "tfgpu", *args], env=full, capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("role", "index_env", "index"),
    [("chief", {}, 0), ("worker", {"JOB_COMPLETION_INDEX": "1"}, 1), ("ps", {}, 0)],
)
def test_each_role_gets_the_three_groups_and_its_task(
    role: str, index_env: dict[str, str], index: int
) -> None:
    env = {**PS, "TF_GPU_ROLE": role, "TF_GPU_WORKER_INDEX": "0", **index_env}
    if index_env:
        del env["TF_GPU_WORKER_INDEX"]
    s = parse_environment(env)
    assert s.tf_config is not None and s.tf_config.built
    assert json.loads(s.tf_config.value) == {
        "cluster": CLUSTER,
        "task": {"type": role, "index": index},
    }
    assert list(s.tf_config.cluster) == ["chief", "worker", "ps"]  # as `show` lists them
    assert s.sources["TF_CONFIG"].note == "built from TF_GPU_WORKERS, TF_GPU_PS"
    assert s.tf_config.explain().startswith(f"{role} {index} of 1 chief, 2 worker, 1 ps at ")


def test_the_multi_worker_cluster_is_unchanged_without_tf_gpu_ps() -> None:
    env = {k: PS[k] for k in ("TF_GPU_WORKERS", "TF_GPU_WORKER_HOSTS")}
    s = parse_environment({**env, "TF_GPU_ROLE": "worker", "JOB_COMPLETION_INDEX": "0"})
    assert s.tf_config is not None
    assert list(s.tf_config.cluster) == ["worker"]
    assert "TF_GPU_PS_GPUS" not in s.sources and not s.hide_gpus


@pytest.mark.parametrize(
    ("environ", "variable", "part"),
    [
        ({**PS, "TF_GPU_ROLE": "Chief"}, "TF_GPU_ROLE", "chief, worker, ps (lower case)"),
        ({**PS}, "TF_GPU_PS", "TF_GPU_ROLE is not set"),
        ({**PS, "TF_GPU_PS": "0", "TF_GPU_ROLE": "ps"}, "TF_GPU_PS", "from 1 to 1000"),
        ({**PS, "TF_GPU_PS": "x", "TF_GPU_ROLE": "ps"}, "TF_GPU_PS", "parameter servers"),
        ({**PS, "TF_GPU_PS_HOSTS": "", "TF_GPU_ROLE": "ps"}, "TF_GPU_PS", "PS_HOSTS is not set"),
        ({**PS, "TF_GPU_CHIEF_HOST": "", "TF_GPU_ROLE": "ps"}, "TF_GPU_PS", "HOST is not set"),
        (
            {**PS, "TF_GPU_CHIEF_HOST": "c-{index}.t", "TF_GPU_ROLE": "chief"},
            "TF_GPU_CHIEF_HOST",
            "one host name",
        ),
        (
            {**PS, "TF_GPU_PS_HOSTS": "a,b", "TF_GPU_ROLE": "chief"},
            "TF_GPU_PS_HOSTS",
            "2 host(s) for TF_GPU_PS=1",
        ),
        (
            {**PS, "TF_GPU_PS_HOSTS": "t-worker-0-1.t", "TF_GPU_ROLE": "chief"},
            "TF_GPU_PS_HOSTS",
            "'t-worker-0-1.t' is in TF_GPU_WORKER_HOSTS too",
        ),
        (
            {**PS, "TF_GPU_ROLE": "ps", "JOB_COMPLETION_INDEX": "1"},
            "JOB_COMPLETION_INDEX",
            "only 1 ps tasks",
        ),
        ({**PS, "TF_GPU_ROLE": "worker"}, "TF_GPU_WORKER_INDEX", "this worker's index"),
        (
            {**PS, "TF_GPU_ROLE": "chief", "TF_GPU_WORKER_INDEX": "1"},
            "TF_GPU_WORKER_INDEX",
            "0 for the chief",
        ),
        (
            {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "TF_GPU_PS_GPUS": "maybe"},
            "TF_GPU_PS_GPUS",
            "true/false",
        ),
        (
            {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "TF_GPU_REQUIRED": "true"},
            "TF_GPU_REQUIRED",
            "TF_GPU_PS_GPUS=true",
        ),
        # without TF_GPU_PS: the parameter-server variables would do nothing
        ({"TF_GPU_PS_HOSTS": "p-{index}"}, "TF_GPU_PS_HOSTS", "TF_GPU_PS is not set"),
        ({"TF_GPU_CHIEF_HOST": "c"}, "TF_GPU_CHIEF_HOST", "TF_GPU_PS is not set"),
        ({"TF_GPU_PS_GPUS": "true"}, "TF_GPU_PS_GPUS", "TF_GPU_PS is not set"),
        ({"TF_GPU_ROLE": "chief"}, "TF_GPU_ROLE", "every task is a worker"),
        ({"TF_GPU_ROLE": "worker"}, "TF_GPU_ROLE", "TF_GPU_WORKERS is not set"),
        ({"TF_GPU_PS": "1"}, "TF_GPU_PS", "TF_GPU_WORKERS is not set"),
    ],
)
def test_bad_values_name_the_variable(environ: dict[str, str], variable: str, part: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_environment({k: v for k, v in environ.items() if v})
    assert caught.value.variable == variable
    assert part in str(caught.value)
    assert "accepted:" in str(caught.value) and "example:" in str(caught.value)


def test_a_parameter_server_gets_no_gpu_unless_asked() -> None:
    s = parse_environment({**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps"})
    assert s.hide_gpus and s.visible_devices == []
    assert s.sources["CUDA_VISIBLE_DEVICES"].source == DERIVED
    assert s.sources["TF_GPU_PS_GPUS"].source == KIT_DEFAULT
    env = prepare(clean_env(**PS, TF_GPU_ROLE="ps", JOB_COMPLETION_INDEX="0"))
    assert env["CUDA_VISIBLE_DEVICES"] == ""
    assert "CUDA_VISIBLE_DEVICES" in env["TFGPU_DERIVED"].split(",")
    asked = parse_environment(
        {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "TF_GPU_PS_GPUS": "true"}
    )
    assert not asked.hide_gpus and asked.visible_devices is None
    theirs = parse_environment(
        {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "CUDA_VISIBLE_DEVICES": "1"}
    )
    assert not theirs.hide_gpus and theirs.visible_devices == ["1"]  # never replaced
    for role in ("chief", "worker"):
        other = parse_environment({**PS, "TF_GPU_ROLE": role, "TF_GPU_WORKER_INDEX": "0"})
        assert not other.hide_gpus and other.visible_devices is None


def test_run_gives_a_parameter_server_no_gpu_without_warning() -> None:
    r = _tfgpu(
        "run",
        "--",
        "sh",
        "-c",
        'echo "[$CUDA_VISIBLE_DEVICES]"',
        **PS,
        TF_GPU_ROLE="ps",
        JOB_COMPLETION_INDEX="0",
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]"
    assert "no GPU:" not in r.stderr  # by design on a parameter server: no warning
    assert "tfgpu: cluster: ps 0 of 1 chief, 2 worker, 1 ps" in r.stderr


def test_users_tf_config_with_any_roles_is_kept() -> None:
    for role in ("chief", "worker", "ps", "evaluator"):
        mine = {
            "cluster": {**CLUSTER, "evaluator": ["t-eval.t:2222"]},
            "task": {"type": role, "index": 0},
        }
        text = json.dumps(mine)
        s = parse_environment(
            {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "TF_CONFIG": text}
        )
        assert s.tf_config is not None and not s.tf_config.built
        assert s.tf_config.value == text and s.tf_config.task_type == role
        assert not s.hide_gpus  # the kit changes nothing of a user's own cluster
        assert any("TF_GPU_PS, TF_GPU_PS_HOSTS" in w for w in s.warnings)


def test_show_names_the_new_variables_and_exits_78_on_a_bad_one() -> None:
    r = _tfgpu("show", "--json", **PS, TF_GPU_ROLE="worker", JOB_COMPLETION_INDEX="1")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    for name in ("TF_GPU_PS", "TF_GPU_PS_HOSTS", "TF_GPU_CHIEF_HOST", "TF_GPU_ROLE"):
        assert doc["settings"][name]["value"] == {**PS, "TF_GPU_ROLE": "worker"}[name]
    assert doc["settings"]["TF_GPU_PS_GPUS"] == {"value": "false", "source": KIT_DEFAULT}
    assert doc["cluster"].startswith("worker 1 of 1 chief, 2 worker, 1 ps")
    bad = _tfgpu("show", **PS, TF_GPU_ROLE="boss")
    assert bad.returncode == 78
    assert "TF_GPU_ROLE='boss' is not valid" in bad.stderr and "Traceback" not in bad.stderr


@pytest.mark.parametrize(
    ("env", "part"),
    [
        ({**PS, "TF_GPU_ROLE": "chief"}, "this task is the chief, which runs your training"),
        ({}, "no cluster: neither TF_CONFIG nor TF_GPU_WORKERS is set"),
        (
            {
                "TF_GPU_WORKERS": "2",
                "TF_GPU_WORKER_HOSTS": "w-{index}",
                "JOB_COMPLETION_INDEX": "0",
            },
            "the cluster has no ps role",
        ),
        (
            {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", "TF_GPU_CONFIG": "off"},
            "there is no cluster to serve",
        ),
        (
            {"TF_CONFIG": json.dumps({"cluster": CLUSTER, "task": {"type": "evaluator"}})},
            "not a role of the cluster",
        ),
    ],
)
def test_server_refuses_without_a_worker_or_ps_task(env: dict[str, str], part: str) -> None:
    with pytest.raises(ConfigError) as caught:
        server.cluster_to_serve(dict(env))
    assert part in str(caught.value)
    r = _tfgpu("server", **env)
    assert r.returncode == 78 and part in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_server_serves_a_worker_and_hides_gpus_from_a_ps() -> None:
    worker = server.cluster_to_serve({**PS, "TF_GPU_ROLE": "worker", "JOB_COMPLETION_INDEX": "1"})
    assert (worker.task_type, worker.index, worker.address) == ("worker", 1, "t-worker-0-1.t:2222")
    environ = {**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps"}
    ps = server.cluster_to_serve(environ)
    assert ps.task_type == "ps" and environ["CUDA_VISIBLE_DEVICES"] == ""
    mine = json.dumps({"cluster": CLUSTER, "task": {"type": "ps", "index": 0}})
    users = server.cluster_to_serve({"TF_CONFIG": mine, "TF_GPU_CONFIG": "off"})
    assert users.task_type == "ps" and not users.built


def test_server_help() -> None:
    r = _tfgpu("server", "--help")
    assert r.returncode == 0 and "ParameterServerStrategy" in r.stdout


def test_lost_parameter_server_line_names_it() -> None:
    class UnavailableError(Exception):  # as tensorflow.errors names it
        pass

    error = UnavailableError(  # the chief's error when its parameter server was killed (measured)
        "failed to connect to all addresses; last error: UNKNOWN: ipv4:172.22.0.2:2222: Failed "
        "to connect to remote host: connect() timed out\nAdditional GRPC error information from "
        "remote target /job:ps/replica:0/task:0/device:CPU:0 while calling /tensorflow.eager."
    )
    assert peer_lost.is_peer_lost(UnavailableError, error)
    line = peer_lost.message(error, parameter_servers=True)
    assert line.startswith(
        "tfgpu: error: this parameter-server cluster lost the parameter server "
        "/job:ps/replica:0/task:0 (TensorFlow: UnavailableError)"
    )
    assert "multi-worker" not in line and "tf.train.Checkpoint" in line


hosts = st.from_regex(r"[a-z][a-z0-9-]{0,15}[a-z0-9]", fullmatch=True)


@settings(derandomize=True, max_examples=60, deadline=None)
@given(
    workers=st.integers(1, 20),
    ps=st.integers(1, 8),
    role=st.sampled_from(tf_config.ROLES),
    data=st.data(),
    port=st.integers(1, 65535),
    prefix=hosts,
)
def test_built_config_is_one_the_user_check_accepts(
    workers: int, ps: int, role: str, data: st.DataObject, port: int, prefix: str
) -> None:
    """Every parameter-server TF_CONFIG the kit builds passes its own check of a user's TF_CONFIG,
    names every task once and puts this task at its index in its role."""
    EXAMPLES_RUN.append(1)
    count = {"chief": 1, "worker": workers, "ps": ps}[role]
    index = data.draw(st.integers(0, count - 1))
    s = parse_environment(
        {
            "TF_GPU_PS": str(ps),
            "TF_GPU_WORKERS": str(workers),
            "TF_GPU_WORKER_HOSTS": f"{prefix}-worker-{{index}}.svc",
            "TF_GPU_PS_HOSTS": ",".join(f"{prefix}-ps-{i}.svc" for i in range(ps)),
            "TF_GPU_CHIEF_HOST": f"{prefix}-chief.svc",
            "TF_GPU_ROLE": role,
            "JOB_COMPLETION_INDEX": str(index),
            "TF_GPU_WORKER_PORT": str(port),
        }
    )
    assert s.tf_config is not None
    again = tf_config.parse_user_tf_config(s.tf_config.value)
    assert again.cluster == s.tf_config.cluster
    assert (again.task_type, again.index) == (role, index)
    assert again.address == f"{prefix}-{role}{'' if role == 'chief' else f'-{index}'}.svc:{port}"
    assert [len(again.cluster[r]) for r in tf_config.ROLES] == [1, workers, ps]
    assert len(again.peers) + 1 == 1 + workers + ps
    assert s.hide_gpus == (role == "ps")


@settings(derandomize=True, max_examples=80, deadline=None)
@given(
    name=st.sampled_from(["TF_GPU_PS", "TF_GPU_ROLE", "TF_GPU_PS_HOSTS", "TF_GPU_CHIEF_HOST"]),
    value=st.text(min_size=1, max_size=30),
)
def test_any_text_is_accepted_or_refused_with_the_message(name: str, value: str) -> None:
    """Whatever a variable holds, the door answers with a settings object or a ConfigError that
    names a variable of the contract: never another exception."""
    EXAMPLES_RUN.append(1)
    try:
        parse_environment({**PS, "JOB_COMPLETION_INDEX": "0", "TF_GPU_ROLE": "ps", name: value})
    except ConfigError as e:
        assert e.variable.startswith(("TF_GPU_", "JOB_COMPLETION_INDEX"))
        assert "accepted:" in str(e)


def test_hypothesis_examples_ran() -> None:
    print(f"parameter-server tf_config property examples: {len(EXAMPLES_RUN)}")
    assert len(EXAMPLES_RUN) >= 100 or not EXAMPLES_RUN


def test_the_chief_refuses_a_second_index_from_its_indexed_job() -> None:
    env = {**PS, "TF_GPU_ROLE": "chief"}
    with pytest.raises(ConfigError) as caught:
        parse_environment({**env, "JOB_COMPLETION_INDEX": "1"})
    assert caught.value.variable == "JOB_COMPLETION_INDEX" and caught.value.example == "0"
    assert "a second chief" in str(caught.value)
    assert parse_environment({**env, "JOB_COMPLETION_INDEX": "0"}).tf_config is not None


# role (job) names, and whether TensorFlow 2.21's server starts with one (measured below)
ROLE_NAMES = [("worker-1", False), ("1w", False), ("Worker", True)]


@pytest.mark.parametrize(("role", "starts"), [*ROLE_NAMES, ("wörker", False), ("_w", False)])
def test_a_role_name_tensorflow_aborts_on_is_refused(role: str, starts: bool) -> None:
    value = json.dumps({"cluster": {role: ["h0:2222"]}, "task": {"type": role, "index": 0}})
    if starts:
        assert parse_environment({"TF_CONFIG": value}).tf_config is not None
        return
    with pytest.raises(ConfigError, match="a role name TensorFlow aborts on"):
        parse_environment({"TF_CONFIG": value})


@pytest.mark.parametrize(("role", "starts"), ROLE_NAMES)
def test_the_role_rule_is_tensorflows(role: str, starts: bool) -> None:
    """The rule above against real TensorFlow (tensorflow-cpu of .venv): its server starts with
    the names the kit accepts and aborts (SIGABRT) on those it refuses."""
    code = (
        "import sys, tensorflow as tf; role = sys.argv[1]; "
        "tf.distribute.Server(tf.train.ClusterSpec({role: ['localhost:0']}), job_name=role, "
        "task_index=0, protocol='grpc', start=True); print('STARTED')"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, role],
        env=clean_env(TF_GPU_CONFIG="off"), capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert ("STARTED" in done.stdout) == starts, done.stderr[-2000:]
    if not starts:
        assert done.returncode == -6 and "ParseFullName" in done.stderr
