"""Parsers of the environment contract: table-driven cases and property tests."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tfgpu.contract.errors import ConfigError
from tfgpu.contract.settings import (
    DERIVED,
    ENVIRONMENT,
    IMAGE_DEFAULT,
    KIT_DEFAULT,
    MemAmount,
    parse_environment,
    parse_mem_limit,
    parse_virtual_devices,
    parse_visible_devices,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("4096", [MemAmount(mib=4096)]),
        ("4GiB", [MemAmount(mib=4096)]),
        ("4gib", [MemAmount(mib=4096)]),
        ("4g", [MemAmount(mib=4096)]),
        ("512MiB", [MemAmount(mib=512)]),
        ("512 m", [MemAmount(mib=512)]),
        ("1.5GiB", [MemAmount(mib=1536)]),
        ("40%", [MemAmount(percent=40)]),
        ("100%", [MemAmount(percent=100)]),
        ("4096,2048", [MemAmount(mib=4096), MemAmount(mib=2048)]),
        (" 4096 , 50% ", [MemAmount(mib=4096), MemAmount(percent=50)]),
    ],
)
def test_mem_limit_accepts(text: str, expected: list[MemAmount]) -> None:
    assert parse_mem_limit(text) == expected


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("", "empty"),
        ("0", "over 0"),
        ("-5", ""),
        ("4MB", "ambiguous"),
        ("4GB", "ambiguous"),
        ("0%", "percentage"),
        ("101%", "percentage"),
        ("4096,", ""),
        ("lots", ""),
        ("4 TiB", ""),
        ("99999999999", "16 TiB"),
    ],
)
def test_mem_limit_rejects_with_one_message(text: str, why: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_mem_limit(text)
    err = info.value
    assert err.variable == "TF_GPU_MEM_LIMIT" and err.value == text
    message = str(err)
    assert "\n" not in message
    assert message.startswith(f"TF_GPU_MEM_LIMIT={text!r} is not valid")
    assert "accepted:" in message and "example: TF_GPU_MEM_LIMIT=4096" in message
    assert why in message


@pytest.mark.parametrize(
    ("text", "groups"),
    [
        ("6144,8192", [[6144, 8192]]),
        ("6144,8192;4096", [[6144, 8192], [4096]]),
        ("2GiB;2GiB;1GiB", [[2048], [2048], [1024]]),
    ],
)
def test_virtual_devices_grammar(text: str, groups: list[list[float]]) -> None:
    assert [[a.mib for a in g] for g in parse_virtual_devices(text)] == groups


@pytest.mark.parametrize("text", ["", "6144;", ";4096", "6144,,8192", "6144;;4096", "x"])
def test_virtual_devices_rejects(text: str) -> None:
    with pytest.raises(ConfigError, match="TF_GPU_VIRTUAL_DEVICES"):
        parse_virtual_devices(text)


@pytest.mark.parametrize(
    ("text", "entries"),
    [
        ("", []),
        ("-1", []),
        ("0,1", ["0", "1"]),
        ("1, 0", ["1", "0"]),
        ("0,-1,1", ["0"]),
        ("GPU-8f2a1c3e", ["GPU-8f2a1c3e"]),
        ("MIG-4f1c0b0e-aaaa-bbbb", ["MIG-4f1c0b0e-aaaa-bbbb"]),
    ],
)
def test_visible_devices(text: str, entries: list[str]) -> None:
    assert parse_visible_devices(text) == entries


@pytest.mark.parametrize(
    ("text", "why"), [("all", "NVIDIA_VISIBLE_DEVICES"), ("gpu0", "not valid"), ("0,0", "twice")]
)
def test_visible_devices_rejects(text: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_visible_devices(text)


def env(**kw: str) -> dict[str, str]:
    return dict(kw)


@pytest.mark.parametrize(
    ("environ", "variable"),
    [
        (env(TF_GPU_MEMORY_GROWTH="maybe"), "TF_GPU_MEMORY_GROWTH"),
        (
            env(TF_FORCE_GPU_ALLOW_GROWTH="True"),
            "TF_FORCE_GPU_ALLOW_GROWTH",
        ),  # TF wants exact lowercase
        (env(TF_FORCE_GPU_ALLOW_GROWTH="1"), "TF_FORCE_GPU_ALLOW_GROWTH"),
        (env(TF_GPU_MEMORY_GROWTH="on", TF_FORCE_GPU_ALLOW_GROWTH="false"), "TF_GPU_MEMORY_GROWTH"),
        (
            env(TF_GPU_MEM_LIMIT="4096", TF_GPU_VIRTUAL_DEVICES="2048,2048"),
            "TF_GPU_VIRTUAL_DEVICES",
        ),
        (env(TF_CPU_VIRTUAL_DEVICES="0"), "TF_CPU_VIRTUAL_DEVICES"),
        (env(TF_CPU_VIRTUAL_DEVICES="three"), "TF_CPU_VIRTUAL_DEVICES"),
        (env(TF_GPU_REQUIRED="sure"), "TF_GPU_REQUIRED"),
        (env(TF_MIXED_PRECISION="fp16"), "TF_MIXED_PRECISION"),
        (env(TF_GPU_QUIET="2"), "TF_GPU_QUIET"),
        (env(TF_GPU_ALLOCATOR="cuda_malloc_asnyc"), "TF_GPU_ALLOCATOR"),
        (env(TF_GPU_CONFIG="disabled"), "TF_GPU_CONFIG"),
        (env(CUDA_VISIBLE_DEVICES="all"), "CUDA_VISIBLE_DEVICES"),
        (env(TFGPU_IMAGE_DEFAULTS="garbage"), "TFGPU_IMAGE_DEFAULTS"),
    ],
)
def test_environment_errors_name_the_variable(environ: dict[str, str], variable: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment(environ)
    assert info.value.variable == variable
    assert str(info.value).startswith(f"{variable}=")
    assert "example:" in str(info.value)


def test_growth_translation_and_sources() -> None:
    s = parse_environment({"TF_GPU_MEMORY_GROWTH": "Yes"})
    assert s.growth is True
    assert s.sources["TF_GPU_MEMORY_GROWTH"].source == ENVIRONMENT
    derived = s.sources["TF_FORCE_GPU_ALLOW_GROWTH"]
    assert (derived.value, derived.source) == ("true", DERIVED)
    assert s.sources["TF_GPU_REQUIRED"].source == KIT_DEFAULT


def test_native_growth_passes_through() -> None:
    s = parse_environment({"TF_FORCE_GPU_ALLOW_GROWTH": "false"})
    assert s.growth is False and s.sources["TF_FORCE_GPU_ALLOW_GROWTH"].source == ENVIRONMENT


def test_explicit_native_value_wins_over_image_default() -> None:
    s = parse_environment(
        {
            "TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true",
            "TF_GPU_MEMORY_GROWTH": "true",
            "TF_FORCE_GPU_ALLOW_GROWTH": "false",
        }
    )
    assert s.growth is False
    assert s.sources["TF_GPU_MEMORY_GROWTH"].source == IMAGE_DEFAULT
    assert "overridden" in s.sources["TF_GPU_MEMORY_GROWTH"].note


def test_same_contradiction_without_image_default_is_an_error() -> None:
    with pytest.raises(ConfigError, match="contradicts TF_FORCE_GPU_ALLOW_GROWTH=false"):
        parse_environment({"TF_GPU_MEMORY_GROWTH": "true", "TF_FORCE_GPU_ALLOW_GROWTH": "false"})


def test_user_value_different_from_image_default_is_environment() -> None:
    s = parse_environment(
        {"TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true", "TF_GPU_MEMORY_GROWTH": "false"}
    )
    assert s.growth is False and s.sources["TF_GPU_MEMORY_GROWTH"].source == ENVIRONMENT


def test_values_tfgpu_run_added_are_reported_as_derived() -> None:
    # what `tfgpu run` hands its command: the image default plus the native variable it derived
    image = {"TFGPU_IMAGE_DEFAULTS": "TF_GPU_MEMORY_GROWTH=true", "TF_GPU_MEMORY_GROWTH": "true"}
    s = parse_environment(
        {**image, "TF_FORCE_GPU_ALLOW_GROWTH": "true", "TFGPU_DERIVED": "TF_FORCE_GPU_ALLOW_GROWTH"}
    )
    assert s.sources["TF_FORCE_GPU_ALLOW_GROWTH"].source == DERIVED
    assert s.sources["TF_GPU_MEMORY_GROWTH"].source == IMAGE_DEFAULT


def test_a_derived_value_gives_way_to_the_variable_it_came_from() -> None:
    # a process below `tfgpu run` turned growth off before starting a child: not a contradiction
    s = parse_environment(
        {
            "TF_GPU_MEMORY_GROWTH": "false",
            "TF_FORCE_GPU_ALLOW_GROWTH": "true",
            "TFGPU_DERIVED": "TF_FORCE_GPU_ALLOW_GROWTH",
        }
    )
    assert s.growth is False
    assert s.sources["TF_FORCE_GPU_ALLOW_GROWTH"].value == "false"


def test_off_means_nothing_is_parsed() -> None:
    s = parse_environment({"TF_GPU_CONFIG": "OFF", "TF_GPU_MEM_LIMIT": "garbage"})
    assert s.enabled is False and s.mem_limit is None


def test_empty_values_count_as_unset_but_empty_visible_devices_hides_all() -> None:
    s = parse_environment({"TF_GPU_MEM_LIMIT": "", "CUDA_VISIBLE_DEVICES": ""})
    assert s.mem_limit is None and s.visible_devices == []


def test_async_allocator_warns_that_limit_is_not_a_hard_cap() -> None:
    s = parse_environment({"TF_GPU_ALLOCATOR": "cuda_malloc_async", "TF_GPU_MEM_LIMIT": "4096"})
    assert any("not a hard cap" in w for w in s.warnings)


# --- properties over the grammar -------------------------------------------------------------

units = st.sampled_from(
    [("", 1), ("MiB", 1), ("mib", 1), ("m", 1), ("GiB", 1024), ("g", 1024), ("G", 1024)]
)
sizes = st.integers(min_value=1, max_value=16 * 1024)  # GiB × 16384 = the 16 TiB ceiling


@given(sizes, units)
def test_any_size_with_unit_resolves_to_mib(n: int, unit: tuple[str, int]) -> None:
    suffix, factor = unit
    [amount] = parse_mem_limit(f"{n}{suffix}")
    assert amount.percent is None and amount.resolve(None) == n * factor


@given(st.integers(min_value=1, max_value=100), st.floats(min_value=1, max_value=200_000))
def test_percent_resolves_against_total(p: int, total: float) -> None:
    [amount] = parse_mem_limit(f"{p}%")
    assert amount.resolve(total) == pytest.approx(total * p / 100)


@given(st.lists(st.lists(sizes, min_size=1, max_size=4), min_size=1, max_size=4))
def test_virtual_devices_round_trip(groups: list[list[int]]) -> None:
    text = ";".join(",".join(str(n) for n in g) for g in groups)
    assert [[a.mib for a in g] for g in parse_virtual_devices(text)] == groups


@given(st.text(max_size=12))
def test_any_text_parses_or_raises_config_error(text: str) -> None:
    for parse in (parse_mem_limit, parse_virtual_devices, parse_visible_devices):
        try:
            parse(text)
        except ConfigError as e:
            assert "\n" not in str(e) and e.value == text


# --- digits of other scripts ---------------------------------------------------------------
# "²".isdigit() is True but int("²") raises ValueError: an internal error instead of the
# one-line message. "٣" (Arabic-Indic three) converts with int(), but CUDA and TensorFlow read
# ASCII only, so accepting it would be a guess.


@pytest.mark.parametrize("value", ["²", "٣", "1²", "٣2", "¹⁰"])
def test_non_ascii_digits_are_a_config_error(value: str) -> None:
    for variable in (
        "TF_CPU_VIRTUAL_DEVICES",
        "TF_GPU_MEM_LIMIT",
        "TF_GPU_VIRTUAL_DEVICES",
        "CUDA_VISIBLE_DEVICES",
    ):
        with pytest.raises(ConfigError) as info:
            parse_environment({variable: value})
        assert info.value.variable == variable and info.value.value == value


@pytest.mark.parametrize("value", ["²", "٣", "9٤01", "⁹⁴⁰¹"])
def test_non_ascii_metrics_port_is_a_config_error_and_metrics_still_warns(
    value: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Refused at the door like every value; a caller of tfgpu.act.metrics that did not
    validate gets its warning instead of a crash."""
    from tfgpu.act import metrics

    with pytest.raises(ConfigError) as info:
        parse_environment({"TF_GPU_METRICS_PORT": value})
    assert info.value.variable == "TF_GPU_METRICS_PORT" and info.value.value == value
    assert metrics.parse_port(value) is None
    monkeypatch.setattr(metrics, "_state", {"attempted": False, "server": None, "port": None})
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": value}) is False
    assert f"TF_GPU_METRICS_PORT={value!r} is not valid" in capsys.readouterr().err


