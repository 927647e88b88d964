"""A "data only" change to images/*.yaml must never add a Dockerfile instruction.

Hostile strings (newlines, control and bidi characters, Jinja syntax, shell metacharacters, YAML
syntax) are put into each spec field that reaches a Dockerfile; the spec is either refused with a
SpecError naming that field, or renders Dockerfiles with the same instructions as the benign spec
(instruction keywords per logical line, continuation-aware)."""

from __future__ import annotations

import copy
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tfgpu_kit.image import render
from tfgpu_kit.matrix import catalog
from tfgpu_kit.matrix import spec as specs
from tfgpu_kit.shared.errors import SpecError

ROOT = Path(__file__).resolve().parents[2]
VERSION = "2.21.0"  # the first offered version: its images are the ones rendered
EXAMPLES = 30  # per field: 27 fields x 30 examples render in about 15 s
COUNTS: dict[str, dict[str, int]] = {}

INJECTIONS = [
    "\nRUN touch /injected",
    "\r\nRUN touch /injected",
    "\\\nRUN touch /injected",
    "\u2028RUN touch /injected",
    "\u0085RUN x",
    "\x0bRUN x",
    "\x00",
    "\x1b[2J",
    "\u202e",
    "\u2066",
    "\u200b",
    "{{ 7 * 7 }}",
    "{% if true %}x{% endif %}",
    "{# c #}",
    "$(touch /injected)",
    "`id`",
    "; rm -rf /",
    " && curl x | sh",
    '" \\',
    "'",
    "${HOME}",
    "#",
    ": value",
    "- item",
    "&anchor",
    "*alias",
    "!!python/object/apply:os.system ['id']",
    "{a: b}",
    "[x]",
    " ",
    "\t",
    "\\",
    "=1.0",
]


def _hostile(benign: str) -> st.SearchStrategy[str]:
    injection = st.sampled_from(INJECTIONS)
    noise = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
    return st.one_of(
        injection.map(lambda bad: benign + bad),
        injection.map(lambda bad: bad + benign),
        st.tuples(injection, injection).map(lambda p: benign[:3] + p[0] + benign[3:] + p[1]),
        noise.map(lambda extra: benign + extra),
        injection,
    )


Setter = Callable[[dict[str, Any], str], None]


def _at(*path: str | int) -> Setter:
    def set_value(files: dict[str, Any], value: str) -> None:
        node: Any = files
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = value

    return set_value


def _listed(*path: str | int) -> Setter:
    """A list of one value at `path` (an image's extra apt or pip packages)."""
    inner = _at(*path)
    return lambda files, value: inner(files, [value])  # type: ignore[arg-type]


def _rename(*path: str, key: str) -> Setter:
    """Rename the dict key `key` under `path` to the value (a recipe's, a variant's name)."""

    def set_value(files: dict[str, Any], value: str) -> None:
        node = files
        for part in path:
            node = node[part]
        node[value] = node.pop(key)
        if path == ("bases.yaml", "recipes"):
            for entry in files["bases.yaml"]["versions"].values():
                if entry["recipe"] == key:
                    entry["recipe"] = value

    return set_value


def _recipe_name() -> str:
    bases = yaml.safe_load((ROOT / "images" / "bases.yaml").read_text())
    return str(bases["versions"][VERSION]["recipe"])


RECIPE = _recipe_name()
IMAGES = ("images.yaml",)
ENV = ("bases.yaml", "recipes", RECIPE, "env")

