"""NVIDIA_REQUIRE_* as libnvidia-container's dsl.c and the toolkit's Go parser read it.

Hosts are (driver, the CUDA version that driver reports, brand, arch). The reported CUDA version
is an input here, as libnvidia-container gets it from NVML: 470.x reports 11.4, 525.60.13 12.0,
535.104.05 12.2, 545.23.08 12.3, 555.42.06 12.5, 560.35.03 12.6, 580.65.06 13.0."""

from __future__ import annotations

import pytest

from tests.nvidia_require_oracle import (
    NVML_BRANDS,
    Gpu,
    Op,
    compare_version,
    env_from_entries,
    evaluate,
    evaluate_environment,
    host_cuda_version,
    is_legacy_image,
    parse,
    requirements_from_env,
)
from tfgpu_kit.matrix.nvidia_require import go_parse_error, go_parser_accepts

# nvidia/cuda:12.3.0-base-ubuntu22.04, amd64 stage, verbatim (NVIDIA's
# dist/12.3.0/ubuntu2204/base/Dockerfile, read in two public copies of it; facts file §1d)
CUDA_12_3_BASE = (
    "cuda>=12.3 "
    "brand=tesla,driver>=470,driver<471 "
    "brand=unknown,driver>=470,driver<471 "
    "brand=nvidia,driver>=470,driver<471 "
    "brand=nvidiartx,driver>=470,driver<471 "
    "brand=geforce,driver>=470,driver<471 "
    "brand=geforcertx,driver>=470,driver<471 "
    "brand=quadro,driver>=470,driver<471 "
    "brand=quadrortx,driver>=470,driver<471 "
    "brand=titan,driver>=470,driver<471 "
    "brand=titanrtx,driver>=470,driver<471 "
    "brand=tesla,driver>=525,driver<526 "
    "brand=unknown,driver>=525,driver<526 "
    "brand=nvidia,driver>=525,driver<526 "
    "brand=nvidiartx,driver>=525,driver<526 "
    "brand=geforce,driver>=525,driver<526 "
    "brand=geforcertx,driver>=525,driver<526 "
    "brand=quadro,driver>=525,driver<526 "
    "brand=quadrortx,driver>=525,driver<526 "
    "brand=titan,driver>=525,driver<526 "
    "brand=titanrtx,driver>=525,driver<526 "
    "brand=tesla,driver>=535,driver<536 "
    "brand=unknown,driver>=535,driver<536 "
    "brand=nvidia,driver>=535,driver<536 "
    "brand=nvidiartx,driver>=535,driver<536 "
    "brand=geforce,driver>=535,driver<536 "
    "brand=geforcertx,driver>=535,driver<536 "
    "brand=quadro,driver>=535,driver<536 "
    "brand=quadrortx,driver>=535,driver<536 "
    "brand=titan,driver>=535,driver<536 "
    "brand=titanrtx,driver>=535,driver<536"
)
BRANDS_12_3 = [
    "tesla", "unknown", "nvidia", "nvidiartx", "geforce", "geforcertx", "quadro",
    "quadrortx", "titan", "titanrtx",
]  # fmt: skip
UPDATE = ", please update your driver to a newer version, or use an earlier cuda container"

TESLA = ("Tesla", "8.0")
GEFORCE = ("GeForce", "8.9")
NO_GPU = (None, None)

H470 = ("470.256.02", "11.4")
H520 = ("520.61.05", "11.8")
H525 = ("525.60.13", "12.0")
H530 = ("530.30.02", "12.1")
H535 = ("535.104.05", "12.2")
H545 = ("545.23.08", "12.3")
H555 = ("555.42.06", "12.5")
H560 = ("560.35.03", "12.6")
H580 = ("580.65.06", "13.0")
H450_36 = ("450.36.06", "11.0")
H450_80 = ("450.80.02", "11.0")


def admitted(expr: str, host: tuple[str, str], gpu: tuple[str | None, str | None]) -> bool:
    driver, cuda = host
    brand, arch = gpu
    return evaluate(expr, cuda=cuda, driver=driver, brand=brand, arch=arch).ok


