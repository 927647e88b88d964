"""Loading and validating images/matrix.yaml, images/images.yaml, images/bases.yaml and the Jetson
images of images/l4t.yaml (pydantic models).

A bad spec raises SpecError naming the file, the key path and what was expected; never a
traceback."""

from __future__ import annotations

import enum
import re
import tomllib
import unicodedata
from collections.abc import Callable, Iterable, Iterator
from functools import cached_property
from pathlib import Path
from typing import Annotated, Any, TypeVar

from packaging.specifiers import SpecifierSet
from packaging.version import InvalidVersion
from packaging.version import Version as PackageVersion
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from tfgpu.contract import gpu_support
from tfgpu.contract.gpu_support import Failure

from tfgpu_kit.matrix import nvidia_require
from tfgpu_kit.matrix.versions import Version, parse_arch_code
from tfgpu_kit.shared.errors import SpecError
from tfgpu_kit.shared.yamlfile import load_yaml as load_yaml  # also wheel_locks's

ROOT = Path(__file__).resolve().parents[2]  # the checkout: tfgpu_kit/matrix/spec.py
IMAGES_DIR = ROOT / "images"
# the runtime package installed into every image: its `[project] requires-python` bounds the bases
RUNTIME_PYPROJECT = ROOT / "entrypoint" / "pyproject.toml"


# Every pattern below is applied with re.fullmatch: `re.match(r"…$")` also accepts a trailing
# newline, and a spec value reaches a Dockerfile line. pydantic's `pattern=` runs the
# Rust regex engine, whose `$` matches only at the very end of the text: whole-text too.

# Docker's reference grammar (distribution/reference), for what goes before `/REPO:TAG`: a host
# (dot-separated components, an optional :port) or a first path component, then /path components.
# Lowercase only: an image name with capitals is refused by the engine.
_DOMAIN_COMPONENT = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
_PATH_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_HOST = rf"{_DOMAIN_COMPONENT}(?:\.{_DOMAIN_COMPONENT})*(?::[0-9]+)?"
REGISTRY_PREFIX = re.compile(rf"(?:{_HOST}|{_PATH_COMPONENT})(?:/{_PATH_COMPONENT})*")
# an image reference with a tag (bases.yaml from_image: nvidia/cuda:11.8.0-base-ubuntu20.04)
_IMAGE_REF = re.compile(
    rf"(?:{_HOST}/)?{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*:[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}}"
)
# libnvidia-container's NVIDIA_REQUIRE_CUDA (src/cli/dsl.c): space-separated alternatives of
# comma-separated `key OP value` conditions; rendered into a quoted ENV value, so no quote, `$`,
# backslash or space inside a condition can pass
_REQUIRE_CONDITION = r"[a-z]+(?:[<>]=?|==?|!=)[A-Za-z0-9._-]+"
_REQUIRE_ALTERNATIVE = rf"{_REQUIRE_CONDITION}(?:,{_REQUIRE_CONDITION})*"
REQUIRE_CUDA = re.compile(rf"{_REQUIRE_ALTERNATIVE}(?: {_REQUIRE_ALTERNATIVE})*")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def control_characters(text: str) -> list[str]:
    """The control, format (bidi overrides, zero-width) and line/paragraph separator characters of
    `text`, as U+XXXX: none of them belongs in a spec value that ends up in a Dockerfile line."""
    return [
        f"U+{ord(ch):04X}"
        for ch in dict.fromkeys(text)
        if unicodedata.category(ch) in ("Cc", "Cf", "Zl", "Zp", "Cs")
    ]


def _text_problems(data: Any, where: tuple[str, ...] = ()) -> Iterator[str]:
    """Every string of the loaded YAML (keys too) is one line of printable text."""
    if isinstance(data, str):
        if bad := control_characters(data):
            yield (
                f"  {'.'.join(where) or '(top)'}: {data!r} contains {', '.join(bad)}: a spec value"
                " must be one line of printable text (no newline, control or bidi character)"
            )
    elif isinstance(data, dict):
        for key, value in data.items():
            yield from _text_problems(key, where)
            yield from _text_problems(value, (*where, str(key)))
    elif isinstance(data, list):
        for index, item in enumerate(data):
            yield from _text_problems(item, (*where, str(index)))


