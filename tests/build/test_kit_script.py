"""`./kit` from another folder works on the user's files, in the user's folder: `plan
compose.yaml` judges their compose file (not the kit's own), `k8s --out DIR` writes there; and
build.py run by a Python without the kit's dependencies says so in one line, exit 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
KIT = ROOT / "kit"


def kit(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [str(KIT), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=300
    )


def test_kit_reads_and_writes_relative_paths_in_the_callers_folder(tmp_path: Path) -> None:
    compose = {"services": {"mine": {"image": "x", "environment": {"TF_GPU_MEM_LIMIT": "4MB"}}}}
    (tmp_path / "compose.yaml").write_text(yaml.safe_dump(compose))
    judged = kit(tmp_path, "plan", "compose.yaml", "--gpu-memory", "16GiB")
    # the user's file, with its bad value: not the kit's compose.yaml, which passes
    assert judged.returncode == 1, judged.stdout + judged.stderr
    assert "services.mine" in judged.stdout and "TF_GPU_MEM_LIMIT='4MB'" in judged.stdout
    written = kit(tmp_path, "k8s", "--name", "t", "--image", "x/y:1", "--out", "out")
    assert written.returncode == 0, written.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["deployment.yaml", "job.yaml"]
    assert not (ROOT / "out").exists()


def test_build_py_without_its_dependencies_says_what_to_run() -> None:
    # -S: no site-packages, so the kit's dependencies are missing, as under a bare python3
    done = subprocess.run(
        [sys.executable, "-S", str(ROOT / "build.py"), "matrix"],
        capture_output=True, text=True, timeout=60, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr
    assert lines[0].startswith("build.py: No module named") and "run ./kit instead" in lines[0]
