"""The images the spec describes, each one complete record: one per (offered TensorFlow version,
variant) of images.yaml, and one per entry of l4t.yaml (NVIDIA Jetson), with their tags. What
differs between the two files is decided here, once, when a row becomes an Image; the template,
the selectors and the build read the record and never ask which file it came from."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from tfgpu.contract import gpu_support

from tfgpu_kit.matrix import cudagap
from tfgpu_kit.matrix.locks import wheel_locks
from tfgpu_kit.matrix.spec import (
    REGISTRY_PREFIX,
    CudaSource,
    JetsonEntry,
    Spec,
    Variant,
    VariantBase,
)
from tfgpu_kit.matrix.versions import Version
from tfgpu_kit.shared import name_rules
from tfgpu_kit.shared.errors import SpecError, UsageError

JETSON = "l4t"  # l4t.yaml's variant name: `build.py build l4t`, bake's group, dockerfiles/l4t/
# images.yaml's bases are x86-64 images (their wheels: context.WHEEL_PLATFORMS, manylinux x86_64)
NATIVE_PLATFORM = "linux/amd64"


@dataclass(frozen=True)
class Cuda:
    """Where the image's CUDA libraries come from, as `build` and its dry run report them."""

    source: str  # "base" (the base's own, JetPack's on a Jetson) or "wheels"
    cuda: str
    cudnn: str | None  # None: unknown
    wheels: tuple[str, ...]  # the NVIDIA wheels the image adds (none: the base's own)
    summary: str  # one line: what the base has and what the image adds
    detail: Mapping[str, object] = field(compare=False, hash=False)  # the dry run's `cuda`


@dataclass(frozen=True)
class Image:
    """One image to render and build: a row of images.yaml or of l4t.yaml, complete."""

    tensorflow: str
    variant_name: str
    name: str  # `2.21.0-gpu`: its id, its first tag, its dockerfiles/ folder
    folder: str  # where its Dockerfile lives under dockerfiles/ ("" or l4t/)
    repository: str
    tag_names: tuple[str, ...]  # its tags after `REPO:`, in CONTRACTS.md's order, but the composite
    cuda_tag: str | None  # CUDA major+minor of the composite tag (`125`); None: no composite tag
    selected_by: frozenset[str]  # the selector words that pick it (its tags among them)
    in_all: bool  # picked by `all` and `re:` (images.yaml's rows)
    newest: bool  # the default version's (its slim variant's newest): it has `latest-` tags
    platform: str  # what it is built for (docker build --platform)
    base_registry: str
    base_repository: str
    base_tag: str
    base_python: str
    base_locked: bool  # images/bases.lock.yaml locks its base (pin, digest check): else no pin
    partials: tuple[str, ...]  # templates/partials/ the Dockerfile is made of, in order
    cuda: Cuda  # where its CUDA libraries come from
    # what those partials read beyond `image` (the row's CUDA facts, recipe, slim base, entry)
    facts: Mapping[str, object] = field(compare=False, hash=False)
    cmd: tuple[str, ...] = ()
    cuda_wheels: tuple[str, ...] = ()  # the NVIDIA CUDA wheels it adds (none: the base's CUDA)
    tf_keras: str | None = None  # `tf-keras==X.Y.Z` it carries (TensorFlow 2.16+), or none
    budget_mib: float | None = None  # what the kit's layers may add to the base; None: no budget
    variant: Variant | None = None  # images.yaml's variant (extra packages, Jupyter)
    req: cudagap.Requirements | None = (
        None  # what its TensorFlow needs of the driver; None: unknown
    )
    gap: cudagap.Gap | None = None  # its base against its TensorFlow; None: JetPack's CUDA
    jetson: JetsonEntry | None = None  # l4t.yaml's row, for verify's Jetson checks
    # this version's own extra packages (images.yaml versions[N].pip/.apt)
    version_pip: tuple[str, ...] = ()
    version_apt: tuple[str, ...] = ()
    # the slim variant's base tag (bases.yaml `slim`): FROM Python alone, not a TensorFlow image
    slim_tag: str | None = None

    @property
    def slim(self) -> bool:
        """On the slim base: the image installs TensorFlow itself (pip) and always the wheels."""
        return self.slim_tag is not None

    @property
    def pip(self) -> list[str]:
        """Extra pip packages: TensorFlow on the slim base, the variant's, then the version's (a
        repeated entry once)."""
        own = [f"tensorflow=={self.tensorflow}"] if self.slim else []
        variant = self.variant.pip if self.variant else []
        return list(dict.fromkeys([*own, *variant, *self.version_pip]))

    @property
    def apt(self) -> list[str]:
        """Extra apt packages: the variant's, then the version's (a repeated entry once)."""
        return list(dict.fromkeys([*(self.variant.apt if self.variant else []), *self.version_apt]))

    @property
    def base_ref(self) -> str:
        """Base image without the registry: `tensorflow/tensorflow:2.21.0-gpu`."""
        return f"{self.base_repository}:{self.base_tag}"

    @property
    def jupyter(self) -> bool:
        return self.variant is not None and self.variant.jupyter is not None

    @property
    def short_version(self) -> str:
        return Version.parse(self.tensorflow).major_minor

    def composite_tag(self, python: str | None = None) -> str:
        """`2.21.0-gpu-py311-cu125` (AWS DLC style): Python and the CUDA major+minor of the
        libraries TensorFlow loads in the image (the base's, or the wheels it adds)."""
        py = Version.parse(python or self.base_python)
        return f"{self.name}-py{py.major}{py.minor}-cu{self.cuda_tag}"

    def tags(self, *, registry: str | None = None, python: str | None = None) -> list[str]:
        """Full references, `[REGISTRY/]REPO:TAG`, in the order of CONTRACTS.md: its tag names,
        then the composite tag where it has one."""
        repo = f"{registry.rstrip('/')}/{self.repository}" if registry else self.repository
        names = [*self.tag_names]
        if self.cuda_tag is not None:
            names.append(self.composite_tag(python))
        return [f"{repo}:{name}" for name in names]


