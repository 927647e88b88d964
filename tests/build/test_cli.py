"""build.py as users run it: --help everywhere, data on stdout, exit codes, no tracebacks."""

from __future__ import annotations

import ast
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tfgpu_kit.cli import COMMANDS
from tfgpu_kit.cli.command import Command
from tfgpu_kit.matrix import spec as specs

COMMAND_NAMES = [command.name for command in COMMANDS]

ROOT = Path(__file__).resolve().parents[2]


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "build.py", *args], cwd=ROOT, capture_output=True, text=True,
        env={**os.environ, "NO_COLOR": "1", **(env or {})}, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize("command", [*COMMAND_NAMES, None])
def test_help(command: str | None) -> None:
    result = run(*([command] if command else []), "--help")
    assert result.returncode == 0
    assert "exit codes" in result.stdout


def test_matrix_json_on_stdout_only() -> None:
    result = run("matrix", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    row = next(r for r in data if r["tensorflow"] == "2.21.0")
    assert row["cuda"] == "12.5.1" and row["driver_min"] == "555.42.06" and row["default"]


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (["check", "--driver", "abc"], 2, "'abc' is not a driver version"),
        (["check", "--driver", ""], 2, "empty driver version"),
        (["check", "--driver", "535", "--tf", "3.0"], 2, "--tf 3.0: not in the matrix"),
        (["check", "--driver", "535.104.05", "--gpu-arch", "h100"], 2, "not a GPU architecture"),
        # an empty value (an unset shell variable) is refused, not silently judged without arch
        (["check", "--driver", "535.104.05", "--gpu-arch", ""], 2, "not a GPU architecture"),
        (["build", "--dry-run", "9.9.9"], 2, "matches no image"),
        (
            ["build", "--dry-run", "--driver", "470.82.01", "2.21.0-gpu"],
            1,
            "refusing to build 2.21.0-gpu",
        ),
        # tags and FROM lines are built from these: refused before anything is printed
        (["build", "--dry-run", "--registry", "A B"], 2, "--registry 'A B' is not a registry"),
        (["build", "--dry-run", "--registry", ""], 2, "--registry '' is not a registry"),
        (
            ["build", "--dry-run", "--base-registry", "Mirror.local:x"],
            2,
            "--base-registry 'Mirror.local:x' is not a registry: accepted: a lowercase host",
        ),
        (["bake", "--registry", "reg example"], 2, "example: --registry registry.example.com"),
        (["bake", "--base-registry=mirror_.local"], 2, "--base-registry 'mirror_.local' is not a"),
        (["nosuchcommand"], 2, "invalid choice"),
        # a path that cannot be written: named, no traceback
        (["render", "--out", "/proc/tfgpu-no-such-dir/x"], 5, "error: /proc/tfgpu-no-such-dir"),
    ],
)
def test_error_paths(args: list[str], code: int, message: str) -> None:
    result = run(*args)
    assert result.returncode == code, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr


def test_check_exit_codes_and_json() -> None:
    ok = run("check", "--driver", "560.35.03", "--tf", "2.21", "--json")
    assert ok.returncode == 0
    assert json.loads(ok.stdout)["results"][0]["verdict"] == "native"
    bad = run("check", "--driver", "525.60.13", "--gpu-arch", "sm_90", "--tf", "2.21.0", "--json")
    assert bad.returncode == 1
    result = json.loads(bad.stdout)["results"][0]
    assert result["ptx_jit_failure"] and result["verdict"] == "does not run"


def test_check_answers_a_patch_release_with_its_minors_build_and_says_so() -> None:
    minor = run("check", "--driver", "535.104.05", "--tf", "2.14", "--json")
    [row] = json.loads(minor.stdout)["results"]
    assert (row["tensorflow"], row["requested"], row["note"]) == ("2.14.0", "2.14.0", None)
    patch = run("check", "--driver", "535.104.05", "--tf", "2.14.1", "--json")
    assert patch.returncode == 0, patch.stderr
    [row] = json.loads(patch.stdout)["results"]
    assert (row["tensorflow"], row["requested"], row["cuda"]) == ("2.14.0", "2.14.1", "11.8.0")
    assert "answered with 2.14.0's build" in row["note"]
    assert "2.14.1's own build configuration is not recorded" in " ".join(patch.stderr.split())
    table = run("check", "--driver", "535.104.05", "--tf", "2.14.1")
    assert "2.14.1 (as 2.14.0)" in table.stdout
    unknown = run("check", "--driver", "535.104.05", "--tf", "2.14.9")
    assert unknown.returncode == 2
    assert "patch releases: 2.12.1" in unknown.stderr


