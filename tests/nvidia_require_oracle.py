"""Test oracle: `NVIDIA_REQUIRE_*` evaluated exactly as the NVIDIA container stack evaluates it.

Kept out of the product (`tfgpu_kit/matrix/nvidia_require.py` holds only the Go parser the build
uses);
the tests check the values the kit chooses against it.

Two implementations of the grammar exist, and they disagree on what they accept:

* **libnvidia-container `src/cli/dsl.c`** (`nvidia-container-cli configure --require=EXPR`), the
  one that guards ordinary x86 hosts. NVIDIA/libnvidia-container `src/cli/dsl.c`, last changed by
  93fb62b29902081c7c4aad968e91811dad01a1d0 (2019-09-13, "Update error messages for CUDA version
  requirements"; merged in 5823754b8577d16fabf25a6ef6a1d58f7ff1e5dd) and the same at
  63d366ee3b4183513c310ac557bf31b05b83328f (2024-10-17). Its callers, same commit:
  `src/cli/configure.c` (rules `cuda`, `driver`, `arch`, `brand`; each requirement evaluated once
  per visible GPU, or once with no device), `src/driver.c` (`cuda` = nvmlSystemGetCudaDriverVersion
  as "%u.%u", major = v/1000, minor = v%100/10, since e83cd3d and 6003504 of 2020, before them
  cuDriverGetVersion; `driver` = nvmlSystemGetDriverVersion; `arch` =
  nvmlDeviceGetCudaComputeCapability as "%u.%u"; `brand` = nvmlDeviceGetBrand mapped to "Tesla",
  "GeForce", …, "Unknown"), `src/cli/cli.h` (`reqs[32]`: at most 32 `--require`).
* **nvidia-container-toolkit `internal/requirements`** (Go), used only in CSV mode (Tegra/Jetson,
  `internal/modifier/csv.go`). It validates every `cuda`/`arch`/`driver` literal, with
  golang.org/x/mod/semver from v1.10.0 (583793b7, 2022-05-05) through v1.20.0 (5505e2f9), which
  rejects leading zeros (`535.104.05`) and a fourth component, and with Masterminds/semver v3.5.0
  (coercing: leading zeros accepted) since 36e84731 (2026-08-20), on `main` at
  d34b3046758cb1a5db606b2a39519c731bbf9f56 but in no release tag there. It skips keys other than
  exactly `cuda`, `arch`, `driver`, `brand` (so `CUDA>=12.3` is ignored).

How the toolkit feeds them (nvidia-container-toolkit d34b3046,
`internal/config/image/cuda_image.go` GetRequirements, HasDisableRequire, IsLegacy;
`cmd/nvidia-container-runtime-hook/main.go`): every `NVIDIA_REQUIRE_*` variable except
`NVIDIA_REQUIRE_JETPACK*` becomes one `--require=VALUE`, in Go map order (so which of several
failures is reported is not deterministic). `NVIDIA_DISABLE_REQUIRE` is read with strconv.ParseBool
(true for `1 t T TRUE true True` only) and skips every check, as does `disable-require = true` in
the toolkit's config. An image with `CUDA_VERSION` and an empty or unset `NVIDIA_REQUIRE_CUDA` also
gets `cuda>=MAJOR.MINOR`. Only the legacy mode (the nvidia-container-runtime-hook) runs
nvidia-container-cli; the `cdi` and `jit-cdi` modes check nothing, and since toolkit v1.18.0
(6149592b) the `nvidia` runtime's `auto` mode resolves to `jit-cdi` on NVML hosts
(`internal/info/auto.go`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Literal

from tfgpu_kit.matrix.nvidia_require import (
    MASTERMINDS_LOOSE,
    GoSemver,
    go_parse_error,
    go_parser_accepts,
    go_version_problem,
)

__all__ = [
    "DISABLE_REQUIRE",
    "NVML_BRANDS",
    "Condition",
    "GoSemver",
    "Gpu",
    "Op",
    "Requirement",
    "Verdict",
    "compare_string",
    "compare_version",
    "disable_require",
    "env_from_entries",
    "evaluate",
    "evaluate_environment",
    "go_parse_error",
    "go_parser_accepts",
    "host_cuda_version",
    "is_legacy_image",
    "parse",
    "requirements_from_env",
]

KEYS = ("cuda", "driver", "arch", "brand")
"""dsl.c's rules (configure.c `rules[]`), matched with strcasecmp."""

EXPR_MAX = 128
"""dsl.c's buffer for the failing condition: "%s %s %s" of 128 bytes or more is an invalid
expression."""

