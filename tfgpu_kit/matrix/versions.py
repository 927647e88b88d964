"""Parsing and comparing NVIDIA driver versions, CUDA versions and GPU architectures.

Driver versions compare numerically component by component, missing components counting as 0, as
libnvidia-container's `dsl_compare_version` does (`535.104.05` == (535, 104, 5))."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from tfgpu_kit.shared.errors import UsageError

# ASCII digits only, whole string (fullmatch): `\d` also takes "٥" (int() reads it as 5), which
# nvidia-smi, CUDA and the runtime (tfgpu.contract.settings.is_ascii_number) never write or accept.
_VERSION = re.compile(r"[0-9]+(\.[0-9]+){0,3}")


@dataclass(frozen=True, order=True)
class Version:
    """A dotted numeric version (driver `535.104.05`, CUDA `12.5.1`); `text` keeps the spelling."""

    parts: tuple[int, ...]
    text: str = field(compare=False)

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse without user-facing wording; raises ValueError."""
        cleaned = text.strip()
        if not _VERSION.fullmatch(cleaned):
            raise ValueError(text)
        parts = tuple(int(p) for p in cleaned.split("."))
        while len(parts) > 1 and parts[-1] == 0:
            parts = parts[:-1]
        return cls(parts, cleaned)

    @property
    def major(self) -> int:
        return self.parts[0]

    @property
    def minor(self) -> int:
        return self.parts[1] if len(self.parts) > 1 else 0

    @property
    def major_minor(self) -> str:
        return f"{self.major}.{self.minor}"

    def __str__(self) -> str:
        return self.text


def parse_driver(text: str, *, flag: str = "--driver") -> Version:
    """A Linux driver version as `nvidia-smi` prints it; a bare branch (`535`) is accepted and
    means the lowest driver of that branch (so verdicts stay conservative)."""
    if text is None or not text.strip():
        raise UsageError(
            f"{flag}: empty driver version",
            hint="give the version nvidia-smi prints, e.g. 535.104.05",
        )
    try:
        version = Version.parse(text)
    except ValueError:
        raise UsageError(
            f"{flag}: {text!r} is not a driver version",
            hint="expected numbers (ASCII digits 0-9) separated by dots, e.g. 535.104.05 (or a "
            "branch such as 535)",
        ) from None
    if version.major < 100 or len(text.strip().split(".")) > 3:
        raise UsageError(
            f"{flag}: {text!r} does not look like a Linux driver version",
            hint="Linux drivers look like 535.104.05; a CUDA version (12.2) is not one",
        )
    return version


def is_branch_only(version: Version) -> bool:
    """True when only the branch was given (`535`), so the verdict is for its lowest driver."""
    return "." not in version.text


@dataclass(frozen=True, order=True)
class Arch:
    """A GPU compute capability, e.g. 9.0 for H100 (`sm_90`)."""

    major: int
    minor: int

    def __str__(self) -> str:
        return f"sm_{self.major}{self.minor}"


_ARCH = re.compile(r"(?:sm_?|compute_?)?([0-9]+)([0-9])|([0-9]+)\.([0-9])")


def parse_arch(text: str, *, flag: str = "--gpu-arch") -> Arch:
    """`sm_90`, `sm90`, `90` or `9.0` (compute capability); two-digit majors too (`sm_100`,
    `sm_120`: Blackwell), as in `parse_arch_code`."""
    match = _ARCH.fullmatch(text.strip().lower())
    if not match:
        raise UsageError(
            f"{flag}: {text!r} is not a GPU architecture",
            hint="expected sm_XY or compute capability X.Y (ASCII digits 0-9): sm_90 or 9.0 "
            "(H100), sm_80 (A100)",
        )
    groups = [g for g in match.groups() if g is not None]
    return Arch(int(groups[0]), int(groups[1]))


def parse_arch_code(code: str) -> tuple[str, Arch]:
    """A build's arch entry: ('sass', Arch) for sm_XY, ('ptx', Arch) for compute_XY."""
    match = re.fullmatch(r"(sm|compute)_([0-9]+)([0-9])", code)
    if not match:
        raise ValueError(code)
    kind = "sass" if match.group(1) == "sm" else "ptx"
    return kind, Arch(int(match.group(2)), int(match.group(3)))
