"""The compatibility rules: can driver D run TensorFlow X (CUDA X.Y) on GPU architecture A?

Verdicts, in order of preference:
- native: the driver is at least the toolkit's own minimum.
- minor-version compatibility: older driver of the same CUDA major, at or above the major's floor
  (12.x >= 525.60.13, 11.x >= 450.80.02, 13.x >= 580). Works, except that PTX produced by the newer
  toolkit cannot be JIT-compiled by the older driver: a GPU whose architecture the build covers only
  as PTX (e.g. H100, sm_90, with TF 2.21's compute_90) then fails.
- known to fail: the driver would run it, but users or maintainers report that TensorFlow's own
  kernels fail on this GPU (images/gpus.yaml).
- forward compatibility: the cuda-compat package of the image's CUDA on this driver branch
  (data-centre GPUs only); the image does not ship it, so this counts as "cannot run as built".
- does not run.

With an architecture, two columns besides: how TensorFlow's own kernels reach it and how XLA does
(tfgpu.contract.gpu_support's rule, the one the runtime in the image applies): native, PTX JIT (not
reported either way, unless a failure is), known to fail, no kernels.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field

from tfgpu.contract import gpu_support

from tfgpu_kit.matrix.cudagap import Requirements, requirements
from tfgpu_kit.matrix.spec import Spec, TensorFlowBuild
from tfgpu_kit.matrix.versions import Arch, Version, is_branch_only


class Verdict(enum.StrEnum):
    NATIVE = "native"
    MINOR_COMPAT = "minor-version compatibility"
    KNOWN_FAILURE = "known to fail"
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


_COVERAGE = {
    gpu_support.NATIVE: ArchCoverage.SASS,
    gpu_support.PTX_JIT: ArchCoverage.PTX,
    gpu_support.NO_KERNELS: ArchCoverage.NONE,
    gpu_support.UNKNOWN: ArchCoverage.UNKNOWN,
}


def support(spec: Spec, tf: str, arch: Arch) -> gpu_support.Verdict:
    """What TensorFlow `tf`'s build means for GPUs of `arch` (Spec.gpu_support)."""
    return spec.gpu_support(tf, (arch.major, arch.minor))


def arch_coverage(build: TensorFlowBuild, arch: Arch) -> ArchCoverage:
    """How the build covers `arch`: SASS for the same major at or below its minor, else PTX at or
    below it (JIT), else not at all."""
    if build.arches is None:
        return ArchCoverage.UNKNOWN
    sass, ptx = gpu_support.parse_arches([*build.arches.sass, *build.arches.ptx])
    return _COVERAGE[gpu_support.reach(sass, ptx, (arch.major, arch.minor))]


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
    support: gpu_support.Verdict | None = None  # with an arch: kernels, XLA, failures
    # with an arch, for a version that fails there: the nearest older and newer that do not
    nearest: dict[str, str | None] = field(default_factory=dict)
    # the reasons that are known failures (also in `reasons`): a table gives them as footnotes
    failure_reasons: list[str] = field(default_factory=list)

    @property
    def jit(self) -> bool:
        """The driver JIT-compiles TensorFlow's kernels from PTX for this GPU (slow first start)."""
        return (
            self.support is not None
            and self.support.reach == gpu_support.PTX_JIT
            and self.verdict is not Verdict.NO
            and not self.ptx_jit_failure
        )

    def part(self, part: str) -> str:
        """gpu_support's status of TensorFlow's kernels or XLA here; "" without an arch."""
        return self.support.part_status(part) if self.support is not None else ""

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
            "kernels": self._part_json(gpu_support.KERNELS),
            "xla": self._part_json(gpu_support.XLA),
            "jit": self.jit,
            "reasons": self.reasons,
            "newest_runnable_tensorflow": self.newest_runnable,
            "newest_unassessed_tensorflow": self.newest_unassessed,
            "nearest_not_failing": self.nearest or None,
        }

    def _part_json(self, part: str) -> dict[str, object] | None:
        if self.support is None:
            return None
        failure = self.support.failure(part)
        return {
            "status": self.support.part_status(part),
            "failure": failure.as_json() if failure is not None else None,
        }


def _driver_verdict(req: Requirements, driver: Version) -> Verdict:
    if driver >= req.driver_min:
        return Verdict.NATIVE
    if driver >= req.compat_floor:
        return Verdict.MINOR_COMPAT
    return Verdict.NO


