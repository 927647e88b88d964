"""The contract's inputs answered rightly or refused clearly at the door.

Each case (silent answers, tracebacks, unclear refusals, the security findings on the inputs) as
a regression test; each docstring names the wrong answer the test rules out."""

from __future__ import annotations

import io
import json
import time

import pytest
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from tfgpu.act import jupyter_cull
from tfgpu.commands import show
from tfgpu.contract import recovery_rule, tf_config
from tfgpu.contract.errors import ConfigError, printable
from tfgpu.contract.settings import parse_environment, parse_visible_devices
from tfgpu.machine import driver, nvml

CAP = {"TF_GPU_MEM_LIMIT": "4GiB"}
WORKERS = {"TF_GPU_WORKERS": "2", "TF_GPU_WORKER_HOSTS": "a,b", "TF_GPU_WORKER_INDEX": "0"}
HUGE = "9" * 5000  # over CPython's 4,300-digit limit of int(): a ValueError, not a ConfigError


def refusal(env: dict[str, str]) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_environment(env)
    error = info.value
    assert type(error) is ConfigError or isinstance(error, ConfigError)
    message = str(error)
    assert "accepted:" in message and "example:" in message, message
    assert message.isprintable(), message  # one line, nothing a terminal would act on
    return error


# --- Keras and allow-growth: TensorFlow's own verdict, or a refusal ----------------------------


# tensorflow/api_template.__init__.py: `os.environ.get("TF_USE_LEGACY_KERAS") in ("true", "True",
# "1")` (tfgpu.contract.tf_config's module doc cites the commit).
def tensorflow_reads_legacy(value: str) -> bool:
    return value in ("true", "True", "1")


@pytest.mark.parametrize("value", ["1 ", " 1", "true ", "\t1", "True\n", "1\u00a0"])
def test_legacy_keras_with_spaces_is_refused_not_reported_as_tf_keras(value: str) -> None:
    """Before: stripped, so `tfgpu show` said tf-keras while TensorFlow gave Keras 3."""
    error = refusal({"TF_USE_LEGACY_KERAS": value})
    assert error.variable == "TF_USE_LEGACY_KERAS"
    if value.strip() in ("1", "true", "True"):
        assert "exact text" in error.why


@given(st.text(max_size=8) | st.sampled_from(["1", "true", "True", "0", "false", "False"]))
@example(" 1")
@example("1 ")
@hypothesis_settings(max_examples=300, derandomize=True, database=None)
def test_legacy_keras_verdict_is_tensorflows_whenever_accepted(value: str) -> None:
    """Whatever is accepted means what TensorFlow makes of it; nothing else is accepted."""
    try:
        settings = parse_environment({"TF_USE_LEGACY_KERAS": value})
    except ConfigError as error:
        assert error.variable == "TF_USE_LEGACY_KERAS"
        return
    if not value.strip():  # empty counts as unset: TensorFlow's off
        assert not settings.legacy_keras
        return
    assert settings.legacy_keras == tensorflow_reads_legacy(value)


@pytest.mark.parametrize("value", ["false ", " true", "true\n"])
def test_allow_growth_with_spaces_is_refused_by_the_same_principle(value: str) -> None:
    error = refusal({"TF_FORCE_GPU_ALLOW_GROWTH": value})
    assert error.variable == "TF_FORCE_GPU_ALLOW_GROWTH"
    assert "exact text, spaces included" in error.why


# --- workers ----------------------------------------------------------------------------------


def test_worker_port_equal_to_the_metrics_port_is_refused_at_the_door() -> None:
    """Before: accepted; training died of "Could not start gRPC server" with no word."""
    env = {**WORKERS, "TF_GPU_WORKER_PORT": "9401", "TF_GPU_METRICS_PORT": "9401"}
    error = refusal(env)
    assert error.variable == "TF_GPU_WORKER_PORT" and "TF_GPU_METRICS_PORT is 9401" in error.why
    default = refusal({**WORKERS, "TF_GPU_METRICS_PORT": "2222"})  # the default worker port
    assert default.variable == "TF_GPU_WORKER_PORT"


def test_users_tf_config_on_the_metrics_port_is_refused() -> None:
    doc = {"cluster": {"worker": ["a:9401", "b:9401"]}, "task": {"type": "worker", "index": 0}}
    error = refusal({"TF_CONFIG": json.dumps(doc), "TF_GPU_METRICS_PORT": "9401"})
    assert error.variable == "TF_CONFIG"


