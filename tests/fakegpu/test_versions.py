"""Versions the three libraries report, and how callers find the fake's functions."""

from __future__ import annotations

import pytest

from tests.fakegpu.conftest import GIB, Runner

VERSIONS = r"""
v = c_int(); out["runtime_rc"] = rt.cudaRuntimeGetVersion(byref(v)); out["runtime"] = v.value
d = c_int(); rt.cudaDriverGetVersion(byref(d)); out["rt_driver"] = d.value
cu.cuDriverGetVersion(byref(d)); out["driver"] = d.value
n = c_int(); out["count_rc"] = rt.cudaGetDeviceCount(byref(n)); out["count"] = n.value
"""


def test_the_runtime_reports_12050_by_default_and_the_drivers_version_as_nvml_does(
    run: Runner,
) -> None:
    out = run(
        VERSIONS
        + "import pynvml; pynvml.nvmlInit()\n"
        + "out['nvml'] = pynvml.nvmlSystemGetCudaDriverVersion()\n"
    ).out
    assert out == {
        "runtime_rc": 0,
        "runtime": 12050,
        "rt_driver": 12060,
        "driver": 12060,
        "count_rc": 0,
        "count": 1,
        "nvml": 12060,
    }


def test_fakegpu_cudart_version_and_the_cuda_11_runtime(run: Runner) -> None:
    assert run(VERSIONS, {"FAKEGPU_CUDART_VERSION": "12030"}).out["runtime"] == 12030
    eleven = run(VERSIONS, {"FAKEGPU_TEST_CUDART": "libcudart.so.11.0"}).out
    assert eleven["runtime"] == 11080
    assert eleven["count"] == 1  # a 12.6 driver runs CUDA 11 programs


def test_a_runtime_newer_than_the_driver_is_refused_like_the_real_one(run: Runner) -> None:
    out = run(VERSIONS, {"FAKEGPU_DRIVER": "520.61.05"}).out  # CUDA 11.8
    assert out["driver"] == 11080
    assert out["count_rc"] == 35  # cudaErrorInsufficientDriver: a CUDA 12 runtime on 11.8
    assert out["count"] == 0
    minor = run(VERSIONS, {"FAKEGPU_DRIVER": "535.104.05"}).out  # CUDA 12.2 runs a 12.5 runtime
    assert (minor["driver"], minor["count_rc"], minor["count"]) == (12020, 0, 1)


def test_nvml_memory_info_v2_checks_the_struct_version(run: Runner) -> None:
    out = run(
        r"""
import pynvml
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(0)
m = pynvml.nvmlDeviceGetMemoryInfo(h, version=pynvml.nvmlMemory_v2)
out["v2"] = [m.total, m.reserved, m.free, m.used]
nv = ctypes.CDLL("libnvidia-ml.so.1")
bad = pynvml.c_nvmlMemory_v2_t(); bad.version = 1
out["wrong_version"] = nv.nvmlDeviceGetMemoryInfo_v2(h, byref(bad))
pynvml.nvmlShutdown()
try:
    pynvml.nvmlDeviceGetCount(); out["after_shutdown"] = "ok"
except pynvml.NVMLError_Uninitialized:
    out["after_shutdown"] = "uninitialized"
""",
    ).out
    assert out["v2"] == [16 * GIB, 0, 16 * GIB, 0]
    assert out["wrong_version"] == 25  # NVML_ERROR_ARGUMENT_VERSION_MISMATCH
    assert out["after_shutdown"] == "uninitialized"


@pytest.mark.parametrize(
    ("symbol", "version", "expected"),
    [
        ("cuMemAlloc", 12000, "cuMemAlloc_v2"),
        ("cuCtxCreate", 3020, "cuCtxCreate_v2"),
        ("cuCtxCreate", 12050, "cuCtxCreate_v4"),
        ("cuStreamDestroy", 12000, "cuStreamDestroy_v2"),
        ("cuDevicePrimaryCtxRelease", 12000, "cuDevicePrimaryCtxRelease_v2"),
        ("cuLaunchKernel", 12000, "cuLaunchKernel"),
        ("cuMemAlloc", 2000, None),  # the 32-bit v1 ABI: not provided
        ("cuNoSuchFunction", 12000, None),
    ],
)
def test_cu_get_proc_address_maps_names_and_versions_to_the_fakes_own_functions(
    run: Runner, symbol: str, version: int, expected: str | None
) -> None:
    out = run(
        f"""
cu.cuInit(0)
fn, status = c_void_p(), c_int()
out["rc"] = cu.cuGetProcAddress_v2(b"{symbol}", byref(fn), {version}, c_ulonglong(0), byref(status))
out["status"] = status.value
own = ctypes.cast(getattr(cu, {expected!r} or "cuInit"), c_void_p).value
out["same"] = {expected!r} is not None and fn.value == own
"""
    ).out
    if expected is None:
        assert out["rc"] == 500 and out["status"] in (1, 2)  # CUDA_ERROR_NOT_FOUND
    else:
        assert out == {"rc": 0, "status": 0, "same": True}


def test_the_real_drivers_private_tables_are_not_there(run: Runner) -> None:
    out = run(
        "t = c_void_p(); out['rc'] = cu.cuGetExportTable(byref(t), None); out['t'] = t.value\n"
    ).out
    assert out == {"rc": 801, "t": None}  # CUDA_ERROR_NOT_SUPPORTED: real cuBLAS/cuDNN cannot init


