"""Names checked, not only values: tfgpu.contract.names is the one list of the kit's
variable names, every name the repository uses is in it, and a stranger of the kit's prefixes
(or a near miss of TensorFlow's variables the kit reads) is named with its closest known name at
the door and in `tfgpu show`, at no start-up cost when there is none."""

from __future__ import annotations

import io
import re
import subprocess
from pathlib import Path

import pytest
from tfgpu.act import jupyter_cull, recovery
from tfgpu.commands import show
from tfgpu.commands.run import DERIVED_MARK, PREFLIGHT_MARK
from tfgpu.contract import names, recovery_rule, settings, tf_config
from tfgpu.contract.settings import parse_environment
from tfgpu.machine import shm, tegra

from tests.runtime.test_run_startup import IMAGE_ENV as KIT_IMAGE_ENV
from tests.runtime.test_run_startup import imports_of_run

ROOT = Path(__file__).resolve().parents[2]
# Names the repository writes that are not variables: prefixes its code matches, and the typo
# the documents spell on purpose; and the tests that spell strangers on purpose.
NOT_NAMES = {"TF_GPU_", "TFGPU_", "TF_GPU_RECOVER", "TF_GPU_WORKER", "TF_GPU_RE", "TF_GPU_MEM_LMIT"}
TYPOS = (
    "tests/runtime/test_names.py",
    "tests/runtime/test_contract_inputs.py",
    "tests/scale/test_contract_agreement.py",
    "tests/scale/test_plan_compose.py",
)
# What the images set (dockerfiles/*/Dockerfile ENV) and what NVIDIA's bases set.
IMAGE_ENV = {**KIT_IMAGE_ENV, "CUDA_VERSION": "12.5.1", "TF_CPP_MIN_LOG_LEVEL": "2"}