def test_a_placeholder_other_than_index_is_named() -> None:
    """Before: "(1 host(s) for TF_GPU_WORKERS=2)"."""
    error = refusal({**WORKERS, "TF_GPU_WORKER_HOSTS": "train-{idx}"})
    assert error.variable == "TF_GPU_WORKER_HOSTS" and "{index}" in error.why


def test_one_bound_of_workers_and_the_tf_config_it_builds() -> None:
    """Before: 10000 workers built a 239 kB TF_CONFIG: every later exec failed with E2BIG."""
    assert tf_config.MAX_WORKERS == 1000
    refusal({**WORKERS, "TF_GPU_WORKERS": "1001"})
    # the largest count with the host names `build.py k8s` writes fits
    hosts = "tfgpu-train-{index}.tfgpu-train"
    at_most = parse_environment({**WORKERS, "TF_GPU_WORKERS": "1000", "TF_GPU_WORKER_HOSTS": hosts})
    assert at_most.tf_config is not None
    assert len(at_most.tf_config.value) <= tf_config.MAX_TF_CONFIG_BYTES
    # long host names: refused with the reason, not built
    long_hosts = "a" * 50 + "-{index}." + ".".join(["b" * 60] * 3)
    error = refusal({**WORKERS, "TF_GPU_WORKERS": "1000", "TF_GPU_WORKER_HOSTS": long_hosts})
    assert error.variable == "TF_GPU_WORKERS" and "E2BIG" in error.why


# --- TF_CONFIG: one grammar --------------------------------------------------------------------


def user_tf_config(workers: object, task: object) -> str:
    return json.dumps({"cluster": {"worker": workers}, "task": task})


TASK0 = {"type": "worker", "index": 0}


@pytest.mark.parametrize(
    ("value", "why"),
    [
        (user_tf_config(["a:99999", "b:2222"], TASK0), "port from 1 to 65535"),
        (user_tf_config(["a:0", "b:2222"], TASK0), "port from 1 to 65535"),
        (user_tf_config(["wörker:2222", "b:2222"], TASK0), "ASCII"),
        (user_tf_config(["a:" + HUGE], TASK0), "port from 1 to 65535"),
        (user_tf_config(["a:2222", "a:2222"], TASK0), "listed twice"),
        (user_tf_config(["a:2222", "A:2222"], TASK0), "listed twice"),
        (user_tf_config(["a:2222", "b:2222"], {"type": "worker", "index": "1"}), "integer"),
        (user_tf_config(["a:2222", "b:2222"], {"type": "worker", "index": 1.0}), "integer"),
        (user_tf_config(["a:2222", "b:2222"], {"type": "worker", "index": True}), "integer"),
        (user_tf_config(["a:2222"], {"type": ["worker"], "index": 0}), "must be a string"),
        (user_tf_config(["a:2222"], {"type": {"a": 1}, "index": 0}), "must be a string"),
        (user_tf_config([["a:2222"]], TASK0), "not a 'host:port' string"),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        ('{"cluster": ' + "[" * 100_000 + "]" * 100_000 + "}", "nested too deeply"),
    ],
)
def test_tf_config_is_judged_by_the_worker_hosts_grammar(value: str, why: str) -> None:
    """Before: a:99999, a:0, wörker:2222 and duplicates accepted; "1", 1.0, true reported as
    "outside cluster.worker"; a list as task.type and deep nesting were tracebacks."""
    error = refusal({"TF_CONFIG": value})
    assert error.variable == "TF_CONFIG"
    assert why in error.why, error.why
    assert "outside" not in error.why
    assert len(str(error)) < 2000  # the value is cut, never echoed whole


def test_tf_config_accepts_addresses_the_hosts_grammar_accepts() -> None:
    value = user_tf_config(["10.0.0.1:2222", "[::1]:2222", "w-2.train:65535"], TASK0)
    settings = parse_environment({"TF_CONFIG": value})
    assert settings.tf_config is not None and settings.tf_config.workers == 3


