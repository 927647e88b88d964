"""Devices as CUDA and NVML see them: attributes, several cards, CUDA_VISIBLE_DEVICES."""

from __future__ import annotations

import pytest

from tests.fakegpu.conftest import GIB, Runner

TWO_CARDS = {
    "FAKEGPU_MEMORY_MIB": "8192,16384",
    "FAKEGPU_NAME": "Fake A100-PCIE-8GB,Fake A100-SXM4-16GB",
    "FAKEGPU_UUID": (
        "GPU-aaaaaaaa-0000-4000-8000-000000000000,GPU-bbbbbbbb-0000-4000-8000-000000000000"
    ),
}


def test_device_attributes_are_those_of_an_a100(run: Runner) -> None:
    out = run(
        r"""
cu.cuInit(0)
names = {1: "max_threads", 10: "warp", 16: "sms", 13: "clock_khz", 36: "mem_clock_khz",
         37: "bus_width", 38: "l2", 39: "threads_per_sm", 41: "unified_addressing",
         75: "cc_major", 76: "cc_minor", 8: "smem_block", 97: "smem_optin", 81: "smem_sm",
         115: "memory_pools", 33: "pci_bus", 50: "pci_domain", 9999: "unknown"}
out.update({n: attr(a) for a, n in names.items()})
bus = ctypes.create_string_buffer(32)
cu.cuDeviceGetPCIBusId(bus, 32, 0)
out["bus_id"] = bus.value.decode()
maj, mnr = c_int(), c_int(); cu.cuDeviceComputeCapability(byref(maj), byref(mnr), 0)
out["cc"] = [maj.value, mnr.value]
lo, hi = c_int(), c_int()
ctx()
cu.cuCtxGetStreamPriorityRange(byref(lo), byref(hi))
out["prio"] = [lo.value, hi.value]
""",
        {"FAKEGPU_CC": "8.6"},
    ).out
    assert out["warp"] == 32
    assert out["max_threads"] == 1024
    assert out["sms"] == 108
    assert out["clock_khz"] == 1410000
    assert out["mem_clock_khz"] == 1215000
    assert out["bus_width"] == 5120
    assert out["l2"] == 40 * (1 << 20)
    assert out["threads_per_sm"] == 2048
    assert out["unified_addressing"] == 1
    assert out["memory_pools"] == 1
    assert out["smem_block"] == 49152 < out["smem_optin"] < out["smem_sm"]
    assert (out["cc_major"], out["cc_minor"]) == (8, 6) and out["cc"] == [8, 6]
    assert out["pci_domain"] == 0
    assert out["bus_id"] == f"0000:{out['pci_bus']:02x}:00.0"
    assert out["unknown"] == ["error", 1]
    assert out["prio"] == [0, -5]


def test_two_cards_of_different_sizes_agree_between_cuda_and_nvml(run: Runner) -> None:
    out = run(
        r"""
import pynvml
cu.cuInit(0); pynvml.nvmlInit()
out["cuda"], out["nvml"] = [], []
for i in range(2):
    total = c_size_t(); cu.cuDeviceTotalMem_v2(byref(total), i)
    uuid = ctypes.create_string_buffer(16); cu.cuDeviceGetUuid(uuid, i)
    bus = ctypes.create_string_buffer(32); cu.cuDeviceGetPCIBusId(bus, 32, i)
    out["cuda"].append([total.value, uuid.raw.hex(), bus.value.decode()])
    h = pynvml.nvmlDeviceGetHandleByIndex(i)
    pci = pynvml.nvmlDeviceGetPciInfo_v3(h)
    out["nvml"].append([pynvml.nvmlDeviceGetMemoryInfo(h).total,
                        pynvml.nvmlDeviceGetUUID(h).replace("GPU-", "").replace("-", ""),
                        str(pci.busIdLegacy).lower(), pynvml.nvmlDeviceGetName(h),
                        pynvml.nvmlDeviceGetIndex(h), pynvml.nvmlDeviceGetMinorNumber(h),
                        pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(pynvml.nvmlDeviceGetUUID(h))),
                        str(pci.busId)])
""",
        TWO_CARDS,
    ).out
    assert [c[0] for c in out["cuda"]] == [8 * GIB, 16 * GIB]
    for cuda, nvml in zip(out["cuda"], out["nvml"], strict=True):
        assert nvml[0] == cuda[0]
        assert nvml[1] == cuda[1]  # the same UUID bytes
        assert nvml[2] == cuda[2]  # the same PCI bus id
    assert [n[3] for n in out["nvml"]] == ["Fake A100-PCIE-8GB", "Fake A100-SXM4-16GB"]
    assert [n[4:7] for n in out["nvml"]] == [[0, 0, 0], [1, 1, 1]]
    assert out["nvml"][0][7] == "00000000:07:00.0"


