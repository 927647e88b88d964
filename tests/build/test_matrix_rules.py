"""Matrix rules at their edges: exact minimum drivers, the 11.x/12.x/13.x floors, driver strings."""

from __future__ import annotations

import pytest

from tfgpu_kit import matrix, spec
from tfgpu_kit.errors import UsageError
from tfgpu_kit.matrix import ArchCoverage, Verdict
from tfgpu_kit.versions import Arch, Version, parse_arch, parse_driver

SPEC = spec.load()


def verdict(tf: str, driver: str, arch: str | None = None) -> matrix.Assessment:
    return matrix.assess(SPEC, tf, parse_driver(driver), parse_arch(arch) if arch else None)


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("535", (535,)),
        ("535.104.05", (535, 104, 5)),
        (" 580.65.06 ", (580, 65, 6)),
        ("525.60", (525, 60)),
    ],
)
def test_driver_strings_parse(text: str, parts: tuple[int, ...]) -> None:
    assert parse_driver(text).parts == parts


@pytest.mark.parametrize(
    "text", ["", "   ", "abc", "535.", "535..1", "v535", "535.104.05.1", "12.2", "-1"]
)
def test_bad_driver_strings_are_usage_errors(text: str) -> None:
    with pytest.raises(UsageError) as info:
        parse_driver(text)
    assert "--driver" in str(info.value)


def test_versions_compare_like_libnvidia_container() -> None:
    assert Version.parse("535.104.05") == Version.parse("535.104.5")
    assert Version.parse("580") == Version.parse("580.0.0")
    assert Version.parse("525.60.13") > Version.parse("525.60.9")
    assert Version.parse("580") < Version.parse("580.65.06")


@pytest.mark.parametrize(
    ("tf", "driver", "expected"),
    [
        # 2.21.0: CUDA 12.5.1 needs 555.42.06; 12.x floor 525.60.13
        ("2.21.0", "555.42.06", Verdict.NATIVE),
        ("2.21.0", "555.42.05", Verdict.MINOR_COMPAT),
        ("2.21.0", "525.60.13", Verdict.MINOR_COMPAT),
        ("2.21.0", "525.60.12", Verdict.NO),
        ("2.21.0", "580.65.06", Verdict.NATIVE),
        # 2.15.0: CUDA 12.2.2 needs 535.104.05
        ("2.15.0", "535.104.05", Verdict.NATIVE),
        ("2.15.0", "535.104.04", Verdict.MINOR_COMPAT),
        # 2.14.0: CUDA 11.8 needs 520.61.05; 11.x floor 450.80.02
        ("2.14.0", "520.61.05", Verdict.NATIVE),
        ("2.14.0", "520.61.04", Verdict.MINOR_COMPAT),
        ("2.14.0", "450.80.02", Verdict.MINOR_COMPAT),
        ("2.14.0", "450.80.01", Verdict.NO),
        ("2.14.0", "418.226.00", Verdict.NO),
        # a bare branch is judged as its oldest driver
        ("2.21.0", "525", Verdict.NO),
        ("2.21.0", "555", Verdict.MINOR_COMPAT),
    ],
)
def test_driver_verdicts_at_the_edges(tf: str, driver: str, expected: Verdict) -> None:
    assert verdict(tf, driver).verdict is expected


def test_13x_floor_is_580() -> None:
    floor = Version.parse(SPEC.matrix.cuda_majors["13"].compat_floor)
    assert floor == Version.parse("580") and Version.parse("579.99") < floor


def test_does_not_run_names_minimum_and_newest_runnable() -> None:
    result = verdict("2.21.0", "470.82.01")
    assert result.verdict is Verdict.NO
    assert "525.60.13" in " ".join(result.reasons)
    assert result.newest_runnable == "2.14.0"  # 11.8 runs on 470 by minor-version compatibility


def test_ptx_only_arch_fails_under_minor_compat_but_forward_compat_can_help() -> None:
    # H100 (sm_90) with TF 2.21 (compute_90 PTX from CUDA 12.5) on a 535 driver
    result = verdict("2.21.0", "535.104.05", "sm_90")
    assert result.ptx_jit_failure
    assert result.verdict is Verdict.FORWARD_COMPAT
    assert result.newest_runnable is None or result.newest_runnable != "2.21.0"
    # on a 530 driver no forward-compat package exists for that branch: does not run
    assert verdict("2.21.0", "530.30.02", "sm_90").verdict is Verdict.NO
    # natively the PTX JITs fine
    assert verdict("2.21.0", "555.42.06", "sm_90").verdict is Verdict.NATIVE


def test_newest_runnable_with_arch_skips_unknown_coverage() -> None:
    # H100 on 535: 2.18/2.19 run on the driver (12.5 by minor-version compatibility) but their
    # architectures are unknown (arches: null), so they are not recommended; 2.14.0 (PTX
    # compute_80, CUDA 11.8 natively) is the newest known to work, and 2.19.0 is named apart.
    result = verdict("2.21.0", "535.104.05", "sm_90")
    assert result.newest_runnable == "2.14.0"
    assert result.newest_unassessed == "2.19.0"
    data = result.as_json()
    assert data["newest_runnable_tensorflow"] == "2.14.0"
    assert data["newest_unassessed_tensorflow"] == "2.19.0"
    # without an arch nothing is unassessed
    no_arch = verdict("2.21.0", "470.82.01")
    assert no_arch.newest_unassessed is None
    # an unknown version older than the newest known one is not worth naming
    assert matrix.newest_unassessed(SPEC, parse_driver("560.35.03"), parse_arch("sm_90")) is None
    assert matrix.newest_runnable(SPEC, parse_driver("560.35.03"), parse_arch("sm_90")) == "2.21.0"