UINTMAX_MAX = 2**64 - 1
"""strtoumax's overflow value; dsl.c treats a component equal to it as invalid."""

MAX_REQUIREMENTS = 32
"""`char *reqs[32]` in src/cli/cli.h; a 33rd `--require` is "input error: too many requirements"."""

REQUIRE_PREFIX = "NVIDIA_REQUIRE_"
JETPACK_PREFIX = "NVIDIA_REQUIRE_JETPACK"
DISABLE_REQUIRE = "NVIDIA_DISABLE_REQUIRE"

NVML_BRANDS: Mapping[str, str] = {
    "NVML_BRAND_QUADRO": "Quadro",
    "NVML_BRAND_TESLA": "Tesla",
    "NVML_BRAND_NVS": "NVS",
    "NVML_BRAND_GRID": "GRID",
    "NVML_BRAND_GEFORCE": "GeForce",
    "NVML_BRAND_TITAN": "TITAN",
    "NVML_BRAND_NVIDIA_VAPPS": "VApps",
    "NVML_BRAND_NVIDIA_VPC": "VPC",
    "NVML_BRAND_NVIDIA_VCS": "VCS",
    "NVML_BRAND_NVIDIA_VWS": "VWS",
    "NVML_BRAND_NVIDIA_CLOUD_GAMING": "CloudGaming",
    "NVML_BRAND_QUADRO_RTX": "QuadroRTX",
    "NVML_BRAND_NVIDIA_RTX": "NvidiaRTX",
    "NVML_BRAND_NVIDIA": "Nvidia",
    "NVML_BRAND_GEFORCE_RTX": "GeForceRTX",
    "NVML_BRAND_TITAN_RTX": "TitanRTX",
    "NVML_BRAND_UNKNOWN": "Unknown",  # the `default:` case
}
"""The brand string libnvidia-container compares (`driver_get_device_brand_1_svc`, src/driver.c)."""

_OP_CHARS = "<>=!"
_VERSION_CHARS = frozenset("0123456789.")
_CUDA_HINT = "cuda>="
_UPDATE_HINT = ", please update your driver to a newer version, or use an earlier cuda container"


class Op(Enum):
    """dsl.c's comparators; the value is the spelling dsl.c prints (`op->str`)."""

    EQUAL = "="
    NOT_EQUAL = "!="
    LESS = "<"
    LESS_EQUAL = "<="
    GREATER = ">"
    GREATER_EQUAL = ">="


# dsl.c `operators[]`, in its order: the first entry whose string starts with the run of operator
# characters wins (strncmp over the run's length), so a lone "!" means "!=".
_OPERATORS = (Op.EQUAL, Op.NOT_EQUAL, Op.LESS, Op.LESS_EQUAL, Op.GREATER, Op.GREATER_EQUAL)


@dataclass(frozen=True)
class Condition:
    """One comma-separated factor, `KEY OP VALUE`, as dsl.c splits it."""

    key: str  # as written; dsl.c matches it case-insensitively
    op: Op
    op_text: str  # the operator characters as written ("!" is Op.NOT_EQUAL)
    value: str

    @property
    def rule(self) -> str:
        """The rule dsl.c applies: one of KEYS."""
        return _ascii_lower(self.key)

    @property
    def formatted(self) -> str:
        """The condition as dsl.c saves it when it fails: "%s %s %s" of key, op->str, value."""
        return f"{self.key} {self.op.value} {self.value}"


@dataclass(frozen=True)
class Requirement:
    """A parsed expression: OR (space) of AND (comma) groups.

    A group that was only commas stays as an empty tuple: dsl.c ends its search there, satisfied
    if no earlier group was tried, unsatisfied otherwise."""

    text: str
    alternatives: tuple[tuple[Condition, ...], ...]


@dataclass(frozen=True)
class Gpu:
    """A visible GPU as libnvidia-container describes it: brand string and "major.minor" arch."""

    brand: str
    arch: str


Outcome = Literal["ok", "unsatisfied", "invalid", "input-error", "setup-error"]


@dataclass(frozen=True)
class Verdict:
    """The result of a check. `message` is nvidia-container-cli's `err.msg` ("unsatisfied condition:
    …", "invalid expression", "too many requirements") or, for "setup-error", the hook's reason."""

    ok: bool
    outcome: Outcome = "ok"
    message: str | None = None
    failed: str | None = None  # the condition that was false, formatted as dsl.c saves it
    requirement: str | None = None  # the expression that failed (environment checks)
    checked: bool = True  # False when NVIDIA_DISABLE_REQUIRE / disable-require skipped the checks

    @property
    def cli_error(self) -> str | None:
        """The line nvidia-container-cli prints (warnx/errx put the program name first)."""
        if self.outcome in ("unsatisfied", "invalid"):
            return f"nvidia-container-cli: requirement error: {self.message}"
        if self.outcome == "input-error":
            return f"nvidia-container-cli: input error: {self.message}"
        return None


