"""Matrix rules at their edges: exact minimum drivers, the 11.x/12.x/13.x floors, driver strings."""

from __future__ import annotations

import pytest

from tests import nvidia_require_oracle
from tfgpu_kit.matrix import compat, cudagap, spec
from tfgpu_kit.matrix.compat import ArchCoverage, Verdict
from tfgpu_kit.matrix.spec import CudaSource
from tfgpu_kit.matrix.versions import Arch, Version, parse_arch, parse_driver
from tfgpu_kit.shared.errors import UsageError

SPEC = spec.load()


def verdict(tf: str, driver: str, arch: str | None = None) -> compat.Assessment:
    return compat.assess(SPEC, tf, parse_driver(driver), parse_arch(arch) if arch else None)


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
    # H100 on 535: 2.16-2.21 run on the driver (CUDA 12.3/12.5 by minor-version compatibility)
    # but cover sm_90 only with PTX that driver cannot JIT; 2.15.0 (PTX compute_80 from CUDA
    # 12.2, natively) is the newest that works.
    result = verdict("2.21.0", "535.104.05", "sm_90")
    assert result.newest_runnable == "2.15.0"
    assert result.newest_unassessed is None
    # with 2.18/2.19's architectures unknown, they are named apart, not recommended
    unknown = SPEC.matrix.model_copy(
        update={
            "tensorflow": {
                tf: build.model_copy(update={"arches": None} if tf in ("2.18.0", "2.19.0") else {})
                for tf, build in SPEC.matrix.tensorflow.items()
            }
        }
    )
    s = SPEC.model_copy(update={"matrix": unknown})
    driver, arch = parse_driver("535.104.05"), parse_arch("sm_90")
    assert compat.newest_runnable(s, driver, arch) == "2.15.0"
    assert compat.newest_unassessed(s, driver, arch) == "2.19.0"
    data = compat.assess(s, "2.21.0", driver, arch).as_json()
    assert data["newest_runnable_tensorflow"] == "2.15.0"
    assert data["newest_unassessed_tensorflow"] == "2.19.0"
    # without an arch nothing is unassessed
    no_arch = verdict("2.21.0", "470.82.01")
    assert no_arch.newest_unassessed is None
    # an unknown version older than the newest known one is not worth naming
    assert compat.newest_unassessed(s, parse_driver("560.35.03"), arch) is None
    assert compat.newest_runnable(s, parse_driver("560.35.03"), arch) == "2.21.0"


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
    assert compat.newest_runnable(s, driver, arch) is None
    # 2.21.0's PTX-only failure on 535 is no longer known either
    assert compat.newest_unassessed(s, driver, arch) == "2.21.0"
    assert compat.newest_runnable(s, driver, None) == "2.21.0"


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
        ("2.18.0", Arch(9, 0), ArchCoverage.PTX),
    ],
)
def test_arch_coverage(tf: str, arch: Arch, coverage: ArchCoverage) -> None:
    assert compat.arch_coverage(SPEC.matrix.tensorflow[tf], arch) is coverage


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


# NVIDIA_REQUIRE_CUDA chosen for each image, evaluated as libnvidia-container's dsl.c does
# (tests/nvidia_require_oracle.py, checked against dsl.c itself). `cuda` is what the host driver
# reports through NVML (nvmlSystemGetCudaDriverVersion): the CUDA version of its branch.
CASES = [
    # (driver, the CUDA version it reports, brand)
    ("470.82.01", "11.4", "Tesla"),
    ("470.82.01", "11.4", "GRID"),
    ("520.61.05", "11.8", "GeForce"),
    ("525.60.11", "12.0", "GeForce"),  # reports 12.0, below the 12.x floor 525.60.13
    ("525.60.13", "12.0", "GeForce"),
    ("530.30.02", "12.1", "Quadro"),
    ("535.104.05", "12.2", "Tesla"),
    ("545.23.08", "12.3", "GeForce"),
    ("555.42.06", "12.5", "Tesla"),
    ("560.35.03", "12.6", "GeForce"),
    ("580.65.06", "13.0", "Tesla"),
]


def admitted(expression: str) -> dict[str, bool]:
    out = {}
    for driver, cuda, brand in CASES:
        verdict = nvidia_require_oracle.evaluate(expression, cuda=cuda, driver=driver, brand=brand)
        assert verdict.outcome in ("ok", "unsatisfied"), verdict  # dsl.c parses every value
        out[f"{driver} {brand}"] = verdict.ok
    return out


