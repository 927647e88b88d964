"""The contract's inputs on the build side: `build.py k8s --env` and `build.py plan` answer each
case of the contract's inputs as the door (`tfgpu run`) does, and the three agree on every value
Hypothesis generates for the recovery, worker, Keras and metrics-address variables (item 5):
the same verdict, the same variable named.

k8s is asked through pod_env of tfgpu_kit.k8s.env, the code behind `--env` (the whole command adds
refusals of its own that no container has: a /livez probe on a loopback address, --workers' owned
names)."""

from __future__ import annotations

import string
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from tfgpu.contract import tf_config
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import parse_environment

from tests.scale.helpers import errors, plan_json, write
from tests.scale.test_plan_compose import gpu, service
from tests.scale.test_plan_kube import container, job
from tfgpu_kit import cli
from tfgpu_kit.k8s.env import pod_env
from tfgpu_kit.k8s.workers import MAX_WORKERS
from tfgpu_kit.matrix import local_driver
from tfgpu_kit.shared.errors import UsageError

IMAGE = "registry.example/tfgpu/tensorflow:2.21.0-gpu"
HUGE = "9" * 5000
BASE = {"TF_GPU_MEM_LIMIT": "4GiB", "TF_GPU_METRICS_PORT": "9401"}
WORKERS = {"TF_GPU_WORKERS": "2", "TF_GPU_WORKER_HOSTS": "a,b", "TF_GPU_WORKER_INDEX": "0"}


@pytest.fixture(autouse=True)
def no_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(local_driver, "gpu_memory", lambda missing: (None, "no driver (test)"))


def k8s(capsys: pytest.CaptureFixture[str], *flags: str) -> tuple[int, str]:
    code = cli.main(["k8s", "--image", IMAGE, *flags])
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def plan_compose(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], services: dict[str, Any]
) -> tuple[int, list[str]]:
    path = write(tmp_path, "compose.yaml", {"services": services})
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    return code, errors(report)


# --- k8s ----------------------------------------------------------------------------------------


def test_k8s_refuses_two_workers_with_one_index(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: rendered; run, worker 0 exited 1 and worker 1 hung."""
    code, err = k8s(capsys, "--kind", "job", "--workers", "2", "--env", "JOB_COMPLETION_INDEX=0")
    assert code == 2 and "--env JOB_COMPLETION_INDEX='0'" in err and "one index" in err


def test_k8s_names_the_flag_that_owns_a_workers_variable(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Before: "(TF_GPU_WORKER_HOSTS is not set)" for a variable --workers sets itself."""
    code, err = k8s(capsys, "--kind", "job", "--workers", "2", "--env", "TF_GPU_WORKERS=3")
    assert code == 2 and "--workers sets TF_GPU_WORKERS" in err and "is not set" not in err


def test_one_bound_for_workers_said_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert MAX_WORKERS == tf_config.MAX_WORKERS
    code, err = k8s(capsys, "--kind", "job", "--workers", str(tf_config.MAX_WORKERS + 1))
    assert code == 2 and f"from 1 to {tf_config.MAX_WORKERS}" in err
    with pytest.raises(SystemExit):
        cli.main(["k8s", "--help"])
    assert f"1 to {tf_config.MAX_WORKERS}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize(
    ("item", "words"),
    [
        ("TF_GPU_MEM_LMIT=4GiB", "did you mean TF_GPU_MEM_LIMIT?"),
        ("tf_gpu_mem_limit=4GiB", "names are case-sensitive; did you mean TF_GPU_MEM_LIMIT?"),
        ("TF_USE_LEGACY_KERA=1", "did you mean TF_USE_LEGACY_KERAS?"),
    ],
)
def test_k8s_refuses_a_misspelt_name(
    capsys: pytest.CaptureFixture[str], item: str, words: str
) -> None:
    """Before: rendered without a word; the pod ran uncapped."""
    code, err = k8s(capsys, "--env", item)
    assert code == 2 and words in err and f"--env {item.partition('=')[0]}=" in err


def test_k8s_warns_of_a_stranger_with_no_close_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, err = k8s(capsys, "--env", "TF_GPU_SOMETHING_NEW=1")
    assert code == 0 and "TF_GPU_SOMETHING_NEW is ignored" in " ".join(err.split())


# --- plan ---------------------------------------------------------------------------------------