_OK = Verdict(ok=True)


# --- C helpers ------------------------------------------------------------------------------


def _ascii_lower(text: str) -> str:
    """strcasecmp folds ASCII letters only."""
    return text.translate(_ASCII_FOLD)


_ASCII_FOLD = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _strspn(text: str, start: int, accept: str) -> int:
    end = start
    while end < len(text) and text[end] in accept:
        end += 1
    return end - start


def _c_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogateescape"))


def _check_c_string(expr: str) -> None:
    if "\0" in expr:
        raise ValueError(f"{expr!r}: contains NUL, which no environment value can hold")


# --- dsl.c ----------------------------------------------------------------------------------


def compare_version(v1: str, op: Op, v2: str) -> int:
    """dsl_compare_version: 1 (true), 0 (false) or -1 (invalid), `v1` being the host's value.

    Only digits and dots; components are strtoumax'd while both sides have some (leading zeros
    are fine, a run of dots is one separator); what is left over counts only if it holds a digit
    other than 0."""
    if any(c not in _VERSION_CHARS for c in v1) or any(c not in _VERSION_CHARS for c in v2):
        return -1
    i = j = 0
    while i < len(v1) and j < len(v2):
        di = _strspn(v1, i, "0123456789")
        dj = _strspn(v2, j, "0123456789")
        if di == 0 or dj == 0:  # v == ptr: no digits (a leading dot)
            return -1
        n1, n2 = int(v1[i : i + di]), int(v2[j : j + dj])
        if n1 >= UINTMAX_MAX or n2 >= UINTMAX_MAX:  # overflow returns UINTMAX_MAX
            return -1
        if n1 != n2:
            if op is Op.EQUAL:
                return 0
            if op is Op.NOT_EQUAL:
                return 1
            if op in (Op.LESS, Op.LESS_EQUAL):
                return int(n1 < n2)
            return int(n1 > n2)
        i += di
        i += _strspn(v1, i, ".")
        j += dj
        j += _strspn(v2, j, ".")
    i += _strspn(v1, i, ".0")
    j += _strspn(v2, j, ".0")
    rest1, rest2 = i < len(v1), j < len(v2)
    if op is Op.NOT_EQUAL:
        return int(rest1 or rest2)
    if op in (Op.EQUAL, Op.LESS_EQUAL, Op.GREATER_EQUAL):
        if not rest1 and not rest2:
            return 1
        if op is Op.EQUAL:
            return 0
    if op in (Op.LESS, Op.LESS_EQUAL):
        return int(not rest1 and rest2)
    return int(rest1 and not rest2)


def compare_string(s1: str, op: Op, s2: str) -> int:
    """dsl_compare_string: ASCII case-insensitive = and !=; any other operator is invalid (-1)."""
    if op is Op.EQUAL:
        return int(_ascii_lower(s1) == _ascii_lower(s2))
    if op is Op.NOT_EQUAL:
        return int(_ascii_lower(s1) != _ascii_lower(s2))
    return -1


def _split_condition(factor: str) -> Condition | str:
    """evaluate_rule's parsing: a Condition, or why dsl.c returns -1."""
    key_end = next((k for k, c in enumerate(factor) if c in _OP_CHARS), len(factor))
    if key_end == 0:
        return "no key before the operator"
    run = _strspn(factor, key_end, _OP_CHARS)
    if run == 0:
        return "no operator (one of = != < <= > >=)"
    op_text = factor[key_end : key_end + run]
    op = next((o for o in _OPERATORS if o.value.startswith(op_text)), None)
    if op is None:
        return f"unknown operator {op_text!r} (one of = != < <= > >=)"
    value = factor[key_end + run :]
    if not value:
        return "no value after the operator"
    key = factor[:key_end]
    if _ascii_lower(key) not in KEYS:
        return f"unknown key {key!r} (one of {', '.join(KEYS)}, any case)"
    return Condition(key=key, op=op, op_text=op_text, value=value)


