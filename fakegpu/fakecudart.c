/*
 * fakecudart.c - libcudart.so.12 (and libcudart.so.11.0 with -DFG_CUDART_MAJOR=11): a
 * minimal CUDA runtime for the fake driver.
 *
 * The real libcudart cannot run on a fake driver: it asks the driver for private export
 * tables (cuGetExportTable). TensorFlow reaches the runtime through its cudart stub
 * (dlopen("libcudart.so.12") + dlsym), and LD_LIBRARY_PATH comes before TensorFlow's RUNPATH,
 * so this file, put next to the fake libcuda.so.1, shadows the pip wheel's runtime.
 *
 * NO COMPUTE: kernel launches (cudaLaunchKernel, <<<...>>>) succeed doing nothing; copies
 * to the device and memsets do nothing; copies from the device write zeros. Everything goes
 * through the fake driver next to this file (dlopen'ed by path): cudaMalloc is accounted, and
 * logged, exactly like cuMemAlloc. Signatures and enum values: CUDA Runtime API reference
 * (docs.nvidia.com/cuda/cuda-runtime-api).
 */
#define _GNU_SOURCE
#include "fakegpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef FG_CUDART_MAJOR
#define FG_CUDART_MAJOR 12
#endif

#define T(...) fakegpu_trace_rt(__func__, __VA_ARGS__)

typedef int cudaError_t;
typedef struct fg_stream *cudaStream_t;
typedef struct fg_event *cudaEvent_t;
typedef struct {
    unsigned int x, y, z;
} dim3;

enum {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInsufficientDriver = 35,
    cudaErrorInvalidDeviceFunction = 98,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorSharedObjectSymbolNotFound = 302,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorSymbolNotFound = 500,
    cudaErrorNotReady = 600,
    cudaErrorNotSupported = 801,
    cudaErrorUnknown = 999
};

/* ---- the fake driver, loaded from this library's own directory ---- */

static struct {
    void *h;
    const fg_config *(*config)(void);
    void (*trace)(const char *, const char *, const char *, ...);
    int (*trace_enabled)(void);
    CUresult (*alloc)(int, size_t, const char *, CUdeviceptr *);
    CUresult (*free_)(CUdeviceptr, const char *);
    int (*pointer_device)(CUdeviceptr);
    CUresult (*cuInit)(unsigned);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
    CUresult (*cuDeviceGetName)(char *, int, CUdevice);
    CUresult (*cuDeviceGetUuid)(CUuuid *, CUdevice);
    CUresult (*cuDeviceTotalMem_v2)(size_t *, CUdevice);
    CUresult (*cuDeviceCanAccessPeer)(int *, CUdevice, CUdevice);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuCtxEnablePeerAccess)(CUcontext, unsigned);
    CUresult (*cuCtxGetStreamPriorityRange)(int *, int *);
    CUresult (*cuCtxGetLimit)(size_t *, int);
    CUresult (*cuCtxSetLimit)(int, size_t);
    CUresult (*cuMemGetInfo_v2)(size_t *, size_t *);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemHostRegister_v2)(void *, size_t, unsigned);
    CUresult (*cuMemHostUnregister)(void *);
    CUresult (*cuMemHostGetDevicePointer_v2)(CUdeviceptr *, void *, unsigned);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned);
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
    CUresult (*cuPointerGetAttribute)(void *, int, CUdeviceptr);
    CUresult (*cuStreamCreateWithPriority)(CUstream *, unsigned, int);
    CUresult (*cuStreamDestroy_v2)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuStreamQuery)(CUstream);
    CUresult (*cuStreamWaitEvent)(CUstream, CUevent, unsigned);
    CUresult (*cuStreamGetPriority)(CUstream, int *);
    CUresult (*cuStreamGetFlags)(CUstream, unsigned *);
    CUresult (*cuStreamAddCallback)(CUstream, void (*)(CUstream, CUresult, void *), void *, unsigned);
    CUresult (*cuLaunchHostFunc)(CUstream, void (*)(void *), void *);
    CUresult (*cuEventCreate)(CUevent *, unsigned);
    CUresult (*cuEventDestroy_v2)(CUevent);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventQuery)(CUevent);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventElapsedTime)(float *, CUevent, CUevent);
    CUresult (*cuModuleLoadData)(CUmodule *, const void *);
    CUresult (*cuModuleGetFunction)(CUfunction *, CUmodule, const char *);
    CUresult (*cuGetProcAddress_v2)(const char *, void **, int, unsigned long long, int *);
} D;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_loaded;

static void fakegpu_trace_rt(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void load(void) {
    Dl_info info;
    char path[FG_PATH_LEN];
    path[0] = 0;
    if (dladdr((void *)&load, &info) && info.dli_fname) {
        snprintf(path, sizeof path, "%s", info.dli_fname);
        char *slash = strrchr(path, '/');
        if (slash)
            snprintf(slash + 1, sizeof path - (size_t)(slash + 1 - path), "libcuda.so.1");
        else
            path[0] = 0;
    }
    D.h = path[0] ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!D.h) D.h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!D.h || !(D.config = (const fg_config *(*)(void))dlsym(D.h, "fakegpu_config"))) {
        const char *m = "fakegpu: the fake libcudart needs the fake libcuda.so.1 next to it\n";
        ssize_t w = write(2, m, strlen(m));
        (void)w;
        return;
    }