def test_the_real_12_3_value_is_three_branches_for_ten_brands() -> None:
    groups = [
        f"brand={brand},driver>={branch},driver<{branch + 1}"
        for branch in (470, 525, 535)
        for brand in BRANDS_12_3
    ]
    assert " ".join(["cuda>=12.3", *groups]) == CUDA_12_3_BASE
    requirement = parse(CUDA_12_3_BASE)
    assert len(requirement.alternatives) == 31
    assert requirement.alternatives[1][0].op is Op.EQUAL


@pytest.mark.parametrize(
    ("host", "gpu", "ok"),
    [
        (H470, TESLA, True),  # brand=tesla,driver>=470,driver<471
        (H470, GEFORCE, True),  # 12.3.0 lists every consumer brand for 470 too
        (H470, ("Unknown", "7.5"), True),
        # NVS, GRID, VApps, VPC, VCS, VWS, CloudGaming are not listed
        (H470, ("NVS", "7.5"), False),
        (H470, ("GRID", "8.6"), False),
        (H470, NO_GPU, True),  # no device: every brand= condition holds
        (("471.11", "11.4"), TESLA, False),  # driver<471
        (H520, TESLA, False),
        (H525, GEFORCE, True),
        (H530, TESLA, False),  # 530 is in no brand branch and reports 12.1
        (H535, TESLA, True),
        (H535, GEFORCE, True),
        (H545, GEFORCE, True),  # cuda>=12.3
        (H555, TESLA, True),
        (H560, GEFORCE, True),
        (H580, TESLA, True),
        (H450_80, TESLA, False),
    ],
)
def test_cuda_12_3_base_value(
    host: tuple[str, str], gpu: tuple[str | None, str | None], ok: bool
) -> None:
    assert admitted(CUDA_12_3_BASE, host, gpu) is ok


def test_cuda_12_3_base_refusal_names_the_first_term_with_the_hint() -> None:
    verdict = evaluate(CUDA_12_3_BASE, cuda="12.1", driver="530.30.02", brand="Tesla", arch="8.0")
    assert not verdict.ok
    assert verdict.outcome == "unsatisfied"
    assert verdict.message == f"unsatisfied condition: cuda>=12.3{UPDATE}"
    assert verdict.cli_error == f"nvidia-container-cli: requirement error: {verdict.message}"
    # what failed last: the last group's brand, checked before its driver bounds
    assert verdict.failed == "brand = titanrtx"


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        (H470, False),
        (H520, False),
        (H525, True),
        (H530, True),
        (H535, True),
        (H545, True),
        (H555, True),
        (H560, True),
        (H580, True),
    ],
)
@pytest.mark.parametrize("gpu", [TESLA, GEFORCE, NO_GPU])
def test_cuda_12_0(host: tuple[str, str], ok: bool, gpu: tuple[str | None, str | None]) -> None:
    assert admitted("cuda>=12.0", host, gpu) is ok
    assert admitted("cuda>=12.0,driver>=525.60.13", host, gpu) is ok


def test_cuda_12_0_refusal_message() -> None:
    verdict = evaluate("cuda>=12.0", cuda="11.4", driver="470.256.02")
    assert verdict.message == f"unsatisfied condition: cuda>=12.0{UPDATE}"
    assert verdict.failed == "cuda >= 12.0"


def test_driver_term_is_evaluated_after_cuda() -> None:
    # synthetic host: reports 12.0 with a driver below 12.0 GA's minimum
    verdict = evaluate("cuda>=12.0,driver>=525.60.13", cuda="12.0", driver="525.60.12")
    assert not verdict.ok
    assert verdict.failed == "driver >= 525.60.13"
    # the message repeats the whole first token, comma part included
    assert verdict.message == f"unsatisfied condition: cuda>=12.0,driver>=525.60.13{UPDATE}"


