"""The images the spec describes: one per (offered TensorFlow version, variant) of images.yaml,
and one per Jetson entry of l4t.yaml, with their tags."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from tfgpu_kit import cudagap, name_rules
from tfgpu_kit.errors import SpecError, UsageError
from tfgpu_kit.locks import wheel_locks
from tfgpu_kit.spec import REGISTRY_PREFIX, CudaSource, JetsonEntry, Spec, Variant, VariantBase
from tfgpu_kit.versions import Version

JETSON = "l4t"  # the Jetson images' variant name: `build.py build l4t`, bake's group `l4t`


@dataclass(frozen=True)
class Image:
    """One image to render and build: images.yaml's (`variant` and `req` set, on an official base,
    for the engine's own platform) or a Jetson one of l4t.yaml (`jetson` set: an L4T base that
    brings JetPack's CUDA, for `platform` linux/arm64)."""

    tensorflow: str
    variant_name: str
    variant: Variant | None
    base_registry: str
    base_repository: str
    base_python: str
    repository: str
    newest: bool
    req: cudagap.Requirements | None
    # this version's own extra packages (images.yaml versions[N].pip/.apt)
    version_pip: tuple[str, ...] = ()
    version_apt: tuple[str, ...] = ()
    # the newest offered patch of its X.Y: only that one gets the `X.Y-variant` tag
    newest_of_minor: bool = True
    jetson: JetsonEntry | None = None
    platform: str | None = None  # None: the engine's own (linux/amd64)
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
    def name(self) -> str:
        """`2.21.0-gpu` (`2.11.0-l4t-r35.2.1-arm64`): the image's id, its dockerfiles/ folder
        (dockerfiles/l4t/ for a Jetson image) and its first tag."""
        if self.jetson:
            return f"{self.tensorflow}-{JETSON}-r{self.jetson.l4t}-arm64"
        return f"{self.tensorflow}-{self.variant_name}"

    @property
    def base_tag(self) -> str:
        if self.jetson:
            return self.jetson.base_tag
        if self.slim_tag is not None:
            return self.slim_tag
        return f"{self.tensorflow}{self.official.variant.base_suffix}"

    @property
    def base_ref(self) -> str:
        """Base image without the registry: `tensorflow/tensorflow:2.21.0-gpu`."""
        return f"{self.base_repository}:{self.base_tag}"

    @property
    def jupyter(self) -> bool:
        return self.variant is not None and self.variant.jupyter is not None

    @property
    def cmd(self) -> list[str]:
        return self.jetson.cmd if self.jetson else self.official.variant.cmd

    @property
    def short_version(self) -> str:
        return Version.parse(self.tensorflow).major_minor

    @property
    def official(self) -> Official:
        """The facts of images.yaml's images; an AssertionError for a Jetson image."""
        assert self.variant is not None and self.req is not None and self.req.gap is not None
        return Official(self.variant, self.req, self.req.gap)

    @property
    def gap(self) -> cudagap.Gap:
        """Base against TensorFlow: where the CUDA libraries come from (images() sets it)."""
        return self.official.gap

    @property
    def cuda_wheels(self) -> tuple[str, ...]:
        """The NVIDIA CUDA wheels the image adds (none on a Jetson: JetPack brings its CUDA)."""
        return self.gap.wheels if self.req else ()

    @property
    def tf_keras(self) -> str | None:
        """`tf-keras==X.Y.Z` the image carries (TensorFlow 2.16+: tf.keras is Keras 3), or None
        (also on a Jetson: JetPack's TensorFlow 2.11 has Keras 2 as tf.keras)."""
        return self.req.tf_keras if self.req else None

    def composite_tag(self, python: str | None = None) -> str:
        """`2.21.0-gpu-py311-cu125` (AWS DLC style): Python and the CUDA major+minor of the
        libraries TensorFlow loads in the image (the base's, or the wheels it adds)."""
        py = Version.parse(python or self.base_python)
        cuda = self.official.req.cuda
        return f"{self.name}-py{py.major}{py.minor}-cu{cuda.major}{cuda.minor}"

    def tags(self, *, registry: str | None = None, python: str | None = None) -> list[str]:
        """Full references, `[REGISTRY/]REPO:TAG`, in the order of CONTRACTS.md; a Jetson image's
        are `2.11.0-l4t-r35.2.1-arm64` and `2.11-l4t-r35-arm64` (any R35.x runs R35 images)."""
        repo = f"{registry.rstrip('/')}/{self.repository}" if registry else self.repository
        if self.jetson:
            major = Version.parse(self.jetson.l4t).major
            names = [self.name, f"{self.short_version}-{JETSON}-r{major}-arm64"]
            return [f"{repo}:{name}" for name in names]
        names = [self.name]
        if self.newest_of_minor:
            names.append(f"{self.short_version}-{self.variant_name}")
        if self.newest:
            names.append(f"latest-{self.variant_name}")
        names.append(self.composite_tag(python))
        return [f"{repo}:{name}" for name in names]


