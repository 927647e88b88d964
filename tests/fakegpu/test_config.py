"""Configuration by environment: defaults, per-card lists, versions, and invalid values."""

from __future__ import annotations

import pytest

from tests.fakegpu.conftest import GIB, Runner

READ = r"""
out["init"] = cu.cuInit(0)
n = c_int(); cu.cuDeviceGetCount(byref(n)); out["count"] = n.value
v = c_int(); cu.cuDriverGetVersion(byref(v)); out["cuda"] = v.value
out["cards"] = []
for i in range(n.value):
    name = ctypes.create_string_buffer(128); cu.cuDeviceGetName(name, 128, i)
    total = c_size_t(); cu.cuDeviceTotalMem_v2(byref(total), i)
    out["cards"].append([name.value.decode(), total.value, attr(75, i), attr(76, i)])
import pynvml
pynvml.nvmlInit()
out["nvml_driver"] = pynvml.nvmlSystemGetDriverVersion()
out["nvml_cuda"] = pynvml.nvmlSystemGetCudaDriverVersion()
out["nvml_cuda_v2"] = pynvml.nvmlSystemGetCudaDriverVersion_v2()
out["nvml_version"] = pynvml.nvmlSystemGetNVMLVersion()
out["nvml_uuids"] = [pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i))
                     for i in range(pynvml.nvmlDeviceGetCount())]
"""


def test_defaults_one_a100_like_card_of_16_gib_and_driver_560(run: Runner) -> None:
    out = run(READ).out
    assert out["init"] == 0
    assert out["cards"] == [["Fake A100-SXM4-16GB", 16 * GIB, 8, 0]]
    assert out["cuda"] == out["nvml_cuda"] == out["nvml_cuda_v2"] == 12060
    assert out["nvml_driver"] == "560.35.03"
    assert out["nvml_version"] == "12.560.35.03"
    assert out["nvml_uuids"] == ["GPU-fa6e0000-0000-4000-8000-000000000000"]


def test_lists_give_each_card_its_own_values_and_a_single_value_applies_to_all(
    run: Runner,
) -> None:
    out = run(
        READ,
        {
            "FAKEGPU_MEMORY_MIB": "8192, 16384,40960",
            "FAKEGPU_NAME": "Fake T4,Fake A100,Fake H100",
            "FAKEGPU_CC": "9.0",
        },
    ).out
    assert out["count"] == 3  # FAKEGPU_COUNT unset: the length of the lists
    assert out["cards"] == [
        ["Fake T4", 8 * GIB, 9, 0],
        ["Fake A100", 16 * GIB, 9, 0],
        ["Fake H100", 40 * GIB, 9, 0],
    ]
    assert len(set(out["nvml_uuids"])) == 3


@pytest.mark.parametrize(
    ("driver", "cuda"),
    [
        ("525.60.13", 12000),
        ("535.104.05", 12020),
        ("545.23.08", 12030),
        ("550.54.15", 12040),
        ("555.42.06", 12050),
        ("560.35.03", 12060),
        ("570.124.06", 12080),
        ("575.57.08", 12090),
        ("580.65.06", 13000),
        ("565.57.01", 12060),  # between branches: the last one below
    ],
)
def test_the_cuda_version_follows_the_driver_branch_in_the_driver_and_nvml(
    run: Runner, driver: str, cuda: int
) -> None:
    out = run(READ, {"FAKEGPU_DRIVER": driver}).out
    assert out["nvml_driver"] == driver
    assert out["cuda"] == out["nvml_cuda"] == out["nvml_cuda_v2"] == cuda


def test_fakegpu_cuda_overrides_the_branch_default(run: Runner) -> None:
    out = run(READ, {"FAKEGPU_DRIVER": "560.35.03", "FAKEGPU_CUDA": "12.4"}).out
    assert out["cuda"] == out["nvml_cuda"] == 12040