def test_require_cuda_of_a_repaired_12x_image() -> None:
    """2.21.0 loads the CUDA 12.5 wheels it adds: every driver from the 12.x floor runs them
    (minor-version compatibility), and the base's brand alternatives stay, since its
    cuda-compat-12-3 serves CUDA 12.x to older data-centre branches (forward compatibility)."""
    req = cudagap.requirements(SPEC, "2.21.0")
    assert req.require_cuda.startswith("cuda>=12.0,driver>=525.60.13 brand=tesla,driver>=470")
    assert admitted(req.require_cuda) == {
        "470.82.01 Tesla": True,  # the base's brand alternative: forward compatibility
        "470.82.01 GRID": False,  # a brand the base does not list
        "520.61.05 GeForce": False,
        "525.60.11 GeForce": True,  # the base's own 525 alternative admits the whole branch
        "525.60.13 GeForce": True,
        "530.30.02 Quadro": True,  # the base refuses it; minor-version compatibility runs it
        "535.104.05 Tesla": True,
        "545.23.08 GeForce": True,
        "555.42.06 Tesla": True,
        "560.35.03 GeForce": True,
        "580.65.06 Tesla": True,
    }
    base = SPEC.base_recipe("2.21.0").env["NVIDIA_REQUIRE_CUDA"]
    # the image admits everything its base admits
    assert all(admitted(req.require_cuda)[k] for k, ok in admitted(base).items() if ok)


def test_require_cuda_without_the_bases_brands() -> None:
    """2.15.0 loads CUDA 12.2 wheels on a CUDA 11.8 base: its cuda-compat-11-8 cannot serve 12.x,
    so the base's brand alternatives (450/470 branches) go, and only the 12.x floor remains."""
    req = cudagap.requirements(SPEC, "2.15.0")
    assert req.require_cuda == "cuda>=12.0,driver>=525.60.13"
    result = admitted(req.require_cuda)
    assert [k for k, ok in result.items() if ok] == [
        "525.60.13 GeForce", "530.30.02 Quadro", "535.104.05 Tesla", "545.23.08 GeForce",
        "555.42.06 Tesla", "560.35.03 GeForce", "580.65.06 Tesla",
    ]  # fmt: skip
    unsatisfied = nvidia_require_oracle.evaluate(req.require_cuda, cuda="12.0", driver="525.60.11")
    assert unsatisfied.cli_error.endswith(
        "unsatisfied condition: cuda>=12.0,driver>=525.60.13, please update your driver to a"
        " newer version, or use an earlier cuda container"
    )


def test_require_cuda_for_11x_admits_its_floor() -> None:
    """2.14.0 adds CUDA 11.8 wheels (cuDNN 8.7) on the 11.8 base; `450.80.02` has a leading zero,
    which dsl.c (strtoumax) reads as 450.80.2."""
    req = cudagap.requirements(SPEC, "2.14.0")
    assert req.require_cuda.startswith("cuda>=11.0,driver>=450.80.02 brand=tesla,driver>=450")
    for driver, ok in (("450.80.02", True), ("450.80.01", False), ("455.23.05", True)):
        verdict = nvidia_require_oracle.evaluate(
            req.require_cuda, cuda="11.0", driver=driver, brand="GeForce"
        )
        assert verdict.ok is ok, driver


def test_require_cuda_without_a_visible_gpu_checks_the_driver_only() -> None:
    # dsl.c: with no GPU visible every brand= and arch= condition holds
    req = cudagap.requirements(SPEC, "2.17.0")
    assert nvidia_require_oracle.evaluate(req.require_cuda, cuda="11.4", driver="470.82.01").ok
    assert not nvidia_require_oracle.evaluate(req.require_cuda, cuda="11.8", driver="520.61.05").ok


def test_image_requirements_follow_the_loaded_libraries() -> None:
    """Labels, tags and driver floor describe what TensorFlow loads in the image: the base's CUDA
    12.3 for 2.17.0, the 12.5 wheels for 2.21.0 (and the base's 12.3 when forced to it)."""
    assert (
        str(cudagap.requirements(SPEC, "2.17.0").cuda),
        str(cudagap.requirements(SPEC, "2.17.0").cudnn),
    ) == ("12.3.1", "8.9.6")
    r21 = cudagap.requirements(SPEC, "2.21.0")
    assert (str(r21.cuda), str(r21.cudnn), str(r21.driver_min)) == ("12.5.1", "9.3.0", "555.42.06")
    forced = cudagap.requirements(SPEC, "2.21.0", override=CudaSource.BASE)
    assert (str(forced.cuda), str(forced.cudnn), str(forced.driver_min)) == (
        "12.3.1",
        "8.9.6",
        "545.23.08",
    )
    assert forced.gap is not None and not forced.gap.works
    assert str(forced.build_cuda) == "12.5.1"  # what TensorFlow was built with stays known
