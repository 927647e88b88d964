"""`tfgpu run` start-up: the entrypoint imports only what its path needs, and still
checks everything. No timings here (they vary by host): benchmarks/bench_runtime.py has them.

What the path must not import, each for its cost or because only another path needs it: `re`
(with enum, functools and collections about 5 ms; settings, driver and tegra parse by hand or
import it lazily), argparse (only `--help` and the other sub-commands), json, typing,
importlib.util/metadata, warnings (os.execvpe's PATH search imports it), __future__ (the
statement `from __future__ import annotations` imports it: the run path quotes its annotations),
tfgpu.contract.recovery_rule and tfgpu.contract.tf_config (they import `re`: only when one of their
variables is set), `show`/`check`; tfgpu.machine.interpreter (its probe: only for a command that
starts Python), tfgpu.machine.tfbuild (only TF_GPU_REQUIRED=true with a GPU in sight) and
tfgpu.machine.driver (only with a driver); as PID 1, contextlib and `signal`'s enums.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import settings as hypothesis_settings
from hypothesis import strategies as st
from tfgpu.contract import recovery_rule, settings, tf_config
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import (
    CLUSTER_NAMES,
    CLUSTER_PREFIX,
    RECOVERY_PREFIX,
    _split_amount,
    is_visible_entry,
    parse_image_defaults,
)
from tfgpu.machine import nvml
from tfgpu.machine.driver import version_tuple

from tests.runtime.conftest import SRC, clean_env

NOT_ON_THE_RUN_PATH = (
    "__future__",  # `from __future__ import annotations` imports it: annotations are quoted
    "re",
    "enum",
    "functools",
    "collections",
    "argparse",
    "json",
    "typing",
    "importlib.util",
    "importlib.metadata",
    "warnings",
    "ipaddress",
    "ctypes",
    "shutil",
    "tfgpu.contract.recovery_rule",
    "tfgpu.contract.tf_config",
    "tfgpu.commands.show",
    "tfgpu.commands.gpu_check",
    "tfgpu.machine.libs",
    "tfgpu.machine.home",
    "tfgpu.machine.shm",
    "tfgpu.machine.interpreter",  # the probe: only for a command that starts Python
    "tfgpu.machine.tfbuild",  # only for TF_GPU_REQUIRED=true with a GPU in sight
    "tensorflow",
)
# Read only where NVML reports a driver (none on the hosts that run these tests: no marker).
NOT_WITHOUT_A_DRIVER = (
    () if any(map(os.path.exists, nvml.DRIVER_MARKERS)) else ("tfgpu.machine.driver",)
)
# As the image's console script starts it (`import sys; from tfgpu.commands.cli import main`), not
# through `-m`, whose runpy imports importlib.util and functools before tfgpu does.
CONSOLE_SCRIPT = "import sys; from tfgpu.commands.cli import main; sys.exit(main(sys.argv[1:]))"


def imports_of_run(
    *command: str, init: bool = False, **extra: str
) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    """`tfgpu run -- COMMAND` under -X importtime: the modules imported after the interpreter's
    own start-up (`site` and what its .pth files import are not the entrypoint's). `init`: as
    PID 1 of a new PID namespace, as in a container without --init."""
    env = clean_env(**extra)
    env["PYTHONPATH"] = str(SRC)
    r = subprocess.run(
        [
            *(UNSHARE if init else []),
            *[sys.executable, "-X", "importtime", "-c", CONSOLE_SCRIPT, "run", "--", *command],
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    names = [
        line.rsplit("|", 1)[-1].strip()
        for line in r.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    ]
    assert "site" in names, r.stderr
    return r, set(names[names.index("site") + 1 :])


UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]  # tfgpu as PID 1, as in test_run.py
IMAGE_ENV = {  # what the 2.21.0-gpu image sets (dockerfiles/2.21.0-gpu/Dockerfile)
    "TF_GPU_MEMORY_GROWTH": "true",
    "TFGPU_IMAGE_TF": "2.21.0",
    "TFGPU_IMAGE_CUDA": "12.5",
    "TFGPU_IMAGE_DRIVER_MIN": "555.42.06",
    "TFGPU_IMAGE_DRIVER_MIN_COMPAT": "525.60.13",
    "TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true",
}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        IMAGE_ENV,
        {
            **IMAGE_ENV,
            "TF_GPU_MEM_LIMIT": "4GiB,40%",
            "CUDA_VISIBLE_DEVICES": "0,GPU-8a2f-01,MIG-a/1",
            "TF_CPU_VIRTUAL_DEVICES": "2",
            "TF_MIXED_PRECISION": "mixed_float16",
            "TF_GPU_METRICS_PORT": "9401",
        },
        {"TF_GPU_VIRTUAL_DEVICES": "1024,2048;512", "TF_GPU_QUIET": "true"},
    ],
    ids=["bare", "image", "capped", "split"],
)
def test_run_imports_only_what_its_path_needs(extra: dict[str, str]) -> None:
    r, imported = imports_of_run("true", **extra)
    assert r.returncode == 0, r.stderr
    assert (
        "tfgpu.commands.run" in imported and "tfgpu.plan.preflight" in imported
    )  # the probe sees them
    assert sorted(imported & {*NOT_ON_THE_RUN_PATH, *NOT_WITHOUT_A_DRIVER}) == []


def test_a_python_command_is_still_probed_for_the_hook() -> None:
    """tfgpu.machine.interpreter is deferred, not skipped: a command that starts Python gets its
    probe."""
    r, imported = imports_of_run(sys.executable, "-c", "pass")
    assert r.returncode == 0, r.stderr
    assert "tfgpu.machine.interpreter" in imported


def test_as_pid1_run_imports_no_contextlib_nor_enum() -> None:
    """A container without --init: tfgpu stays as init (tfgpu.commands.pid1), and its child execs
    the command. Neither needs contextlib, `signal`'s enums or os.execvpe's `warnings`."""
    assert shutil.which("unshare"), "unshare (util-linux) is needed for the PID-1 tests"
    r, imported = imports_of_run("sh", "-c", "exit 3", init=True, **IMAGE_ENV)
    assert r.returncode == 3, r.stderr
    assert "tfgpu.commands.pid1" in imported
    assert sorted(imported & {*NOT_ON_THE_RUN_PATH, "contextlib", "signal"}) == []


def test_a_recovery_or_cluster_variable_imports_its_parser_alone() -> None:
    r, imported = imports_of_run(
        "true", TF_GPU_MEM_LIMIT="4096", TF_GPU_RECOVER_AT="95%", TF_GPU_RECOVER_ACTION="exit"
    )
    assert r.returncode == 0, r.stderr
    assert "tfgpu.contract.recovery_rule" in imported and "tfgpu.contract.tf_config" not in imported
    r, imported = imports_of_run(
        "true", TF_GPU_WORKERS="1", TF_GPU_WORKER_HOSTS="w0", TF_GPU_WORKER_INDEX="0"
    )
    assert r.returncode == 0, r.stderr
    assert "tfgpu.contract.tf_config" in imported and "tfgpu.contract.recovery_rule" not in imported
    assert "cluster: worker 0 of 1 worker at w0:2222" in r.stderr


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"TF_GPU_MEM_LIMIT": "4GB"}, "'GB' is ambiguous (decimal or binary?)"),
        ({"TF_GPU_MEM_LIMIT": "4.GiB"}, "TF_GPU_MEM_LIMIT='4.GiB' is not valid"),
        ({"TF_GPU_MEM_LIMIT": "\u0663"}, "TF_GPU_MEM_LIMIT='\u0663' is not valid"),
        ({"TF_GPU_VIRTUAL_DEVICES": "1024,;2048"}, "TF_GPU_VIRTUAL_DEVICES='1024,;2048'"),
        ({"CUDA_VISIBLE_DEVICES": "all"}, "use NVIDIA_VISIBLE_DEVICES for 'all'"),
        ({"CUDA_VISIBLE_DEVICES": "GPU-xyz"}, "CUDA_VISIBLE_DEVICES='GPU-xyz' is not valid"),
        ({"TFGPU_IMAGE_DEFAULTS": "TF_GPU_QUIET"}, "TFGPU_IMAGE_DEFAULTS='TF_GPU_QUIET'"),
        # the lazily imported parsers: set alone, each variable is still refused
        ({"TF_GPU_RECOVER_AFTER": "5m"}, "TF_GPU_RECOVER_AT is not set"),
        ({"TF_GPU_RECOVER_AT": "95%"}, "no cap is set"),
        ({"TF_GPU_WORKER_PORT": "2222"}, "TF_GPU_WORKERS is not set"),
        ({"TF_USE_LEGACY_KERAS": "yes"}, "TensorFlow would silently read it as off"),
        ({"TF_CONFIG": "{"}, "TF_CONFIG='{' is not valid"),
    ],
)
def test_run_still_refuses_bad_input_with_78(
    tmp_path: Path, extra: dict[str, str], message: str
) -> None:
    marker = tmp_path / "ran"
    r, _ = imports_of_run("touch", str(marker), **extra)
    assert r.returncode == 78, r.stderr
    assert message in r.stderr and "nothing was started" in r.stderr
    assert "Traceback" not in r.stderr
    assert not marker.exists()


def test_the_lazy_parsers_are_asked_for_every_one_of_their_variables() -> None:
    """settings imports recovery_rule / tf_config only when a variable it reads is set: the
    prefixes must cover every name, or a bad value would pass unchecked."""
    assert all(name.startswith(RECOVERY_PREFIX) for name in recovery_rule.VARIABLES)
    assert all(
        name.startswith(CLUSTER_PREFIX) or name in CLUSTER_NAMES for name in tf_config.VARIABLES
    )
    assert (
        tf_config.TF_CONFIG,
        tf_config.LEGACY_KERAS,
        *[name for name in tf_config.VARIABLES if not name.startswith(CLUSTER_PREFIX)],
    ) == CLUSTER_NAMES
    # and nothing of settings' own starts with them (else every run would import the parsers)
    own = settings._OWN_KIT_VARIABLES + settings._OWN_NATIVE_VARIABLES
    assert not [n for n in own if n.startswith((RECOVERY_PREFIX, CLUSTER_PREFIX))]


def test_the_variable_lists_still_name_every_variable() -> None:
    kit, native = settings.KIT_VARIABLES, settings.NATIVE_VARIABLES  # built on first use
    assert kit == (
        *settings._OWN_KIT_VARIABLES,
        *recovery_rule.VARIABLES,
        *tf_config.VARIABLES,
    )
    assert native == (*settings._OWN_NATIVE_VARIABLES, tf_config.TF_CONFIG, tf_config.LEGACY_KERAS)
    assert "TF_GPU_RECOVER_AT" in kit and "CUDA_VISIBLE_DEVICES" in native
    with pytest.raises(AttributeError):
        settings.NO_SUCH_NAME  # noqa: B018


# --- the hand-written parsers read exactly what the regular expressions they replace read ----

_AMOUNT = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(%|mib|gib|m|g|mb|gb)?\s*", re.IGNORECASE | re.ASCII)
_VISIBLE_ENTRY = re.compile(r"(\d+|GPU-[0-9a-fA-F-]+|MIG-[0-9A-Za-z/-]+)", re.ASCII)
_VERSION = re.compile(r"\s*(\d+(?:\.\d+)*)")
# the characters the grammars turn on, and look-alikes that must not pass: other scripts'
# digits, non-ASCII spaces, letters whose case folds onto ASCII (İ, K = Kelvin, ſ)
_TRICKY = (
    "0123456789.% \t\n\x0b\x0c\r\u00a0\u2003\u0663\u00b2"
    "mMiIbBgGkKGPUMI-/afAFzZ,;=\u0130\u212a\u017f"
)


@hypothesis_settings(max_examples=500)
@given(st.text(alphabet=_TRICKY, max_size=12))
@example("4GiB")
@example(" 40 % ")
@example("4.")
@example("4.5.6")
@example("4 MB")
@example("\u0663")
@example("4m\u0130b")
@example("\u00a04")  # a non-ASCII space: `\s` with re.ASCII does not take it
@example("4\u2003GiB")
def test_split_amount_is_the_regular_expression(text: str) -> None:
    m = _AMOUNT.fullmatch(text)
    assert _split_amount(text) == ((m.group(1), m.group(2) or "") if m else None)


@given(st.text(alphabet=_TRICKY, max_size=10))
@example("GPU-")
@example("MIG-a/1")
@example("gpu-1")
@example("\u00b2")
def test_visible_entry_is_the_regular_expression(entry: str) -> None:
    assert is_visible_entry(entry) == bool(_VISIBLE_ENTRY.fullmatch(entry))


@given(st.text(alphabet=_TRICKY + "_TF", max_size=20))
def test_image_defaults_split_as_before(value: str) -> None:
    items = [i for i in re.split(r"[\s,]+", value.strip()) if i]
    try:
        got = parse_image_defaults(value)
    except ConfigError:
        assert any(not i.partition("=")[1] or not i.partition("=")[0] for i in items)
        return
    assert got == {i.partition("=")[0]: i.partition("=")[2] for i in items}


@given(st.text(alphabet=_TRICKY, max_size=12))
@example("535.104.05 (beta)")
@example(" 12.5")
@example("12.")
@example("\u0663.1")
def test_version_tuple_is_the_regular_expression(text: str) -> None:
    m = _VERSION.match(text)
    want = tuple(int(x) for x in m.group(1).split(".")) if m else None
    assert version_tuple(text) == want