#define SYM(name) *(void **)&D.name = dlsym(D.h, #name)
    *(void **)&D.trace = dlsym(D.h, "fakegpu_trace");
    *(void **)&D.trace_enabled = dlsym(D.h, "fakegpu_trace_enabled");
    *(void **)&D.alloc = dlsym(D.h, "fakegpu_alloc");
    *(void **)&D.free_ = dlsym(D.h, "fakegpu_free");
    *(void **)&D.pointer_device = dlsym(D.h, "fakegpu_pointer_device");
    SYM(cuInit);
    SYM(cuDriverGetVersion);
    SYM(cuDeviceGetCount);
    SYM(cuDeviceGetAttribute);
    SYM(cuDeviceGetName);
    SYM(cuDeviceGetUuid);
    SYM(cuDeviceTotalMem_v2);
    SYM(cuDeviceCanAccessPeer);
    SYM(cuDevicePrimaryCtxRetain);
    SYM(cuDevicePrimaryCtxReset_v2);
    SYM(cuCtxGetCurrent);
    SYM(cuCtxSetCurrent);
    SYM(cuCtxGetDevice);
    SYM(cuCtxSynchronize);
    SYM(cuCtxEnablePeerAccess);
    SYM(cuCtxGetStreamPriorityRange);
    SYM(cuCtxGetLimit);
    SYM(cuCtxSetLimit);
    SYM(cuMemGetInfo_v2);
    SYM(cuMemHostAlloc);
    SYM(cuMemFreeHost);
    SYM(cuMemHostRegister_v2);
    SYM(cuMemHostUnregister);
    SYM(cuMemHostGetDevicePointer_v2);
    SYM(cuMemAllocManaged);
    SYM(cuMemAllocAsync);
    SYM(cuMemFreeAsync);
    SYM(cuMemcpyAsync);
    SYM(cuMemsetD8Async);
    SYM(cuPointerGetAttribute);
    SYM(cuStreamCreateWithPriority);
    SYM(cuStreamDestroy_v2);
    SYM(cuStreamSynchronize);
    SYM(cuStreamQuery);
    SYM(cuStreamWaitEvent);
    SYM(cuStreamGetPriority);
    SYM(cuStreamGetFlags);
    SYM(cuStreamAddCallback);
    SYM(cuLaunchHostFunc);
    SYM(cuEventCreate);
    SYM(cuEventDestroy_v2);
    SYM(cuEventRecord);
    SYM(cuEventQuery);
    SYM(cuEventSynchronize);
    SYM(cuEventElapsedTime);
    SYM(cuModuleLoadData);
    SYM(cuModuleGetFunction);
    SYM(cuGetProcAddress_v2);
#undef SYM
    g_loaded = D.trace && D.alloc && D.free_ && D.cuInit && D.cuGetProcAddress_v2;
}

static int loaded(void) {
    pthread_once(&g_once, load);
    return g_loaded;
}

static void fakegpu_trace_rt(const char *fn, const char *fmt, ...) {
    if (!loaded() || !D.trace_enabled()) return;
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    D.trace(FG_CUDART_MAJOR == 11 ? "libcudart.so.11.0" : "libcudart.so.12", fn, "%s", buf);
}

/* ---- per-thread runtime state ---- */

static __thread int t_device;
static __thread cudaError_t t_last_error;
static __thread struct {
    dim3 grid, block;
    size_t shmem;
    void *stream;
} t_launch;

static cudaError_t ret(cudaError_t e) {
    if (e != cudaSuccess) t_last_error = e;
    return e;
}

/* CUresult -> cudaError_t: the numbers agree for every code this fake driver returns,
 * except CUDA_ERROR_NOT_INITIALIZED (the runtime reports an initialization error) and
 * CUDA_ERROR_INVALID_CONTEXT (201, cudaErrorDeviceUninitialized: the same number). */
static cudaError_t rt(CUresult r) {
    if (r == CUDA_ERROR_NOT_INITIALIZED) return ret(cudaErrorInitializationError);
    return ret((cudaError_t)r);
}

static int runtime_version(void) {
    const char *v = getenv("FAKEGPU_CUDART_VERSION");
    if (v && *v) {
        char *end;
        long n = strtol(v, &end, 10);
        if (*end == 0 && n >= 1000 && n < 100000) return (int)n;
    }
    return FG_CUDART_MAJOR == 11 ? 11080 : 12050;
}

/* Initialise like the real runtime: cuInit, then the primary context of the thread's device
 * current on this thread (unless the thread already has a context). */
static cudaError_t lazy_init(void) {
    if (!loaded()) return ret(cudaErrorInsufficientDriver);
    CUresult r = D.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) return ret(cudaErrorNoDevice);
    if (r != CUDA_SUCCESS) return ret(cudaErrorInitializationError);
    int drv = 0;
    D.cuDriverGetVersion(&drv);
    if (drv / 1000 < runtime_version() / 1000) return ret(cudaErrorInsufficientDriver);
    CUcontext c = NULL;
    D.cuCtxGetCurrent(&c);
    if (!c) {
        r = D.cuDevicePrimaryCtxRetain(&c, t_device);
        if (r != CUDA_SUCCESS) return rt(r);
        D.cuCtxSetCurrent(c);
    }
    return cudaSuccess;
}

#define INIT()                                                                                     \
    do {                                                                                           \
        cudaError_t e_ = lazy_init();                                                              \
        if (e_ != cudaSuccess) return e_;                                                          \
    } while (0)

static int current_device(void) {
    CUdevice d;
    if (D.cuCtxGetDevice && D.cuCtxGetDevice(&d) == CUDA_SUCCESS) return d;
    return t_device;
}

/* ---- versions, errors ---- */