def partials(prefix: str, *, apt: bool, jupyter: bool) -> tuple[str, ...]:
    """The Dockerfile's partials in order: the header, env and labels of `prefix` (`l4t-` for
    l4t.yaml's rows, whose facts are JetPack's), apt and Jupyter where the image has them."""
    return (
        f"{prefix}header",
        "from",
        "runtime-stage",
        f"{prefix}env",
        *(["apt"] if apt else []),
        "runtime",
        "user",
        *(["jupyter"] if jupyter else []),
        "guard",
        f"{prefix}labels",
        "entrypoint",
    )


def base_registry(spec_registry: str, override: str | None) -> str:
    """The registry an image's FROM names: --base-registry when given, else the spec's; without
    a trailing `/` (`mirror.local/` must not give FROM mirror.local//tensorflow/…)."""
    return (override or spec_registry).rstrip("/")


def check_registry(flag: str, value: str | None) -> None:
    """UsageError unless `value` (None: not given) can prefix an image name: `R/REPO:TAG`. A
    trailing `/` is tolerated: it is stripped where the prefix is used."""
    if value is not None and not REGISTRY_PREFIX.fullmatch(value.rstrip("/")):
        raise UsageError(
            f"{flag} {value!r} is not a registry: accepted: a lowercase host of letters, digits, "
            "'.' and '-', an optional :PORT, then optional /PATH components of letters and digits "
            "separated by '.', '_', '__' or '-' (Docker's image reference grammar); "
            f"example: {flag} registry.example.com:5000/team"
        )


def check_registry_flags(registry: str | None, base_registry: str | None) -> None:
    """--registry and --base-registry, each a registry host[:port] (a usage error otherwise)."""
    for flag, value in (("--registry", registry), ("--base-registry", base_registry)):
        check_registry(flag, value)
        name_rules.registry_port(flag, value)


