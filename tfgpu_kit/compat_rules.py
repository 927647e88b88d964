"""The compatibility rules: can driver D run TensorFlow X (CUDA X.Y) on GPU architecture A?

Verdicts, in order of preference:
- native: the driver is at least the toolkit's own minimum.
- minor-version compatibility: older driver of the same CUDA major, at or above the major's floor
  (12.x >= 525.60.13, 11.x >= 450.80.02, 13.x >= 580). Works, except that PTX produced by the newer
  toolkit cannot be JIT-compiled by the older driver: a GPU whose architecture the build covers only
  as PTX (e.g. H100, sm_90, with TF 2.21's compute_90) then fails.
- forward compatibility: the cuda-compat package of the image's CUDA on this driver branch
  (data-centre GPUs only); the image does not ship it, so this counts as "cannot run as built".
- does not run.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tfgpu_kit.cudagap import Requirements, requirements
from tfgpu_kit.spec import Spec, TensorFlowBuild
from tfgpu_kit.versions import Arch, Version, is_branch_only, parse_arch_code


class Verdict(enum.StrEnum):
    NATIVE = "native"
    MINOR_COMPAT = "minor-version compatibility"
    FORWARD_COMPAT = "needs forward compatibility"
    NO = "does not run"

    @property
    def runs(self) -> bool:
        return self in (Verdict.NATIVE, Verdict.MINOR_COMPAT)


class ArchCoverage(enum.StrEnum):
    SASS = "sass"
    PTX = "ptx"
    NONE = "none"
    UNKNOWN = "unknown"


def arch_coverage(build: TensorFlowBuild, arch: Arch) -> ArchCoverage:
    """How the build covers `arch`: SASS for the same major at or below its minor, else PTX at or
    below it (JIT), else not at all."""
    if build.arches is None:
        return ArchCoverage.UNKNOWN
    sass = (parse_arch_code(code)[1] for code in build.arches.sass)
    if any(code.major == arch.major and code.minor <= arch.minor for code in sass):
        return ArchCoverage.SASS
    if any(parse_arch_code(code)[1] <= arch for code in build.arches.ptx):
        return ArchCoverage.PTX
    return ArchCoverage.NONE


@dataclass
class Assessment:
    """The verdict for one TensorFlow version on one driver (and optionally one GPU arch)."""

    tensorflow: str
    req: Requirements
    driver: Version
    verdict: Verdict
    reasons: list[str] = field(default_factory=list)
    arch: Arch | None = None
    coverage: ArchCoverage | None = None
    ptx_jit_failure: bool = False
    newest_runnable: str | None = None
    # with an arch: a TensorFlow newer than `newest_runnable` that the driver runs but whose
    # architectures are unknown (not assessed for `arch`, so not recommended)
    newest_unassessed: str | None = None

    def as_json(self) -> dict[str, object]:
        return {
            "tensorflow": self.tensorflow,
            "cuda": str(self.req.cuda),
            "cudnn": str(self.req.cudnn),
            "driver": str(self.driver),
            "driver_min": str(self.req.driver_min),
            "driver_min_compat": str(self.req.compat_floor),
            "gpu_arch": str(self.arch) if self.arch else None,
            "arch_coverage": self.coverage.value if self.coverage else None,
            "verdict": self.verdict.value,
            "runs": self.verdict.runs,
            "ptx_jit_failure": self.ptx_jit_failure,
            "reasons": self.reasons,
            "newest_runnable_tensorflow": self.newest_runnable,
            "newest_unassessed_tensorflow": self.newest_unassessed,
        }


def _driver_verdict(req: Requirements, driver: Version) -> Verdict:
    if driver >= req.driver_min:
        return Verdict.NATIVE
    if driver >= req.compat_floor:
        return Verdict.MINOR_COMPAT
    return Verdict.NO


def assess(spec: Spec, tf: str, driver: Version, arch: Arch | None = None) -> Assessment:
    req = requirements(spec, tf)
    build = spec.matrix.tensorflow[tf]
    verdict = _driver_verdict(req, driver)
    result = Assessment(tf, req, driver, verdict, arch=arch)
    cuda = req.cuda
    why = {
        Verdict.NATIVE: f"driver {driver} >= {req.driver_min}, the minimum for CUDA {cuda}",
        Verdict.MINOR_COMPAT: f"driver {driver} < CUDA {cuda} minimum {req.driver_min}, >= CUDA"
        f" {cuda.major}.x floor {req.compat_floor}: minor-version compatibility (no newer-driver"
        " features)",
        Verdict.NO: f"driver {driver} < CUDA {cuda.major}.x floor {req.compat_floor} (CUDA {cuda}"
        f" needs {req.driver_min}, natively)",
    }
    result.reasons.append(why[verdict])
    if arch is not None:
        result.coverage = arch_coverage(build, arch)
        if result.coverage is ArchCoverage.NONE:
            result.verdict = Verdict.NO
            result.reasons.append(f"TensorFlow {tf} ships no kernels that run on {arch}")
        elif result.coverage is ArchCoverage.UNKNOWN:
            result.reasons.append(
                f"SASS/PTX architectures of TensorFlow {tf} unknown: {arch} not assessed"
            )
        elif result.coverage is ArchCoverage.PTX and verdict is Verdict.MINOR_COMPAT:
            result.ptx_jit_failure = True
            result.verdict = Verdict.NO
            result.reasons.append(
                f"{arch} only has PTX, and PTX from CUDA {cuda} cannot be JIT-compiled by an older"
                " driver: fails under minor-version compatibility"
            )
        elif result.coverage is ArchCoverage.PTX:
            result.reasons.append(f"{arch} runs through PTX JIT (slower first start)")
    forward = spec.matrix.forward_compat.get(str(driver.major))
    if (
        not result.verdict.runs
        and forward is not None
        and cuda >= Version.parse(forward.from_cuda)
        and result.coverage is not ArchCoverage.NONE
    ):
        result.verdict = Verdict.FORWARD_COMPAT
        result.reasons.append(
            f"data-centre GPUs only: cuda-compat-{cuda.major}-{cuda.minor} (not in the image)"
            f" supports branch {driver.major}"
        )
    if is_branch_only(driver):
        result.reasons.append(
            f"only the branch {driver} was given: judged as its oldest driver (give the full one)"
        )
    if not result.verdict.runs:
        result.newest_runnable = newest_runnable(spec, driver, arch)
        result.newest_unassessed = newest_unassessed(spec, driver, arch)
    return result


def _newest(
    spec: Spec, driver: Version, arch: Arch | None
) -> tuple[Version | None, Version | None]:
    """The newest TensorFlow this driver runs (natively or by minor compatibility) whose kernels are
    not known to fail on `arch`: (one whose coverage of `arch` is known, or any without `arch`; one
    whose coverage of `arch` is unknown)."""
    known: list[Version] = []
    unknown: list[Version] = []
    for tf, build in spec.matrix.tensorflow.items():
        verdict = _driver_verdict(requirements(spec, tf), driver)
        coverage = arch_coverage(build, arch) if arch is not None else None
        fails = coverage is ArchCoverage.NONE or (
            coverage is ArchCoverage.PTX and verdict is Verdict.MINOR_COMPAT
        )
        if verdict.runs and not fails:
            (unknown if coverage is ArchCoverage.UNKNOWN else known).append(Version.parse(tf))
    return max(known, default=None), max(unknown, default=None)


def newest_runnable(spec: Spec, driver: Version, arch: Arch | None) -> str | None:
    """The newest TensorFlow in the matrix this driver runs (natively or by minor compatibility).

    With `arch`, only versions whose SASS/PTX coverage of it is known to work count: one whose
    architectures are unknown (`arches: null`) is not recommended (see `newest_unassessed`)."""
    newest, _ = _newest(spec, driver, arch)
    return str(newest) if newest is not None else None


def newest_unassessed(spec: Spec, driver: Version, arch: Arch | None) -> str | None:
    """With `arch`: the newest TensorFlow the driver runs whose coverage of `arch` is unknown, when
    it is newer than `newest_runnable` (else None: nothing newer is left unsaid)."""
    if arch is None:
        return None
    known, unknown = _newest(spec, driver, arch)
    if unknown is None or (known is not None and known > unknown):
        return None
    return str(unknown)