# struct cudaDeviceProp of CUDA 11.8 (driver_types.h); CUDA 12 appends 76 ints (304 bytes).
PROPS = r"""
from ctypes import c_char
I, Z = c_int, c_size_t
class Props(ctypes.Structure):
    _fields_ = [("name", c_char * 256), ("uuid", c_char * 16), ("luid", c_char * 8),
        ("luidDeviceNodeMask", c_uint), ("totalGlobalMem", Z), ("sharedMemPerBlock", Z),
        ("regsPerBlock", I), ("warpSize", I), ("memPitch", Z), ("maxThreadsPerBlock", I),
        ("maxThreadsDim", I * 3), ("maxGridSize", I * 3), ("clockRate", I), ("totalConstMem", Z),
        ("major", I), ("minor", I), ("textureAlignment", Z), ("texturePitchAlignment", Z),
        ("deviceOverlap", I), ("multiProcessorCount", I), ("kernelExecTimeoutEnabled", I),
        ("integrated", I), ("canMapHostMemory", I), ("computeMode", I), ("maxTexture1D", I),
        ("maxTexture1DMipmap", I), ("maxTexture1DLinear", I), ("maxTexture2D", I * 2),
        ("maxTexture2DMipmap", I * 2), ("maxTexture2DLinear", I * 3), ("maxTexture2DGather", I * 2),
        ("maxTexture3D", I * 3), ("maxTexture3DAlt", I * 3), ("maxTextureCubemap", I),
        ("maxTexture1DLayered", I * 2), ("maxTexture2DLayered", I * 3),
        ("maxTextureCubemapLayered", I * 2), ("maxSurface1D", I), ("maxSurface2D", I * 2),
        ("maxSurface3D", I * 3), ("maxSurface1DLayered", I * 2), ("maxSurface2DLayered", I * 3),
        ("maxSurfaceCubemap", I), ("maxSurfaceCubemapLayered", I * 2), ("surfaceAlignment", Z),
        ("concurrentKernels", I), ("ECCEnabled", I), ("pciBusID", I), ("pciDeviceID", I),
        ("pciDomainID", I), ("tccDriver", I), ("asyncEngineCount", I), ("unifiedAddressing", I),
        ("memoryClockRate", I), ("memoryBusWidth", I), ("l2CacheSize", I),
        ("persistingL2CacheMaxSize", I), ("maxThreadsPerMultiProcessor", I),
        ("streamPrioritiesSupported", I), ("globalL1CacheSupported", I),
        ("localL1CacheSupported", I), ("sharedMemPerMultiprocessor", Z),
        ("regsPerMultiprocessor", I), ("managedMemory", I), ("isMultiGpuBoard", I),
        ("multiGpuBoardGroupID", I), ("hostNativeAtomicSupported", I),
        ("singleToDoublePrecisionPerfRatio", I), ("pageableMemoryAccess", I),
        ("concurrentManagedAccess", I), ("computePreemptionSupported", I),
        ("canUseHostPointerForRegisteredMem", I), ("cooperativeLaunch", I),
        ("cooperativeMultiDeviceLaunch", I), ("sharedMemPerBlockOptin", Z),
        ("pageableMemoryAccessUsesHostPageTables", I), ("directManagedMemAccessFromHost", I),
        ("maxBlocksPerMultiProcessor", I), ("accessPolicyMaxWindowSize", I),
        ("reservedSharedMemPerBlock", Z)]
size = ctypes.sizeof(Props) + (304 if os.environ.get("FAKEGPU_TEST_CUDART") is None else 0)
buf = ctypes.create_string_buffer(b"\xee" * (size + 64), size + 64)
fn = getattr(rt, "cudaGetDeviceProperties_v2", None) or rt.cudaGetDeviceProperties
out["rc"] = fn(buf, 0)
out["guard"] = buf.raw[size:] == b"\xee" * 64
p = Props.from_buffer(buf)
out["props"] = [p.name.decode(), p.totalGlobalMem, p.major, p.minor, p.multiProcessorCount,
                p.warpSize, p.memoryBusWidth, p.l2CacheSize, p.pciBusID, p.maxThreadsPerBlock,
                p.sharedMemPerBlockOptin, p.reservedSharedMemPerBlock]
out["has_v2"] = hasattr(rt, "cudaGetDeviceProperties_v2")
"""


@pytest.mark.parametrize("cudart", ["libcudart.so.12", "libcudart.so.11.0"])
def test_cuda_get_device_properties_fills_the_struct_of_its_cuda_major_and_no_more(
    run: Runner, cudart: str
) -> None:
    env = {"FAKEGPU_CC": "8.6", "FAKEGPU_MEMORY_MIB": "24576", "FAKEGPU_NAME": "Fake A10"}
    if cudart != "libcudart.so.12":
        env["FAKEGPU_TEST_CUDART"] = cudart
    out = run(PROPS, env).out
    assert out["rc"] == 0
    assert out["guard"]  # nothing written past the caller's struct
    assert out["props"] == [
        "Fake A10",
        24 * GIB,
        8,
        6,
        108,
        32,
        5120,
        40 << 20,
        7,
        1024,
        166912,
        1024,
    ]
    assert out["has_v2"] == (cudart == "libcudart.so.12")
