"""What the visible GPUs mean for this image's TensorFlow (tfgpu.contract.gpu_support's rule), said
where a user looks: `tfgpu run`'s start-up lines, `tfgpu show` and `tfgpu check`.

The image's TensorFlow, its SASS/PTX architectures and its known failures come from the image
(TFGPU_IMAGE_TF, TFGPU_IMAGE_GPU_ARCHES, TFGPU_IMAGE_GPU_FAILURES: docs/CONTRACTS.md); outside a
kit image, the architectures come from the installed TensorFlow's build_info (tfgpu.machine.tfbuild)
and no failure is known. Nothing is read unless a GPU with a compute capability is in sight.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
from tfgpu.contract import gpu_support
from tfgpu.contract.problems import WARNING, Problem

TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Callable, Dict, List, Mapping, Optional, Sequence, Tuple

    from tfgpu.machine.kernel_cache import KernelCache
    from tfgpu.machine.nvml import Gpu

REQUIRED_FIX = (
    "use an image whose TensorFlow runs on this GPU (`./kit check --gpu-arch sm_XY` lists them), "
    "or set CUDA_VISIBLE_DEVICES= to run on the CPU"
)
# TF_GPU_REQUIRED=true refuses such a GPU: its error ends with this sentence
UNUSABLE_FIX = f"{REQUIRED_FIX[0].upper()}{REQUIRED_FIX[1:]}."
XLA_FIX = (
    "keep XLA off: tf.function(jit_compile=False), and model.compile(..., jit_compile=False) "
    'for Keras (its default "auto" uses XLA)'
)
CACHE_FIX = (
    "mount a volume at the kernel cache (docker run -v tfgpu-kernels:{path} …; compose.yaml "
    "does; `./kit k8s --kernel-cache`), so that the compiled kernels outlive the container"
)


class GpuVerdict:
    """One visible GPU (CUDA's index) and what this TensorFlow does there."""

    __slots__ = ("gpu", "index", "verdict")

    def __init__(self, index: int, gpu: "Gpu", verdict: "gpu_support.Verdict") -> None:
        self.index = index
        self.gpu = gpu
        self.verdict = verdict

    def as_json(self, tensorflow: str) -> "Dict[str, object]":
        v = self.verdict
        return {
            "summary": v.describe(tensorflow),
            "index": self.index,
            "name": self.gpu.name,
            "compute_capability": self.gpu.compute_capability,
            "status": v.status,
            "kernels": v.part_status(gpu_support.KERNELS),
            "xla": v.part_status(gpu_support.XLA),
            "failures": [f.as_json() for f in v.failures],
            "arches": v.codes() or None,
        }


def _tensorflow(environ: "Mapping[str, str]") -> str:
    return environ.get("TFGPU_IMAGE_TF", "")


def _arches(
    environ: "Mapping[str, str]",
    build_info: "Optional[Callable[[], Optional[Dict[str, object]]]]",
) -> "Tuple[Optional[List[str]], Optional[str]]":
    """The build's SASS/PTX codes (None: unknown), and a note when the image's value is bad."""
    text = environ.get(gpu_support.ARCHES_VARIABLE)
    if text is not None:
        codes = text.split()
        try:
            gpu_support.parse_arches(codes)
        except ValueError as e:
            return None, f"{gpu_support.ARCHES_VARIABLE}: {e}"
        return codes, None
    info = build_info() if build_info is not None else None
    found = (info or {}).get("cuda_compute_capabilities")
    if isinstance(found, (list, tuple)) and all(isinstance(c, str) for c in found):
        return [str(c) for c in found], None
    return None, None


def judge_gpus(
    gpus: "Sequence[Optional[Gpu]]",
    environ: "Mapping[str, str]",
    build_info: "Optional[Callable[[], Optional[Dict[str, object]]]]" = None,
) -> "Tuple[List[GpuVerdict], List[Problem]]":
    """A verdict per visible GPU whose compute capability NVML gives, and the problems of reading
    the image's own facts (a bad TFGPU_IMAGE_GPU_* value: then nothing is judged)."""
    known = [(i, g) for i, g in enumerate(gpus) if g is not None and g.compute_capability]
    if not known:
        return [], []
    problems: List[Problem] = []
    arches, note = _arches(environ, build_info)
    try:
        failures = gpu_support.parse_failures(environ.get(gpu_support.FAILURES_VARIABLE))
    except ValueError as e:
        failures, note = [], str(e)
    if note is not None:
        problems.append(
            Problem(WARNING, f"the image's GPU facts are not readable ({note}): GPUs not assessed")
        )
        return [], problems
    verdicts = []
    for index, gpu in known:
        cc = gpu_support.capability(gpu.compute_capability or "")
        if cc is not None:
            verdicts.append(GpuVerdict(index, gpu, gpu_support.judge(cc, arches, failures)))
    return verdicts, problems


def unusable(verdicts: "Sequence[GpuVerdict]", environ: "Mapping[str, str]") -> "Optional[str]":
    """Why TF_GPU_REQUIRED=true refuses: a GPU TensorFlow's own kernels cannot run on, or are known
    to fail on (XLA alone does not count: the program may not use it); None when all can run."""
    bad = [
        v for v in verdicts if not v.verdict.kernels_run and v.verdict.status != gpu_support.UNKNOWN
    ]
    if not bad:
        return None
    tf = _tensorflow(environ)
    return "; ".join(f"GPU {v.index} ({v.gpu.name}), {v.verdict.describe(tf)}" for v in bad)


def findings(
    verdicts: "Sequence[GpuVerdict]",
    environ: "Mapping[str, str]",
    cache: "Optional[KernelCache]",
) -> "Tuple[List[str], List[Problem]]":
    """(notes for the start-up summary, problems): nothing for a native GPU; for PTX JIT, a note
    when the compiled kernels are kept, else a warning; a warning for a known failure (of the
    kernels or of XLA) or a GPU without kernels (`tfgpu check` makes the kernels' ones errors)."""
    notes: List[str] = []
    problems: List[Problem] = []
    tf = _tensorflow(environ)
    for v in verdicts:
        head = f"GPU {v.index} ({v.gpu.name}), {v.verdict.describe(tf)}"
        if not v.verdict.kernels_run and v.verdict.status != gpu_support.UNKNOWN:
            problems.append(Problem(WARNING, head, REQUIRED_FIX))
            continue
        xla = v.verdict.failure(gpu_support.XLA) is not None
        if v.verdict.reach == gpu_support.PTX_JIT:
            kept = cache is not None and cache.keeps_kernels
            line = f"{head}; {cache.describe()}" if cache is not None else head
            fixes = (
                [] if kept else [CACHE_FIX.format(path=cache.path if cache else "$CUDA_CACHE_PATH")]
            )
            fixes += [XLA_FIX] if xla else []
            if fixes:
                problems.append(Problem(WARNING, line, "; ".join(fixes)))
            else:
                notes.append(line)
        elif xla:
            problems.append(Problem(WARNING, head, XLA_FIX))
        elif v.verdict.reach == gpu_support.UNKNOWN:
            notes.append(head)
    return notes, problems


class GpuFindings:
    """All that preflight says of the visible GPUs' architectures."""

    __slots__ = ("arch_problems", "cache", "notes", "problems", "unusable", "verdicts")

    def __init__(self) -> None:
        self.verdicts: List[GpuVerdict] = []
        self.problems: List[Problem] = []  # the image's facts unreadable
        self.arch_problems: List[Problem] = []  # what the verdicts raise (findings)
        self.notes: List[str] = []
        self.cache: Optional[KernelCache] = None  # inspected only where the driver JIT-compiles
        self.unusable: Optional[str] = None  # why TF_GPU_REQUIRED=true refuses


def assess(
    gpus: "Sequence[Optional[Gpu]]",
    environ: "Mapping[str, str]",
    build_info: "Optional[Callable[[], Optional[Dict[str, object]]]]" = None,
) -> GpuFindings:
    """judge_gpus, then what it means: the kernel cache where a GPU needs the PTX JIT, the notes
    and problems of `findings`, and `unusable`'s reason."""
    found = GpuFindings()
    found.verdicts, found.problems = judge_gpus(gpus, environ, build_info)
    if any(v.verdict.reach == gpu_support.PTX_JIT for v in found.verdicts):
        # ~0.3 ms (-X importtime): a JIT-only GPU only
        from tfgpu.machine.kernel_cache import inspect

        found.cache = inspect(environ)
    found.notes, found.arch_problems = findings(found.verdicts, environ, found.cache)
    found.unusable = unusable(found.verdicts, environ)
    return found