def repository_names() -> set[str]:
    """Every TF_GPU_*/TFGPU_* name in the tracked files (git grep: what a commit holds)."""
    pattern = r"\b(TFGPU|TF_GPU)_[A-Z0-9_]*"
    out = subprocess.run(
        ["git", "grep", "-ohIE", pattern, "--", ".", *(f":!{path}" for path in TYPOS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return {name.rstrip("_") if name.endswith("_") else name for name in out.split()}


def test_every_name_the_repository_uses_is_known() -> None:
    used = repository_names()
    assert {"TF_GPU_MEM_LIMIT", "TFGPU_IMAGE_TF", "TFGPU_HOOK_RAISE"} <= used  # the grep works
    unknown = {
        name
        for name in used
        if name not in names.KNOWN and name not in NOT_NAMES and name + "_" not in NOT_NAMES
    }
    # a prefix the code matches (TF_GPU_RECOVER_*, TFGPU_JUPYTER_CULL_*, TFGPU_IMAGE_*)
    unknown = {n for n in unknown if not any(k.startswith(n + "_") for k in names.KNOWN)}
    assert not unknown, f"add these to tfgpu.contract.names (or NOT_NAMES here): {sorted(unknown)}"


def test_the_modules_names_are_the_lists_names() -> None:
    """The runtime's modules keep their own constants; tfgpu.contract.names holds each of them."""
    assert set(settings.KIT_VARIABLES) <= names.KNOWN
    assert set(settings.NATIVE_VARIABLES) <= names.KNOWN
    assert set(recovery_rule.VARIABLES) == set(names.RECOVERY)
    assert set(tf_config.VARIABLES) == set(names.CLUSTER)
    assert {jupyter_cull.IDLE_TIMEOUT, jupyter_cull.INTERVAL, jupyter_cull.CONNECTED} == set(
        names.JUPYTER
    )
    internal = {PREFLIGHT_MARK, DERIVED_MARK, recovery.STATE_DIR_VARIABLE, shm.WARNED_MARK}
    assert internal | {tegra.SYSROOT_VARIABLE, "TFGPU_HOOK_RAISE"} <= set(names.INTERNAL)
    # the derived-image guard's names (docs/teams.md)
    assert {"TF_GPU_REQUIRE_HOOK", "TFGPU_IMAGE_CONSTRAINTS"} <= names.KNOWN


@pytest.mark.parametrize(
    ("name", "closest", "words"),
    [
        ("TF_GPU_MEM_LMIT", "TF_GPU_MEM_LIMIT", "not a variable the kit reads"),
        ("tf_gpu_mem_limit", "TF_GPU_MEM_LIMIT", "case-sensitive"),
        ("TF_GPU_RECOVER_AFTR", "TF_GPU_RECOVER_AFTER", "the kit"),
        ("TF_GPU_WORKER_HOST", "TF_GPU_WORKER_HOSTS", "the kit"),
        ("TFGPU_JUPYTER_CULL_INTERVL", "TFGPU_JUPYTER_CULL_INTERVAL", "the kit"),
        ("TF_MIXED_PRECISON", "TF_MIXED_PRECISION", "the kit"),
        ("TF_USE_LEGACY_KERA", "TF_USE_LEGACY_KERAS", "TensorFlow"),
        ("tf_use_legacy_keras", "TF_USE_LEGACY_KERAS", "case-sensitive"),
        ("TF_FORCE_GPU_ALLOW_GROWHT", "TF_FORCE_GPU_ALLOW_GROWTH", "TensorFlow"),
        ("TF_GPU_ALOCATOR", "TF_GPU_ALLOCATOR", "TensorFlow"),
        ("CUDA_VISIBLE_DEVICE", "CUDA_VISIBLE_DEVICES", "CUDA"),
    ],
)
def test_a_stranger_is_named_with_its_closest_known_name(
    name: str, closest: str, words: str
) -> None:
    """Before: `-e TF_GPU_MEM_LMIT=4GiB` capped nothing and said nothing."""
    found = parse_environment({name: "4GiB"})
    warning = [w for w in found.warnings if w.startswith(name)]
    assert warning and f"did you mean {closest}?" in warning[0] and words in warning[0], warning
    out = io.StringIO()
    show.show(environ={name: "4GiB"}, out=out)
    assert f"warning: {name} is ignored" in out.getvalue()


def test_a_stranger_with_no_close_name_is_still_named() -> None:
    found = parse_environment({"TF_GPU_SOMETHING_ELSE": "1"})
    assert any("TF_GPU_SOMETHING_ELSE is ignored" in w for w in found.warnings)


@pytest.mark.parametrize(
    "env",
    [
        IMAGE_ENV,
        {"TF_GPU_THREAD_MODE": "gpu_private", "TF_GPU_THREAD_COUNT": "2"},  # TensorFlow's own
        {"TF_ENABLE_ONEDNN_OPTS": "0", "TF_XLA_FLAGS": "--tf_xla_auto_jit=2"},
        {"CUDA_DEVICE_ORDER": "PCI_BUS_ID", "CUDA_MODULE_LOADING": "LAZY"},
        {name: "x" for name in names.INTERNAL + names.BUILD_ARGS + names.HARNESS},
    ],
)
def test_known_names_are_no_strangers(env: dict[str, str]) -> None:
    assert names.strangers(env) == []


# what the kubelet injects for a Service `tfgpu-serve` in the pod's namespace (enableServiceLinks)
SERVICE_LINKS = {
    "TFGPU_SERVE_SERVICE_HOST": "10.0.0.1",
    "TFGPU_SERVE_SERVICE_PORT": "8501",
    "TFGPU_SERVE_SERVICE_PORT_HTTP": "8501",
    "TFGPU_SERVE_PORT": "tcp://10.0.0.1:8501",
    "TFGPU_SERVE_PORT_8501_TCP": "tcp://10.0.0.1:8501",
    "TFGPU_SERVE_PORT_8501_TCP_PROTO": "tcp",
    "TFGPU_SERVE_PORT_8501_TCP_PORT": "8501",
    "TFGPU_SERVE_PORT_8501_TCP_ADDR": "10.0.0.1",
}


def test_kubernetes_service_links_are_no_strangers() -> None:
    """`build.py k8s --name tfgpu` names its Services tfgpu-*: their links start with TFGPU_."""
    assert names.strangers(SERVICE_LINKS) == []
    typo = names.strangers({**SERVICE_LINKS, "TF_GPU_METRIC_PORT": "9401"})
    assert [s.closest for s in typo] == ["TF_GPU_METRICS_PORT"]


def test_a_stranger_name_is_escaped() -> None:
    found = names.strangers({"TF_GPU_\x1b[2J": "1"})
    assert found and found[0].warning().isprintable()


def test_the_door_warns_and_pays_no_difflib_without_a_stranger() -> None:
    """The scan costs a set lookup per name; difflib (it imports `re`) only for a stranger."""
    result, modules = imports_of_run("true", **IMAGE_ENV)
    assert result.returncode == 0, result.stderr
    assert "difflib" not in modules and "re" not in modules
    result, modules = imports_of_run("true", **IMAGE_ENV, TF_GPU_MEM_LMIT="4GiB")
    assert result.returncode == 0, result.stderr
    assert re.search(
        r"tfgpu: warning: TF_GPU_MEM_LMIT is ignored .*TF_GPU_MEM_LIMIT", result.stderr
    )


def test_a_lookalike_letter_is_named_by_its_code_point() -> None:
    """`-e ТF_GPU_MEM_LIMIT=4GiB` with a Cyrillic Т prints like the real name: the warning says
    which character is not what it looks like, so the reader is not told "did you mean" the
    very name they see."""
    name = "\u0422F_GPU_MEM_LIMIT"
    found = names.strangers({name: "4GiB"})
    assert [s.closest for s in found] == ["TF_GPU_MEM_LIMIT"]
    why = found[0].why()
    assert "U+0422 CYRILLIC CAPITAL LETTER TE" in why and "not ASCII" in why, why
    assert names.strangers({"TF_GPU_MEM_LIMIT": "4GiB"}) == []