@pytest.mark.parametrize(
    ("host", "ok"),
    [
        (H450_36, False),  # 11.0 GA driver, below the 11.x minor-version floor
        (H450_80, True),
        (("450.80.2", "11.0"), True),  # 02 and 2 are the same component
        (("450.80.1", "11.0"), False),  # numeric, not textual: 1 < 02
        (("450.100.1", "11.0"), True),  # 100 > 80
        (H470, True),
        (H535, True),
        (H580, True),
        (("418.226.00", "10.1"), False),
    ],
)
def test_cuda_11_0_with_leading_zero_driver(host: tuple[str, str], ok: bool) -> None:
    assert admitted("cuda>=11.0,driver>=450.80.02", host, TESLA) is ok


def test_leading_zero_parses_in_dsl_c_and_not_in_released_go() -> None:
    expr = "cuda>=11.0,driver>=450.80.02"
    assert parse(expr).alternatives[0][1].value == "450.80.02"
    assert not go_parser_accepts(expr, semver="x/mod")
    assert go_parse_error(expr) == "invailid value 450.80.02; expected a valid version string"
    assert go_parser_accepts(expr, semver="masterminds")


@pytest.mark.parametrize(
    ("expr", "xmod", "masterminds"),
    [
        ("cuda>=12.0", True, True),
        ("cuda>=12", True, True),
        ("cuda>=12.0,driver>=525.60.13", True, True),
        ("driver>=535.104.05", False, True),
        ("driver>=545.23.08", False, True),
        ("driver>=560.35.03", False, True),
        ("driver>=555.42.06", False, True),
        ("driver>=470.256.02", False, True),
        ("driver>=550.54.14", True, True),  # no component with a leading zero
        ("driver>=525.85.12", True, True),
        ("driver>=1.2.3.4", False, False),  # a fourth component: dsl.c takes it
        ("cuda>=v12.0", True, True),  # the "v" prefix: dsl.c refuses it
        ("cuda>=12.0-rc1", False, True),  # x/mod: a prerelease needs PATCH; Masterminds: coerced
        ("cuda>=12.0.0-rc1", True, True),
        ("cuda>=12.0.0-rc.01", False, False),
        ("cuda=>12", False, False),  # "=" then value ">12"
        ("cuda", False, False),  # "invalid constraint"
        ("CUDA>=12.3", True, True),  # keys are case-sensitive there: skipped
        ("foo>=bar", True, True),  # unknown keys are skipped
        ("brand=anything,brand>tesla", True, True),  # strings are not validated
        ("brand=tesla,driver>=470,driver<471", True, True),
        (CUDA_12_3_BASE, True, True),
    ],
)
def test_go_parser_acceptance(expr: str, xmod: bool, masterminds: bool) -> None:
    assert go_parser_accepts(expr, semver="x/mod") is xmod
    assert go_parser_accepts(expr, semver="masterminds") is masterminds


def test_go_parser_messages() -> None:
    assert go_parse_error("cuda") == "invalid constraint: cuda"
    assert (
        go_parse_error("driver>=1.2.3.4", semver="masterminds")
        == "invalid version string: invalid semantic version"
    )
    assert go_parse_error("cuda>=" + "1" * 300, semver="masterminds") == (
        "invalid version string: version string is too long (max 256 bytes)"
    )


@pytest.mark.parametrize(
    "expr",
    [
        "cuda>>12.0",
        "cuda=>12.0",
        "cuda==12.0",
        "cuda<>12.0",
        "cuda>=",
        ">=12.0",
        "cuda",
        "cudaa>=12.0",
        "cuda>=v12.0",
        "cuda>=12.0a",
        "cuda>=.5",
        "cuda>=.",
        "cuda>=18446744073709551615",
        "driver>=535.104.05-rc",
        "arch>=sm_80",
        "brand>tesla",
        "brand<=tesla",
        "cuda>=12.0\tdriver>=525",  # only a space separates
        "cuda>=12.0 cuda>>1",  # dsl.c itself only notices when it gets there
        "brand=" + "x" * 130,  # too long to report when it fails
    ],
)
def test_malformed_expressions_are_refused_by_parse(expr: str) -> None:
    with pytest.raises(ValueError, match="invalid expression"):
        parse(expr)


