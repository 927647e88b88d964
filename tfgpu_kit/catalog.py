"""The images the spec describes: one per (offered TensorFlow version, variant), with their tags."""

from __future__ import annotations

from dataclasses import dataclass

from tfgpu_kit import compat_rules, cudagap
from tfgpu_kit.errors import UsageError
from tfgpu_kit.spec import REGISTRY_PREFIX, CudaSource, Spec, Variant
from tfgpu_kit.versions import Version


@dataclass(frozen=True)
class Image:
    """One image to render and build."""

    tensorflow: str
    variant_name: str
    variant: Variant
    base_registry: str
    base_repository: str
    base_python: str
    repository: str
    newest: bool
    req: compat_rules.Requirements
    # this version's own extra packages (images.yaml versions[N].pip/.apt)
    version_pip: tuple[str, ...] = ()
    version_apt: tuple[str, ...] = ()
    # the newest offered patch of its X.Y: only that one gets the `X.Y-variant` tag
    newest_of_minor: bool = True

    @property
    def pip(self) -> list[str]:
        """Extra pip packages: the variant's, then the version's (a repeated entry once)."""
        return list(dict.fromkeys([*self.variant.pip, *self.version_pip]))

    @property
    def apt(self) -> list[str]:
        """Extra apt packages: the variant's, then the version's (a repeated entry once)."""
        return list(dict.fromkeys([*self.variant.apt, *self.version_apt]))

    @property
    def name(self) -> str:
        """`2.21.0-gpu`: the image's id, its dockerfiles/ folder and its first tag."""
        return f"{self.tensorflow}-{self.variant_name}"

    @property
    def base_tag(self) -> str:
        return f"{self.tensorflow}{self.variant.base_suffix}"

    @property
    def base_ref(self) -> str:
        """Base image without the registry: `tensorflow/tensorflow:2.21.0-gpu`."""
        return f"{self.base_repository}:{self.base_tag}"

    @property
    def jupyter(self) -> bool:
        return self.variant.jupyter is not None

    @property
    def short_version(self) -> str:
        v = Version.parse(self.tensorflow)
        return f"{v.major}.{v.minor}"

    @property
    def gap(self) -> cudagap.Gap:
        """Base against TensorFlow: where the CUDA libraries come from (images() sets it)."""
        assert self.req.gap is not None  # every offered version has a base in bases.yaml
        return self.req.gap

    @property
    def tf_keras(self) -> str | None:
        """`tf-keras==X.Y.Z` the image carries (TensorFlow 2.16+: tf.keras is Keras 3), or None."""
        return self.req.tf_keras

    def composite_tag(self, python: str | None = None) -> str:
        """`2.21.0-gpu-py311-cu125` (AWS DLC style): Python and the CUDA major+minor of the
        libraries TensorFlow loads in the image (the base's, or the wheels it adds)."""
        py = Version.parse(python or self.base_python)
        return f"{self.name}-py{py.major}{py.minor}-cu{self.req.cuda.major}{self.req.cuda.minor}"

    def tags(self, *, registry: str | None = None, python: str | None = None) -> list[str]:
        """Full references, `[REGISTRY/]REPO:TAG`, in the order of CONTRACTS.md."""
        names = [self.name]
        if self.newest_of_minor:
            names.append(f"{self.short_version}-{self.variant_name}")
        if self.newest:
            names.append(f"latest-{self.variant_name}")
        names.append(self.composite_tag(python))
        repo = f"{registry.rstrip('/')}/{self.repository}" if registry else self.repository
        return [f"{repo}:{name}" for name in names]


def base_registry(spec_registry: str, override: str | None) -> str:
    """The registry an image's FROM names: --base-registry when given, else the spec's; without
    a trailing `/` (`mirror.local/` must not give FROM mirror.local//tensorflow/…)."""
    return (override or spec_registry).rstrip("/")


def check_registry(flag: str, value: str | None) -> None:
    """UsageError unless `value` (None: not given) can prefix an image name: `R/REPO:TAG`. A
    trailing `/` is tolerated: it is stripped where the prefix is used."""
    if value is None:
        return
    if not REGISTRY_PREFIX.fullmatch(value.rstrip("/")):
        raise UsageError(
            f"{flag} {value!r} is not a registry: accepted: a lowercase host of letters, digits, "
            "'.' and '-', an optional :PORT, then optional /PATH components of letters and digits "
            "separated by '.', '_', '__' or '-' (Docker's image reference grammar); "
            f"example: {flag} registry.example.com:5000/team"
        )


def images(spec: Spec, *, cuda_source: CudaSource | None = None) -> list[Image]:
    """Every image, newest TensorFlow first, variants in spec order; `cuda_source` (build.py
    --cuda-source) overrides images.yaml's for every image."""
    found: list[Image] = []
    newest = spec.default_version
    newest_patch: dict[str, Version] = {}
    for offered in spec.images.versions:
        v = Version.parse(offered.version)
        newest_patch[v.major_minor] = max(v, newest_patch.get(v.major_minor, v))
    reqs = {
        offered.version: compat_rules.requirements(spec, offered.version, override=cuda_source)
        for offered in spec.images.versions
    }
    for offered in spec.images.versions:
        version = Version.parse(offered.version)
        for variant_name, variant in spec.images.variants.items():
            found.append(
                Image(
                    tensorflow=offered.version,
                    variant_name=variant_name,
                    variant=variant,
                    base_registry=spec.images.base.registry,
                    base_repository=spec.images.base.repository,
                    base_python=spec.base_recipe(offered.version).python,
                    repository=spec.images.repository,
                    newest=offered.version == newest,
                    req=reqs[offered.version],
                    version_pip=tuple(offered.pip),
                    version_apt=tuple(offered.apt),
                    newest_of_minor=version == newest_patch[version.major_minor],
                )
            )
    return found
