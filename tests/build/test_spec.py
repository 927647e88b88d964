"""Spec validation: a bad spec names the file, the key path and what was expected."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tfgpu_kit import cli
from tfgpu_kit.matrix import spec
from tfgpu_kit.shared.errors import EXIT_SPEC, SpecError

ROOT = Path(__file__).resolve().parents[2]


def copy_spec(tmp_path: Path) -> Path:
    for name in ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml", "cuda-wheels.lock.yaml"):
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
        ("images.yaml", lambda d: d["versions"].append({"version": "2.99.0"}),
         "versions.10.version: 2.99.0 is not in matrix.yaml"),
        ("images.yaml", lambda d: d["versions"][0].__setitem__("base_python", "3.11"),
         "versions.0.base_python: unknown key"),
        ("images.yaml", lambda d: d.__setitem__("cuda_source", "system"),
         "cuda_source: Input should be 'auto', 'base' or 'wheels'"),
        ("images.yaml", lambda d: d["base"].__setitem__("repository", "team/tensorflow"),
         "bases.yaml describes 'tensorflow/tensorflow'; describe your base's contents there"),
        ("bases.yaml", lambda d: d["versions"].pop("2.21.0"),
         "versions: 2.21.0 (offered in images.yaml): bases.yaml does not say what its base"),
        ("bases.yaml", lambda d: d["versions"]["2.21.0"].__setitem__("recipe", "cuda13"),
         "versions.2.21.0.recipe: 'cuda13' is not under `recipes:`"),
        ("bases.yaml", lambda d: d["recipes"]["cuda12.3-ubuntu22.04"].__setitem__("cudnn", "8.x"),
         "recipes.cuda12.3-ubuntu22.04.cudnn: expected a dotted version"),
        ("bases.yaml", lambda d: d["recipes"]["cuda12.3-ubuntu22.04"].__setitem__("cuda", "12.4.0"),
         "recipes.cuda12.3-ubuntu22.04.cuda: 12.4.0 has no entry under `cuda:`"),
        ("bases.yaml",
         lambda d: d["recipes"]["cuda12.3-ubuntu22.04"]["env"].pop("NVIDIA_REQUIRE_CUDA"),
         "env: NVIDIA_REQUIRE_CUDA is missing"),
        ("bases.yaml", lambda d: d["recipes"]["cuda12.3-ubuntu22.04"].__setitem__("commit", "9f81"),
         "recipes.cuda12.3-ubuntu22.04.commit"),
        ("matrix.yaml",
         lambda d: d["tensorflow"]["2.21.0"]["and_cuda"].__setitem__(0, "nvidia-cublas-cu12>=12.5"),
         "tensorflow.2.21.0.and_cuda.0: expected a lowercase package pinned exactly"),
        ("matrix.yaml", lambda d: d["tensorflow"]["2.21.0"]["and_cuda"].pop(5),
         "and_cuda: expected exactly one nvidia-cudnn-cuXX pin"),
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
        # the slim variant
        ("images.yaml", lambda d: d["variants"]["gpu-slim"].pop("versions"),
         "a slim variant lists its versions; another lists none"),
        ("images.yaml", lambda d: d["variants"]["gpu"].__setitem__("versions", ["2.21.0"]),
         "a slim variant lists its versions; another lists none"),
        ("images.yaml", lambda d: d["variants"]["gpu-slim"].__setitem__("base", "thin"),
         "variants.gpu-slim.base: Input should be 'official' or 'slim'"),
        ("images.yaml", lambda d: d["variants"]["gpu-slim"]["versions"].append("2.11.0"),
         "variants.gpu-slim.versions: 2.11.0 is not offered"),
        ("bases.yaml", lambda d: d["slim"]["nvidia_env"].__setitem__("bad name", "x"),
         "slim.nvidia_env.bad name"),
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
    shutil.copytree(ROOT / "fakegpu", checkout / "fakegpu")  # build.py verify's GPU probe
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


# --- the bases' Python (bases.yaml) against the runtime's requires-python (a temporary spec and
# pyproject, so the tests do not depend on the committed floor or on the committed Pythons) ---


def runtime_pyproject(tmp_path: Path, requires: str | None) -> Path:
    path = tmp_path / "pyproject.toml"
    line = f'requires-python = "{requires}"\n' if requires is not None else ""
    path.write_text(f'[build-system]\nrequires = []\n\n[project]\nname = "tfgpu"\n{line}')
    return path


def spec_with_pythons(tmp_path: Path, pythons: dict[str, str]) -> spec.Spec:
    """The committed spec with the Python of some recipes changed."""
    directory = copy_spec(tmp_path)

    def change(data: dict[str, dict[str, dict[str, str]]]) -> None:
        for name, python in pythons.items():
            data["recipes"][name]["python"] = python

    edit(directory / "bases.yaml", change)
    return spec.load(directory)


OLD = "cuda11.8-ubuntu20.04"  # the recipe of the 2.12 and 2.13 bases (Python 3.8)
NEW = "cuda12.3-ubuntu22.04"  # 2.16.1 to 2.21.0 (Python 3.11)


def test_base_python_below_runtime_floor_is_a_spec_error(tmp_path: Path) -> None:
    loaded = spec_with_pythons(tmp_path, {})
    pyproject = runtime_pyproject(tmp_path, ">=3.9")
    with pytest.raises(SpecError) as info:
        spec.check_base_python(loaded, pyproject=pyproject)
    message = str(info.value)
    assert str(tmp_path / "bases.yaml") in message
    assert f"recipes.{OLD}.python: 3.8 (base of TensorFlow 2.13.0)" in message
    assert f"recipes.{OLD}.python: 3.8 (base of TensorFlow 2.12.0)" in message
    assert "requires-python '>=3.9'" in message and str(pyproject) in message
    assert info.value.exit_code == EXIT_SPEC
    # only the versions asked about are checked
    spec.check_base_python(loaded, ["2.21.0", "2.14.0"], pyproject=pyproject)
    with pytest.raises(SpecError, match=r"base of TensorFlow 2\.12\.0") as one:
        spec.check_base_python(loaded, ["2.12.0"], pyproject=pyproject)
    assert "2.13.0" not in str(one.value)


@pytest.mark.parametrize("requires", [">=3.8", ">=3.8,<3.14", "~=3.8", None])
def test_base_python_allowed_by_the_runtime(tmp_path: Path, requires: str | None) -> None:
    loaded = spec_with_pythons(tmp_path, {})
    spec.check_base_python(loaded, pyproject=runtime_pyproject(tmp_path, requires))


def test_base_python_above_the_runtime_ceiling(tmp_path: Path) -> None:
    loaded = spec_with_pythons(tmp_path, {NEW: "3.13"})
    with pytest.raises(SpecError, match=rf"recipes\.{NEW}\.python: 3\.13 .*'>=3\.9,<3\.13'"):
        spec.check_base_python(loaded, pyproject=runtime_pyproject(tmp_path, ">=3.9,<3.13"))


def test_unreadable_requires_python_is_named(tmp_path: Path) -> None:
    loaded = spec_with_pythons(tmp_path, {})
    with pytest.raises(SpecError, match=r"requires-python: '>=3\.9 and <4' is not a PEP 440"):
        spec.check_base_python(loaded, pyproject=runtime_pyproject(tmp_path, ">=3.9 and <4"))
    with pytest.raises(SpecError, match="cannot be read"):
        spec.check_base_python(loaded, pyproject=tmp_path / "missing.toml")


@pytest.mark.parametrize(
    ("python", "requires", "ok"),
    [
        ("3.8", ">=3.9", False), ("3.9", ">=3.9", True), ("3.13", ">=3.9,<3.13", False),
        ("3.12", ">=3.9,<3.13", True), ("3.10", "!=3.10.*", False), ("3.11", "!=3.10.*", True),
        ("3.8", "==3.8.*", True), ("3.9", "~=3.8", True), ("3.8", "~=3.8.1", False),
        ("3.8", ">3.8", False), ("3.8", "<=3.8", True), ("3.11", " >= 3.9 ", True),
    ],
)  # fmt: skip
def test_python_satisfies(python: str, requires: str, ok: bool) -> None:
    assert spec.python_satisfies(python, requires) is ok


def test_build_fails_early_on_a_base_the_runtime_does_not_support(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "spec").mkdir()
    spec_with_pythons(tmp_path / "spec", {})
    monkeypatch.setattr(spec, "IMAGES_DIR", tmp_path / "spec")
    monkeypatch.setattr(spec, "RUNTIME_PYPROJECT", runtime_pyproject(tmp_path, ">=3.9"))
    assert cli.main(["build", "--dry-run", "2.13.0-gpu"]) == EXIT_SPEC
    assert f"recipes.{OLD}.python: 3.8" in capsys.readouterr().err
    # other images still build; bake writes its file and warns, --assemble refuses
    assert cli.main(["build", "--dry-run", "--json", "2.14.0-gpu"]) == 0
    assert cli.main(["bake", "2.13.0-gpu"]) == 0
    captured = capsys.readouterr()
    assert "2_13_0-gpu" in captured.out and f"recipes.{OLD}.python" in captured.err
    contexts = tmp_path / "contexts"
    assert cli.main(["bake", "2.13.0-gpu", "--assemble", "--contexts", str(contexts)]) == EXIT_SPEC
    assert not contexts.exists()
    # a runtime that allows 3.8 lets it through
    monkeypatch.setattr(spec, "RUNTIME_PYPROJECT", runtime_pyproject(tmp_path, ">=3.8"))
    assert cli.main(["build", "--dry-run", "--json", "2.13.0-gpu"]) == 0
