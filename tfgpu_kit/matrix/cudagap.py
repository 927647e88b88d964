"""What an official base image lacks for its TensorFlow, where the image's CUDA comes from, and what
that CUDA asks of the host driver (the image's Requirements, which tfgpu_kit/matrix/compat.py judges
a driver against).

The official `tensorflow/tensorflow:X-gpu` images ship system CUDA and cuDNN from apt and a plain
`pip install tensorflow` (images/bases.yaml). TensorFlow loads whatever CUDA and cuDNN it finds, and
refuses the GPU when they do not fit its build: it needs the CUDA libraries of its CUDA major, and a
cuDNN of the same major whose minor is not lower than the one it was compiled with ("Loaded runtime
CuDNN library: … CuDNN library needs to have matching major version and equal or higher minor
version"). The kit applies the same rule to the CUDA runtime: libraries older than the build's CUDA
release may lack functions the build calls.

Where the base falls short, the image installs the NVIDIA wheels of TensorFlow's own `[and-cuda]`
extra (images/matrix.yaml `and_cuda`: one CUDA release), as `pip install tensorflow[and-cuda]`
would. The CUDA the image ends up with sets the driver it needs: that release's own minimum, its
major's minor-version-compatibility floor, and the image's NVIDIA_REQUIRE_CUDA.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfgpu.machine import libs

from tfgpu_kit.matrix.spec import CudaSource, Spec
from tfgpu_kit.matrix.versions import Version
from tfgpu_kit.shared.errors import SpecError


@dataclass(frozen=True)
class Component:
    """One library family compared: what TensorFlow needs against what the base ships."""

    name: str  # "CUDA" or "cuDNN"
    needed: Version  # the build's version (CUDA 12.5.1, cuDNN 9.3)
    base_has: Version | None  # None: the base has none (the slim base)
    ok: bool

    def describe(self) -> str:
        if self.base_has is None:
            return f"{self.name} {self.needed.major_minor} (has none)"
        if self.ok:
            return f"{self.name} {self.base_has}"
        if self.base_has.major != self.needed.major:
            return f"{self.name} {self.needed.major} (has {self.base_has})"
        return f"{self.name} {self.needed.major_minor} or newer (has {self.base_has})"


def fits(needed: Version, has: Version) -> bool:
    """Does the CUDA runtime or cuDNN a base has fit what its TensorFlow was built with? The rule
    TensorFlow applies (the runtime's tfgpu.machine.libs.fits): the same major, a minor not
    lower."""
    return libs.fits((has.major, has.minor), (needed.major, needed.minor))


@dataclass(frozen=True)
class Gap:
    """The comparison for one TensorFlow version and the decision it leads to."""

    tensorflow: str
    recipe: str  # bases.yaml recipe of the base
    components: tuple[Component, ...]
    setting: CudaSource  # what images.yaml (or --cuda-source) asked for
    source: CudaSource  # BASE or WHEELS: where the image's CUDA libraries come from
    wheels: tuple[str, ...]  # the pins the image installs (empty when source is BASE)
    cuda: Version  # the CUDA toolkit release of the libraries TensorFlow will load
    cudnn: Version  # the cuDNN TensorFlow will load (major.minor.patch)

    @property
    def base_enough(self) -> bool:
        return all(c.ok for c in self.components)

    @property
    def works(self) -> bool:
        """Whether TensorFlow can use the GPU with the libraries the image ends up with."""
        return self.base_enough or self.source is CudaSource.WHEELS

    def describe(self) -> str:
        """One line, e.g. `base lacks cuDNN 9 (has 8.9.6): the image adds 12 NVIDIA wheels …`."""
        if self.base_enough:
            provides = ", ".join(c.describe() for c in self.components)
            text = f"base provides {provides}"
            if self.source is CudaSource.WHEELS:
                text += f" (cuda_source: wheels: the image adds {self._wheels_text()} anyway)"
            return text
        if all(c.base_has is None for c in self.components):
            return f"base has no CUDA of its own: the image adds {self._wheels_text()}"
        lacks = " and ".join(c.describe() for c in self.components if not c.ok)
        if self.source is CudaSource.WHEELS:
            return f"base lacks {lacks}: the image adds {self._wheels_text()}"
        return (
            f"base lacks {lacks}: cuda_source: base adds nothing, so TensorFlow {self.tensorflow}"
            " will not use the GPU in this image"
        )

    def _wheels_text(self) -> str:
        return (
            f"{len(self.wheels)} NVIDIA wheels of tensorflow[and-cuda]=={self.tensorflow}"
            f" (CUDA {self.cuda}, cuDNN {self.cudnn})"
        )

    def as_json(self) -> dict[str, object]:
        return {
            "base_recipe": self.recipe,
            "base_provides": self.base_enough,
            "components": [
                {
                    "name": c.name,
                    "needed": str(c.needed),
                    "base_has": str(c.base_has) if c.base_has is not None else None,
                    "ok": c.ok,
                }
                for c in self.components
            ],
            "cuda_source_setting": self.setting.value,
            "cuda_source": self.source.value,
            "wheels": list(self.wheels),
            "cuda": str(self.cuda),
            "cudnn": str(self.cudnn),
            "summary": self.describe(),
        }


SLIM_RECIPE = "slim"  # Gap.recipe of the slim variant's base (bases.yaml `slim`)


def assess(
    spec: Spec, tensorflow: str, *, override: CudaSource | None = None, slim: bool = False
) -> Gap:
    """Compare the official base of `tensorflow` (with `slim`, bases.yaml's slim base, which has
    no CUDA) with its build and decide the CUDA source.

    `override` (build.py --cuda-source) wins over images.yaml's cuda_source; neither applies to
    the slim base, whose images always add the wheels. Raises SpecError when the wheels are needed
    or asked for but TensorFlow has no `[and-cuda]` extra to take them from."""
    build = spec.matrix.tensorflow[tensorflow]
    needed_cuda, needed_cudnn = Version.parse(build.cuda), Version.parse(build.cudnn)
    base_cuda = base_cudnn = None
    recipe_name = SLIM_RECIPE
    if not slim:
        recipe_name = spec.bases.versions[tensorflow].recipe
        recipe = spec.bases.recipes[recipe_name]
        base_cuda, base_cudnn = Version.parse(recipe.cuda), Version.parse(recipe.cudnn)
    components = tuple(
        Component(name, needed, has, has is not None and fits(needed, has))
        for name, needed, has in (
            ("CUDA", needed_cuda, base_cuda),
            ("cuDNN", needed_cudnn, base_cudnn),
        )
    )
    setting = CudaSource.WHEELS if slim else override or spec.cuda_source(tensorflow)
    base_enough = all(c.ok for c in components)
    source = setting
    if setting is CudaSource.AUTO:
        source = CudaSource.BASE if base_enough else CudaSource.WHEELS
    if source is CudaSource.BASE and base_cuda is not None and base_cudnn is not None:
        return Gap(tensorflow, recipe_name, components, setting, source, (), base_cuda, base_cudnn)
    pins = tuple(build.and_cuda)
    cudnn_pin = next((pin for pin in pins if pin.startswith("nvidia-cudnn-")), None)
    if cudnn_pin is None:
        why = "cuda_source is wheels" if base_enough else "its base lacks CUDA libraries"
        raise SpecError(
            f"TensorFlow {tensorflow}: {why}, but matrix.yaml lists no [and-cuda] wheels for it"
            f" (tensorflow.{tensorflow}.and_cuda)",
            hint="TensorFlow before 2.14 has no [and-cuda] extra: use cuda_source: base",
        )
    # major.minor.patch of the wheel's version (9.3.0.75 -> 9.3.0)
    cudnn_wheel = Version.parse(cudnn_pin.partition("==")[2])
    cudnn = Version.parse(".".join(str(p) for p in (*cudnn_wheel.parts, 0, 0)[:3]))
    return Gap(
        tensorflow, recipe_name, components, setting, CudaSource.WHEELS, pins, needed_cuda, cudnn
    )


@dataclass(frozen=True)
class Requirements:
    """What one image's TensorFlow needs from the host driver, for the CUDA libraries it will load
    there: the base's own or the `[and-cuda]` wheels the image adds (`gap`)."""

    tensorflow: str
    cuda: Version  # CUDA release of the libraries TensorFlow loads in the image
    cudnn: Version  # cuDNN TensorFlow loads in the image
    driver_min: Version  # that CUDA release's own minimum driver
    compat_floor: Version  # its major's minor-version-compatibility floor
    build_cuda: Version  # what TensorFlow was built with (matrix.yaml)
    build_cudnn: Version
    require_cuda: str  # the image's NVIDIA_REQUIRE_CUDA
    gap: Gap | None = None  # None for a version whose base bases.yaml does not describe
    tf_keras: str | None = None  # the locked tf-keras pin its images carry (matrix.yaml tf_keras)


def nvidia_require_cuda(cuda: Version, floor: Version, base_require: str | None = None) -> str:
    """The NVIDIA_REQUIRE_CUDA of an image whose TensorFlow loads CUDA `cuda`.

    libnvidia-container (src/cli/dsl.c, legacy mode) reads space-separated alternatives of
    comma-separated conditions. The first alternative is the minor-version-compatibility floor of
    the CUDA major: `cuda>=12.0,driver>=525.60.13` (`cuda` is the CUDA version the host driver
    supports; dsl.c reads each version component with strtoumax, so `450.80.02` is accepted).
    `base_require` is the base's own value (bases.yaml): its `brand=…,driver…` alternatives admit
    older data-centre branches through the base's cuda-compat package (forward compatibility); they
    are kept only when the caller knows that package serves this CUDA major. See docs/build.md."""
    value = f"cuda>={cuda.major}.0,driver>={floor}"
    if base_require:
        brands = [term for term in base_require.split() if term.lower().startswith("brand=")]
        value = " ".join([value, *brands])
    return value


def requirements(
    spec: Spec, tf: str, *, override: CudaSource | None = None, slim: bool = False
) -> Requirements:
    """The requirements of TensorFlow `tf`'s images (bases.yaml, images.yaml cuda_source or
    `override`), on its official base or (`slim`) on the slim base; raises SpecError as `assess`
    does."""
    build = spec.matrix.tensorflow[tf]
    build_cuda, build_cudnn = Version.parse(build.cuda), Version.parse(build.cudnn)
    known = slim or tf in spec.bases.versions
    gap = assess(spec, tf, override=override, slim=slim) if known else None
    cuda, cudnn = (gap.cuda, gap.cudnn) if gap else (build_cuda, build_cudnn)
    floor = Version.parse(spec.matrix.cuda_majors[str(cuda.major)].compat_floor)
    base_require = None  # the slim base has no cuda-compat package: no brand= alternatives
    if gap is not None and not slim:
        recipe = spec.base_recipe(tf)
        if recipe.cuda_compat and Version.parse(recipe.cuda_compat).major == cuda.major:
            base_require = recipe.env["NVIDIA_REQUIRE_CUDA"]
    return Requirements(
        tensorflow=tf,
        cuda=cuda,
        cudnn=cudnn,
        driver_min=Version.parse(spec.matrix.cuda[str(cuda)].driver_min),
        compat_floor=floor,
        build_cuda=build_cuda,
        build_cudnn=build_cudnn,
        require_cuda=nvidia_require_cuda(cuda, floor, base_require),
        gap=gap,
        tf_keras=build.tf_keras,
    )