@pytest.mark.parametrize(
    "hostile", ["w\ntfgpu: error: forged", "\x1b[2Jw", "w\u2028x", "w\rtfgpu: error: x"]
)
def test_control_characters_of_tf_config_are_escaped_wherever_printed(hostile: str) -> None:
    """Before: a role name or task type reached the terminal raw (a forged `tfgpu: error:`)."""
    doc = {"cluster": {hostile: ["a:2222"]}, "task": {"type": hostile, "index": 5}}
    error = refusal({"TF_CONFIG": json.dumps(doc)})
    assert str(error).isprintable(), str(error)
    # with a valid index too: TensorFlow aborts on such a job name, so the kit refuses it,
    # and that refusal is escaped as well
    doc["task"]["index"] = 0
    error = refusal({"TF_CONFIG": json.dumps(doc)})
    assert str(error).isprintable() and "a role name TensorFlow aborts on" in str(error)


def test_printable_is_linear_and_leaves_printable_text_alone() -> None:
    assert printable("tráin-0 ✓") == "tráin-0 ✓"
    assert printable("a\nb\x1b") == "a\\nb\\x1b"


# --- integers bounded before int() --------------------------------------------------------------


@pytest.mark.parametrize(
    ("env", "variable"),
    [
        ({"TF_GPU_METRICS_PORT": HUGE}, "TF_GPU_METRICS_PORT"),
        ({"TF_CPU_VIRTUAL_DEVICES": HUGE}, "TF_CPU_VIRTUAL_DEVICES"),
        ({**WORKERS, "TF_GPU_WORKERS": HUGE}, "TF_GPU_WORKERS"),
        ({**WORKERS, "TF_GPU_WORKER_PORT": HUGE}, "TF_GPU_WORKER_PORT"),
        ({**WORKERS, "TF_GPU_WORKER_INDEX": HUGE}, "TF_GPU_WORKER_INDEX"),
        (
            {**WORKERS, "TF_GPU_WORKER_INDEX": "", "JOB_COMPLETION_INDEX": HUGE},
            "JOB_COMPLETION_INDEX",
        ),
        ({**CAP, "TF_GPU_RECOVER_AT": "95%", "TF_GPU_RECOVER_AFTER": HUGE}, "TF_GPU_RECOVER_AFTER"),
        ({**CAP, "TF_GPU_RECOVER_AT": HUGE + "%"}, "TF_GPU_RECOVER_AT"),
    ],
)
def test_integers_of_4300_digits_are_refused_not_internal_errors(
    env: dict[str, str], variable: str
) -> None:
    """Before: int() raised ValueError ("Exceeds the limit (4300 digits)"): exit 1 "internal
    error" at the door, a traceback at `import tensorflow` and from `build.py plan`."""
    error = refusal(env)
    assert error.variable == variable
    assert "… (5000 characters)" in str(error) or "characters)" in str(error)


@pytest.mark.parametrize("name", [jupyter_cull.IDLE_TIMEOUT, jupyter_cull.INTERVAL])
def test_jupyter_cull_integers_are_bounded(name: str) -> None:
    """Before: a ValueError, so culling was silently off."""
    with pytest.raises(ConfigError) as info:
        jupyter_cull.read_settings({name: HUGE})
    assert info.value.variable == name and type(info.value) is ConfigError
    with pytest.raises(ConfigError):
        jupyter_cull.read_settings({name: "0" * 5000 + "9" * 7})  # zeros, then over a week


def test_leading_zeros_are_still_numbers() -> None:
    settings = parse_environment({"TF_GPU_METRICS_PORT": "0" * 5000 + "9401"})
    assert settings.metrics_port == 9401


def test_recover_after_takes_days_as_its_documentation_says() -> None:
    """Before: documented as "1 s - 7 days", but `7d` was refused."""
    assert recovery_rule.parse_after("7d") == 7 * 86400
    assert recovery_rule.parse_after("1D") == 86400
    assert recovery_rule.format_duration(7 * 86400) == "7d"
    with pytest.raises(ConfigError) as info:
        recovery_rule.parse_after("8d")
    assert "days (7d)" in info.value.accepted


# --- nothing in the door worse than linear ----------------------------------------------------


def test_cuda_visible_devices_duplicate_check_is_linear() -> None:
    """Before: `entry in entries` per entry: 23,685 entries cost 3.6 s (here 60,000: ~25 s)."""
    value = ",".join(str(i) for i in range(60_000))
    start = time.perf_counter()
    assert len(parse_visible_devices(value)) == 60_000
    assert time.perf_counter() - start < 1.0
    with pytest.raises(ConfigError, match="listed twice"):
        parse_visible_devices(value + ",7")