FG_EXPORT cudaError_t cudaRuntimeGetVersion(int *v) {
    T("%s", "");
    if (!v) return ret(cudaErrorInvalidValue);
    *v = runtime_version();
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaDriverGetVersion(int *v) {
    T("%s", "");
    if (!v) return ret(cudaErrorInvalidValue);
    if (!loaded()) {
        *v = 0;
        return cudaSuccess;
    }
    return rt(D.cuDriverGetVersion(v));
}

static const struct {
    int code;
    const char *name, *text;
} k_errors[] = {
    {0, "cudaSuccess", "no error"},
    {1, "cudaErrorInvalidValue", "invalid argument"},
    {2, "cudaErrorMemoryAllocation", "out of memory"},
    {3, "cudaErrorInitializationError", "initialization error"},
    {35, "cudaErrorInsufficientDriver", "CUDA driver version is insufficient for CUDA runtime version"},
    {98, "cudaErrorInvalidDeviceFunction", "invalid device function"},
    {100, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {101, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {201, "cudaErrorDeviceUninitialized", "invalid device context"},
    {302, "cudaErrorSharedObjectSymbolNotFound", "shared object symbol not found"},
    {400, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {500, "cudaErrorSymbolNotFound", "named symbol not found"},
    {600, "cudaErrorNotReady", "device not ready"},
    {704, "cudaErrorPeerAccessAlreadyEnabled", "peer access is already enabled"},
    {801, "cudaErrorNotSupported", "operation not supported"},
    {999, "cudaErrorUnknown", "unknown error"},
};

FG_EXPORT const char *cudaGetErrorName(cudaError_t e) {
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == e) return k_errors[i].name;
    return "cudaErrorUnknown";
}

FG_EXPORT const char *cudaGetErrorString(cudaError_t e) {
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == e) return k_errors[i].text;
    return "unrecognized error code";
}

FG_EXPORT cudaError_t cudaGetLastError(void) {
    cudaError_t e = t_last_error;
    t_last_error = cudaSuccess;
    return e;
}

FG_EXPORT cudaError_t cudaPeekAtLastError(void) { return t_last_error; }

/* ---- devices ---- */

FG_EXPORT cudaError_t cudaGetDeviceCount(int *count) {
    T("%s", "");
    if (!count) return ret(cudaErrorInvalidValue);
    *count = 0;
    if (!loaded()) return ret(cudaErrorInsufficientDriver);
    CUresult r = D.cuInit(0);
    if (r == CUDA_ERROR_NO_DEVICE) return ret(cudaErrorNoDevice);
    if (r != CUDA_SUCCESS) return ret(cudaErrorInitializationError);
    int drv = 0;
    D.cuDriverGetVersion(&drv);
    if (drv / 1000 < runtime_version() / 1000) return ret(cudaErrorInsufficientDriver);
    return rt(D.cuDeviceGetCount(count));
}

FG_EXPORT cudaError_t cudaGetDevice(int *device) {
    T("%s", "");
    if (!device) return ret(cudaErrorInvalidValue);
    INIT();
    *device = current_device();
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaSetDevice(int device) {
    T("device=%d", device);
    if (!loaded()) return ret(cudaErrorInsufficientDriver);
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) return e;
    if (device < 0 || device >= n) return ret(cudaErrorInvalidDevice);
    t_device = device;
    CUcontext c;
    CUresult r = D.cuDevicePrimaryCtxRetain(&c, device);
    if (r != CUDA_SUCCESS) return rt(r);
    return rt(D.cuCtxSetCurrent(c));
}

FG_EXPORT cudaError_t cudaSetDeviceFlags(unsigned int flags) {
    T("flags=%u", flags);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaGetDeviceFlags(unsigned int *flags) {
    T("%s", "");
    if (!flags) return ret(cudaErrorInvalidValue);
    *flags = 0;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaDeviceGetAttribute(int *value, int attr, int device) {
    T("attr=%d device=%d", attr, device);
    INIT();
    /* cudaDeviceAttr values equal CUdevice_attribute values */
    return rt(D.cuDeviceGetAttribute(value, attr, device));
}

FG_EXPORT cudaError_t cudaDeviceGetStreamPriorityRange(int *least, int *greatest) {
    T("%s", "");
    INIT();
    return rt(D.cuCtxGetStreamPriorityRange(least, greatest));
}

FG_EXPORT cudaError_t cudaDeviceCanAccessPeer(int *can, int device, int peer) {
    T("device=%d peer=%d", device, peer);
    INIT();
    return rt(D.cuDeviceCanAccessPeer(can, device, peer));
}

FG_EXPORT cudaError_t cudaDeviceEnablePeerAccess(int peer, unsigned int flags) {
    T("peer=%d", peer);
    INIT();
    CUcontext c;
    CUresult r = D.cuDevicePrimaryCtxRetain(&c, peer);
    if (r != CUDA_SUCCESS) return rt(r);
    return rt(D.cuCtxEnablePeerAccess(c, flags));
}

FG_EXPORT cudaError_t cudaDeviceSynchronize(void) {
    T("%s", "");
    INIT();
    return rt(D.cuCtxSynchronize());
}

FG_EXPORT cudaError_t cudaDeviceReset(void) {
    T("%s", "");
    INIT();
    return rt(D.cuDevicePrimaryCtxReset_v2(current_device()));
}

FG_EXPORT cudaError_t cudaDeviceSetLimit(int limit, size_t value) {
    T("limit=%d", limit);
    INIT();
    return rt(D.cuCtxSetLimit(limit, value));
}

FG_EXPORT cudaError_t cudaDeviceGetLimit(size_t *value, int limit) {
    T("limit=%d", limit);
    INIT();
    return rt(D.cuCtxGetLimit(value, limit));
}

FG_EXPORT cudaError_t cudaDeviceSetCacheConfig(int config) {
    T("config=%d", config);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaDeviceGetCacheConfig(int *config) {
    T("%s", "");
    if (config) *config = 0;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaDeviceSetSharedMemConfig(int config) {
    T("config=%d", config);
    return cudaSuccess;
}

/* struct cudaDeviceProp (driver_types.h). CUDA 11.8's ends at reservedSharedMemPerBlock; CUDA 12
 * appends the rest (and names the call cudaGetDeviceProperties_v2). */
typedef struct {
    char name[256];
    CUuuid uuid;
    char luid[8];
    unsigned int luidDeviceNodeMask;
    size_t totalGlobalMem, sharedMemPerBlock;
    int regsPerBlock, warpSize;
    size_t memPitch;
    int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], clockRate;
    size_t totalConstMem;
    int major, minor;
    size_t textureAlignment, texturePitchAlignment;
    int deviceOverlap, multiProcessorCount, kernelExecTimeoutEnabled, integrated, canMapHostMemory,
        computeMode, maxTexture1D, maxTexture1DMipmap, maxTexture1DLinear, maxTexture2D[2],
        maxTexture2DMipmap[2], maxTexture2DLinear[3], maxTexture2DGather[2], maxTexture3D[3],
        maxTexture3DAlt[3], maxTextureCubemap, maxTexture1DLayered[2], maxTexture2DLayered[3],
        maxTextureCubemapLayered[2], maxSurface1D, maxSurface2D[2], maxSurface3D[3], maxSurface1DLayered[2],
        maxSurface2DLayered[3], maxSurfaceCubemap, maxSurfaceCubemapLayered[2];
    size_t surfaceAlignment;
    int concurrentKernels, ECCEnabled, pciBusID, pciDeviceID, pciDomainID, tccDriver, asyncEngineCount,
        unifiedAddressing, memoryClockRate, memoryBusWidth, l2CacheSize, persistingL2CacheMaxSize,
        maxThreadsPerMultiProcessor, streamPrioritiesSupported, globalL1CacheSupported, localL1CacheSupported;
    size_t sharedMemPerMultiprocessor;
    int regsPerMultiprocessor, managedMemory, isMultiGpuBoard, multiGpuBoardGroupID, hostNativeAtomicSupported,
        singleToDoublePrecisionPerfRatio, pageableMemoryAccess, concurrentManagedAccess,
        computePreemptionSupported, canUseHostPointerForRegisteredMem, cooperativeLaunch,
        cooperativeMultiDeviceLaunch;
    size_t sharedMemPerBlockOptin;
    int pageableMemoryAccessUsesHostPageTables, directManagedMemAccessFromHost, maxBlocksPerMultiProcessor,
        accessPolicyMaxWindowSize;
    size_t reservedSharedMemPerBlock;
#if FG_CUDART_MAJOR >= 12
    int hostRegisterSupported, sparseCudaArraySupported, hostRegisterReadOnlySupported,
        timelineSemaphoreInteropSupported, memoryPoolsSupported, gpuDirectRDMASupported;
    unsigned int gpuDirectRDMAFlushWritesOptions;
    int gpuDirectRDMAWritesOrdering;
    unsigned int memoryPoolSupportedHandleTypes;
    int deferredMappingCudaArraySupported, ipcEventSupported, clusterLaunch, unifiedFunctionPointers;
    int reserved2[2], reserved1[1], reserved[60];
#endif
} fg_device_prop;

static int attr_of(int attr, int device) {
    int v = 0;
    D.cuDeviceGetAttribute(&v, attr, device);
    return v;
}

static cudaError_t device_properties(fg_device_prop *p, int device) {
    if (!p) return ret(cudaErrorInvalidValue);
    INIT();
    int n = 0;
    D.cuDeviceGetCount(&n);
    if (device < 0 || device >= n) return ret(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
#define A(attr) attr_of(attr, device)
    D.cuDeviceGetName(p->name, sizeof p->name, device);
    D.cuDeviceGetUuid(&p->uuid, device);
    D.cuDeviceTotalMem_v2(&p->totalGlobalMem, device);
    p->sharedMemPerBlock = (size_t)A(8);
    p->regsPerBlock = A(12);
    p->warpSize = A(10);
    p->memPitch = (size_t)A(11);
    p->maxThreadsPerBlock = A(1);
    for (int i = 0; i < 3; i++) {
        p->maxThreadsDim[i] = A(2 + i);
        p->maxGridSize[i] = A(5 + i);
    }
    p->clockRate = A(13);
    p->totalConstMem = (size_t)A(9);
    p->major = A(75);
    p->minor = A(76);
    p->textureAlignment = (size_t)A(14);
    p->texturePitchAlignment = (size_t)A(51);
    p->deviceOverlap = A(15);
    p->multiProcessorCount = A(16);
    p->canMapHostMemory = A(19);
    p->maxTexture1D = A(21);
    p->maxTexture2D[0] = A(22);
    p->maxTexture2D[1] = A(23);
    p->maxTexture3D[0] = p->maxTexture3D[1] = p->maxTexture3D[2] = A(24);
    p->surfaceAlignment = (size_t)A(30);
    p->concurrentKernels = A(31);
    p->ECCEnabled = A(32);
    p->pciBusID = A(33);
    p->pciDeviceID = A(34);
    p->pciDomainID = A(50);
    p->asyncEngineCount = A(40);
    p->unifiedAddressing = A(41);
    p->memoryClockRate = A(36);
    p->memoryBusWidth = A(37);
    p->l2CacheSize = A(38);
    p->persistingL2CacheMaxSize = A(108);
    p->maxThreadsPerMultiProcessor = A(39);
    p->streamPrioritiesSupported = A(78);
    p->globalL1CacheSupported = A(79);
    p->localL1CacheSupported = A(80);
    p->sharedMemPerMultiprocessor = (size_t)A(81);
    p->regsPerMultiprocessor = A(82);
    p->managedMemory = A(83);
    p->multiGpuBoardGroupID = A(85);
    p->singleToDoublePrecisionPerfRatio = A(87);
    p->concurrentManagedAccess = A(89);
    p->computePreemptionSupported = A(90);
    p->canUseHostPointerForRegisteredMem = A(91);
    p->cooperativeLaunch = A(95);
    p->cooperativeMultiDeviceLaunch = A(96);
    p->sharedMemPerBlockOptin = (size_t)A(97);
    p->maxBlocksPerMultiProcessor = A(106);
    p->accessPolicyMaxWindowSize = A(109);
    p->reservedSharedMemPerBlock = (size_t)A(111);
#if FG_CUDART_MAJOR >= 12
    p->hostRegisterSupported = A(99);
    p->memoryPoolsSupported = A(115);
    p->memoryPoolSupportedHandleTypes = (unsigned)A(119);
    p->clusterLaunch = A(120);
#endif
#undef A
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaGetDeviceProperties(fg_device_prop *p, int device) {
    T("device=%d", device);
    return device_properties(p, device);
}

#if FG_CUDART_MAJOR >= 12
FG_EXPORT cudaError_t cudaGetDeviceProperties_v2(fg_device_prop *p, int device) {
    T("device=%d", device);
    return device_properties(p, device);
}
#endif

/* ---- memory ---- */

FG_EXPORT cudaError_t cudaMalloc(void **p, size_t size) {
    T("size=%zu", size);
    if (!p) return ret(cudaErrorInvalidValue);
    INIT();
    if (size == 0) {
        *p = NULL;
        return cudaSuccess;
    }
    CUdeviceptr d = 0;
    CUresult r = D.alloc(current_device(), size, "cudaMalloc", &d);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return ret(cudaErrorMemoryAllocation);
    if (r != CUDA_SUCCESS) return rt(r);
    *p = (void *)(uintptr_t)d;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaFree(void *p) {
    T("p=%p", p);
    INIT(); /* cudaFree(0) is the classic way to create the context */
    if (!p) return cudaSuccess;
    return rt(D.free_((CUdeviceptr)(uintptr_t)p, "cudaFree"));
}

FG_EXPORT cudaError_t cudaMallocAsync(void **p, size_t size, cudaStream_t s) {
    T("size=%zu", size);
    if (!p) return ret(cudaErrorInvalidValue);
    INIT();
    CUdeviceptr d = 0;
    CUresult r = D.cuMemAllocAsync(&d, size, (CUstream)s);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return ret(cudaErrorMemoryAllocation);
    *p = (void *)(uintptr_t)d;
    return rt(r);
}

FG_EXPORT cudaError_t cudaFreeAsync(void *p, cudaStream_t s) {
    T("p=%p", p);
    INIT();
    return rt(D.cuMemFreeAsync((CUdeviceptr)(uintptr_t)p, (CUstream)s));
}

FG_EXPORT cudaError_t cudaMallocManaged(void **p, size_t size, unsigned int flags) {
    T("size=%zu", size);
    if (!p) return ret(cudaErrorInvalidValue);
    INIT();
    CUdeviceptr d = 0;
    CUresult r = D.cuMemAllocManaged(&d, size, flags);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) return ret(cudaErrorMemoryAllocation);
    *p = (void *)(uintptr_t)d;
    return rt(r);
}

FG_EXPORT cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
    T("size=%zu", size);
    INIT();
    CUresult r = D.cuMemHostAlloc(p, size, flags);
    return r == CUDA_ERROR_OUT_OF_MEMORY ? ret(cudaErrorMemoryAllocation) : rt(r);
}

FG_EXPORT cudaError_t cudaMallocHost(void **p, size_t size) { return cudaHostAlloc(p, size, 0); }

FG_EXPORT cudaError_t cudaFreeHost(void *p) {
    T("p=%p", p);
    INIT();
    return rt(D.cuMemFreeHost(p));
}

FG_EXPORT cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags) {
    T("p=%p size=%zu", p, size);
    INIT();
    return rt(D.cuMemHostRegister_v2(p, size, flags));
}

FG_EXPORT cudaError_t cudaHostUnregister(void *p) {
    T("p=%p", p);
    INIT();
    return rt(D.cuMemHostUnregister(p));
}

FG_EXPORT cudaError_t cudaHostGetDevicePointer(void **dp, void *p, unsigned int flags) {
    T("p=%p", p);
    INIT();
    CUdeviceptr d = 0;
    CUresult r = D.cuMemHostGetDevicePointer_v2(&d, p, flags);
    if (dp) *dp = (void *)(uintptr_t)d;
    return rt(r);
}

FG_EXPORT cudaError_t cudaMemGetInfo(size_t *free_bytes, size_t *total) {
    T("%s", "");
    INIT();
    return rt(D.cuMemGetInfo_v2(free_bytes, total));
}

/* cudaMemcpyKind is ignored: with unified addressing the pointers say where memory is. */
FG_EXPORT cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, cudaStream_t s) {
    T("n=%zu kind=%d", n, kind);
    INIT();
    return rt(D.cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, (CUdeviceptr)(uintptr_t)src, n, (CUstream)s));
}

FG_EXPORT cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, int kind) {
    return cudaMemcpyAsync(dst, src, n, kind, NULL);
}

FG_EXPORT cudaError_t cudaMemcpy2DAsync(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                        size_t height, int kind, cudaStream_t s) {
    T("width=%zu height=%zu kind=%d", width, height, kind);
    INIT();
    for (size_t row = 0; row < height; row++) {
        CUresult r = D.cuMemcpyAsync((CUdeviceptr)(uintptr_t)((char *)dst + row * dpitch),
                                     (CUdeviceptr)(uintptr_t)((const char *)src + row * spitch), width,
                                     (CUstream)s);
        if (r != CUDA_SUCCESS) return rt(r);
    }
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaMemcpy2D(void *dst, size_t dpitch, const void *src, size_t spitch, size_t width,
                                   size_t height, int kind) {
    return cudaMemcpy2DAsync(dst, dpitch, src, spitch, width, height, kind, NULL);
}

FG_EXPORT cudaError_t cudaMemcpyPeerAsync(void *dst, int dd, const void *src, int sd, size_t n, cudaStream_t s) {
    (void)dd, (void)sd;
    return cudaMemcpyAsync(dst, src, n, 3, s);
}

FG_EXPORT cudaError_t cudaMemcpyPeer(void *dst, int dd, const void *src, int sd, size_t n) {
    return cudaMemcpyPeerAsync(dst, dd, src, sd, n, NULL);
}

FG_EXPORT cudaError_t cudaMemsetAsync(void *p, int value, size_t n, cudaStream_t s) {
    T("n=%zu", n);
    INIT();
    return rt(D.cuMemsetD8Async((CUdeviceptr)(uintptr_t)p, (unsigned char)value, n, (CUstream)s));
}

FG_EXPORT cudaError_t cudaMemset(void *p, int value, size_t n) { return cudaMemsetAsync(p, value, n, NULL); }

/* __device__/__constant__ variables have no device memory here: copies to them do nothing,
 * copies from them give zeros. */
FG_EXPORT cudaError_t cudaMemcpyToSymbolAsync(const void *sym, const void *src, size_t n, size_t off, int kind,
                                              cudaStream_t s) {
    T("n=%zu", n);
    (void)sym, (void)src, (void)off, (void)kind, (void)s;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaMemcpyToSymbol(const void *sym, const void *src, size_t n, size_t off, int kind) {
    return cudaMemcpyToSymbolAsync(sym, src, n, off, kind, NULL);
}

FG_EXPORT cudaError_t cudaMemcpyFromSymbolAsync(void *dst, const void *sym, size_t n, size_t off, int kind,
                                                cudaStream_t s) {
    T("n=%zu", n);
    (void)sym, (void)off, (void)kind, (void)s;
    if (dst) memset(dst, 0, n);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaMemcpyFromSymbol(void *dst, const void *sym, size_t n, size_t off, int kind) {
    return cudaMemcpyFromSymbolAsync(dst, sym, n, off, kind, NULL);
}

/* struct cudaPointerAttributes (CUDA 11+): type, device, devicePointer, hostPointer */
typedef struct {
    int type;
    int device;
    void *devicePointer;
    void *hostPointer;
} fg_pointer_attributes;

FG_EXPORT cudaError_t cudaPointerGetAttributes(fg_pointer_attributes *a, const void *ptr) {
    T("ptr=%p", ptr);
    if (!a) return ret(cudaErrorInvalidValue);
    INIT();
    CUdeviceptr p = (CUdeviceptr)(uintptr_t)ptr;
    unsigned int type = 0;
    int is_managed = 0;
    memset(a, 0, sizeof *a);
    a->device = -2;
    if (D.cuPointerGetAttribute(&type, 2 /* CU_POINTER_ATTRIBUTE_MEMORY_TYPE */, p) != CUDA_SUCCESS) {
        a->type = 0; /* cudaMemoryTypeUnregistered: not an error since CUDA 11 */
        a->hostPointer = (void *)ptr;
        return cudaSuccess;
    }
    D.cuPointerGetAttribute(&is_managed, 8, p); /* IS_MANAGED */
    D.cuPointerGetAttribute(&a->device, 9, p);  /* DEVICE_ORDINAL */
    if (type == CU_MEMORYTYPE_HOST) {
        a->type = 1; /* cudaMemoryTypeHost */
        a->devicePointer = a->hostPointer = (void *)ptr;
    } else if (is_managed || type == CU_MEMORYTYPE_UNIFIED) {
        a->type = 3; /* cudaMemoryTypeManaged */
        a->devicePointer = a->hostPointer = (void *)ptr;
    } else {
        a->type = 2; /* cudaMemoryTypeDevice */
        a->devicePointer = (void *)ptr;
    }
    return cudaSuccess;
}

/* ---- streams and events ---- */

FG_EXPORT cudaError_t cudaStreamCreateWithPriority(cudaStream_t *s, unsigned int flags, int priority) {
    T("flags=%u priority=%d", flags, priority);
    INIT();
    return rt(D.cuStreamCreateWithPriority((CUstream *)s, flags, priority));
}

FG_EXPORT cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
    return cudaStreamCreateWithPriority(s, flags, 0);
}

FG_EXPORT cudaError_t cudaStreamCreate(cudaStream_t *s) { return cudaStreamCreateWithPriority(s, 0, 0); }

FG_EXPORT cudaError_t cudaStreamDestroy(cudaStream_t s) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamDestroy_v2((CUstream)s));
}

FG_EXPORT cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamSynchronize((CUstream)s));
}

