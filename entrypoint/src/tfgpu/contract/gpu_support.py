"""How a TensorFlow build's kernels reach a GPU, and what is known to fail there: the one rule the
runtime (`tfgpu run`, `show`, `check`, the hook) and the build side (`./kit check --gpu-arch`, the
README's GPU table) both apply.

- native: the wheel has SASS of the GPU's major at or below its minor (sm_80 SASS runs on 8.0,
  8.6, 8.9; not on 9.0);
- PTX JIT: no such SASS, but PTX (compute_XY) of an older or equal capability, which the driver
  compiles at first use: slow first start unless its cache keeps the result;
- no kernels: neither; no kernel of this TensorFlow can run on the GPU;
- known failures (images/gpus.yaml): reports that TensorFlow's own kernels, or XLA, fail there.

An image says what it holds (docs/CONTRACTS.md): TFGPU_IMAGE_GPU_ARCHES, the wheel's SASS and PTX
codes, and TFGPU_IMAGE_GPU_FAILURES, the known failures of its TensorFlow, in `format_failures`'s
form. Pure: no I/O, stdlib only, Python 3.8; nothing here runs unless a GPU is in sight.
"""

# No `from __future__ import annotations` (it imports `__future__`: ~0.4 ms of `tfgpu run`).
TYPE_CHECKING = False  # not `from typing import …`: importing typing costs ms at start-up
if TYPE_CHECKING:
    from typing import Iterable, List, Optional, Tuple

    Capability = Tuple[int, int]

ARCHES_VARIABLE = "TFGPU_IMAGE_GPU_ARCHES"
FAILURES_VARIABLE = "TFGPU_IMAGE_GPU_FAILURES"

NATIVE = "native"
PTX_JIT = "ptx-jit"
NO_KERNELS = "no-kernels"
UNKNOWN = "unknown"
KNOWN_FAILURE = "known-failure"  # a status (Verdict.status), not a reach

KERNELS = "kernels"  # TensorFlow's own GPU kernels: every model
XLA = "xla"  # what XLA compiles: jit_compile=True, Keras models compiled with XLA
PARTS = (KERNELS, XLA)
PART_NAMES = {KERNELS: "TensorFlow's own kernels", XLA: "XLA (jit_compile=True)"}

# TFGPU_IMAGE_GPU_FAILURES: entries joined by ENTRY_SEPARATOR, fields by FIELD_SEPARATOR; no text
# of images/gpus.yaml may hold either (tfgpu_kit.matrix.spec refuses it)
FIELD_SEPARATOR = " | "
ENTRY_SEPARATOR = " || "


def capability(text: str) -> "Optional[Capability]":
    """(major, minor) of `9.0`, `12.0a`, `sm_90`, `sm_120`, `compute_90`; None if not one."""
    text = text.strip()
    for prefix in ("sm_", "compute_"):
        if text.startswith(prefix):
            digits = text[len(prefix) :].rstrip("af")  # sm_90a, sm_100f: the same capability
            if not digits.isdigit() or not 2 <= len(digits) <= 3 or not digits.isascii():
                return None
            return int(digits[:-1]), int(digits[-1])
    major, dot, minor = text.partition(".")
    minor = minor.rstrip("af")
    if not dot or not (major.isdigit() and minor.isdigit() and major.isascii() and minor.isascii()):
        return None
    if len(major) > 2 or len(minor) != 1:
        return None
    return int(major), int(minor)


def arch_name(cc: "Capability") -> str:
    return f"sm_{cc[0]}{cc[1]}"


def parse_arches(codes: "Iterable[str]") -> "Tuple[List[Capability], List[Capability]]":
    """(SASS, PTX) capabilities of codes such as `sm_80`, `compute_90`; ValueError for another."""
    sass: List[Capability] = []
    ptx: List[Capability] = []
    for code in codes:
        cc = capability(code)
        if cc is None or not code.strip().startswith(("sm_", "compute_")):
            raise ValueError(f"not an architecture code (sm_80, compute_90): {code!r}")
        (sass if code.strip().startswith("sm_") else ptx).append(cc)
    return sass, ptx


def reach(sass: "List[Capability]", ptx: "List[Capability]", cc: "Capability") -> str:
    """NATIVE, PTX_JIT or NO_KERNELS: how kernels built for `sass` and `ptx` reach a GPU of `cc`."""
    if any(major == cc[0] and minor <= cc[1] for major, minor in sass):
        return NATIVE
    if any(code <= cc for code in ptx):
        return PTX_JIT
    return NO_KERNELS


class Failure:
    """One known failure of this TensorFlow on GPUs of `arch`: which part fails, what is seen, and
    why it is known (the reports, or why a version without one fails too)."""

    __slots__ = ("arch", "part", "what", "why")

    def __init__(self, arch: "Capability", part: str, what: str, why: str) -> None:
        self.arch = arch
        self.part = part
        self.what = what
        self.why = why

    def as_json(self) -> "dict[str, str]":
        return {
            "arch": arch_name(self.arch),
            "part": self.part,
            "what": self.what,
            "why": self.why,
        }

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Failure) and self.as_json() == other.as_json()

    def __repr__(self) -> str:
        return f"Failure({arch_name(self.arch)}, {self.part!r})"


