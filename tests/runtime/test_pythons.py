"""The runtime runs on every Python of TensorFlow 2.12-2.21 images (3.8-3.13; 2.12 and 2.13
support 3.8, and images on Ubuntu 20.04 ship it): the pure parser/planner, the CLI and the
PID-1 init, imported from the source tree with each interpreter."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.runtime.conftest import SRC, clean_env, find_python

SCRIPT = r"""
import json, sys
from tfgpu.contract.settings import parse_environment, parse_mem_limit, parse_virtual_devices
from tfgpu.plan.device_plan import make_plan
from tfgpu.contract.errors import ConfigError
out = {"version": list(sys.version_info[:2])}
s = parse_environment({"TF_GPU_VIRTUAL_DEVICES": "6144,8192;4096", "TF_GPU_MEMORY_GROWTH": "on"})
out["plan"] = make_plan(s, [24576, 24576]).gpu_limits
out["pct"] = parse_mem_limit("40%")[0].resolve(10000)
try:
    parse_environment({"TF_GPU_MEM_LIMIT": "4MB"})
except ConfigError as e:
    out["error"] = [e.variable, e.value]
print(json.dumps(out))
"""


INIT = """
import os, sys
from tfgpu.commands.pid1 import run_as_init
print(run_as_init(["sh", "-c", "exit 5"], dict(os.environ)),
      run_as_init(["sh", "-c", "kill -TERM $$"], dict(os.environ)),
      run_as_init(["no-such-command-tfgpu"], dict(os.environ)))
"""


@pytest.mark.parametrize("version", ["3.8", "3.9", "3.10", "3.12", "3.13"])
def test_parser_and_cli_on_python(version: str) -> None:
    python = find_python(version)
    env = clean_env(PYTHONPATH=str(SRC))
    r = subprocess.run([python, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["version"] == [int(x) for x in version.split(".")]
    assert doc["plan"] == [[6144, 8192], [4096]] and doc["pct"] == 4000
    assert doc["error"] == ["TF_GPU_MEM_LIMIT", "4MB"]
    for args, code in (
        (["show", "--json"], 0),
        (["run", "--", "true"], 0),
        (["run", "--", "false"], 1),
    ):
        r = subprocess.run(
            [python, "-m", "tfgpu", *args], env=env, capture_output=True, text=True, timeout=60
        )
        assert r.returncode == code, r.stderr
    # check: TensorFlow is not installed for this interpreter; the report must still come out
    r = subprocess.run(
        [python, "-m", "tfgpu", "check", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert r.returncode == 1 and "internal error" not in r.stderr, r.stderr
    assert json.loads(r.stdout)["tensorflow"]["importable"] is False
    # the init's exit codes: the command's own, 128+N for signal N, 127 not found
    r = subprocess.run([python, "-c", INIT], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["5", "143", "127"]


def test_a_missing_python_fails_in_ci_and_is_skipped_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match=r"Python 3\.99 not found.*pyenv install 3\.99"):
        find_python("3.99")
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match=r"Python 3\.99 not found"):
        find_python("3.99")