FG_EXPORT cudaError_t cudaStreamQuery(cudaStream_t s) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamQuery((CUstream)s));
}

FG_EXPORT cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned int flags) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamWaitEvent((CUstream)s, (CUevent)e, flags));
}

FG_EXPORT cudaError_t cudaStreamGetPriority(cudaStream_t s, int *priority) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamGetPriority((CUstream)s, priority));
}

FG_EXPORT cudaError_t cudaStreamGetFlags(cudaStream_t s, unsigned int *flags) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuStreamGetFlags((CUstream)s, flags));
}

typedef void (*cudaStreamCallback_t)(cudaStream_t, cudaError_t, void *);

FG_EXPORT cudaError_t cudaStreamAddCallback(cudaStream_t s, cudaStreamCallback_t cb, void *user,
                                            unsigned int flags) {
    T("s=%p", (void *)s);
    INIT();
    /* CUstreamCallback has the same shape (CUresult and cudaError_t are both int). */
    return rt(D.cuStreamAddCallback((CUstream)s, (void (*)(CUstream, CUresult, void *))cb, user, flags));
}

FG_EXPORT cudaError_t cudaLaunchHostFunc(cudaStream_t s, void (*fn)(void *), void *user) {
    T("s=%p", (void *)s);
    INIT();
    return rt(D.cuLaunchHostFunc((CUstream)s, fn, user));
}