@pytest.mark.parametrize(
    "expr",
    [
        "cuda>>12.0",
        "cuda==12.0",
        "cuda>=",
        ">=12.0",
        "cuda",
        "gpu>=1",
        "cuda>=v12.0",
        "cuda>=.5",
        "cuda>=18446744073709551615",
        "brand>tesla",
        "cuda>=12.0\tdriver>=525",
        "cuda>=99 cuda>>1",
        "brand=" + "x" * 130,
    ],
)
def test_malformed_expressions_are_invalid_when_reached(expr: str) -> None:
    verdict = evaluate(expr, cuda="12.2", driver="535.104.05", brand="Tesla", arch="8.0")
    assert not verdict.ok
    assert verdict.outcome == "invalid"
    assert verdict.message == "invalid expression"
    assert verdict.cli_error == "nvidia-container-cli: requirement error: invalid expression"


def test_evaluation_is_lazy_like_dsl_c() -> None:
    # a satisfied first group: the malformed rest is never parsed
    assert evaluate("cuda>=12.0 cuda>>1", cuda="12.2", driver="535.104.05").ok
    # a false condition ends its group: the malformed factor after it is never parsed
    verdict = evaluate("cuda>=99,cuda>>1 driver>=1", cuda="12.2", driver="535.104.05")
    assert verdict.ok
    # no GPU: brand with an operator strings do not take is never compared
    assert evaluate("brand>tesla", cuda="12.2", driver="535.104.05").ok
    assert evaluate("brand=" + "x" * 130, cuda="12.2", driver="535.104.05").ok


@pytest.mark.parametrize(
    ("expr", "gpu", "ok"),
    [
        ("brand=tesla", NO_GPU, True),
        ("brand=tesla", TESLA, True),
        ("brand=TESLA", TESLA, True),  # strcasecmp
        ("brand=tesla", GEFORCE, False),
        ("brand!=geforce", GEFORCE, False),
        ("brand!=geforce", TESLA, True),
        ("brand=geforce", ("GeForceRTX", "8.9"), False),  # whole-string compare
        ("arch>=8.0", NO_GPU, True),
        ("arch>=8.0", ("Tesla", "7.5"), False),
        ("arch>=8.0", GEFORCE, True),
        ("arch>=8.0", ("Tesla", "10.0"), True),  # numeric: 10 > 8
        ("arch=9", ("Tesla", "9.0"), True),  # trailing zero components are equal
        ("arch<9.0", TESLA, True),
    ],
)
def test_brand_and_arch(expr: str, gpu: tuple[str | None, str | None], ok: bool) -> None:
    assert admitted(expr, H535, gpu) is ok


@pytest.mark.parametrize(
    ("host", "op", "required", "result"),
    [
        ("12.2", Op.GREATER_EQUAL, "12.0", 1),
        ("12.2", Op.GREATER_EQUAL, "12.3", 0),
        ("12", Op.EQUAL, "12.0.0", 1),
        ("12.0", Op.LESS, "12.0.1", 1),
        ("12.0.1", Op.LESS, "12.0", 0),
        ("12.0.1", Op.GREATER, "12..0", 1),  # a run of dots is one separator
        ("535.104.05", Op.EQUAL, "535.104.5", 1),
        ("535.104.05", Op.NOT_EQUAL, "535.104.5", 0),
        ("9", Op.LESS, "10", 1),
        ("12.2", Op.GREATER_EQUAL, "12.x", -1),
        ("12.2", Op.EQUAL, "18446744073709551614", 0),
        ("12.2", Op.EQUAL, "18446744073709551615", -1),
        # the host has no more components: an overflowing one is never converted
        ("12", Op.LESS, "12.99999999999999999999999", 1),
    ],
)
def test_compare_version(host: str, op: Op, required: str, result: int) -> None:
    assert compare_version(host, op, required) == result


