"""Loading and validating images/matrix.yaml and images/images.yaml (pydantic models).

A bad spec raises SpecError naming the file, the key path and what was expected; never a
traceback."""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, TypeVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from tfgpu_kit.errors import SpecError
from tfgpu_kit.versions import Version, parse_arch_code

ROOT = Path(__file__).resolve().parent.parent
IMAGES_DIR = ROOT / "images"
# the runtime package installed into every image: its `[project] requires-python` bounds the bases
RUNTIME_PYPROJECT = ROOT / "entrypoint" / "pyproject.toml"


def _version_text(value: str) -> str:
    try:
        Version.parse(value)
    except ValueError:
        raise ValueError(f"expected a dotted version such as 12.5.1, got {value!r}") from None
    return value


def _arch_code(kind: str) -> AfterValidator:
    def check(value: str) -> str:
        try:
            parsed_kind, _ = parse_arch_code(value)
        except ValueError:
            raise ValueError(f"expected sm_XY or compute_XY, got {value!r}") from None
        if parsed_kind != kind:
            raise ValueError(f"expected a {'sm_XY' if kind == 'sass' else 'compute_XY'} code")
        return value

    return AfterValidator(check)


def _package_name(value: str) -> str:
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._+-]*([<>=!~]=?[A-Za-z0-9.*+!-]+)?$", value):
        raise ValueError(f"expected a package name (optionally pinned, name==1.2), got {value!r}")
    return value


def _apt_package(value: str) -> str:
    if not re.match(r"^[a-z0-9][a-z0-9.+-]*(=[A-Za-z0-9.+:~-]+)?$", value):
        raise ValueError(
            f"expected a Debian package name (optionally pinned, name=version), got {value!r}"
        )
    return value