def images(spec: Spec, *, cuda_source: CudaSource | None = None) -> list[Image]:
    """Every image of images.yaml, newest TensorFlow first, variants in spec order; `cuda_source`
    (build.py --cuda-source) overrides images.yaml's for every image."""
    found: list[Image] = []
    offered_versions = [Version.parse(offered.version) for offered in spec.images.versions]
    reqs = {
        offered.version: cudagap.requirements(spec, offered.version, override=cuda_source)
        for offered in spec.images.versions
    }
    for offered in spec.images.versions:
        version = Version.parse(offered.version)
        same_minor = [v for v in offered_versions if v.major_minor == version.major_minor]
        for variant_name, variant in spec.images.variants.items():
            slim = variant.base is VariantBase.SLIM
            if slim and offered.version not in (variant.versions or []):
                continue
            name, short = f"{offered.version}-{variant_name}", version.major_minor
            newest = offered.version == spec.default_version
            req, base = reqs[offered.version], spec.images.base
            base_repository, base_python = base.repository, spec.base_recipe(offered.version).python
            base_tag, slim_tag = f"{offered.version}{variant.base_suffix}", None
            if slim:
                req = _slim_requirements(spec, offered.version, variant_name, req)
                # the newest of the slim variant's `versions` gets its `latest-` tag
                newest = version == max(map(Version.parse, variant.versions or []))
                assert spec.bases.slim is not None  # spec.load checks it for a slim variant
                base_repository, base_python = spec.bases.slim.repository, spec.bases.slim.python
                base_tag = slim_tag = spec.bases.slim.tag
            tag_names = [name]
            if version == max(same_minor):  # only the newest patch gets the `X.Y-variant` tag
                tag_names.append(f"{short}-{variant_name}")
            if newest:
                tag_names.append(f"latest-{variant_name}")
            words = {name, f"{short}-{variant_name}", offered.version, short, variant_name}
            image = Image(
                tensorflow=offered.version,
                variant_name=variant_name,
                name=name,
                folder="",
                repository=spec.images.repository,
                tag_names=tuple(tag_names),
                cuda_tag=None,
                selected_by=frozenset(
                    words | ({f"latest-{variant_name}", "latest"} if newest else set())
                ),
                in_all=True,
                newest=newest,
                platform=NATIVE_PLATFORM,
                base_registry=base.registry,
                base_repository=base_repository,
                base_tag=base_tag,
                base_python=base_python,
                base_locked=True,
                partials=partials(
                    "", apt=bool([*variant.apt, *offered.apt]), jupyter=bool(variant.jupyter)
                ),
                facts={},
                cuda=_cuda(_gap(req, name)),
                cmd=tuple(variant.cmd),
                budget_mib=variant.max_added_mib,
                variant=variant,
                version_pip=tuple(offered.pip),
                version_apt=tuple(offered.apt),
                slim_tag=slim_tag,
            )
            found.append(with_requirements(spec, image, req))
    return found


def _slim_requirements(
    spec: Spec, tensorflow: str, variant_name: str, official: cudagap.Requirements
) -> cudagap.Requirements:
    """What `tensorflow` needs on bases.yaml's slim base, which has no CUDA: it installs TensorFlow
    and always the [and-cuda] wheels. The version must be one whose official base needs them."""
    if cudagap.assess(spec, tensorflow).source is not CudaSource.WHEELS:
        gap = official.gap
        raise SpecError(
            f"images.yaml: variants.{variant_name}.versions lists {tensorflow}, whose"
            f" official base provides what its TensorFlow needs ({gap.describe() if gap else ''}):"
            " the slim variant is for the versions whose base cannot use its own CUDA",
            hint="remove it from the slim variant's versions",
        )
    return cudagap.requirements(spec, tensorflow, slim=True)


def _gap(req: cudagap.Requirements, name: str) -> cudagap.Gap:
    """The image's base against its TensorFlow; SpecError when bases.yaml has no such base."""
    if req.gap is None:
        raise SpecError(
            f"bases.yaml describes no base of TensorFlow {req.tensorflow} (image {name})",
            hint="add its recipe to images/bases.yaml",
        )
    return req.gap


def _cuda(gap: cudagap.Gap) -> Cuda:
    """What the build reports of an images.yaml image's CUDA: its Gap, in words and as data."""
    detail = gap.as_json()
    return Cuda(gap.source.value, str(gap.cuda), str(gap.cudnn), gap.wheels, gap.describe(), detail)


def gpu_facts(spec: Spec, tensorflow: str) -> dict[str, object]:
    """What an image tells the runtime of the GPUs its TensorFlow serves (templates' gpu-env):
    the wheel's SASS/PTX codes, its known failures (in tfgpu.contract.gpu_support's form), the
    kernel cache."""
    build = spec.matrix.tensorflow[tensorflow]
    return {
        "arches": " ".join([*build.arches.sass, *build.arches.ptx]) if build.arches else None,
        "failures": gpu_support.format_failures(spec.gpus.failures(tensorflow)),
        "cache": spec.gpus.kernel_cache,
    }


def with_requirements(spec: Spec, image: Image, req: cudagap.Requirements) -> Image:
    """`image` of images.yaml with what its TensorFlow needs (`req`): where its CUDA comes from,
    the wheels it adds, its composite tag and the facts its partials read."""
    gap = _gap(req, image.name)
    facts = {
        "req": req,
        "gap": gap,
        "recipe": None if image.slim else spec.base_recipe(image.tensorflow),
        "slim_base": spec.bases.slim if image.slim else None,
        "jupyter": image.variant.jupyter if image.variant else None,
        "gpu": gpu_facts(spec, image.tensorflow),
    }
    return dataclasses.replace(
        image,
        req=req,
        gap=gap,
        cuda=_cuda(gap),
        cuda_wheels=gap.wheels,
        tf_keras=req.tf_keras,
        cuda_tag=f"{req.cuda.major}{req.cuda.minor}",
        facts=facts,
    )