def test_newest_runnable_with_arch_none_known() -> None:
    # no version with known coverage runs: nothing recommended, the unknown one named apart
    unknown = SPEC.matrix.model_copy(
        update={
            "tensorflow": {
                tf: build.model_copy(update={"arches": None})
                for tf, build in SPEC.matrix.tensorflow.items()
            }
        }
    )
    s = SPEC.model_copy(update={"matrix": unknown})
    driver, arch = parse_driver("535.104.05"), parse_arch("sm_90")
    assert matrix.newest_runnable(s, driver, arch) is None
    # 2.21.0's PTX-only failure on 535 is no longer known either
    assert matrix.newest_unassessed(s, driver, arch) == "2.21.0"
    assert matrix.newest_runnable(s, driver, None) == "2.21.0"


@pytest.mark.parametrize(
    ("tf", "arch", "coverage"),
    [
        ("2.21.0", Arch(8, 0), ArchCoverage.SASS),
        ("2.21.0", Arch(8, 6), ArchCoverage.SASS),  # sm_80 SASS runs on 8.6
        ("2.21.0", Arch(8, 9), ArchCoverage.SASS),
        ("2.21.0", Arch(9, 0), ArchCoverage.PTX),
        ("2.21.0", Arch(12, 0), ArchCoverage.PTX),
        ("2.21.0", Arch(5, 2), ArchCoverage.NONE),
        ("2.14.0", Arch(3, 5), ArchCoverage.SASS),
        ("2.14.0", Arch(8, 0), ArchCoverage.PTX),
        ("2.18.0", Arch(9, 0), ArchCoverage.UNKNOWN),
    ],
)
def test_arch_coverage(tf: str, arch: Arch, coverage: ArchCoverage) -> None:
    assert matrix.arch_coverage(SPEC.matrix.tensorflow[tf], arch) is coverage


def test_arch_without_kernels_does_not_run() -> None:
    assert verdict("2.21.0", "560.35.03", "sm_50").verdict is Verdict.NO


@pytest.mark.parametrize("text", ["sm_90", "SM90", "90", "9.0"])
def test_arch_spellings(text: str) -> None:
    assert parse_arch(text) == Arch(9, 0)


@pytest.mark.parametrize(
    ("text", "arch"),
    [
        ("sm_100", Arch(10, 0)),
        ("compute_120", Arch(12, 0)),
        ("sm120", Arch(12, 0)),
        ("10.0", Arch(10, 0)),
    ],
)
def test_arch_spellings_with_two_digit_majors(text: str, arch: Arch) -> None:
    # Blackwell: B200 is sm_100, RTX 50xx sm_120; the matrix's own codes parse the same way
    assert parse_arch(text) == arch


@pytest.mark.parametrize("text", ["", "h100", "sm_9", "9"])
def test_bad_arch(text: str) -> None:
    with pytest.raises(UsageError):
        parse_arch(text)


# NVIDIA_REQUIRE_CUDA, evaluated as libnvidia-container's dsl.c does: space = OR, comma = AND,
# versions compared numerically per component. `cuda` is the CUDA version a driver supports: the
# newest
# toolkit (CUDA release notes, Table 3) whose minimum the driver meets.
TOOLKIT_MINIMUMS = [
    ("11.0", "450.36.06"), ("11.8", "520.61.05"), ("12.0", "525.60.13"), ("12.2", "535.54.03"),
    ("12.5", "555.42.02"), ("13.0", "580.65.06"),
]  # fmt: skip


def driver_cuda(driver: str) -> str:
    d = Version.parse(driver)
    return max((Version.parse(c) for c, m in TOOLKIT_MINIMUMS if d >= Version.parse(m))).major_minor


def satisfies(expression: str, *, driver: str) -> bool:
    facts = {"cuda": Version.parse(driver_cuda(driver)), "driver": Version.parse(driver)}
    ops = {">=": lambda a, b: a >= b, "<=": lambda a, b: a <= b, "=": lambda a, b: a == b,
           "<": lambda a, b: a < b, ">": lambda a, b: a > b}  # fmt: skip
    for term in expression.split(" "):
        ok = True
        for factor in filter(None, term.split(",")):
            for op in (">=", "<=", "=", "<", ">"):
                if op in factor:
                    name, value = factor.split(op, 1)
                    ok = ok and ops[op](facts[name], Version.parse(value))
                    break
        if ok:
            return True
    return False


@pytest.mark.parametrize("tf", ["2.21.0", "2.16.1", "2.15.0"])
def test_require_cuda_admits_the_12x_floor_and_refuses_below(tf: str) -> None:
    req = matrix.requirements(SPEC, tf)
    assert req.require_cuda == "cuda>=12.0"
    assert satisfies(req.require_cuda, driver=str(req.compat_floor))
    assert satisfies(req.require_cuda, driver=str(req.driver_min))
    assert not satisfies(req.require_cuda, driver="520.61.05")


def test_require_cuda_for_11x_admits_its_floor() -> None:
    req = matrix.requirements(SPEC, "2.14.0")
    assert req.require_cuda == "cuda>=11.0"
    assert satisfies(req.require_cuda, driver="450.80.02")