FG_EXPORT cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    T("flags=%u", flags);
    INIT();
    return rt(D.cuEventCreate((CUevent *)e, flags));
}

FG_EXPORT cudaError_t cudaEventCreate(cudaEvent_t *e) { return cudaEventCreateWithFlags(e, 0); }

FG_EXPORT cudaError_t cudaEventDestroy(cudaEvent_t e) {
    T("e=%p", (void *)e);
    INIT();
    return rt(D.cuEventDestroy_v2((CUevent)e));
}

FG_EXPORT cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    T("e=%p", (void *)e);
    INIT();
    return rt(D.cuEventRecord((CUevent)e, (CUstream)s));
}

FG_EXPORT cudaError_t cudaEventRecordWithFlags(cudaEvent_t e, cudaStream_t s, unsigned int flags) {
    (void)flags;
    return cudaEventRecord(e, s);
}

FG_EXPORT cudaError_t cudaEventQuery(cudaEvent_t e) {
    T("e=%p", (void *)e);
    INIT();
    return rt(D.cuEventQuery((CUevent)e));
}

FG_EXPORT cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    T("e=%p", (void *)e);
    INIT();
    return rt(D.cuEventSynchronize((CUevent)e));
}

FG_EXPORT cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b) {
    T("%s", "");
    INIT();
    return rt(D.cuEventElapsedTime(ms, (CUevent)a, (CUevent)b));
}