def _matcher(
    pattern: re.Pattern[str] | str, what: str, example: str | None = None
) -> Callable[[str], str]:
    def check(value: str) -> str:
        if not re.fullmatch(pattern, value):
            expected = f"{what} (e.g. {example})" if example else what
            raise ValueError(f"expected {expected}, got {value!r}")
        return value

    return check


def _fullmatch(
    pattern: re.Pattern[str] | str, what: str, example: str | None = None
) -> AfterValidator:
    return AfterValidator(_matcher(pattern, what, example))


# Version.parse strips blanks and keeps the spelling: the text itself must be bare
_version_text = _matcher(r"\d+(?:\.\d+){0,3}", "a dotted version such as 12.5.1")
_PACKAGE = r"[A-Za-z0-9][A-Za-z0-9._+-]*(?:[<>=!~]=?[A-Za-z0-9.*+!-]+)?"
_APT_PACKAGE = r"[a-z0-9][a-z0-9.+-]*(?:=[A-Za-z0-9.+:~-]+)?"


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


def _pin(version_ok: Callable[[str], object]) -> AfterValidator:
    """A lowercase package pinned exactly, `name==VERSION`, VERSION as `version_ok` takes it."""

    def check(value: str) -> str:
        name, sep, version = value.partition("==")
        if not sep or not re.fullmatch(r"[a-z0-9][a-z0-9-]*", name) or not version_ok(version):
            raise ValueError(
                f"expected a lowercase package pinned exactly (name==1.2.3), got {value!r}"
            )
        return value

    return AfterValidator(check)


def _pep440(version: str) -> bool:
    # a wheel of a lock's resolution: any PEP 440 version (certifi's 2026.10.19.post1)
    try:
        PackageVersion(version)
    except InvalidVersion:
        return False
    return True


VersionText = Annotated[str, AfterValidator(_version_text)]
ResolvedPin = Annotated[str, _pin(_pep440)]
PinnedWheel = Annotated[str, _pin(_version_text)]
PackageName = Annotated[str, _fullmatch(_PACKAGE, "a package name (optionally pinned, name==1.2)")]
AptPackage = Annotated[
    str, _fullmatch(_APT_PACKAGE, "a Debian package name (optionally pinned, name=version)")
]
Registry = Annotated[
    str, _fullmatch(REGISTRY_PREFIX, "a registry host[:port][/path], lowercase", "docker.io")
]
ImageRef = Annotated[
    str, _fullmatch(_IMAGE_REF, "an image reference with a tag", "nvidia/cuda:12.3.0-base")
]
RecipeName = Annotated[
    str, _fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", "a recipe name", "cuda12.3-ubuntu22.04")
]
EnvName = Annotated[str, _fullmatch(_ENV_NAME, "an environment variable name", "CUDA_VERSION")]


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
    # the NVIDIA wheels of TensorFlow's own `[and-cuda]` extra, pinned (`name==version`): what an
    # image adds when its base lacks the CUDA/cuDNN this TensorFlow needs (cudagap.py)
    and_cuda: list[PinnedWheel] = []
    # Keras 2 for a TensorFlow whose tf.keras is Keras 3 (2.16+): TensorFlow's own `tf-keras` of the
    # same minor, which TF_USE_LEGACY_KERAS=1 selects. Every image of this version carries it (Keras
    # 3's model.fit fails under MultiWorkerMirroredStrategy, keras-team/keras#20585); None where
    # tf.keras is Keras 2 already.
    tf_keras: PinnedWheel | None = None
    # later patch releases of this minor on PyPI: `check --tf 2.14.1` answers for this entry's
    # build and says so (their own build configuration is not recorded)
    patches: list[VersionText] = []

    @model_validator(mode="after")
    def _one_cudnn_wheel(self) -> TensorFlowBuild:
        cudnn = [pin for pin in self.and_cuda if pin.startswith("nvidia-cudnn-")]
        if self.and_cuda and len(cudnn) != 1:
            raise ValueError("and_cuda: expected exactly one nvidia-cudnn-cuXX pin")
        return self


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
            entry = Version.parse(tf)
            if build.tf_keras is not None:
                name, _, version = build.tf_keras.partition("==")
                if name != "tf-keras" or Version.parse(version).major_minor != entry.major_minor:
                    raise ValueError(
                        f"tensorflow.{tf}.tf_keras: {build.tf_keras} is not tf-keras of "
                        f"{entry.major_minor} (its Requires-Dist pins TensorFlow's minor); "
                        f'example: tf_keras: "tf-keras=={entry.major_minor}.0"'
                    )
            for patch in build.patches:
                release = Version.parse(patch)
                if release.major_minor != entry.major_minor or release <= entry:
                    raise ValueError(
                        f"tensorflow.{tf}.patches: {patch} is not a later release of "
                        f"{entry.major_minor}"
                    )
        return self