# (field as SpecError names it, how to set it, a benign value)
FIELDS: list[tuple[str, Setter, str]] = [
    ("repository", _at(*IMAGES, "repository"), "tfgpu/tensorflow"),
    ("base.registry", _at(*IMAGES, "base", "registry"), "docker.io"),
    ("versions.0.version", _at(*IMAGES, "versions", 0, "version"), VERSION),
    ("versions.0.apt.0", _listed(*IMAGES, "versions", 0, "apt"), "curl"),
    ("versions.0.pip.0", _listed(*IMAGES, "versions", 0, "pip"), "keras-tuner==1.4.7"),
    ("user.name", _at(*IMAGES, "user", "name"), "tfgpu"),
    ("runtime_extras.0", _at(*IMAGES, "runtime_extras", 0), "prometheus-client"),
    ("variants.gpu.base_suffix", _at(*IMAGES, "variants", "gpu", "base_suffix"), "-gpu"),
    ("variants.gpu.cmd.0", _at(*IMAGES, "variants", "gpu", "cmd", 0), "bash"),
    ("variants.gpu.apt.0", _listed(*IMAGES, "variants", "gpu", "apt"), "graphviz=2.42"),
    ("variants.gpu.pip.0", _listed(*IMAGES, "variants", "gpu", "pip"), "pandas"),
    ("variants", _rename(*IMAGES, "variants", key="gpu"), "gpu"),
    ("repository", _at("bases.yaml", "repository"), "tensorflow/tensorflow"),
    ("recipes", _rename("bases.yaml", "recipes", key=RECIPE), RECIPE),
    (
        f"recipes.{RECIPE}.env.NV_CUDA_COMPAT_PACKAGE",
        _at(*ENV, "NV_CUDA_COMPAT_PACKAGE"),
        "cuda-compat-12-3",
    ),
    (
        f"recipes.{RECIPE}.env.NVIDIA_REQUIRE_CUDA",
        _at(*ENV, "NVIDIA_REQUIRE_CUDA"),
        "cuda>=12.3 brand=tesla,driver>=470,driver<471",
    ),
    (f"recipes.{RECIPE}.env.PATH", _at(*ENV, "PATH"), "/usr/local/cuda/bin:/usr/bin:/bin"),
    (f"recipes.{RECIPE}.env", _rename(*ENV, key="LANG"), "LANG"),
    (
        f"recipes.{RECIPE}.from_image",
        _at("bases.yaml", "recipes", RECIPE, "from_image"),
        "nvidia/cuda:12.3.0-base-ubuntu22.04",
    ),
    (f"recipes.{RECIPE}.python", _at("bases.yaml", "recipes", RECIPE, "python"), "3.11"),
    (f"recipes.{RECIPE}.cuda", _at("bases.yaml", "recipes", RECIPE, "cuda"), "12.3.1"),
    (
        f"recipes.{RECIPE}.site_packages",
        _at("bases.yaml", "recipes", RECIPE, "site_packages"),
        "/usr/local/lib/python3.11/dist-packages",
    ),
    (
        f"recipes.{RECIPE}.targets.jupyter.workdir",
        _at("bases.yaml", "recipes", RECIPE, "targets", "jupyter", "workdir"),
        "/tf",
    ),
    (
        f"recipes.{RECIPE}.targets.gpu.user",
        _at("bases.yaml", "recipes", RECIPE, "targets", "gpu", "user"),
        "root",
    ),
    (
        f"versions.{VERSION}.released",
        _at("bases.yaml", "versions", VERSION, "released"),
        "2026-01-01",
    ),
    (f"tensorflow.{VERSION}.cudnn", _at("matrix.yaml", "tensorflow", VERSION, "cudnn"), "9.3.0"),
    (
        f"tensorflow.{VERSION}.python.1",
        _at("matrix.yaml", "tensorflow", VERSION, "python", 1),
        "3.13",
    ),
]

DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
SPEC_FILES = ("matrix.yaml", "images.yaml", "bases.yaml", "gpus.yaml")
ORIGINAL = {name: yaml.safe_load((ROOT / "images" / name).read_text()) for name in SPEC_FILES}


def instructions(dockerfile: str) -> list[str]:
    """The instruction keyword of each logical line: comment and blank lines skipped (also
    inside a continuation, as Docker's parser skips them), a line ending in `\\` continued."""
    found = []
    continued = False
    for line in dockerfile.splitlines():
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        if not continued:
            found.append(stripped.split()[0].upper())
        continued = stripped.endswith("\\")
    return found


def _render(files: dict[str, Any]) -> dict[str, list[str]] | SpecError:
    """The instructions of the first version's Dockerfiles, or the SpecError of the spec."""
    with tempfile.TemporaryDirectory(prefix="tfgpu-hostile-") as tmp:
        for name in SPEC_FILES:
            (Path(tmp) / name).write_text(yaml.dump(files[name], Dumper=DUMPER), encoding="utf-8")
        shutil.copy(ROOT / "images" / "cuda-wheels.lock.yaml", tmp)
        try:
            spec = specs.load(Path(tmp))
            images = [i for i in catalog.images(spec) if i.tensorflow == spec.default_version]
            return {i.variant_name: instructions(render.render_image(spec, i)) for i in images}
        except SpecError as error:
            return error