def format_failures(failures: "Iterable[Failure]") -> str:
    """TFGPU_IMAGE_GPU_FAILURES's value: the build side writes it, `parse_failures` reads it."""
    return ENTRY_SEPARATOR.join(
        FIELD_SEPARATOR.join((f"{f.arch[0]}.{f.arch[1]}", f.part, f.what, f.why)) for f in failures
    )


def parse_failures(text: "Optional[str]") -> "List[Failure]":
    """The failures of TFGPU_IMAGE_GPU_FAILURES; ValueError naming the entry that is not one."""
    found: List[Failure] = []
    for entry in (text or "").split(ENTRY_SEPARATOR):
        if not entry.strip():
            continue
        fields = entry.split(FIELD_SEPARATOR)
        cc = capability(fields[0]) if len(fields) == 4 else None
        if cc is None or fields[1] not in PARTS:
            raise ValueError(
                f"{FAILURES_VARIABLE}: {entry[:80]!r} is not 'X.Y{FIELD_SEPARATOR}kernels|xla"
                f"{FIELD_SEPARATOR}WHAT{FIELD_SEPARATOR}WHY'"
            )
        found.append(Failure(cc, fields[1], fields[2].strip(), fields[3].strip()))
    return found


class Verdict:
    """What one TensorFlow build means for one GPU."""

    __slots__ = ("cc", "failures", "ptx", "reach", "sass")

    def __init__(
        self,
        cc: "Capability",
        reach_: str,
        failures: "List[Failure]",
        sass: "List[Capability]",
        ptx: "List[Capability]",
    ) -> None:
        self.cc = cc
        self.reach = reach_
        self.failures = failures  # those of this GPU's capability
        self.sass = sass
        self.ptx = ptx

    def failure(self, part: str) -> "Optional[Failure]":
        return next((f for f in self.failures if f.part == part), None)

    @property
    def kernels_run(self) -> bool:
        """False when TensorFlow's own kernels cannot run here, or are known to fail."""
        return self.reach in (NATIVE, PTX_JIT) and self.failure(KERNELS) is None

    @property
    def status(self) -> str:
        """NATIVE, PTX_JIT (no failure known for the kernels), KNOWN_FAILURE, NO_KERNELS or
        UNKNOWN (the build's architectures are not known)."""
        if self.reach in (NO_KERNELS, UNKNOWN):
            return self.reach
        return KNOWN_FAILURE if self.failure(KERNELS) is not None else self.reach

    def part_status(self, part: str) -> str:
        """For `part` alone: KNOWN_FAILURE, or the reach (XLA compiles for the GPU itself, but
        where TensorFlow's kernels are only JIT-compiled nothing is reported for XLA either)."""
        if self.reach in (NO_KERNELS, UNKNOWN):
            return self.reach
        return KNOWN_FAILURE if self.failure(part) is not None else self.reach

    def codes(self) -> str:
        return " ".join(
            [*(arch_name(c) for c in self.sass), *(f"compute_{a}{b}" for a, b in self.ptx)]
        )

    def describe(self, tensorflow: str) -> str:
        """One line: what this TensorFlow does on a GPU of this capability."""
        tf = f"TensorFlow {tensorflow}" if tensorflow else "this TensorFlow"
        cc = f"compute capability {self.cc[0]}.{self.cc[1]}"
        if self.reach == UNKNOWN:
            return f"{cc}: the SASS/PTX architectures of {tf} are not known; not assessed"
        if self.reach == NO_KERNELS:
            return (
                f"{cc}: {tf} has no kernel for this GPU (it ships {self.codes()}; PTX is JIT-"
                "compiled only for its own capability or newer): TensorFlow either ignores the GPU "
                '("The minimum required Cuda capability is …") and runs on the CPU, or fails at '
                "its first GPU op"
            )
        kernels = self.failure(KERNELS)
        xla = self.failure(XLA)
        parts = []
        if kernels is not None:
            parts.append(
                f"{tf}'s own kernels are known to fail here: {kernels.what} ({kernels.why})"
            )
        elif self.reach == NATIVE:
            parts.append(f"native ({tf} ships SASS for it)")
        else:
            ptx = " ".join(f"compute_{a}{b}" for a, b in self.ptx)
            parts.append(
                f"no {tf} kernels are compiled for it: the driver JIT-compiles its PTX ({ptx}) "
                "at first use (slow first start); not reported to work or fail"
            )
        if xla is not None:
            parts.append(f"XLA (jit_compile=True) is known to fail: {xla.what} ({xla.why})")
        return f"{cc}: " + "; ".join(parts)


def judge(
    cc: "Capability", arches: "Optional[Iterable[str]]", failures: "Iterable[Failure]"
) -> Verdict:
    """The verdict for a GPU of `cc` and a build with these SASS/PTX `arches` (None: unknown)."""
    if arches is None:
        sass: List[Capability] = []
        ptx: List[Capability] = []
        how = UNKNOWN
    else:
        sass, ptx = parse_arches(arches)
        how = reach(sass, ptx, cc)
    return Verdict(cc, how, [f for f in failures if f.arch == cc], sass, ptx)
