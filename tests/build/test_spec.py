"""Spec validation: a bad spec names the file, the key path and what was expected."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tfgpu_kit import spec
from tfgpu_kit.errors import EXIT_SPEC, SpecError

ROOT = Path(__file__).resolve().parents[2]


def copy_spec(tmp_path: Path) -> Path:
    for name in ("matrix.yaml", "images.yaml"):
        shutil.copy(ROOT / "images" / name, tmp_path / name)
    return tmp_path


def edit(path: Path, change: object) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)  # type: ignore[operator]
    path.write_text(yaml.safe_dump(data))


def test_committed_spec_is_valid() -> None:
    loaded = spec.load()
    assert loaded.default_version == "2.21.0"
    assert set(loaded.images.variants) >= {"gpu", "gpu-jupyter"}
    assert [v.version for v in loaded.images.versions][-1] == "2.12.0"


@pytest.mark.parametrize(
    ("file", "change", "expected"),
    [
        ("images.yaml", lambda d: d["user"].__setitem__("uid", "root"), "user.uid"),
        ("images.yaml", lambda d: d["user"].__setitem__("uid", 0), "user.uid"),
        ("images.yaml", lambda d: d.__setitem__("repositry", "x"), "repositry: unknown key"),
        ("images.yaml", lambda d: d.pop("repository"), "repository: required key is missing"),
        ("images.yaml",
         lambda d: d["versions"].append({"version": "2.99.0", "base_python": "3.11"}),
         "versions.10.version: 2.99.0 is not in matrix.yaml"),
        ("images.yaml", lambda d: d["variants"]["gpu"].__setitem__("pip", ["bad name!"]),
         "variants.gpu.pip.0"),
        ("images.yaml", lambda d: d["variants"]["gpu"].__setitem__("apt", ["Bad_Name"]),
         "variants.gpu.apt.0: expected a Debian package name (optionally pinned, name=version)"),
        # per-version extra packages: validated like the variant's
        ("images.yaml", lambda d: d["versions"][0].__setitem__("pip", ["bad name!"]),
         "versions.0.pip.0: expected a package name (optionally pinned, name==1.2)"),
        ("images.yaml", lambda d: d["versions"][1].__setitem__("apt", ["git", "-rf"]),
         "versions.1.apt.1: expected a Debian package name"),
        ("images.yaml", lambda d: d["versions"][0].__setitem__("pip", "requests"),
         "versions.0.pip: Input should be a valid list"),
        ("images.yaml", lambda d: d["versions"][0].__setitem__("apk", ["git"]),
         "versions.0.apk: unknown key"),
        ("images.yaml", lambda d: d["variants"]["gpu-jupyter"]["jupyter"].__setitem__("port", 9999),
         "jupyter.port 9999 does not appear in cmd"),
        ("matrix.yaml", lambda d: d["tensorflow"]["2.21.0"].__setitem__("cuda", "12.x"),
         "tensorflow.2.21.0.cuda: expected a dotted version"),
        ("matrix.yaml", lambda d: d["tensorflow"]["2.21.0"].__setitem__("cuda", "12.6.0"),
         "12.6.0 has no entry under `cuda:`"),
        ("matrix.yaml", lambda d: d["tensorflow"]["2.21.0"]["arches"].__setitem__("ptx", ["sm_90"]),
         "expected a compute_XY code"),
        ("matrix.yaml", lambda d: d["cuda"]["12.5.1"].pop("driver_min"),
         "cuda.12.5.1.driver_min: required key is missing"),
    ],
)  # fmt: skip
def test_bad_spec_names_file_key_and_expectation(
    tmp_path: Path, file: str, change: object, expected: str
) -> None:
    directory = copy_spec(tmp_path)
    edit(directory / file, change)
    with pytest.raises(SpecError) as info:
        spec.load(directory)
    message = str(info.value)
    assert str(directory / file) in message
    assert expected in message


def test_yaml_syntax_error_names_line(tmp_path: Path) -> None:
    directory = copy_spec(tmp_path)
    (directory / "images.yaml").write_text("repository: [unclosed\n")
    with pytest.raises(SpecError, match=r"images.yaml: line 2"):
        spec.load(directory)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="cannot be read"):
        spec.load(tmp_path)


def test_cli_bad_spec_exit_code_no_traceback(tmp_path: Path) -> None:
    """build.py with a broken images/ prints the spec error and exits 3 without a traceback."""
    checkout = tmp_path / "kit"
    shutil.copytree(ROOT / "tfgpu_kit", checkout / "tfgpu_kit")
    shutil.copytree(ROOT / "images", checkout / "images")
    shutil.copytree(ROOT / "templates", checkout / "templates")
    shutil.copy(ROOT / "build.py", checkout / "build.py")
    edit(checkout / "images" / "images.yaml", lambda d: d["user"].__setitem__("uid", -5))
    result = subprocess.run(
        [sys.executable, "build.py", "matrix"], cwd=checkout, capture_output=True, text=True
    )
    assert result.returncode == EXIT_SPEC
    assert "Traceback" not in result.stderr
    assert "user.uid" in result.stderr