/* ---- kernels: registration and launches (nothing runs) ---- */

static int g_fatbin_handles; /* the handle only has to be a unique non-null pointer */

FG_EXPORT void **__cudaRegisterFatBinary(void *fatCubin) {
    (void)fatCubin;
    return (void **)&g_fatbin_handles;
}

FG_EXPORT void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }

FG_EXPORT void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

FG_EXPORT void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                                      int threadLimit, void *tid, void *bid, void *bDim, void *gDim, int *wSize) {
    (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)threadLimit;
    (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

FG_EXPORT void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName,
                                 int ext, size_t size, int constant, int global) {
    (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)ext, (void)size, (void)constant;
    (void)global;
}

FG_EXPORT void __cudaRegisterManagedVar(void **handle, void **hostVarPtrAddress, char *deviceAddress,
                                        const char *deviceName, int ext, size_t size, int constant, int global) {
    (void)handle, (void)hostVarPtrAddress, (void)deviceAddress, (void)deviceName, (void)ext, (void)size;
    (void)constant, (void)global;
}

FG_EXPORT void __cudaRegisterTexture(void **handle, const void *hostVar, const void **deviceAddress,
                                     const char *deviceName, int dim, int norm, int ext) {
    (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)dim, (void)norm, (void)ext;
}

FG_EXPORT void __cudaRegisterSurface(void **handle, const void *hostVar, const void **deviceAddress,
                                     const char *deviceName, int dim, int ext) {
    (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)dim, (void)ext;
}

FG_EXPORT char __cudaInitModule(void **handle) {
    (void)handle;
    return 1;
}

FG_EXPORT unsigned __cudaPushCallConfiguration(dim3 grid, dim3 block, size_t shmem, void *stream) {
    t_launch.grid = grid;
    t_launch.block = block;
    t_launch.shmem = shmem;
    t_launch.stream = stream;
    return 0;
}

FG_EXPORT cudaError_t __cudaPopCallConfiguration(dim3 *grid, dim3 *block, size_t *shmem, void *stream) {
    if (grid) *grid = t_launch.grid;
    if (block) *block = t_launch.block;
    if (shmem) *shmem = t_launch.shmem;
    if (stream) *(void **)stream = t_launch.stream;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaLaunchKernel(const void *func, dim3 grid, dim3 block, void **args, size_t shmem,
                                       cudaStream_t s) {
    T("func=%p grid=%ux%ux%u block=%ux%ux%u", func, grid.x, grid.y, grid.z, block.x, block.y, block.z);
    (void)args, (void)shmem, (void)s;
    return cudaSuccess; /* nothing is computed */
}

FG_EXPORT cudaError_t cudaLaunchCooperativeKernel(const void *func, dim3 grid, dim3 block, void **args,
                                                  size_t shmem, cudaStream_t s) {
    return cudaLaunchKernel(func, grid, block, args, shmem, s);
}

FG_EXPORT cudaError_t cudaLaunchKernelExC(const void *config, const void *func, void **args) {
    T("func=%p", func);
    (void)config, (void)args;
    return cudaSuccess;
}

/* struct cudaFuncAttributes (CUDA 12 layout; CUDA 11's is a prefix of it, minus reserved) */
typedef struct {
    size_t sharedSizeBytes, constSizeBytes, localSizeBytes;
    int maxThreadsPerBlock, numRegs, ptxVersion, binaryVersion, cacheModeCA, maxDynamicSharedSizeBytes,
        preferredShmemCarveout;
#if FG_CUDART_MAJOR >= 12
    int clusterDimMustBeSet, requiredClusterWidth, requiredClusterHeight, requiredClusterDepth,
        clusterSchedulingPolicyPreference, nonPortableClusterSizeAllowed, reserved[16];
#endif
} fg_func_attributes;

FG_EXPORT cudaError_t cudaFuncGetAttributes(fg_func_attributes *a, const void *func) {
    T("func=%p", func);
    if (!a) return ret(cudaErrorInvalidValue);
    memset(a, 0, sizeof *a);
    a->maxThreadsPerBlock = 1024;
    a->numRegs = 32;
    a->ptxVersion = 80;
    a->binaryVersion = 80;
    a->maxDynamicSharedSizeBytes = 48 * 1024;
    a->preferredShmemCarveout = -1;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaFuncSetAttribute(const void *func, int attr, int value) {
    T("func=%p attr=%d value=%d", func, attr, value);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaFuncSetCacheConfig(const void *func, int config) {
    T("func=%p config=%d", func, config);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaFuncSetSharedMemConfig(const void *func, int config) {
    T("func=%p config=%d", func, config);
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *n, const void *func,
                                                                             int blockSize, size_t smem,
                                                                             unsigned int flags) {
    T("func=%p block=%d", func, blockSize);
    (void)smem, (void)flags;
    if (!n || blockSize <= 0) return ret(cudaErrorInvalidValue);
    int b = 2048 / blockSize;
    *n = b < 1 ? 1 : b > 32 ? 32 : b;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessor(int *n, const void *func, int blockSize,
                                                                    size_t smem) {
    return cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(n, func, blockSize, smem, 0);
}

FG_EXPORT cudaError_t cudaOccupancyAvailableDynamicSMemPerBlock(size_t *smem, const void *func, int numBlocks,
                                                                int blockSize) {
    T("func=%p", func);
    (void)numBlocks, (void)blockSize;
    if (!smem) return ret(cudaErrorInvalidValue);
    *smem = 166912;
    return cudaSuccess;
}

/* A CUfunction handle for a kernel known by its host stub (XLA loads in-process kernels so). */
FG_EXPORT cudaError_t cudaGetFuncBySymbol(CUfunction *f, const void *symbol) {
    T("symbol=%p", symbol);
    if (!f) return ret(cudaErrorInvalidValue);
    INIT();
    static CUmodule m;
    static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&mu);
    CUresult r = m ? CUDA_SUCCESS : D.cuModuleLoadData(&m, "");
    pthread_mutex_unlock(&mu);
    if (r != CUDA_SUCCESS) return rt(r);
    char name[64];
    snprintf(name, sizeof name, "kernel_%p", symbol);
    return rt(D.cuModuleGetFunction(f, m, name));
}

/* cudaGetDriverEntryPoint: the runtime's way to cuGetProcAddress. CUDA 12 added the status
 * argument; a CUDA 11 caller passes three. */
#if FG_CUDART_MAJOR >= 12
FG_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags,
                                              int *status) {
#else
FG_EXPORT cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **fn, unsigned long long flags) {
    int *status = NULL;
#endif
    T("symbol=%s", symbol ? symbol : "(null)");
    INIT();
    CUresult r = D.cuGetProcAddress_v2(symbol, fn, runtime_version(), flags, status);
    return r == CUDA_ERROR_NOT_FOUND ? ret(cudaSuccess) : rt(r); /* not found: *fn == NULL, status says so */
}

#if FG_CUDART_MAJOR >= 12
FG_EXPORT cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                                       unsigned long long flags, int *status) {
    T("symbol=%s", symbol ? symbol : "(null)");
    INIT();
    CUresult r = D.cuGetProcAddress_v2(symbol, fn, (int)version, flags, status);
    return r == CUDA_ERROR_NOT_FOUND ? ret(cudaSuccess) : rt(r);
}
#endif

FG_EXPORT cudaError_t cudaProfilerStart(void) { return cudaSuccess; }

FG_EXPORT cudaError_t cudaProfilerStop(void) { return cudaSuccess; }

FG_EXPORT cudaError_t cudaThreadExchangeStreamCaptureMode(int *mode) {
    (void)mode;
    return cudaSuccess;
}

FG_EXPORT cudaError_t cudaStreamIsCapturing(cudaStream_t s, int *status) {
    (void)s;
    if (!status) return ret(cudaErrorInvalidValue);
    *status = 0;
    return cudaSuccess;
}