def _static_problem(cond: Condition) -> str | None:
    """What makes dsl.c report a parsed condition invalid on some host with a visible GPU."""
    if cond.rule == "brand":
        if cond.op not in (Op.EQUAL, Op.NOT_EQUAL):
            return f"brand takes only = or !=, not {cond.op.value}"
    else:
        if any(c not in _VERSION_CHARS for c in cond.value):
            return f"{cond.value!r} is not a version (digits and dots only)"
        if cond.value.startswith("."):
            return f"{cond.value!r} starts with a dot"
        if any(int(p) >= UINTMAX_MAX for p in cond.value.split(".") if p):
            return f"{cond.value!r} has a component of 2**64-1 or more"
    if _c_len(cond.formatted) >= EXPR_MAX:
        return f"{cond.formatted!r} is {EXPR_MAX} bytes or longer, too long to report"
    return None


def _tokens(expr: str) -> Iterable[list[str]]:
    """strsep on " " (empty tokens skipped), then on "," (empty factors skipped)."""
    for or_expr in expr.split(" "):
        if or_expr:
            yield [f for f in or_expr.split(",") if f]


def parse(expr: str) -> Requirement:
    """Parse strictly: raise ValueError for any condition dsl.c would answer with "invalid
    expression" when it reaches it on some host with a GPU visible (dsl.c itself parses lazily:
    see `evaluate`). The empty expression admits everything."""
    _check_c_string(expr)
    alternatives: list[tuple[Condition, ...]] = []
    for factors in _tokens(expr):
        group: list[Condition] = []
        for factor in factors:
            cond = _split_condition(factor)
            if isinstance(cond, str):
                raise ValueError(f"invalid expression {factor!r} in {expr!r}: {cond}")
            problem = _static_problem(cond)
            if problem is not None:
                raise ValueError(f"invalid expression {factor!r} in {expr!r}: {problem}")
            group.append(cond)
        alternatives.append(tuple(group))
    return Requirement(text=expr, alternatives=tuple(alternatives))


def _apply(
    cond: Condition, *, cuda: str, driver: str, gpu_brand: str | None, arch: str | None
) -> int:
    """configure.c's check_* functions."""
    if cond.rule == "cuda":
        return compare_version(cuda, cond.op, cond.value)
    if cond.rule == "driver":
        return compare_version(driver, cond.op, cond.value)
    if cond.rule == "arch":
        return 1 if arch is None else compare_version(arch, cond.op, cond.value)
    return 1 if gpu_brand is None else compare_string(gpu_brand, cond.op, cond.value)


def _unsatisfied(expr: str) -> str:
    first = expr.split(" ", 1)[0]  # dsl.c reports the first space-separated token, not the failure
    if first.startswith(_CUDA_HINT):
        return f"unsatisfied condition: {first}{_UPDATE_HINT}"
    return f"unsatisfied condition: {first}"


def evaluate(
    expr: str,
    *,
    cuda: str,
    driver: str,
    brand: str | None = None,
    arch: str | None = None,
) -> Verdict:
    """dsl_evaluate for one device: `cuda` as the host reports it ("12.2"), `driver` the kernel
    driver ("535.104.05"), `brand`/`arch` of the GPU ("Tesla", "8.0"), None when no GPU is visible
    (dsl.c then counts every brand and arch condition as satisfied, whatever its operator).

    Lazy like dsl.c: groups are tried left to right and stop at the first satisfied one, a group
    stops at its first false condition, and only what is reached can be "invalid expression"."""
    _check_c_string(expr)
    ret = 1
    failed: str | None = None
    for factors in _tokens(expr):
        completed = True
        for factor in factors:
            cond = _split_condition(factor)
            if isinstance(cond, str):
                return Verdict(ok=False, outcome="invalid", message="invalid expression")
            ret = _apply(cond, cuda=cuda, driver=driver, gpu_brand=brand, arch=arch)
            if ret < 0:
                return Verdict(ok=False, outcome="invalid", message="invalid expression")
            if ret == 0:
                if _c_len(cond.formatted) >= EXPR_MAX:  # snprintf into buf[EXPR_MAX]
                    return Verdict(ok=False, outcome="invalid", message="invalid expression")
                failed = cond.formatted
                completed = False
                break
        if completed:  # and_expr == NULL: every condition held (or the group was only commas)
            break
    if ret:
        return _OK
    return Verdict(ok=False, outcome="unsatisfied", message=_unsatisfied(expr), failed=failed)


def host_cuda_version(version: int) -> str:
    """The `cuda` value libnvidia-container derives from the driver's integer (12040 -> "12.4")."""
    return f"{version // 1000}.{version % 100 // 10}"


# --- nvidia-container-toolkit: environment --------------------------------------------------


