"""`NVIDIA_REQUIRE_*` as nvidia-container-toolkit's Go parser reads it (CSV mode: Jetson/Tegra).

The build refuses an L4T spec whose `require_cuda` this parser would refuse (`go_parse_error`).
nvidia-container-toolkit `internal/requirements` validates every `cuda`/`arch`/`driver` literal,
with golang.org/x/mod/semver from v1.10.0 (583793b7, 2022-05-05) through v1.20.0 (5505e2f9),
which rejects leading zeros (`535.104.05`) and a fourth component, and with Masterminds/semver
v3.5.0 (coercing: leading zeros accepted) since 36e84731 (2026-08-20), on `main` at
d34b3046758cb1a5db606b2a39519c731bbf9f56 but in no release tag there. It skips keys other than
exactly `cuda`, `arch`, `driver`, `brand` (so `CUDA>=12.3` is ignored).

libnvidia-container's `dsl.c` (the x86 legacy mode) is emulated only as a test oracle:
`tests/nvidia_require_oracle.py`; docs/build.md says who evaluates the expression where.
"""

from __future__ import annotations

import re
from typing import Literal

__all__ = [
    "MASTERMINDS_LOOSE",
    "GoSemver",
    "go_parse_error",
    "go_parser_accepts",
    "go_version_problem",
]

GoSemver = Literal["x/mod", "masterminds"]
"""Which Go version parser: "x/mod" = golang.org/x/mod/semver (toolkit v1.10.0 … v1.20.0),
"masterminds" = Masterminds/semver v3.5.0 NewVersion (main since 36e84731, unreleased)."""

_OP_CHARS = "<>=!"  # factory.go splits a factor at the first of these
# unicode.IsSpace, used by strings.TrimSpace (str.strip drops these from both ends)
_GO_SPACE = (
    "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000"
)
_GO_OPERATORS = ("!=", "<=", ">=", "=", "<", ">")  # factory.go, in its order
_GO_VERSION_KEYS = ("cuda", "arch", "driver")
MASTERMINDS_LOOSE = re.compile(
    r"v?([0-9]+)(\.[0-9]+)?(\.[0-9]+)?"
    r"(-([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
    r"(\+([0-9A-Za-z\-]+(\.[0-9A-Za-z\-]+)*))?"
)
# golang.org/x/mod/semver IsValid (parse): vMAJOR[.MINOR[.PATCH[-PRE][+BUILD]]], no leading zeros
# (numeric prerelease identifiers included), prerelease/build only after PATCH
_XMOD_NUMBER = "(0|[1-9][0-9]*)"
_XMOD_PRE = "(0|[1-9][0-9]*|[0-9]*[A-Za-z-][0-9A-Za-z-]*)"
_XMOD_VALID = re.compile(
    rf"v{_XMOD_NUMBER}(\.{_XMOD_NUMBER}(\.{_XMOD_NUMBER}"
    rf"(-{_XMOD_PRE}(\.{_XMOD_PRE})*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?)?)?"
)


def _masterminds_problem(v: str) -> str | None:
    """Masterminds/semver v3.5.0 NewVersion with CoerceNewVersion = true (its default)."""
    if len(v.encode("utf-8", "surrogateescape")) > 256:
        return "version string is too long (max 256 bytes)"
    m = MASTERMINDS_LOOSE.fullmatch(v)
    if m is None:
        return "invalid semantic version"
    for segment in (group.lstrip(".") for group in m.group(1, 2, 3) if group):
        if int(segment) > 2**64 - 1:
            return (
                "error parsing version segment: strconv.ParseUint: "
                f'parsing "{segment}": value out of range'
            )
    pre, meta = m.group(5), m.group(8)
    if pre and any(
        ident.isdigit() and len(ident) > 1 and ident[0] == "0" for ident in pre.split(".")
    ):
        return "version segment starts with 0"
    if meta and any(not p for p in meta.split(".")):
        return "invalid metadata string"
    return None


def go_version_problem(value: str, semver: GoSemver) -> str | None:
    """Why the Go parser `semver` refuses `value` as a version, or None when it parses."""
    if semver == "x/mod":
        valid = _XMOD_VALID.fullmatch("v" + value.removeprefix("v"))
        return None if valid else "invalid version string"
    return _masterminds_problem(value)


def go_parse_error(expr: str, *, semver: GoSemver = "x/mod") -> str | None:
    """The error nvidia-container-toolkit's constraints.New returns for one requirement, or None
    when it builds (factory.go): space = OR, comma = AND, blank factors skipped, a factor without
    an operator character is an error, a key other than exactly `cuda`, `arch`, `driver`, `brand`
    is skipped, and every `cuda`/`arch`/`driver` value must parse as a version."""
    if not expr.strip(_GO_SPACE):
        return None
    for term in expr.split(" "):
        for factor in term.split(","):
            if not factor.strip(_GO_SPACE):
                continue
            end = next((k for k, c in enumerate(factor) if c in _OP_CHARS), -1)
            if end < 0:
                return f"invalid constraint: {factor}"
            key, condition = factor[:end], factor[end:]
            if key not in _GO_VERSION_KEYS:
                continue  # brand validates nothing; others: "Skipping unsupported constraint"
            op = next((o for o in _GO_OPERATORS if condition.startswith(o)), "")
            value = condition[len(op) :]
            problem = go_version_problem(value, semver)
            if problem is not None:
                if semver == "x/mod":
                    return f"invailid value {value}; expected a valid version string"
                return f"invalid version string: {problem}"
    return None


def go_parser_accepts(expr: str, *, semver: GoSemver = "x/mod") -> bool:
    """Whether the Go implementation (CSV mode) builds the constraint at all; see go_parse_error."""
    return go_parse_error(expr, semver=semver) is None