# GPU generations (images/gpus.yaml). A capability as NVIDIA writes it (8.0, 12.0); an issue or
# pull request as owner/repo#N. Free text reaches the images' TFGPU_IMAGE_GPU_FAILURES (a quoted ENV
# value, parsed by tfgpu.contract.gpu_support): no quote, `$`, backslash, backtick or `|` in it.
Capability = Annotated[str, _fullmatch(r"[1-9][0-9]?\.[0-9]", "a compute capability X.Y", "12.0")]
IssueRef = Annotated[
    str,
    _fullmatch(
        r"[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+#[1-9][0-9]*",
        "an issue or pull request as owner/repo#N",
        "tensorflow/tensorflow#111958",
    ),
]
EnvText = Annotated[
    str,
    _fullmatch(r"[^\"$\\`|]+", "one line without a quote, $, backslash, backtick or |", "it fails"),
]


class FailureReport(_Strict):
    """One report of a known failure: where, which TensorFlow releases it ran, what it says."""

    source: IssueRef
    tensorflow: list[VersionText] = Field(min_length=1)
    says: str = Field(min_length=1)


class KnownFailure(_Strict):
    """A failure of TensorFlow's own kernels, or of XLA, on GPUs of one capability."""

    arch: Capability
    part: Annotated[str, _fullmatch(r"kernels|xla", "kernels or xla")]
    what: EnvText
    reports: list[FailureReport] = []
    # a matrix version no report names, and why it fails too
    also: dict[VersionText, EnvText] = {}
    nightlies: str | None = None  # pre-releases that failed: noted, never a release's verdict

    @model_validator(mode="after")
    def _some_evidence(self) -> KnownFailure:
        if not self.reports and not self.also:
            raise ValueError("a known failure needs reports or `also` entries")
        return self


class JitReport(_Strict):
    source: IssueRef
    says: str = Field(min_length=1)


class PtxJit(_Strict):
    warning: str = Field(min_length=1)
    reports: list[JitReport] = Field(min_length=1)


class KernelCacheSpec(_Strict):
    path: str = Field(pattern=r"^/[A-Za-z0-9._/-]+$")
    max_bytes: int = Field(ge=1, le=2**32)


class Gpus(_Strict):
    """images/gpus.yaml: the GPUs users run, the PTX JIT cost, the kernel cache, known failures."""

    architectures: dict[Capability, str] = Field(min_length=1)
    ptx_jit: PtxJit
    kernel_cache: KernelCacheSpec
    known_failures: list[KnownFailure] = []

    def failures(self, tensorflow: str) -> list[Failure]:
        """The known failures of TensorFlow `tensorflow` (a matrix entry): those a report names
        a release of its minor for, or an `also` entry names it for; each with why it is known."""
        minor = Version.parse(tensorflow).major_minor
        found = []
        for entry in self.known_failures:
            named = [
                r
                for r in entry.reports
                if any(Version.parse(v).major_minor == minor for v in r.tensorflow)
            ]
            if named:
                why = "reported: " + ", ".join(
                    f"{r.source} ({' '.join(r.tensorflow)})" for r in named
                )
            elif tensorflow in entry.also:
                why = entry.also[tensorflow]
            else:
                continue
            cc = gpu_support.capability(entry.arch)
            assert cc is not None  # Capability's pattern
            found.append(gpu_support.Failure(cc, entry.part, entry.what, why))
        return found