def test_plan_accepts_a_compose_worker_that_sets_its_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: refused, as if JOB_COMPLETION_INDEX were not set (plan never read it)."""
    env = {**BASE, **WORKERS, "TF_GPU_WORKER_INDEX": "", "JOB_COMPLETION_INDEX": "1"}
    code, found = plan_compose(tmp_path, capsys, {"w1": service(env, gpu("0"))})
    assert code == 0, found


@pytest.mark.parametrize("index", ["TF_GPU_WORKER_INDEX", "JOB_COMPLETION_INDEX"])
def test_plan_refuses_replicas_that_would_be_one_worker(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], index: str
) -> None:
    env = {**BASE, **WORKERS, "TF_GPU_WORKER_INDEX": "", index: "0"}
    code, found = plan_compose(
        tmp_path, capsys, {"w": service(env, {**gpu(count=1), "replicas": 2})}
    )
    assert code == 1 and any(f"{index}='0' gives them all one index" in e for e in found), found


def test_plan_refuses_an_indexed_job_whose_container_sets_the_index(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: `plan` said OK for the manifest of `k8s --workers 2 --env JOB_COMPLETION_INDEX=0`;
    Kubernetes keeps a container's own JOB_COMPLETION_INDEX, so both pods were worker 0."""
    env = {**BASE, **WORKERS, "TF_GPU_WORKER_INDEX": "", "JOB_COMPLETION_INDEX": "0"}
    doc = job("train", container({k: v for k, v in env.items() if v}), parallelism=2)
    doc["spec"]["completions"] = 2
    doc["spec"]["completionMode"] = "Indexed"
    path = write(tmp_path, "job.yaml", doc)
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert code == 1 and any("gives them all one index" in e for e in errors(report))
    del doc["spec"]["template"]["spec"]["containers"][0]["env"][-1]  # Kubernetes numbers them
    path = write(tmp_path, "job.yaml", doc)
    code, report = plan_json(capsys, [path], "--gpu-memory", "16GiB")
    assert code == 0, errors(report)


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({**WORKERS, "TF_GPU_WORKER_PORT": "9401"}, "TF_GPU_WORKER_PORT"),
        ({"TF_USE_LEGACY_KERAS": "1 "}, "TF_USE_LEGACY_KERAS"),
        ({"TF_GPU_MEM_LMIT": "4GiB"}, "TF_GPU_MEM_LMIT"),
        ({"tf_gpu_mem_limit": "4GiB"}, "tf_gpu_mem_limit"),
        ({**WORKERS, "TF_GPU_WORKERS": HUGE}, "TF_GPU_WORKERS"),
        ({"TF_GPU_METRICS_PORT": HUGE}, "TF_GPU_METRICS_PORT"),
        ({"TF_CPU_VIRTUAL_DEVICES": HUGE}, "TF_CPU_VIRTUAL_DEVICES"),
        ({"TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_AFTER": HUGE}, "TF_GPU_RECOVER_AFTER"),
        ({"TF_CONFIG": "[" * 50_000}, "TF_CONFIG"),
    ],
)
def test_plan_refuses_what_the_door_refuses_without_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], env: dict[str, str], variable: str
) -> None:
    """Before: passed (the port pair, ' 1', the typos) or a traceback (the 4,300-digit values:
    plan/budget.py catches ConfigError only, and int() raised a plain ValueError)."""
    code, found = plan_compose(tmp_path, capsys, {"s": service({**BASE, **env}, gpu("0"))})
    assert code == 1 and any(f"{variable}=" in e for e in found), found