def test_a_patch_release_must_belong_to_its_entry() -> None:
    text = (ROOT / "images" / "matrix.yaml").read_text()
    bad = text.replace('patches: ["2.14.1"]', 'patches: ["2.15.3"]', 1)
    assert bad != text
    with pytest.raises(ValueError, match=r"2\.14\.0\.patches: 2\.15\.3 is not a later release"):
        specs.Matrix.model_validate(yaml.safe_load(bad))


def test_check_gpu_arch_recommends_only_versions_that_run_there() -> None:
    # 535 + H100: 2.16-2.21 cover sm_90 only by PTX, which a 535 driver cannot JIT (their CUDA
    # is newer); 2.15.0 (CUDA 12.2, natively) is the newest that runs
    result = run("check", "--driver", "535.104.05", "--gpu-arch", "sm_90", "--tf", "2.21.0")
    assert result.returncode == 1
    text = " ".join(re.sub(r"[│┃]", " ", result.stdout).split())  # the table folds long cells
    assert "newest TensorFlow that the driver runs, not known to fail on sm_90: 2.15.0" in text
    assert "not assessed" not in text  # every release's architectures are known now
    data = run("check", "--driver", "535.104.05", "--gpu-arch", "sm_90", "--tf", "2.21.0", "--json")
    row = json.loads(data.stdout)["results"][0]
    assert row["newest_runnable_tensorflow"] == "2.15.0"
    assert row["newest_unassessed_tensorflow"] is None


def test_check_without_driver_and_without_nvml() -> None:
    result = run("check")
    # this machine has no NVIDIA driver: said clearly, exit 1, no traceback
    assert result.returncode == 1
    assert "no NVIDIA driver found" in result.stderr
    assert "Traceback" not in result.stderr


def test_build_dry_run_output() -> None:
    result = run("build", "--dry-run", "--base-registry", "tfgpu-standin.local", "--registry",
                 "reg.example", "2.21.0", "--json")  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)
    assert [r["image"] for r in rows] == ["2.21.0-gpu", "2.21.0-gpu-jupyter", "2.21.0-gpu-slim"]
    assert rows[2]["base"] == "tfgpu-standin.local/library/python:3.11-slim-bookworm"
    assert rows[0]["base"] == "tfgpu-standin.local/tensorflow/tensorflow:2.21.0-gpu"
    assert rows[0]["tags"] == [
        "reg.example/tfgpu/tensorflow:2.21.0-gpu",
        "reg.example/tfgpu/tensorflow:2.21-gpu",
        "reg.example/tfgpu/tensorflow:latest-gpu",
        "reg.example/tfgpu/tensorflow:2.21.0-gpu-py311-cu125",
    ]
    default = run("build", "--dry-run", "--json")  # no selector: the newest version only
    newest = ["2.21.0-gpu", "2.21.0-gpu-jupyter", "2.21.0-gpu-slim"]
    assert [r["image"] for r in json.loads(default.stdout)] == newest
    table = run("build", "--dry-run", "2.14.0-gpu")
    assert "tfgpu/tensorflow:2.14.0-gpu-py311-cu118" in table.stdout
    assert "nothing built" in table.stderr


def test_build_force_overrides_driver_refusal() -> None:
    result = run("build", "--dry-run", "--driver", "470.82.01", "--force", "2.21.0-gpu")
    assert result.returncode == 0
    assert "does not run" in result.stderr