def _with(setter: Setter, value: str) -> dict[str, Any]:
    files = copy.deepcopy(ORIGINAL)
    setter(files, value)
    return files


@pytest.mark.parametrize(("field", "setter", "benign"), FIELDS, ids=[f[0] for f in FIELDS])
def test_hostile_spec_values_are_refused_or_change_no_instruction(
    field: str, setter: Setter, benign: str
) -> None:
    expected = _render(_with(setter, benign))
    assert not isinstance(expected, SpecError), f"benign {field}={benign!r}: {expected}"
    counts = COUNTS.setdefault(field + ":" + benign, {"refused": 0, "rendered": 0})

    # fixed seed and budget; no timing checks (a shared, loaded CI machine makes them flaky)
    @settings(
        derandomize=True,
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow],
    )
    @given(value=_hostile(benign))
    def check(value: str) -> None:
        result = _render(_with(setter, value))
        if isinstance(result, SpecError):
            counts["refused"] += 1
            message = str(result)
            assert "Traceback" not in message
            # names the field (for a renamed key: the mapping that holds it)
            assert field.split(".")[0] in message, message
            assert field in message or field.rsplit(".", 1)[0] in message, message
        else:
            counts["rendered"] += 1
            assert result == expected, f"{field}={value!r} changed the instructions"

    check()
    total = counts["refused"] + counts["rendered"]
    print(f"{field}: {total} examples ({counts['refused']} refused, {counts['rendered']} rendered)")
    assert total >= EXAMPLES // 2
    assert counts["refused"] > 0  # the hostile values reached the validation


def test_instructions_parser_sees_an_injected_instruction() -> None:
    # the comparison above is only as good as the parser: an injected line must show
    text = "FROM a\nRUN x \\\n    # note\n    && y\nLABEL a=b\nRUN touch /injected\n"
    assert instructions(text) == ["FROM", "RUN", "LABEL", "RUN"]


@pytest.mark.parametrize(
    ("field", "setter", "value"),
    [
        ("base.registry", _at(*IMAGES, "base", "registry"), "docker.io\nRUN touch /injected2"),
        ("versions.0.apt.0", _listed(*IMAGES, "versions", 0, "apt"), "curl\n"),
        ("variants.gpu.apt.0", _listed(*IMAGES, "variants", "gpu", "apt"), "curl\n"),
        (
            f"recipes.{RECIPE}.env.NV_CUDA_COMPAT_PACKAGE",
            _at(*ENV, "NV_CUDA_COMPAT_PACKAGE"),
            "x\nRUN touch /injected",
        ),
        (
            f"recipes.{RECIPE}.env.NVIDIA_REQUIRE_CUDA",
            _at(*ENV, "NVIDIA_REQUIRE_CUDA"),
            'cuda>=12.3" \\\nRUN x',
        ),
        ("versions.0.version", _at(*IMAGES, "versions", 0, "version"), f"{VERSION}\n"),
    ],
)
def test_the_issue_22_reproducers_are_refused(field: str, setter: Setter, value: str) -> None:
    result = _render(_with(setter, value))
    assert isinstance(result, SpecError), f"{field}={value!r} rendered"
    assert field in str(result)
    assert "\nRUN" not in str(result)  # the value is shown escaped, never raw


def test_a_value_with_a_newline_never_reaches_a_dockerfile_line() -> None:
    # even one no validator looked at (a model built without validation)
    spec = specs.load()
    image = catalog.images(spec)[0]
    hostile = image.__class__(**{**image.__dict__, "base_registry": "docker.io\nRUN id"})
    with pytest.raises(SpecError, match=r"refusing to render .*U\+000A"):
        render.render_image(spec, hostile)


@pytest.mark.parametrize("registry", ["nvcr.io\nRUN touch /injected", "nvcr.io x", "NVCR.io"])
def test_the_jetson_spec_base_registry_follows_the_same_grammar(
    tmp_path: Path, registry: str
) -> None:
    data = yaml.safe_load((ROOT / "images" / "l4t.yaml").read_text())
    data["base"]["registry"] = registry
    (tmp_path / "l4t.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(SpecError, match=r"base\.registry"):
        specs.load_jetson(tmp_path)