def test_a_lone_bang_is_not_equal() -> None:
    condition = parse("cuda!12.0").alternatives[0][0]
    assert condition.op is Op.NOT_EQUAL
    assert condition.formatted == "cuda != 12.0"
    assert not evaluate("cuda!12.2", cuda="12.2", driver="535.104.05").ok
    assert evaluate("cuda!12.0", cuda="12.2", driver="535.104.05").ok


def test_keys_are_case_insensitive_in_dsl_c() -> None:
    # NVIDIA's arm64 stage sets NVIDIA_REQUIRE_CUDA="CUDA>=12.3"
    verdict = evaluate("CUDA>=12.3", cuda="12.2", driver="535.104.05")
    assert not verdict.ok
    assert verdict.message == "unsatisfied condition: CUDA>=12.3"  # strncmp: no hint
    assert verdict.failed == "CUDA >= 12.3"
    assert evaluate("CUDA>=12.3", cuda="12.3", driver="545.23.08").ok


@pytest.mark.parametrize(
    ("expr", "ok", "message"),
    [
        ("", True, None),
        ("   ", True, None),
        (",", True, None),
        (", cuda>=99", True, None),  # a group of commas only ends the search, satisfied...
        ("cuda>=99 , cuda>=1", False, "unsatisfied condition: cuda>=99" + UPDATE),  # ...or not
        ("cuda>=99  cuda>=1", True, None),  # empty tokens are skipped
        ("cuda>=1,,driver>=1", True, None),
        ("driver>=999 cuda>=99", False, "unsatisfied condition: driver>=999"),
        (" cuda>=99", False, "unsatisfied condition: "),  # the first token is empty
    ],
)
def test_separators_and_messages(expr: str, ok: bool, message: str | None) -> None:
    verdict = evaluate(expr, cuda="12.2", driver="535.104.05", brand="Tesla", arch="8.0")
    assert verdict.ok is ok
    assert verdict.message == message


def test_nul_is_refused() -> None:
    with pytest.raises(ValueError, match="NUL"):
        parse("cuda>=12.0\0")
    with pytest.raises(ValueError, match="NUL"):
        evaluate("cuda>=12.0\0", cuda="12.2", driver="535.104.05")


@pytest.mark.parametrize(
    ("version", "text"),
    [(11040, "11.4"), (12000, "12.0"), (12020, "12.2"), (12080, "12.8"), (13000, "13.0")],
)
def test_host_cuda_version(version: int, text: str) -> None:
    assert host_cuda_version(version) == text


def test_nvml_brand_strings() -> None:
    assert NVML_BRANDS["NVML_BRAND_TESLA"] == "Tesla"
    assert NVML_BRANDS["NVML_BRAND_UNKNOWN"] == "Unknown"
    lowered = {b.lower() for b in NVML_BRANDS.values()}
    assert set(BRANDS_12_3) <= lowered
    assert {"nvs", "grid", "vapps", "cloudgaming"} <= lowered - set(BRANDS_12_3)


# --- the environment, as nvidia-container-toolkit assembles it --------------------------------

FAILING = {"NVIDIA_REQUIRE_CUDA": "cuda>=99.0"}


@pytest.mark.parametrize("value", ["1", "t", "T", "true", "TRUE", "True"])
def test_disable_require_true_values_skip_every_check(value: str) -> None:
    verdict = evaluate_environment(
        {**FAILING, "NVIDIA_DISABLE_REQUIRE": value}, cuda="12.2", driver="535.104.05"
    )
    assert verdict.ok
    assert not verdict.checked


@pytest.mark.parametrize(
    "value", ["0", "false", "yes", "on", "y", "tRUE", " true", "true ", "2", "", "enabled"]
)
def test_disable_require_other_values_keep_the_checks(value: str) -> None:
    verdict = evaluate_environment(
        {**FAILING, "NVIDIA_DISABLE_REQUIRE": value}, cuda="12.2", driver="535.104.05"
    )
    assert not verdict.ok
    assert verdict.checked
    assert verdict.requirement == "cuda>=99.0"


