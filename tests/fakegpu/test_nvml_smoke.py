"""tools/nvml_smoke.py, the TensorFlow-free, Docker-free smoke for a host with a driver, run
here against the fake NVML.

The kit's runtime asks NVML only where a driver's device node or /proc/driver/nvidia exists, so
the smoke runs in a private mount namespace (`unshare -m`, root) where /proc/driver holds a
fake `nvidia/version`; nothing outside that child sees it."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import fakegpu
from tests.ci_policy import ci_or_skip

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "tools" / "nvml_smoke.py"
CARDS = [fakegpu.FakeCard("Fake A100-SXM4-16GB", 16384), fakegpu.FakeCard("Fake L4", 8192)]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("nvml_smoke", SMOKE)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_smoke(tmp_path: Path, env: dict[str, str], *, driver_marker: bool = True) -> Any:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        reason = "needs root and unshare(1) for a private mount namespace"
        ci_or_skip(reason)
    (tmp_path / "driver" / "nvidia").mkdir(parents=True)
    (tmp_path / "driver" / "nvidia" / "version").write_text("NVRM version: fake\n")
    mount = f"mount --bind {tmp_path / 'driver'} /proc/driver && " if driver_marker else ""
    child_env = {k: v for k, v in os.environ.items() if not k.startswith(("TF_", "FAKEGPU_"))}
    child_env.update(env)
    done = subprocess.run(
        ["unshare", "-m", "sh", "-c", f'{mount}exec "{sys.executable}" "{SMOKE}"'],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    return done


def test_every_figure_agrees_on_two_fake_cards(tmp_path: Path) -> None:
    env = {
        "LD_LIBRARY_PATH": str(fakegpu.build()),
        **fakegpu.environment(CARDS, driver="535.104.05"),
    }
    done = run_smoke(tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert report["ok"] is True
    assert report["nvml"]["driver"] == "535.104.05"
    assert [g["total_bytes"] for g in report["nvml"]["gpus"]] == [16384 << 20, 8192 << 20]
    names = [c["check"] for c in report["checks"]]
    assert "tfgpu check: TF_GPU_MEM_LIMIT=25% resolves per card" in names
    assert "metrics: tfgpu_gpu_memory_total_bytes per card" in names
    # one driver verdict per TensorFlow version the kit offers
    assert sum(n.startswith("driver verdict for TensorFlow") for n in names) >= 10
    resolved = next(c for c in report["checks"] if c["check"].endswith("resolves per card"))
    assert resolved["got"] == [[4096.0], [2048.0]]
    # both fake cards are A100s (8.0): native for 2.16-2.21, PTX JIT for 2.12-2.15, agreed
    assert [g["compute_capability"] for g in report["nvml"]["gpus"]] == ["8.0", "8.0"]
    assert sum(n.startswith("GPU 0 with TensorFlow") for n in names) >= 10


def test_no_driver_cannot_run_exit_2(tmp_path: Path) -> None:
    done = run_smoke(tmp_path, {"LD_LIBRARY_PATH": ""}, driver_marker=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert json.loads(done.stdout)["ok"] is False
    assert "nvml_smoke: cannot run: NVML cannot start" in done.stderr


def test_a_wrong_figure_is_named() -> None:
    smoke = _load()
    truth = {
        "driver": "560.35.03",
        "gpus": [
            {"index": 0, "compute_capability": "9.0", "total_bytes": 16384 << 20, "used_bytes": 0}
        ],
    }
    plan = {"gpu_limits_mib": [[4096.0]]}
    good = {
        "percent": {
            "driver": {"version": "560.35.03"},
            "gpus": [{"total_mib": 16384.0, "compute_capability": "9.0"}],
            "plan": plan,
        },
        "per_gpu": {"plan": {"gpu_limits_mib": [[1024.0]]}},
        "over": {"problems": [{"severity": "error", "what": "TF_GPU_MEM_LIMIT … 16384 MiB"}]},
        "build_check": {
            "driver": "560.35.03",
            "gpu_arch": "sm_90",
            "results": [
                {
                    "tensorflow": "2.21.0",
                    "verdict": "native",
                    "kernels": {"status": "ptx-jit"},
                    "xla": {"status": "ptx-jit"},
                }
            ],
        },
        "runtime_verdicts": {"2.21.0": None},
        "gpu_verdicts": {"2.21.0": [{"index": 0, "kernels": "ptx-jit", "xla": "ptx-jit"}]},
        "metrics": {
            "tfgpu_gpu_memory_total_bytes": [({"gpu": "0"}, float(16384 << 20))],
            "tfgpu_gpu_memory_used_bytes": [({"gpu": "0"}, 1.0)],
        },
    }
    assert all(c["ok"] for c in smoke.judge(truth, good))
    wrong = json.loads(json.dumps(good))
    wrong["percent"]["plan"] = {"gpu_limits_mib": [[4000.0]]}
    wrong["runtime_verdicts"] = {"2.21.0": "error"}
    wrong["gpu_verdicts"] = {"2.21.0": [{"index": 0, "kernels": "native", "xla": "native"}]}
    failed = [c["check"] for c in smoke.judge(truth, wrong) if not c["ok"]]
    assert failed == [
        "tfgpu check: TF_GPU_MEM_LIMIT=25% resolves per card",
        "driver verdict for TensorFlow 2.21.0: build side and runtime agree",
        "GPU 0 with TensorFlow 2.21.0: the runtime's kernels and XLA verdicts are the build side's",
    ]