def env_from_entries(entries: Iterable[str]) -> dict[str, str]:
    """The OCI `process.env` list as the toolkit reads it (builder.go WithEnv): split at the first
    "=", a later duplicate wins; an entry without "=" is an error."""
    env: dict[str, str] = {}
    for entry in entries:
        name, sep, value = entry.partition("=")
        if not sep:
            raise ValueError(f"invalid environment variable: {entry}")
        env[name] = value
    return env


def disable_require(env: Mapping[str, str]) -> bool:
    """HasDisableRequire: strconv.ParseBool of NVIDIA_DISABLE_REQUIRE; unparsable means False."""
    return env.get(DISABLE_REQUIRE) in ("1", "t", "T", "true", "TRUE", "True")


def is_legacy_image(env: Mapping[str, str]) -> bool:
    """IsLegacy: a non-empty CUDA_VERSION and an empty or unset NVIDIA_REQUIRE_CUDA."""
    return bool(env.get("CUDA_VERSION")) and not env.get("NVIDIA_REQUIRE_CUDA")


def requirements_from_env(
    env: Mapping[str, str], *, disable_require_config: bool = False, semver: GoSemver = "x/mod"
) -> list[str]:
    """GetRequirements: the values of every NVIDIA_REQUIRE_* but NVIDIA_REQUIRE_JETPACK*, in
    `env`'s order (the toolkit's is Go map order), then `cuda>=MAJOR.MINOR` for a legacy image;
    nothing when disabled. Raises ValueError where the hook would panic (a bad CUDA_VERSION)."""
    if disable_require_config or disable_require(env):
        return []
    reqs = [
        value
        for name, value in env.items()
        if name.startswith(REQUIRE_PREFIX) and not name.startswith(JETPACK_PREFIX)
    ]
    if is_legacy_image(env):
        reqs.append(f"cuda>={_legacy_major_minor(env['CUDA_VERSION'], semver)}")
    return reqs


def _legacy_major_minor(version: str, semver: GoSemver) -> str:
    """parseMajorMinorVersion (cuda_image.go)."""
    problem = go_version_problem(version, semver)
    if problem is not None:
        raise ValueError(f"failed to get version: invalid CUDA version {version}: {problem}")
    if semver == "x/mod":
        parts = version.removeprefix("v").split("-")[0].split("+")[0].split(".")
        major, minor = parts[0], parts[1] if len(parts) > 1 else "0"
    else:
        m = MASTERMINDS_LOOSE.fullmatch(version)
        assert m is not None  # validated above
        major = str(int(m.group(1)))
        minor = str(int(m.group(2)[1:])) if m.group(2) else "0"
    for part, what in ((major, "major"), (minor, "minor")):
        if int(part) > 2**32 - 1:  # strconv.ParseUint(part, 10, 32)
            raise ValueError(
                f"failed to get version: invalid CUDA version {version}: invalid {what} version"
            )
    return f"{major}.{minor}"


def evaluate_environment(
    env: Mapping[str, str],
    *,
    cuda: str,
    driver: str,
    gpus: Sequence[Gpu] = (),
    disable_require_config: bool = False,
    semver: GoSemver = "x/mod",
) -> Verdict:
    """The legacy-mode check of a GPU container: the hook collects the requirements
    (`requirements_from_env`), nvidia-container-cli evaluates each of them for each visible GPU
    (all must hold; with no GPU, once with brand/arch unknown) and stops at the first failure.
    Requirements are only checked when the container requests GPUs (NVIDIA_VISIBLE_DEVICES); that
    selection is not modelled here."""
    try:
        reqs = requirements_from_env(
            env, disable_require_config=disable_require_config, semver=semver
        )
    except ValueError as exc:
        return Verdict(ok=False, outcome="setup-error", message=str(exc))
    if disable_require_config or disable_require(env):
        return Verdict(ok=True, checked=False)
    if len(reqs) > MAX_REQUIREMENTS:
        return Verdict(ok=False, outcome="input-error", message="too many requirements")
    devices: Sequence[Gpu | None] = gpus if gpus else (None,)
    for gpu in devices:
        for req in reqs:
            verdict = evaluate(
                req,
                cuda=cuda,
                driver=driver,
                brand=None if gpu is None else gpu.brand,
                arch=None if gpu is None else gpu.arch,
            )
            if not verdict.ok:
                return Verdict(
                    ok=False,
                    outcome=verdict.outcome,
                    message=verdict.message,
                    failed=verdict.failed,
                    requirement=req,
                )
    return _OK