class Base(_Strict):
    registry: Registry
    repository: str = Field(min_length=1, pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")


class CudaSource(enum.StrEnum):
    """Where an image's CUDA libraries come from (`cuda_source` in images.yaml)."""

    AUTO = "auto"  # the base's when they are enough for its TensorFlow, else NVIDIA's wheels
    BASE = "base"  # always the base's (even when TensorFlow cannot use them: `verify` says so)
    WHEELS = "wheels"  # always TensorFlow's `[and-cuda]` wheels


class OfferedVersion(_Strict):
    version: VersionText
    # extra packages of this version's images, installed after the variant's (same rules)
    pip: list[PackageName] = []
    apt: list[AptPackage] = []
    # overrides the top-level cuda_source for this version's images
    cuda_source: CudaSource | None = None


class User(_Strict):
    name: str = Field(pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    uid: int = Field(ge=1, le=2**31 - 1)
    gid: int = Field(ge=1, le=2**31 - 1)
    run_as_user: bool = False


class Jupyter(_Strict):
    port: int = Field(ge=1, le=65535)


class VariantBase(enum.StrEnum):
    """What a variant is built FROM (images.yaml variants.<name>.base)."""

    OFFICIAL = "official"  # tensorflow/tensorflow:X{base_suffix}: TensorFlow and system CUDA
    SLIM = "slim"  # bases.yaml `slim`: Python alone; the image installs TensorFlow and its wheels


class Variant(_Strict):
    base_suffix: str = Field(pattern=r"^(-[a-z0-9]+)*$")
    base: VariantBase = VariantBase.OFFICIAL
    # slim: the versions offered in this variant (each must be offered and need the repair)
    versions: list[VersionText] | None = None
    pip: list[PackageName] = []
    apt: list[AptPackage] = []
    max_added_mib: float = Field(gt=0)
    cmd: list[str] = Field(min_length=1)
    jupyter: Jupyter | None = None

    @model_validator(mode="after")
    def _slim_versions_and_port(self) -> Variant:
        if (self.base is VariantBase.SLIM) != (self.versions is not None):
            raise ValueError("versions: a slim variant lists its versions; another lists none")
        if self.jupyter and not any(str(self.jupyter.port) in arg for arg in self.cmd):
            raise ValueError(f"jupyter.port {self.jupyter.port} does not appear in cmd")
        return self


class ImagesSpec(_Strict):
    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    base: Base
    versions: list[OfferedVersion] = Field(min_length=1)
    user: User
    runtime_extras: list[PackageName] = []
    cuda_source: CudaSource = CudaSource.AUTO
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


class BaseTarget(_Strict):
    """One build target of the official Dockerfile (`gpu` = its `base` stage, `jupyter`)."""

    cmd: list[str] | None = Field(description="CMD; null: inherited from a parent we cannot cite")
    workdir: Annotated[str, _fullmatch(r"/[A-Za-z0-9._/-]*", "an absolute path", "/tf")] | None
    user: Annotated[str, _fullmatch(r"[a-z_][a-z0-9_-]{0,31}|[0-9]+", "a user", "root")]
    expose: list[int] = []


class BaseRecipe(_Strict):
    """One state of tensorflow/build's tensorflow_runtime_dockerfiles/: what its images ship."""

    commit: str = Field(pattern=r"^[0-9a-f]{40}$")
    date: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")
    from_image: ImageRef
    ubuntu: VersionText
    python: VersionText
    site_packages: str = Field(pattern=r"^/.*-packages$")
    cuda: VersionText
    cudnn: VersionText
    tensorrt: VersionText | None
    cuda_compat: VersionText | None
    env: dict[EnvName, str]
    targets: dict[Annotated[str, Field(pattern=r"^(gpu|jupyter)$")], BaseTarget]

    @field_validator("env")
    @classmethod
    def _rendered_env(cls, env: dict[str, str]) -> dict[str, str]:
        # both reach the Dockerfile: the first in a quoted ENV value, the second in a comment
        require = env.get("NVIDIA_REQUIRE_CUDA")
        if require is not None and not REQUIRE_CUDA.fullmatch(require):
            raise ValueError(
                f"NVIDIA_REQUIRE_CUDA: {require!r} is not libnvidia-container's syntax:"
                " space-separated alternatives of comma-separated KEY>=VALUE conditions"
                " (e.g. cuda>=11.8 brand=tesla,driver>=470,driver<471)"
            )
        compat = env.get("NV_CUDA_COMPAT_PACKAGE")
        if compat is not None and not re.fullmatch(r"[a-z0-9][a-z0-9.+-]*", compat):
            raise ValueError(
                "NV_CUDA_COMPAT_PACKAGE: expected a Debian package name (e.g. cuda-compat-12-3),"
                f" got {compat!r}"
            )
        return env

    @model_validator(mode="after")
    def _require_cuda_in_env(self) -> BaseRecipe:
        if "NVIDIA_REQUIRE_CUDA" not in self.env:
            raise ValueError("env: NVIDIA_REQUIRE_CUDA is missing (every nvidia/cuda base sets it)")
        return self


class SlimBase(_Strict):
    """bases.yaml `slim`: the slim variant's base, a Python image with no CUDA of its own."""

    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    tag: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    debian: VersionText
    glibc: VersionText
    python: VersionText
    site_packages: str = Field(pattern=r"^/.*-packages$")
    env: dict[EnvName, str]
    cmd: list[str] = Field(min_length=1)
    # what the kit's image sets for the NVIDIA container runtime, as NVIDIA's CUDA base images do
    nvidia_env: dict[EnvName, str]


class BaseVersion(_Strict):
    recipe: RecipeName
    released: str = Field(pattern=r"^\d{4}-\d{2}-\d{2}$")


class Bases(_Strict):
    """images/bases.yaml: what the official base images really contain."""

    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    recipes: dict[RecipeName, BaseRecipe] = Field(min_length=1)
    versions: dict[VersionText, BaseVersion]
    slim: SlimBase | None = None

    @model_validator(mode="after")
    def _known_recipes(self) -> Bases:
        for version, entry in self.versions.items():
            if entry.recipe not in self.recipes:
                raise ValueError(
                    f"versions.{version}.recipe: {entry.recipe!r} is not under `recipes:`"
                    f" (known: {', '.join(self.recipes)})"
                )
        return self


class JetsonEntry(_Strict):
    """One NVIDIA Jetson image of images/l4t.yaml: an L4T TensorFlow container and its facts."""

    tensorflow: VersionText
    base_tag: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
    l4t: VersionText
    jetpack: VersionText | None
    python: VersionText
    cuda: VersionText
    cudnn: VersionText | None
    require_cuda: str = Field(min_length=1)
    cmd: list[str] = Field(min_length=1)


class JetsonSpec(_Strict):
    """images/l4t.yaml: arm64 images on NVIDIA's L4T TensorFlow containers."""

    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    platform: str = Field(pattern=r"^linux/arm64$")
    base: Base  # the same grammar as images.yaml's base
    images: list[JetsonEntry] = Field(min_length=1)


class Spec(BaseModel):
    """The files, cross-checked."""

    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)

    matrix: Matrix
    images: ImagesSpec
    bases: Bases
    gpus: Gpus
    directory: Path
    jetson: JetsonSpec | None = None  # None: the folder has no l4t.yaml

    @cached_property
    def default_version(self) -> str:
        return self.images.versions[0].version

    def base_recipe(self, tensorflow: str) -> BaseRecipe:
        """What the official base of TensorFlow `tensorflow` ships (load() checked it exists)."""
        return self.bases.recipes[self.bases.versions[tensorflow].recipe]

    def gpu_support(self, tensorflow: str, cc: tuple[int, int]) -> gpu_support.Verdict:
        """What TensorFlow `tensorflow`'s build means for GPUs of capability `cc`: its SASS/PTX
        (matrix.yaml) by tfgpu.contract.gpu_support's rule, and its known failures (gpus.yaml)."""
        build = self.matrix.tensorflow[tensorflow]
        codes = None if build.arches is None else [*build.arches.sass, *build.arches.ptx]
        return gpu_support.judge(cc, codes, self.gpus.failures(tensorflow))

    def cuda_source(self, tensorflow: str) -> CudaSource:
        """images.yaml's cuda_source for this version: its own, else the top-level one."""
        own = (o.cuda_source for o in self.images.versions if o.version == tensorflow)
        return next((source for source in own if source is not None), self.images.cuda_source)


M = TypeVar("M", bound=BaseModel)


_MESSAGES = {  # pydantic's wording for these, in the spec's terms
    "extra_forbidden": "unknown key (check the spelling; see docs/build.md for the settings)",
    "missing": "required key is missing",
}


def _location(loc: tuple[int | str, ...]) -> str:
    # a key with a newline or an escape sequence is shown escaped, never printed raw
    return ".".join(
        repr(part) if isinstance(part, str) and control_characters(part) else str(part)
        for part in loc
    )


def _refuse(path: Path, problems: list[str]) -> None:
    if problems:
        raise SpecError(f"{path}: invalid spec\n" + "\n".join(problems))


def validate(model: type[M], data: Any, path: Path) -> M:
    """Validate `data` read from `path`; every problem becomes one line of a SpecError."""
    _refuse(path, list(_text_problems(data)))
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = f"{_location(error['loc'])}: " if error["loc"] else ""
            message = _MESSAGES.get(error["type"], error["msg"].removeprefix("Value error, "))
            lines.append(f"  {where}{message}")
        raise SpecError(f"{path}: invalid spec\n" + "\n".join(lines)) from None


def load_jetson(directory: Path | None = None) -> JetsonSpec | None:
    """images/l4t.yaml (None when the folder has none), each require_cuda checked against the
    NVIDIA runtime's CSV mode (Jetson), whose Go parser refuses what libnvidia-container accepts."""
    path = (directory or IMAGES_DIR) / "l4t.yaml"
    if not path.exists():
        return None
    loaded = validate(JetsonSpec, load_yaml(path), path)
    problems = [
        f"  images.{index}.require_cuda: {entry.require_cuda!r}: the NVIDIA runtime's CSV"
        f" mode (Jetson) would refuse the container: {error}"
        for index, entry in enumerate(loaded.images)
        if (error := nvidia_require.go_parse_error(entry.require_cuda)) is not None
    ]
    _refuse(path, problems)
    return loaded


def _slim_problems(images: ImagesSpec, bases: Bases, matrix: Matrix, bases_path: Path) -> list[str]:
    """A slim variant needs bases.yaml's `slim`, and offers only offered versions whose
    TensorFlow supports the slim base's Python."""
    problems = []
    offered = {v.version for v in images.versions}
    for name, variant in images.variants.items():
        if variant.versions is None:
            continue
        if bases.slim is None:
            problems.append(
                f"  variants.{name}.base: slim, but {bases_path.name} has no `slim:` base"
            )
            continue
        python = Version.parse(bases.slim.python)
        for version in variant.versions:
            if version not in offered:
                problems.append(f"  variants.{name}.versions: {version} is not offered")
                continue
            low, high = (Version.parse(v) for v in matrix.tensorflow[version].python)
            if not low <= python <= high:
                problems.append(
                    f"  variants.{name}.versions: TensorFlow {version} does not support the slim"
                    f" base's Python {python} (it supports {low}–{high})"
                )
    return problems


def load(directory: Path | None = None) -> Spec:
    """Load and cross-check images/matrix.yaml, images/images.yaml and images/bases.yaml, and read
    images/l4t.yaml when there is one."""
    directory = directory or IMAGES_DIR
    matrix_path = directory / "matrix.yaml"
    images_path = directory / "images.yaml"
    bases_path = directory / "bases.yaml"
    matrix = validate(Matrix, load_yaml(matrix_path), matrix_path)
    images = validate(ImagesSpec, load_yaml(images_path), images_path)
    bases = validate(Bases, load_yaml(bases_path), bases_path)
    problems = [
        f"  versions.{index}.version: {offered.version} is not in {matrix_path.name}"
        f" (known: {', '.join(matrix.tensorflow)})"
        for index, offered in enumerate(images.versions)
        if offered.version not in matrix.tensorflow
    ]
    if images.base.repository != bases.repository:
        problems.append(
            f"  base.repository: {images.base.repository!r}: {bases_path.name} describes"
            f" {bases.repository!r}; describe your base's contents there"
        )
    _refuse(images_path, problems)
    problems = [
        f"  versions: {offered.version} (offered in {images_path.name}): {bases_path.name}"
        " does not say what its base image ships (add it under `versions:`)"
        for offered in images.versions
        if offered.version not in bases.versions
    ]
    problems += [
        f"  recipes.{recipe_name}.cuda: {recipe.cuda} has no entry under `cuda:` in"
        f" {matrix_path.name} (its minimum driver)"
        for recipe_name, recipe in bases.recipes.items()
        if recipe.cuda not in matrix.cuda
    ]
    _refuse(bases_path, problems)
    _refuse(images_path, _slim_problems(images, bases, matrix, bases_path))
    jetson = load_jetson(directory)
    gpus = load_gpus(directory, matrix)
    return Spec(
        matrix=matrix, images=images, bases=bases, gpus=gpus, directory=directory, jetson=jetson
    )


def load_gpus(directory: Path, matrix: Matrix) -> Gpus:
    """images/gpus.yaml, its versions checked against matrix.yaml's: every `also` key is a matrix
    entry, every reported release a release of a matrix minor."""
    path = directory / "gpus.yaml"
    gpus = validate(Gpus, load_yaml(path), path)
    entries = set(matrix.tensorflow)
    minors = {Version.parse(v).major_minor for v in entries}
    problems = []
    for index, entry in enumerate(gpus.known_failures):
        problems += [
            f"  known_failures.{index}.also: {version} is not in matrix.yaml"
            f" (known: {', '.join(entries)})"
            for version in entry.also
            if version not in entries
        ]
        problems += [
            f"  known_failures.{index}.reports.{n}.tensorflow: {version} is no release of a"
            " TensorFlow minor of matrix.yaml"
            for n, report in enumerate(entry.reports)
            for version in report.tensorflow
            if Version.parse(version).major_minor not in minors
        ]
    _refuse(path, problems)
    return gpus


# --- the bases' Python against the runtime's requires-python -----------------------------------


def python_satisfies(python: str, requirement: str) -> bool:
    """Whether Python `python` (`3.8` is 3.8.0 to PEP 440) is in the PEP 440 specifier set
    `requirement` (`>=3.9,<3.14`, `!=3.10.*`, `~=3.9`); ValueError (InvalidSpecifier) if not one."""
    return SpecifierSet(requirement).contains(python, prereleases=True)


def runtime_requires_python(pyproject: Path | None = None) -> str | None:
    """`[project] requires-python` of the runtime package (None when it sets none)."""
    pyproject = pyproject or RUNTIME_PYPROJECT
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except OSError as exc:
        raise SpecError(f"{pyproject}: cannot be read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise SpecError(f"{pyproject}: not valid TOML ({exc})") from None
    value = data.get("project", {}).get("requires-python")
    if value is not None and not isinstance(value, str):
        raise SpecError(f"{pyproject}: project.requires-python: expected a string, got {value!r}")
    return value


def check_base_python(
    spec: Spec, versions: Iterable[str] | None = None, *, pyproject: Path | None = None
) -> None:
    """SpecError unless the base's Python (bases.yaml, `recipes.R.python`) of each TensorFlow
    version (default: every offered one) satisfies the runtime package's `requires-python`:
    otherwise pip refuses the tfgpu wheel in the middle of the Docker build."""
    pyproject = pyproject or RUNTIME_PYPROJECT
    requirement = runtime_requires_python(pyproject)
    if requirement is None:
        return
    wanted = None if versions is None else set(versions)
    problems = []
    for offered in spec.images.versions:
        if wanted is not None and offered.version not in wanted:
            continue
        recipe_name = spec.bases.versions[offered.version].recipe
        python = spec.base_recipe(offered.version).python
        try:
            ok = python_satisfies(python, requirement)
        except ValueError:
            raise SpecError(
                f"{pyproject}: project.requires-python: {requirement!r} is not a PEP 440"
                " specifier set (expected clauses such as >=3.9 or <3.14, comma-separated)"
            ) from None
        if not ok:
            problems.append(
                f"  recipes.{recipe_name}.python: {python} (base of TensorFlow {offered.version})"
                f" does not satisfy the runtime's requires-python {requirement!r} ({pyproject}):"
                " pip would refuse the tfgpu wheel on that base"
            )
    if problems:
        raise SpecError(
            f"{spec.directory / 'bases.yaml'}: the runtime cannot be installed\n"
            + "\n".join(problems),
            hint="drop those versions from images.yaml, or widen requires-python in"
            " entrypoint/pyproject.toml if the runtime supports that Python",
        )
