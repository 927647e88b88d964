"""Every refusal's example is a value of the variable it names: set as that variable, the example
is not refused for that variable (the message "example: TF_GPU_ROLE=TF_GPU_PS=1" was a value of
another variable). Refusals of the contract, the cluster, `tfgpu server` and the door."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping

import pytest
from tfgpu.commands import server
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import parse_environment

PS = {
    "TF_GPU_PS": "1",
    "TF_GPU_WORKERS": "2",
    "TF_GPU_WORKER_HOSTS": "t-worker-{index}.t",
    "TF_GPU_PS_HOSTS": "t-ps-{index}.t",
    "TF_GPU_CHIEF_HOST": "t-chief.t",
    "JOB_COMPLETION_INDEX": "0",
}
MWMS = {"TF_GPU_WORKERS": "2", "TF_GPU_WORKER_HOSTS": "w-{index}.t", "TF_GPU_WORKER_INDEX": "0"}
CHIEF_ONLY = json.dumps({"cluster": {"chief": ["c:1"], "ps": ["p:1"]}, "task": {"type": "chief"}})
NO_PS = json.dumps({"cluster": {"worker": ["a:1"]}, "task": {"type": "worker", "index": 0}})


def _serve(environ: dict[str, str]) -> None:
    cfg = server.cluster_to_serve(environ)
    server.refuse_outside_kubernetes(environ, cfg.port)


BAD: list[tuple[Mapping[str, str], Callable[[dict[str, str]], object]]] = [
    ({"TF_GPU_MEM_LIMIT": "4MB"}, parse_environment),
    ({"TF_GPU_MEM_LIMIT": "lots"}, parse_environment),
    ({"TF_GPU_VIRTUAL_DEVICES": "1,,2"}, parse_environment),
    ({"TF_GPU_MEM_LIMIT": "4096", "TF_GPU_VIRTUAL_DEVICES": "1024"}, parse_environment),
    ({"TF_GPU_MEMORY_GROWTH": "maybe"}, parse_environment),
    ({"TF_GPU_REQUIRED": "2"}, parse_environment),
    ({"TF_GPU_METRICS_PORT": "70000"}, parse_environment),
    ({"TF_GPU_METRICS_ADDR": "localhost"}, parse_environment),
    ({"TF_GPU_RECOVER_AT": "95"}, parse_environment),
    ({"TF_GPU_RECOVER_AT": "95%"}, parse_environment),  # no cap
    ({"TF_GPU_RECOVER_ACTION": "restart", "TF_GPU_MEM_LIMIT": "1024"}, parse_environment),
    ({"TF_GPU_RECOVER_AFTER": "5 weeks", "TF_GPU_MEM_LIMIT": "1024"}, parse_environment),
    ({"TF_CPU_VIRTUAL_DEVICES": "0"}, parse_environment),
    ({"TF_MIXED_PRECISION": "fp16"}, parse_environment),
    ({"TF_FORCE_GPU_ALLOW_GROWTH": "True"}, parse_environment),
    ({"TF_GPU_ALLOCATOR": "bfc"}, parse_environment),
    ({"CUDA_VISIBLE_DEVICES": "all"}, parse_environment),
    ({"TF_USE_LEGACY_KERAS": "yes"}, parse_environment),
    ({"TF_GPU_WORKERS": "0"}, parse_environment),
    ({"TF_GPU_WORKERS": "2"}, parse_environment),  # no hosts
    ({**MWMS, "TF_GPU_WORKER_INDEX": "2"}, parse_environment),
    ({**MWMS, "TF_GPU_WORKER_PORT": "0"}, parse_environment),
    ({**MWMS, "TF_GPU_ROLE": "chief"}, parse_environment),
    ({"TF_GPU_PS_HOSTS": "p-{index}.t"}, parse_environment),
    ({**PS, "TF_GPU_ROLE": "boss"}, parse_environment),
    ({**PS, "TF_GPU_ROLE": "chief", "JOB_COMPLETION_INDEX": "1"}, parse_environment),
    ({**PS, "TF_GPU_ROLE": "ps", "TF_GPU_PS_GPUS": "sometimes"}, parse_environment),
    ({"TF_CONFIG": "worker"}, parse_environment),
    ({**MWMS, "TF_GPU_ROLE": "worker"}, _serve),  # no ps role
    ({**PS, "TF_GPU_ROLE": "chief"}, _serve),  # the chief runs the program
    ({"TF_CONFIG": NO_PS, "TF_GPU_CONFIG": "off"}, _serve),
    ({"TF_CONFIG": CHIEF_ONLY, "TF_GPU_CONFIG": "off"}, _serve),
    ({**PS, "TF_GPU_ROLE": "ps"}, _serve),  # outside Kubernetes
    ({}, _serve),  # no cluster
]


def example_value(example: str) -> str:
    """The value an example gives, without what it says goes with it ("2 with X=…",
    "chief (with TF_GPU_PS=1)", "4096 (or 4GiB, …)", "6144,8192 (every GPU split…) or …")."""
    for cut in (" (", " with "):
        example = example.split(cut)[0]
    return example


def _case_id(value: object) -> str:
    """Stable across xdist workers: a function by name, not by address."""
    return getattr(value, "__name__", None) or str(value)[:60]


@pytest.mark.parametrize(("environ", "call"), BAD, ids=_case_id)
def test_the_example_is_a_value_of_the_variable_it_names(
    environ: Mapping[str, str], call: Callable[[dict[str, str]], object]
) -> None:
    with pytest.raises(ConfigError) as caught:
        call(dict(environ))
    error = caught.value
    value = example_value(error.example)
    # not another variable's assignment ("TF_GPU_ROLE=TF_GPU_PS=1")
    assert not re.match(r"[A-Z][A-Z0-9_]*=", value), str(error)
    if error.variable == "TF_CONFIG":  # a TF_CONFIG, not a role ("TF_CONFIG=worker")
        assert parse_environment({"TF_CONFIG": value}).tf_config is not None, str(error)
    if error.why:
        return  # refused for what goes with it, which the example names
    # a refusal of the value's form: the example has the form
    try:
        call({**environ, error.variable: value})
    except ConfigError as again:
        assert (again.variable, again.value, again.why) != (error.variable, value, ""), (
            str(error),
            str(again),
        )