def test_render_check_passes_and_out_dir(tmp_path: Path) -> None:
    assert run("render", "--check").returncode == 0
    result = run("render", "--out", str(tmp_path), "--check")
    assert result.returncode == 1
    assert "2.21.0-gpu/Dockerfile: missing" in result.stdout
    assert run("render", "--out", str(tmp_path)).returncode == 0
    assert (tmp_path / "2.21.0-gpu" / "Dockerfile").read_text() == (
        ROOT / "dockerfiles" / "2.21.0-gpu" / "Dockerfile"
    ).read_text()


def test_bake_file() -> None:
    result = run("bake", "gpu-jupyter", "--base-registry", "mirror.local")
    assert result.returncode == 0, result.stderr
    bake = json.loads(result.stdout)
    target = bake["target"]["2_21_0-gpu-jupyter"]
    assert target["args"]["BASE_REGISTRY"] == "mirror.local"
    assert "tfgpu/tensorflow:latest-gpu-jupyter" in target["tags"]
    assert len(bake["group"]["default"]["targets"]) == 10


def test_no_docker_engine_is_a_docker_error() -> None:
    result = run(
        "verify", "tfgpu/tensorflow:2.21.0-gpu", env={"DOCKER_HOST": "unix:///nonexistent.sock"}
    )
    assert result.returncode == 4
    assert "no Docker engine answers" in result.stderr
    assert "Traceback" not in result.stderr


def test_bake_base_registry_trailing_slash_like_build() -> None:
    # `build` strips it; bake passed `mirror.local:5000/` on, giving FROM mirror.local:5000//…
    result = run("bake", "2.21.0-gpu", "--base-registry", "mirror.local:5000/")
    assert result.returncode == 0, result.stderr
    target = json.loads(result.stdout)["target"]["2_21_0-gpu"]
    assert target["args"]["BASE_REGISTRY"] == "mirror.local:5000"


def test_bake_labels_the_locked_base_digest(tmp_path: Path) -> None:
    # bases.lock.yaml's digest goes into the base.digest label as `build` does; where the lock does
    # not know it (null) the label says unknown, and a mirror's bases are never vouched for
    from tfgpu_kit.image import bake
    from tfgpu_kit.matrix import catalog
    from tfgpu_kit.matrix.locks import base_lock

    spec = specs.load()
    images = [i for i in catalog.images(spec) if i.name in ("2.21.0-gpu", "2.20.0-gpu")]
    known = "sha256:" + "5" * 64
    lock = base_lock.BaseLock(
        bases={
            base_lock.official_ref(images[0]): base_lock.LockedBase(digest=known),
            base_lock.official_ref(images[1]): base_lock.LockedBase(),
        }
    )
    digests = base_lock.BaseDigests(lock, images, base_registry=None)
    locked = {i.name: d for i in images if (d := digests.digest(i, None)) is not None}
    data = bake.bake_file(
        images,
        contexts=tmp_path,
        registry=None,
        base_registry=None,
        buildargs={"TFGPU_BASE_DIGEST": "unknown"},
        base_digests=locked,
    )
    assert data["target"]["2_21_0-gpu"]["args"]["TFGPU_BASE_DIGEST"] == known
    assert data["target"]["2_20_0-gpu"]["args"]["TFGPU_BASE_DIGEST"] == "unknown"
    mirror = base_lock.BaseDigests(lock, images, base_registry="mirror.local")
    assert mirror.digest(images[0], []) is None


RUN_MAX_LINES = 15  # run() parses nothing itself and makes one call into the package


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: c.name)
def test_every_command_is_thin(command: Command) -> None:
    """A command module holds its arguments and a short run(); what the command does lives in
    the package (driver_check, matrix_table, plan.planner, …), where tests reach it."""
    module = sys.modules[command.run.__module__]
    run_lines = inspect.getsource(command.run).splitlines()
    assert len(run_lines) <= RUN_MAX_LINES, f"{module.__name__}.run: {len(run_lines)} lines"
    tree = ast.parse(inspect.getsource(module))
    helpers = [
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
        and node.name not in ("run", "add_arguments")
        and not node.name.endswith("_arguments")
    ]
    assert helpers == [], f"{module.__name__}: move {helpers} into the package"