def test_plan_reads_a_long_device_list_in_linear_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: the duplicate check was quadratic (a 729 KB compose file took plan 51 s)."""
    env = {**BASE, "CUDA_VISIBLE_DEVICES": ",".join(map(str, range(60_000)))}
    start = time.perf_counter()
    code, _ = plan_compose(tmp_path, capsys, {"s": service(env, gpu("0"))})
    assert code in (0, 1) and time.perf_counter() - start < 10


# --- the three agree (Hypothesis) ------------------------------------------------------------

EXAMPLES = 60  # per variable: 11 variables x 60 in about 20 s (three readers each)
RAN: dict[str, int] = {}
REFUSED: dict[str, int] = {}
# what each variable needs around it to mean something
CONTEXT: dict[str, dict[str, str]] = {
    "TF_GPU_RECOVER_AT": BASE,
    "TF_GPU_RECOVER_AFTER": {**BASE, "TF_GPU_RECOVER_AT": "95%"},
    "TF_GPU_RECOVER_ACTION": {**BASE, "TF_GPU_RECOVER_AT": "95%"},
    "TF_GPU_WORKERS": {**BASE, **WORKERS},
    "TF_GPU_WORKER_HOSTS": {**BASE, **WORKERS},
    "TF_GPU_WORKER_PORT": {**BASE, **WORKERS},
    "TF_GPU_WORKER_INDEX": {**BASE, **WORKERS},
    "JOB_COMPLETION_INDEX": {**BASE, **WORKERS, "TF_GPU_WORKER_INDEX": ""},
    "TF_USE_LEGACY_KERAS": BASE,
    "TF_GPU_METRICS_ADDR": BASE,
    "TF_CONFIG": BASE,
}
INTERESTING = [
    "0", "1", "2", "3", "95%", "100%", "0.5%", "5m", "7d", "8d", "1h", "300s", "exit", "report",
    "a,b", "a,a", "train-{index}", "train-{idx}", "tráin-0,b", "9401", "2222", "65536", "00001",
    "1 ", " 1", "true", "True", "TRUE", "false", "127.0.0.1", "::", "::1", "0.0.0.0", "localhost",
    '{"cluster":{"worker":["a:2222","b:2222"]},"task":{"type":"worker","index":1}}',
    '{"cluster":{"worker":["a:9401"]},"task":{"type":"worker","index":0}}',
    '{"cluster":{"worker":["a:2222","a:2222"]},"task":{"type":"worker","index":0}}',
    '{"cluster":{"worker":["a:2222"]},"task":{"type":"worker","index":"0"}}',
    HUGE, "-1", "1e3", "٣", "²",
]  # fmt: skip
# printable (k8s refuses control characters in --env for every variable), no `$` (compose would
# interpolate it: plan then reports the value as unknown)
ALPHABET = st.characters(
    whitelist_categories=("L", "N", "P", "S", "Zs"), blacklist_characters="$"
) | st.sampled_from(list(string.digits + ",:%{}. "))
TEXT = st.sampled_from(INTERESTING) | st.text(ALPHABET, max_size=12)
USER_TF_CONFIG = '{"cluster":{"worker":["a:2222","b:2222"]},"task":{"type":"worker","index":1}}'
# values each variable accepts in its context, so that both verdicts are asked
VALID = {
    "TF_GPU_RECOVER_AT": ["95%", "50 %", "100%", "1%"],
    "TF_GPU_RECOVER_AFTER": ["5m", "7d", "300", "1h", "1s", "0005M"],
    "TF_GPU_RECOVER_ACTION": ["exit", "report", "EXIT "],
    "TF_GPU_WORKERS": ["2", " 2 ", "02"],
    "TF_GPU_WORKER_HOSTS": ["a,b", "x-{index}", "w-{index}.svc", "A, b"],
    "TF_GPU_WORKER_PORT": ["2222", "3000", "65535", "1"],
    "TF_GPU_WORKER_INDEX": ["0", "1", "01"],
    "JOB_COMPLETION_INDEX": ["0", "1"],
    "TF_USE_LEGACY_KERAS": ["1", "true", "True", "0", "false", "False"],
    "TF_GPU_METRICS_ADDR": ["127.0.0.1", "::", "0.0.0.0", "::1", "10.0.0.1"],
    "TF_CONFIG": [USER_TF_CONFIG, USER_TF_CONFIG.replace('"index":1', '"index":0')],
}


def door(env: dict[str, str]) -> str | None:
    """None: accepted; else the variable the refusal names."""
    try:
        parse_environment(env)
    except ConfigError as error:
        return error.variable
    return None


def k8s_verdict(env: dict[str, str]) -> str | None:
    """None: accepted; else the message, which must name the door's variable."""
    try:
        pod_env({}, [f"{k}={v}" for k, v in env.items()], 1)
    except UsageError as error:
        return str(error)
    return None


def plan_verdict(path: Path, env: dict[str, str], capsys: pytest.CaptureFixture[str]) -> list[str]:
    """The errors of `plan` on a compose file of one service with `env` ([]: accepted)."""
    path.write_text(
        yaml.safe_dump({"services": {"s": service(env, gpu("0"))}}, allow_unicode=True),
        encoding="utf-8",
    )
    capsys.readouterr()
    code, report = plan_json(capsys, [str(path)], "--gpu-memory", "16GiB")
    assert (code == 0) == (not errors(report))
    return errors(report)


@pytest.mark.parametrize("variable", sorted(CONTEXT))
def test_door_k8s_and_plan_agree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], variable: str
) -> None:
    path = tmp_path / "compose.yaml"

    @given(value=st.sampled_from(VALID[variable]) | TEXT)
    @hypothesis_settings(
        max_examples=EXAMPLES,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    def agree(value: str) -> None:
        env = {k: v for k, v in {**CONTEXT[variable], variable: value}.items() if v}
        RAN[variable] = RAN.get(variable, 0) + 1
        named = door(env)
        k8s_said = k8s_verdict(env)
        plan_said = plan_verdict(path, env, capsys)
        assert (k8s_said is None) == (named is None), (env, named, k8s_said)
        assert (not plan_said) == (named is None), (env, named, plan_said)
        if named is not None:
            REFUSED[variable] = REFUSED.get(variable, 0) + 1
            assert f"--env {named}=" in str(k8s_said), (named, k8s_said)
            assert any(f"{named}=" in e for e in plan_said), (named, plan_said)

    agree()


def test_examples_ran() -> None:
    """The number of examples, for the record (pytest -s prints it)."""
    print(f"contract agreement examples: {sum(RAN.values())} ({RAN}); refused: {REFUSED}")
    assert set(RAN) == set(CONTEXT) and all(n >= EXAMPLES // 2 for n in RAN.values()), RAN
    # both verdicts were asked of every variable: some values accepted, some refused
    assert all(0 < REFUSED.get(name, 0) < RAN[name] for name in CONTEXT), REFUSED
