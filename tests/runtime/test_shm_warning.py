"""Docker's 64 MB /dev/shm gets its warning where it helps, once: when TensorFlow is imported
(the hook; not again in the processes it starts) and in `tfgpu check`; not from `tfgpu run`,
which cannot tell whether its command uses TensorFlow (`tfgpu show`, a shell)."""

from __future__ import annotations

import io
import os
from typing import Any

import pytest
from tfgpu.act.apply import configure_tensorflow
from tfgpu.commands import gpu_check, run
from tfgpu.machine import nvml, shm

from tests.runtime.test_gpu_check import TF_OK, no_driver
from tests.runtime.tf_standin import standin_tf

SHM_TEXT = "The SHMEM allocation limit is set to the default of 64MB"


class _Docker64MB:
    f_blocks, f_frsize = 16384, 4096  # 64 MiB


@pytest.fixture
def small_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    real = os.statvfs

    def statvfs(path: Any) -> Any:
        return _Docker64MB() if str(path) == "/dev/shm" else real(path)

    monkeypatch.setattr(os, "statvfs", statvfs)
    monkeypatch.setattr(nvml, "query", no_driver)


def test_tfgpu_run_does_not_warn_about_shm(
    small_shm: None, capsys: pytest.CaptureFixture[str]
) -> None:
    env = run.prepare({"PATH": os.defpath, "HOME": "/tmp"})
    err = capsys.readouterr().err
    assert "tfgpu:" in err  # the summary is there …
    assert SHM_TEXT not in err  # … without the warning
    assert shm.WARNED_MARK not in env


def test_the_hook_warns_once_per_process_tree(small_shm: None) -> None:
    first_out: dict[str, str] = {}
    first_err = io.StringIO()
    configure_tensorflow(standin_tf(gpus=0), {}, env_out=first_out, stderr=first_err)
    assert first_err.getvalue().count(SHM_TEXT) == 1
    assert "fix: docker run --shm-size=1g" in first_err.getvalue()
    assert first_out[shm.WARNED_MARK] == "1"
    # a process started afterwards (a tf.data or multiprocessing worker) inherits the mark
    second_err = io.StringIO()
    configure_tensorflow(standin_tf(gpus=0), dict(first_out), env_out={}, stderr=second_err)
    assert SHM_TEXT not in second_err.getvalue()


def test_the_hook_says_nothing_with_a_larger_shm(monkeypatch: pytest.MonkeyPatch) -> None:
    class Big:
        f_blocks, f_frsize = 262144, 4096  # 1 GiB

    monkeypatch.setattr(os, "statvfs", lambda path: Big())
    out: dict[str, str] = {}
    err = io.StringIO()
    configure_tensorflow(standin_tf(gpus=0), {}, env_out=out, stderr=err)
    assert SHM_TEXT not in err.getvalue() and out == {}


def test_check_reports_a_small_shm(small_shm: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_check, "run_child", lambda environ: TF_OK)
    doc, code = gpu_check.collect({})
    warnings = [p for p in doc["problems"] if p["severity"] == "warning"]
    assert [p["what"][: len(SHM_TEXT)] for p in warnings].count(SHM_TEXT) == 1
    assert code == 0


def test_in_a_pod_the_fix_is_the_volume_not_a_docker_flag(small_shm: None) -> None:
    """Before: every pod was told `docker run --shm-size=1g`, which means nothing there; a pod's
    /dev/shm is containerd's 64 MB, and the fix is a memory-backed emptyDir."""
    pod = {"KUBERNETES_SERVICE_HOST": "10.96.0.1"}
    in_pod = shm.shm_problem("/dev/shm", pod)
    assert in_pod is not None
    assert "emptyDir" in in_pod.fix and "medium: Memory" in in_pod.fix
    assert "--shm-size 1Gi" in in_pod.fix and "docker run" not in in_pod.fix
    err = io.StringIO()
    configure_tensorflow(standin_tf(gpus=0), pod, env_out={}, stderr=err)
    assert "emptyDir" in err.getvalue() and "docker run" not in err.getvalue()
    elsewhere = shm.shm_problem("/dev/shm", {})
    assert elsewhere is not None
    assert "docker run --shm-size=1g" in elsewhere.fix and "shm_size: 1gb" in elsewhere.fix