# --- TF_GPU_METRICS_PORT ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "port"), [("9401", 9401), (" 1 ", 1), ("65535", 65535), ("0", None), ("00", None)]
)
def test_metrics_port_accepts_a_port_and_zero_means_off(value: str, port: int | None) -> None:
    settings = parse_environment({"TF_GPU_METRICS_PORT": value})
    assert settings.metrics_port == port
    assert settings.sources["TF_GPU_METRICS_PORT"].value == value


@pytest.mark.parametrize("value", ["65536", "http", "9401.0", "-1", "94 01", "0x10"])
def test_metrics_port_refuses_what_is_not_a_port(value: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_environment({"TF_GPU_METRICS_PORT": value})
    message = str(info.value)
    assert message.startswith(f"TF_GPU_METRICS_PORT={value!r} is not valid")
    assert "from 1 to 65535" in message and "0 for no metrics" in message
    assert message.endswith("example: TF_GPU_METRICS_PORT=9401")


def test_metrics_port_zero_starts_no_server_and_says_nothing(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from tfgpu.act import metrics

    monkeypatch.setattr(metrics, "_state", {"attempted": False, "server": None, "port": None})
    assert metrics.start_from_environment(None, {"TF_GPU_METRICS_PORT": "0"}) is False
    assert capsys.readouterr().err == ""
    assert metrics._state["attempted"] is False


def test_config_info_has_no_pid_label() -> None:
    """A pid label would start a new series at every restart of the process."""
    from tfgpu.act import metrics

    labels = metrics._config_labels(parse_environment({"TF_GPU_MEM_LIMIT": "4GiB"}), {})
    assert labels == {
        "memory_limit": "4GiB",
        "virtual_devices": "",
        "memory_growth": "",
        "allocator": "",
    }


@given(st.text(max_size=6))
def test_any_cpu_devices_text_parses_or_raises_config_error(text: str) -> None:
    try:
        n = parse_environment({"TF_CPU_VIRTUAL_DEVICES": text}).cpu_devices
    except ConfigError:
        return
    assert n is None or 1 <= n <= 256