CHECK_BOTH = r"""
out["init"] = cu.cuInit(0)
n = c_int(); out["count_rc"] = cu.cuDeviceGetCount(byref(n))
import pynvml
try:
    pynvml.nvmlInit()
    out["nvml"] = "ok"
except pynvml.NVMLError as e:
    out["nvml"] = e.value
"""


@pytest.mark.parametrize(
    ("variable", "value", "env"),
    [
        ("FAKEGPU_MEMORY_MIB", "16GiB", {}),
        ("FAKEGPU_MEMORY_MIB", "0", {}),
        ("FAKEGPU_MEMORY_MIB", "8192,,8192", {}),
        ("FAKEGPU_COUNT", "17", {}),
        ("FAKEGPU_COUNT", "two", {}),
        ("FAKEGPU_NAME", "a,b", {"FAKEGPU_COUNT": "3"}),
        ("FAKEGPU_CC", "8", {}),
        ("FAKEGPU_CC", "8.0.1", {}),
        ("FAKEGPU_UUID", "GPU-1234", {}),
        ("FAKEGPU_UUID", "GPU-fa6e0000-0000-4000-8000-000000000000", {"FAKEGPU_COUNT": "2"}),
        ("FAKEGPU_DRIVER", "latest", {}),
        ("FAKEGPU_DRIVER", "390.48", {}),  # no default CUDA version that old
        ("FAKEGPU_CUDA", "twelve", {}),
        ("FAKEGPU_TRACE", "yes", {}),
        ("FAKEGPU_LOG", "/nonexistent-dir/fakegpu.jsonl", {}),
        ("FAKEGPU_LEDGER", "/proc/nonexistent/ledger", {}),
    ],
)
def test_an_invalid_value_is_named_on_stderr_and_fails_cuinit_and_nvmlinit(
    run: Runner, variable: str, value: str, env: dict[str, str]
) -> None:
    child = run(CHECK_BOTH, {**env, variable: value})
    assert child.out == {"init": 1, "count_rc": 3, "nvml": 2}  # INVALID_VALUE / INVALID_ARGUMENT
    lines = [line for line in child.stderr.splitlines() if line.startswith("fakegpu: invalid")]
    assert len(lines) == 1, child.stderr  # said once, though libcuda and NVML both asked
    assert lines[0].startswith(f"fakegpu: invalid {variable}=")
    assert f"{variable}='{value}'" in lines[0]


def test_no_card_is_a_driver_that_sees_no_device(run: Runner) -> None:
    out = run(
        CHECK_BOTH + "out['nvml_count'] = pynvml.nvmlDeviceGetCount()\n", {"FAKEGPU_COUNT": "0"}
    ).out
    assert out["init"] == 100  # CUDA_ERROR_NO_DEVICE, as the real driver says
    assert out["nvml"] == "ok"
    assert out["nvml_count"] == 0


def test_calls_before_cuinit_fail_as_not_initialized(run: Runner) -> None:
    out = run(
        "n = c_int(); out['count'] = cu.cuDeviceGetCount(byref(n))\n"
        "out['alloc'] = alloc(1)[0]\n"
        "v = c_int(); out['version'] = cu.cuDriverGetVersion(byref(v)); out['v'] = v.value\n"
    ).out
    assert out == {"count": 3, "alloc": 3, "version": 0, "v": 12060}  # the version needs no init


def test_trace_logs_every_call_name_to_stderr(run: Runner) -> None:
    child = run(
        "cu.cuInit(0); ctx(); alloc(4096)\nimport pynvml; pynvml.nvmlInit()\n",
        {"FAKEGPU_TRACE": "1"},
    )
    for call in (
        "libcuda: cuInit(flags=0)",
        "libcuda: cuDevicePrimaryCtxRetain(dev=0)",
        "libcuda: cuMemAlloc_v2(bytes=4096)",
        "libnvidia-ml: nvmlInitWithFlags(flags=0)",
    ):
        assert any(line.endswith(call) for line in child.stderr.splitlines()), call
    quiet = run("cu.cuInit(0); ctx(); alloc(4096)\n")
    assert "fakegpu[" not in quiet.stderr