def test_a_huge_visible_index_is_past_the_gpus_not_an_error() -> None:
    report = nvml.NvmlReport()
    report.found, report.driver_present = True, True
    report.gpus = [nvml.Gpu(0, "A100", "GPU-aaa", 40960.0, 40000.0)]
    gpus, notes = nvml.visible_gpus(report, [HUGE], None)
    assert gpus == [] and "only 1 exist" in notes[0] and len(notes[0]) < 300


def test_version_parsing_is_linear_and_bounded() -> None:
    """Before: each part sliced off the rest (quadratic); a 5000-digit part raised."""
    text = "1." * 200_000 + "1"
    start = time.perf_counter()
    parsed = driver.version_tuple(text)
    assert parsed is not None and len(parsed) == 200_001
    assert time.perf_counter() - start < 1.0
    assert driver.version_tuple(HUGE) is None


# --- tfgpu show --json answers in JSON, also when the door refuses ------------------------------


@pytest.mark.parametrize(
    "env", [{"TF_GPU_WORKERS": HUGE, "TF_GPU_WORKER_HOSTS": "a"}, {"TF_CONFIG": "[" * 100_000}]
)
def test_show_json_prints_an_object_when_the_door_refuses(
    env: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Before: these were "internal error" (exit 1) with nothing on stdout."""
    out = io.StringIO()
    code = show.show(as_json=True, environ=env, out=out)
    assert code == 78
    doc = json.loads(out.getvalue())
    assert doc["ok"] is False and doc["error"].startswith(("TF_GPU_WORKERS=", "TF_CONFIG="))
    assert "tfgpu: error:" in capsys.readouterr().err


def test_help_lists_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    """Before: `tfgpu --help` and `tfgpu run --help` omitted 75 (the recovery rule's exit)."""
    from tfgpu.commands import cli

    for argv in (["--help"], ["run", "--help"]):
        with pytest.raises(SystemExit):
            cli.main(argv)
        text = " ".join(capsys.readouterr().out.split())
        for code in ("69", "75", "78"):
            assert f"{code} " in text, (argv, code)
        assert "TF_GPU_RECOVER_ACTION=exit" in text


def test_a_command_name_is_escaped_when_printed(capsys: pytest.CaptureFixture[str]) -> None:
    """The door's one helper (errors.printable) for every user text it prints: a command name
    cannot forge a `tfgpu: error:` line either."""
    from tfgpu.commands.run import run

    assert run(["no-such\ntfgpu: error: forged"], {"PATH": "/nonexistent"}) == 127
    err = capsys.readouterr().err
    assert "\ntfgpu: error: forged" not in err and "no-such\\ntfgpu" in err


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner),
    max_leaves=12,
)
TASKS = st.fixed_dictionaries({}, optional={"type": JSON | st.just("worker"), "index": JSON})
CLUSTERS = st.dictionaries(
    st.sampled_from(["worker", "chief", "ps", "w\n"]) | st.text(max_size=6),
    st.lists(st.sampled_from(["a:2222", "b:1", "a:2222", "x:0", "wörker:2", "[::1]:3"]) | JSON),
    max_size=3,
)


@given(
    doc=st.fixed_dictionaries({}, optional={"cluster": CLUSTERS | JSON, "task": TASKS | JSON})
    | JSON
)
@hypothesis_settings(max_examples=400, derandomize=True, database=None, deadline=None)
def test_any_tf_config_is_accepted_or_refused_as_a_config_error(doc: object) -> None:
    """Whatever the JSON: a TfConfig, or a ConfigError naming TF_CONFIG on one printable line;
    never another exception (before: TypeError for a list as task.type, RecursionError)."""
    try:
        settings = parse_environment({"TF_CONFIG": json.dumps(doc)})
    except ConfigError as error:
        assert error.variable == "TF_CONFIG" and str(error).isprintable()
        return
    cfg = settings.tf_config
    assert cfg is not None and cfg.explain().isprintable()
    assert type(cfg.index) is int and 0 <= cfg.index < len(cfg.cluster[cfg.task_type])
    addresses = [a.lower() for role in cfg.cluster.values() for a in role]
    assert len(set(addresses)) == len(addresses)