VersionText = Annotated[str, AfterValidator(_version_text)]
PackageName = Annotated[str, AfterValidator(_package_name)]
AptPackage = Annotated[str, AfterValidator(_apt_package)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Arches(_Strict):
    sass: list[Annotated[str, _arch_code("sass")]]
    ptx: list[Annotated[str, _arch_code("ptx")]]


class TensorFlowBuild(_Strict):
    cuda: VersionText
    cudnn: VersionText
    python: tuple[VersionText, VersionText] = Field(description="[oldest, newest] supported Python")
    arches: Arches | None = None


class CudaToolkit(_Strict):
    driver_min: VersionText


class CudaMajor(_Strict):
    compat_floor: VersionText


class ForwardCompat(_Strict):
    from_cuda: VersionText


class Matrix(_Strict):
    tensorflow: dict[VersionText, TensorFlowBuild]
    cuda: dict[VersionText, CudaToolkit]
    cuda_majors: dict[str, CudaMajor]
    forward_compat: dict[str, ForwardCompat]

    @model_validator(mode="after")
    def _cross_references(self) -> Matrix:
        for tf, build in self.tensorflow.items():
            if build.cuda not in self.cuda:
                raise ValueError(
                    f"tensorflow.{tf}.cuda: {build.cuda} has no entry under `cuda:`"
                    " (its minimum driver)"
                )
            major = str(Version.parse(build.cuda).major)
            if major not in self.cuda_majors:
                raise ValueError(
                    f"tensorflow.{tf}.cuda: CUDA major {major} has no entry under `cuda_majors:`"
                )
        return self


class Base(_Strict):
    registry: str = Field(min_length=1)
    repository: str = Field(min_length=1, pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")


class OfferedVersion(_Strict):
    version: VersionText
    base_python: VersionText
    # extra packages of this version's images, installed after the variant's (same rules)
    pip: list[PackageName] = []
    apt: list[AptPackage] = []


class User(_Strict):
    name: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    uid: int = Field(ge=1, le=2**31 - 1)
    gid: int = Field(ge=1, le=2**31 - 1)
    run_as_user: bool = False


class Jupyter(_Strict):
    port: int = Field(ge=1, le=65535)


class Variant(_Strict):
    base_suffix: str = Field(pattern=r"^(-[a-z0-9]+)*$")
    pip: list[PackageName] = []
    apt: list[AptPackage] = []
    max_added_mib: float = Field(gt=0)
    cmd: list[str] = Field(min_length=1)
    jupyter: Jupyter | None = None

    @model_validator(mode="after")
    def _port_in_cmd(self) -> Variant:
        if self.jupyter and not any(str(self.jupyter.port) in arg for arg in self.cmd):
            raise ValueError(f"jupyter.port {self.jupyter.port} does not appear in cmd")
        return self


class ImagesSpec(_Strict):
    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    base: Base
    versions: list[OfferedVersion] = Field(min_length=1)
    user: User
    runtime_extras: list[PackageName] = []
    variants: dict[Annotated[str, Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")], Variant] = Field(
        min_length=1
    )

    @model_validator(mode="after")
    def _unique_versions(self) -> ImagesSpec:
        seen: set[str] = set()
        for index, offered in enumerate(self.versions):
            if offered.version in seen:
                raise ValueError(f"versions.{index}.version: {offered.version} is listed twice")
            seen.add(offered.version)
        return self


class Spec(BaseModel):
    """Both files, cross-checked."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    matrix: Matrix
    images: ImagesSpec
    directory: Path

    @cached_property
    def default_version(self) -> str:
        return self.images.versions[0].version


M = TypeVar("M", bound=BaseModel)


def _location(loc: tuple[int | str, ...]) -> str:
    return ".".join(str(part) for part in loc)


def _load_yaml(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{path}: cannot be read ({exc.strerror})") from None
    try:
        # the C loader when PyYAML has it: several times faster than the pure-Python one
        return yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise SpecError(f"{path}:{where}: not valid YAML ({problem})") from None


def validate(model: type[M], data: Any, path: Path) -> M:
    """Validate `data` read from `path`; every problem becomes one line of a SpecError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key (check the spelling; see docs/build.md for the settings)"
            elif error["type"] == "missing":
                message = "required key is missing"
            where = f"{_location(error['loc'])}: " if error["loc"] else ""
            lines.append(f"  {where}{message}")
        raise SpecError(f"{path}: invalid spec\n" + "\n".join(lines)) from None


def load(directory: Path | None = None) -> Spec:
    """Load and cross-check images/matrix.yaml and images/images.yaml."""
    directory = directory or IMAGES_DIR
    matrix_path = directory / "matrix.yaml"
    images_path = directory / "images.yaml"
    matrix = validate(Matrix, _load_yaml(matrix_path), matrix_path)
    images = validate(ImagesSpec, _load_yaml(images_path), images_path)
    for index, offered in enumerate(images.versions):
        if offered.version not in matrix.tensorflow:
            raise SpecError(
                f"{images_path}: invalid spec\n  versions.{index}.version: {offered.version}"
                f" is not in {matrix_path.name} (known: {', '.join(matrix.tensorflow)})"
            )
    return Spec(matrix=matrix, images=images, directory=directory)


# --- the bases' Python against the runtime's requires-python -----------------------------------

_CLAUSE = re.compile(r"^(~=|==|!=|<=|>=|<|>)\s*(\d+(?:\.\d+)*)(\.\*)?$")


def _padded(version: Version, length: int) -> tuple[int, ...]:
    return (version.parts + (0,) * length)[:length]


def python_satisfies(python: str, requirement: str) -> bool:
    """Whether Python `python` (`3.8`, i.e. 3.8.0 as PEP 440 compares it) is in `requirement`, a
    PEP 440 specifier set of release numbers (`>=3.9`, `>=3.9,<3.14`, `!=3.10.*`, `~=3.9`).

    Raises ValueError for what this does not understand (`===`, pre-releases, local versions)."""
    version = Version.parse(python)
    for raw in requirement.split(","):
        clause = raw.strip()
        if not clause:
            continue
        match = _CLAUSE.match(clause)
        if not match:
            raise ValueError(clause)
        op, text, star = match.groups()
        bound = Version.parse(text)
        length = len(text.split("."))
        if star:
            if op not in ("==", "!="):
                raise ValueError(clause)
            same = _padded(version, length) == _padded(bound, length)
            ok = same if op == "==" else not same
        elif op == "~=":
            if length < 2:
                raise ValueError(clause)
            ok = version >= bound and _padded(version, length - 1) == _padded(bound, length - 1)
        else:
            ok = {
                "==": version == bound,
                "!=": version != bound,
                "<=": version <= bound,
                ">=": version >= bound,
                "<": version < bound,
                ">": version > bound,
            }[op]
        if not ok:
            return False
    return True


def runtime_requires_python(pyproject: Path | None = None) -> str | None:
    """`[project] requires-python` of the runtime package (None when it sets none)."""
    pyproject = pyproject or RUNTIME_PYPROJECT
    try:
        text = pyproject.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError(f"{pyproject}: cannot be read ({exc.strerror})") from None
    try:
        import tomllib
    except ImportError:  # Python < 3.11: the one key, from the [project] table
        table = re.search(r"^\[project\]\s*$(.*?)(?=^\[|\Z)", text, re.M | re.S)
        found = table and re.search(r'^requires-python\s*=\s*"([^"]*)"', table.group(1), re.M)
        return found.group(1) if found else None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{pyproject}: not valid TOML ({exc})") from None
    value = data.get("project", {}).get("requires-python")
    if value is not None and not isinstance(value, str):
        raise SpecError(f"{pyproject}: project.requires-python: expected a string, got {value!r}")
    return value


def check_base_python(
    spec: Spec, versions: Iterable[str] | None = None, *, pyproject: Path | None = None
) -> None:
    """SpecError unless the base's Python (`versions[N].base_python`) of each TensorFlow version
    (default: every offered one) satisfies the runtime package's `requires-python`: otherwise
    pip refuses the tfgpu wheel in the middle of the Docker build."""
    pyproject = pyproject or RUNTIME_PYPROJECT
    requirement = runtime_requires_python(pyproject)
    if requirement is None:
        return
    wanted = None if versions is None else set(versions)
    problems = []
    for index, offered in enumerate(spec.images.versions):
        if wanted is not None and offered.version not in wanted:
            continue
        try:
            ok = python_satisfies(offered.base_python, requirement)
        except ValueError as exc:
            raise SpecError(
                f"{pyproject}: project.requires-python: {requirement!r}: cannot compare"
                f" {exc.args[0]!r} (expected clauses such as >=3.9 or <3.14, comma-separated)"
            ) from None
        if not ok:
            problems.append(
                f"  versions.{index}.base_python: {offered.base_python} (TensorFlow"
                f" {offered.version}) does not satisfy the runtime's requires-python"
                f" {requirement!r} ({pyproject}): pip would refuse the tfgpu wheel on that base"
            )
    if problems:
        raise SpecError(
            f"{spec.directory / 'images.yaml'}: invalid spec\n" + "\n".join(problems),
            hint="drop those versions, correct base_python, or widen requires-python in"
            " entrypoint/pyproject.toml if the runtime supports that Python",
        )