VISIBLE = r"""
out["init"] = cu.cuInit(0)
n = c_int(); cu.cuDeviceGetCount(byref(n)); out["cuda"] = []
for i in range(n.value):
    total = c_size_t()
    cu.cuDeviceTotalMem_v2(byref(total), i)
    out["cuda"].append(total.value // GIB)
import pynvml
pynvml.nvmlInit()
out["nvml"] = pynvml.nvmlDeviceGetCount()
""".replace("GIB", str(GIB))


@pytest.mark.parametrize(
    ("visible", "cuda"),
    [
        (None, [8, 16]),
        ("1", [16]),
        ("1,0", [16, 8]),
        ("GPU-bbbbbbbb-0000-4000-8000-000000000000,0", [16, 8]),
        ("GPU-bbbb", [16]),  # a unique UUID prefix
        ("GPU-", []),  # ambiguous prefix: invalid, nothing after it
        ("0,-1,1", [8]),  # everything after an invalid entry is hidden
        ("0,7", [8]),
        ("0,0", [8]),
        ("MIG-aaaaaaaa-0000-4000-8000-000000000000", []),
        ("", []),
    ],
)
def test_cuda_visible_devices_filters_and_orders_cuda_while_nvml_ignores_it(
    run: Runner, visible: str | None, cuda: list[int]
) -> None:
    env = dict(TWO_CARDS)
    if visible is not None:
        env["CUDA_VISIBLE_DEVICES"] = visible
    out = run(VISIBLE, env).out
    assert out["cuda"] == cuda
    assert out["init"] == (0 if cuda else 100)  # none visible: CUDA_ERROR_NO_DEVICE
    assert out["nvml"] == 2


def test_nvml_answers_what_the_kits_runtime_and_build_side_read(run: Runner) -> None:
    out = run(
        r"""
import pynvml
from tfgpu.machine import nvml as runtime_nvml
report = runtime_nvml.query(pynvml)
out["driver"] = [report.found, report.driver_version, report.cuda_version, report.error]
out["gpus"] = [[g.name, g.uuid, g.total_mib, g.free_mib, g.compute_capability, g.brand]
               for g in report.gpus]
from tfgpu_kit.matrix import local_driver as kit_nvml
d = kit_nvml.local_driver()  # the build side's `check`: the runtime's reader, no device files
out["kit"] = [d.driver_version, [[g.index, g.name, g.compute_capability] for g in d.gpus]]
out["plan"] = kit_nvml.gpu_memory(["--gpu-memory SIZE"])
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(1)
u = pynvml.nvmlDeviceGetUtilizationRates(h)
out["misc"] = [pynvml.nvmlDeviceGetBrand(h), u.gpu, u.memory,
               pynvml.nvmlDeviceGetComputeRunningProcesses(h)]
""",
        {**TWO_CARDS, "FAKEGPU_CC": "8.0,9.0", "FAKEGPU_DRIVER": "550.54.15"},
    ).out
    assert out["driver"] == [True, "550.54.15", "12.4", None]
    assert out["gpus"] == [
        ["Fake A100-PCIE-8GB", "GPU-aaaaaaaa-0000-4000-8000-000000000000", 8192, 8192, "8.0", 2],
        ["Fake A100-SXM4-16GB", "GPU-bbbbbbbb-0000-4000-8000-000000000000", 16384, 16384, "9.0", 2],
    ]
    assert out["kit"] == [
        "550.54.15",
        [[0, "Fake A100-PCIE-8GB", "8.0"], [1, "Fake A100-SXM4-16GB", "9.0"]],
    ]
    assert out["plan"] == [
        {
            "0": 8192,
            "GPU-aaaaaaaa-0000-4000-8000-000000000000": 8192,
            "1": 16384,
            "GPU-bbbbbbbb-0000-4000-8000-000000000000": 16384,
        },
        None,
    ]
    assert out["misc"] == [2, 0, 0, []]  # NVML_BRAND_TESLA; nothing runs; no process