def test_disable_require_in_the_toolkit_config() -> None:
    verdict = evaluate_environment(
        FAILING, cuda="12.2", driver="535.104.05", disable_require_config=True
    )
    assert verdict.ok
    assert not verdict.checked


def test_every_require_variable_is_anded() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": "cuda>=12.0", "NVIDIA_REQUIRE_ARCH": "arch>=8.0"}
    assert evaluate_environment(env, cuda="12.2", driver="535.104.05", gpus=[Gpu(*TESLA)]).ok
    verdict = evaluate_environment(
        env, cuda="12.2", driver="535.104.05", gpus=[Gpu("Tesla", "7.5")]
    )
    assert not verdict.ok
    assert verdict.requirement == "arch>=8.0"
    assert verdict.message == "unsatisfied condition: arch>=8.0"


def test_jetpack_variables_are_ignored() -> None:
    env = {
        "NVIDIA_REQUIRE_CUDA": "cuda>=12.0",
        "NVIDIA_REQUIRE_JETPACK": "cuda>=99",
        "NVIDIA_REQUIRE_JETPACK_HOST_MOUNTS": "cuda>=99",
    }
    assert requirements_from_env(env) == ["cuda>=12.0"]
    assert evaluate_environment(env, cuda="12.2", driver="535.104.05").ok


def test_every_visible_gpu_must_satisfy() -> None:
    env = {"NVIDIA_REQUIRE_CUDA": CUDA_12_3_BASE}
    ok = evaluate_environment(env, cuda="11.4", driver="470.256.02", gpus=[Gpu(*TESLA)])
    assert ok.ok
    mixed = evaluate_environment(
        env, cuda="11.4", driver="470.256.02", gpus=[Gpu(*TESLA), Gpu("NVS", "7.5")]
    )
    assert not mixed.ok
    assert mixed.message == f"unsatisfied condition: cuda>=12.3{UPDATE}"


def test_legacy_image_gets_a_cuda_requirement() -> None:
    env = {"CUDA_VERSION": "12.3.0"}
    assert is_legacy_image(env)
    assert requirements_from_env(env) == ["cuda>=12.3"]
    assert not evaluate_environment(env, cuda="12.2", driver="535.104.05").ok
    # an empty NVIDIA_REQUIRE_CUDA is still legacy, and the empty value is passed on as well
    empty = {"CUDA_VERSION": "12.3.0", "NVIDIA_REQUIRE_CUDA": ""}
    assert requirements_from_env(empty) == ["", "cuda>=12.3"]
    assert not is_legacy_image({"CUDA_VERSION": "12.3.0", "NVIDIA_REQUIRE_CUDA": "cuda>=12.0"})


def test_legacy_cuda_version_with_leading_zero() -> None:
    env = {"CUDA_VERSION": "12.03.1"}
    verdict = evaluate_environment(env, cuda="12.2", driver="535.104.05", semver="x/mod")
    assert verdict.outcome == "setup-error"
    assert requirements_from_env(env, semver="masterminds") == ["cuda>=12.3"]


def test_more_than_32_requirements_is_an_input_error() -> None:
    many = {f"NVIDIA_REQUIRE_X{i}": "cuda>=1" for i in range(33)}
    verdict = evaluate_environment(many, cuda="12.2", driver="535.104.05")
    assert verdict.outcome == "input-error"
    assert verdict.cli_error == "nvidia-container-cli: input error: too many requirements"
    del many["NVIDIA_REQUIRE_X0"]
    assert evaluate_environment(many, cuda="12.2", driver="535.104.05").ok


def test_env_from_entries() -> None:
    assert env_from_entries(["A=1", "B=x=y", "A=2", "C="]) == {"A": "2", "B": "x=y", "C": ""}
    with pytest.raises(ValueError, match="invalid environment variable: NOEQ"):
        env_from_entries(["NOEQ"])