def with_cuda_source(spec: Spec, image: Image, cuda_source: CudaSource) -> Image:
    """`image` (of an official base) with build.py --cuda-source's override: applied to the
    selected images only, so that a version the override cannot serve is an error only when it
    is asked for (2.13.0 has no [and-cuda] wheels; `build 2.21.0-gpu --cuda-source wheels` must
    not fail on it)."""
    req = cudagap.requirements(spec, image.tensorflow, override=cuda_source)
    return with_requirements(spec, image, req)


def jetson_images(spec: Spec) -> list[Image]:
    """The images of images/l4t.yaml, in its order (none without that file): NVIDIA's L4T
    TensorFlow containers, whose CUDA is JetPack's (no wheels added, no size budget), for the
    file's platform (linux/arm64); their bases are not in images/bases.lock.yaml."""
    if spec.jetson is None:
        return []
    found = spec.jetson
    rows = []
    for entry in found.images:
        name = f"{entry.tensorflow}-{JETSON}-r{entry.l4t}-arm64"
        # any R35.x runs R35 images: the second tag names the L4T major only
        short = f"{Version.parse(entry.tensorflow).major_minor}-{JETSON}-r"
        tag_names = (name, f"{short}{Version.parse(entry.l4t).major}-arm64")
        jetpack = f"JetPack {entry.jetpack}" if entry.jetpack else "JetPack (release unknown)"
        summary = f"{jetpack}'s CUDA {entry.cuda} (L4T R{entry.l4t}), in the base: no wheels added"
        detail = {
            "cuda_source": "base",
            "cuda": entry.cuda,
            "cudnn": entry.cudnn,
            "summary": summary,
        }
        rows.append(
            Image(
                tensorflow=entry.tensorflow,
                variant_name=JETSON,
                name=name,
                folder=JETSON,
                repository=found.repository,
                tag_names=tag_names,
                cuda_tag=None,
                selected_by=frozenset({JETSON, *tag_names}),
                in_all=False,
                newest=False,
                platform=found.platform,
                base_registry=found.base.registry,
                base_repository=found.base.repository,
                base_tag=entry.base_tag,
                base_python=entry.python,
                base_locked=False,
                partials=partials(f"{JETSON}-", apt=False, jupyter=False),
                # the shared partials read gap.wheels: JetPack's CUDA, none added
                facts={
                    "jetson": entry,
                    "gap": {"wheels": ()},
                    "slim_base": None,
                    "gpu": {"arches": None, "failures": "", "cache": spec.gpus.kernel_cache},
                },
                cmd=tuple(entry.cmd),
                cuda=Cuda("base", entry.cuda, entry.cudnn, (), summary, detail),
                jetson=entry,
            )
        )
    return rows


def every_image(spec: Spec, *, cuda_source: CudaSource | None = None) -> list[Image]:
    """images() and then jetson_images(): what `render`, `build` and `bake` choose from."""
    return images(spec, cuda_source=cuda_source) + jetson_images(spec)


def locked_wheels(
    image: Image,
    runtime_extras: Sequence[str],
    cuda_lock: wheel_locks.Lock,
    images_lock: wheel_locks.ImageLock,
) -> wheel_locks.ImageWheels:
    """The locked wheels `image` gets (wheel_locks.image_wheels: its set, CUDA wheels, tf-keras,
    pip); SpecError when a lock lacks one of them."""
    return wheel_locks.image_wheels(
        cuda_lock,
        images_lock,
        image=image.name,
        python=image.base_python,
        packages=wheel_locks.image_packages(runtime_extras, image.pip),
        cuda_pins=image.cuda_wheels,
        tf_keras=image.tf_keras,
        installs_tensorflow=image.slim,
    )


def locked_additions(
    spec: Spec, image: Image, cuda_lock: wheel_locks.Lock, images_lock: wheel_locks.ImageLock
) -> tuple[wheel_locks.Added, float | None]:
    """What `image` adds to its base by the locks (TensorFlow with its dependencies on the slim
    base, the CUDA wheels, tf-keras), and its budget in MiB for the rest (the kit's layers; None:
    it has none); SpecError when a lock lacks the image's entries."""
    wheels = locked_wheels(image, spec.images.runtime_extras, cuda_lock, images_lock)
    return wheels.added, image.budget_mib