def assess(spec: Spec, tf: str, driver: Version, arch: Arch | None = None) -> Assessment:
    req = requirements(spec, tf)
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
        _judge_arch(spec, result, arch)
    forward = spec.matrix.forward_compat.get(str(driver.major))
    if (
        result.verdict is Verdict.NO
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
        if arch is not None:
            result.nearest = nearest_not_failing(spec, tf, driver, arch)
    return result


def _judge_arch(spec: Spec, result: Assessment, arch: Arch) -> None:
    """The architecture's part of `result`: coverage, known failures, the PTX JIT's limits."""
    tf, cuda = result.tensorflow, result.req.cuda
    driver_verdict = result.verdict
    result.support = support(spec, tf, arch)
    result.coverage = _COVERAGE[result.support.reach]
    kernels = result.support.failure(gpu_support.KERNELS)
    xla = result.support.failure(gpu_support.XLA)
    if result.coverage is ArchCoverage.NONE:
        result.verdict = Verdict.NO
        result.reasons.append(
            f"TensorFlow {tf} ships no kernels that run on {arch} ({result.support.codes()})"
        )
    elif result.coverage is ArchCoverage.UNKNOWN:
        result.reasons.append(
            f"SASS/PTX architectures of TensorFlow {tf} unknown: {arch} not assessed"
        )
    elif result.coverage is ArchCoverage.PTX and driver_verdict is Verdict.MINOR_COMPAT:
        result.ptx_jit_failure = True
        result.verdict = Verdict.NO
        result.reasons.append(
            f"{arch} only has PTX, and PTX from CUDA {cuda} cannot be JIT-compiled by an older"
            " driver: fails under minor-version compatibility"
        )
    elif result.coverage is ArchCoverage.PTX and kernels is None:
        result.reasons.append(
            f"{arch} runs through PTX JIT ({result.support.codes().split()[-1]}): not reported to"
            " work or fail; slow first start unless the compiled kernels are kept (the kit's"
            f" images keep them in {spec.gpus.kernel_cache.path})"
        )
    if kernels is not None and result.verdict.runs:
        result.verdict = Verdict.KNOWN_FAILURE
    for failure in (kernels, xla):
        if failure is not None:
            text = (
                f"{gpu_support.PART_NAMES[failure.part]} fail on {arch}: {failure.what}"
                f" ({failure.why})"
            )
            result.reasons.append(text)
            result.failure_reasons.append(text)


def _fails(spec: Spec, tf: str, driver: Version, arch: Arch | None) -> tuple[bool, bool]:
    """(the driver runs `tf`, and its kernels do not fail or lack on `arch`; its coverage of
    `arch` is unknown)."""
    verdict = _driver_verdict(requirements(spec, tf), driver)
    if arch is None:
        return verdict.runs, False
    judged = support(spec, tf, arch)
    fails = (
        judged.reach == gpu_support.NO_KERNELS
        or judged.failure(gpu_support.KERNELS) is not None
        or (judged.reach == gpu_support.PTX_JIT and verdict is Verdict.MINOR_COMPAT)
    )
    return verdict.runs and not fails, judged.reach == gpu_support.UNKNOWN


def _newest(
    spec: Spec, driver: Version, arch: Arch | None
) -> tuple[Version | None, Version | None]:
    """The newest TensorFlow this driver runs (natively or by minor compatibility) whose kernels are
    not known to fail on `arch`: (one whose coverage of `arch` is known, or any without `arch`; one
    whose coverage of `arch` is unknown)."""
    known: list[Version] = []
    unknown: list[Version] = []
    for tf in spec.matrix.tensorflow:
        runs, unassessed = _fails(spec, tf, driver, arch)
        if runs:
            (unknown if unassessed else known).append(Version.parse(tf))
    return max(known, default=None), max(unknown, default=None)


def nearest_not_failing(spec: Spec, tf: str, driver: Version, arch: Arch) -> dict[str, str | None]:
    """The matrix versions nearest to `tf`, older and newer, that this driver runs and whose kernels
    are neither missing nor known to fail on `arch` (coverage known)."""
    this = Version.parse(tf)
    good = [
        Version.parse(other)
        for other in spec.matrix.tensorflow
        if _fails(spec, other, driver, arch) == (True, False)
    ]
    older = max((v for v in good if v < this), default=None)
    newer = min((v for v in good if v > this), default=None)
    return {
        "older": str(older) if older else None,
        "newer": str(newer) if newer else None,
    }


def newest_runnable(spec: Spec, driver: Version, arch: Arch | None) -> str | None:
    """The newest TensorFlow in the matrix this driver runs (natively or by minor compatibility).

    With `arch`, only versions whose SASS/PTX coverage of it is known and not known to fail count:
    one whose architectures are unknown (`arches: null`) is not recommended (see
    `newest_unassessed`)."""
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