@dataclass(frozen=True)
class Official:
    """What only images.yaml's images have: a variant, and what their TensorFlow needs."""

    variant: Variant
    req: cudagap.Requirements
    gap: cudagap.Gap


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
    """Every image, newest TensorFlow first, variants in spec order; `cuda_source` (build.py
    --cuda-source) overrides images.yaml's for every image."""
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
            image = Image(
                tensorflow=offered.version,
                variant_name=variant_name,
                variant=variant,
                base_registry=spec.images.base.registry,
                base_repository=spec.images.base.repository,
                base_python=spec.base_recipe(offered.version).python,
                repository=spec.images.repository,
                newest=offered.version == spec.default_version,
                req=reqs[offered.version],
                version_pip=tuple(offered.pip),
                version_apt=tuple(offered.apt),
                newest_of_minor=version == max(same_minor),
            )
            if variant.base is VariantBase.SLIM:
                if offered.version not in (variant.versions or []):
                    continue
                image = _on_slim_base(spec, image, variant.versions or [])
            found.append(image)
    return found


def _on_slim_base(spec: Spec, image: Image, versions: list[str]) -> Image:
    """`image` moved onto bases.yaml's slim base, which has no CUDA: it installs TensorFlow and
    always the [and-cuda] wheels. The version must be one whose official base needs them; the
    newest of the slim variant's `versions` gets its `latest-` tag."""
    slim = spec.bases.slim
    assert slim is not None  # spec.load checks it for a slim variant
    official = image.official.gap
    if cudagap.assess(spec, image.tensorflow).source is not CudaSource.WHEELS:
        raise SpecError(
            f"images.yaml: variants.{image.variant_name}.versions lists {image.tensorflow}, whose"
            f" official base provides what its TensorFlow needs ({official.describe()}): the slim"
            " variant is for the versions whose base cannot use its own CUDA",
            hint="remove it from the slim variant's versions",
        )
    return dataclasses.replace(
        image,
        base_repository=slim.repository,
        base_python=slim.python,
        req=cudagap.requirements(spec, image.tensorflow, slim=True),
        newest=Version.parse(image.tensorflow) == max(map(Version.parse, versions)),
        slim_tag=slim.tag,
    )


def with_cuda_source(spec: Spec, image: Image, cuda_source: CudaSource) -> Image:
    """`image` (of an official base) with build.py --cuda-source's override: applied to the
    selected images only, so that a version the override cannot serve is an error only when it
    is asked for (2.13.0 has no [and-cuda] wheels; `build 2.21.0-gpu --cuda-source wheels` must
    not fail on it)."""
    return dataclasses.replace(
        image, req=cudagap.requirements(spec, image.tensorflow, override=cuda_source)
    )


def jetson_images(spec: Spec) -> list[Image]:
    """The Jetson images of images/l4t.yaml, in its order (none without that file)."""
    if spec.jetson is None:
        return []
    found = spec.jetson
    return [
        Image(
            tensorflow=entry.tensorflow,
            variant_name=JETSON,
            variant=None,
            base_registry=found.base.registry,
            base_repository=found.base.repository,
            base_python=entry.python,
            repository=found.repository,
            newest=False,
            req=None,
            jetson=entry,
            platform=found.platform,
        )
        for entry in found.images
    ]


def every_image(spec: Spec, *, cuda_source: CudaSource | None = None) -> list[Image]:
    """images() and then jetson_images(): what `render`, `build` and `bake` choose from."""
    return images(spec, cuda_source=cuda_source) + jetson_images(spec)


def locked_additions(
    spec: Spec, image: Image, cuda_lock: wheel_locks.Lock, images_lock: wheel_locks.ImageLock
) -> tuple[wheel_locks.Added, float]:
    """What `image` adds to its base by the locks (TensorFlow with its dependencies on the slim
    base, the CUDA wheels, tf-keras), and its variant's budget in MiB for the rest (the kit's
    layers); SpecError when a lock lacks the image's entries."""
    variant = image.official.variant
    locked_set = None
    if image.slim:
        packages = wheel_locks.image_packages(spec.images.runtime_extras, image.pip)
        locked_set = wheel_locks.wheel_set(images_lock, image.base_python, packages, image.name)
    try:
        adds = wheel_locks.added(cuda_lock, locked_set, image.cuda_wheels, image.tf_keras)
    except KeyError as exc:
        raise SpecError(
            f"{wheel_locks.LOCK_NAME} has no entry for {exc.args[0]} (image {image.name})",
            hint="run `build.py lock`",
        ) from None
    return adds, variant.max_added_mib
