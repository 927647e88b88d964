/*
 * fakegpu.h - shared declarations of the fake NVIDIA driver used by tfgpu's tests.
 *
 * THIS IS NOT A GPU DRIVER. Nothing is ever computed: kernel launches, module loads,
 * host-to-device and device-to-device copies and memsets succeed doing nothing, and
 * device-to-host copies write zeros. Numerical results are meaningless. What is real:
 * the devices it reports (names, sizes, UUIDs, compute capability, attributes) and the
 * accounting of device memory (cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY past the
 * card's total, cuMemGetInfo and NVML report what is in use), so that a real TensorFlow
 * registers a GPU, sizes its allocator and takes its memory decisions, which tests then
 * assert at the driver boundary.
 *
 * Three libraries are built from these sources (fakegpu/__init__.py: build()):
 *   libcuda.so.1        fakecuda.c + fakegpu_core.c   CUDA driver API; holds ALL state
 *   libcudart.so.12     fakecudart.c                  minimal CUDA runtime API on top of it
 *   libcudart.so.11.0   fakecudart.c (-DFG_CUDART_MAJOR=11)
 *   libnvidia-ml.so.1   fakenvml.c                    NVML on top of it
 * The configuration, the ledger and the memory accounting live once, in libcuda.so.1
 * (fakegpu_core.c). libcudart and libnvidia-ml dlopen the libcuda.so.1 that sits next to
 * them (by path, found with dladdr) and call the fakegpu_* functions below. One copy of the
 * state per process, as with the real driver: cudaMalloc, cuMemAlloc and NVML's "used"
 * count the same bytes even without a ledger, and the three can never disagree about the
 * configuration.
 *
 * Configuration (environment; read once per process, at the first cuInit / nvmlInit):
 *   FAKEGPU_COUNT       number of cards (0-16). Default: the length of the longest list
 *                       below, or 1.
 *   FAKEGPU_MEMORY_MIB  memory per card in MiB: one value for all cards or a comma list,
 *                       one per card (default 16384).
 *   FAKEGPU_NAME        card name, one or a comma list (default "Fake A100-SXM4-16GB").
 *   FAKEGPU_CC          compute capability "major.minor", one or a list (default 8.0).
 *   FAKEGPU_UUID        "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", a list with one per card
 *                       (default derived from the index: GPU-fa6e0000-0000-4000-8000-0000000000NN).
 *   FAKEGPU_DRIVER      driver version string (default 560.35.03).
 *   FAKEGPU_CUDA        CUDA version the driver supports, "12.6" (default derived from the
 *                       driver branch: 525->12.0 ... 560->12.6, 570->12.8, 575->12.9,
 *                       580->13.0). cuDriverGetVersion and nvmlSystemGetCudaDriverVersion
 *                       both return it as 1000*major + 10*minor.
 *   FAKEGPU_LOG         file: one JSON object per line per device allocation, free and
 *                       refused allocation (O_APPEND: processes and containers may share it).
 *   FAKEGPU_LEDGER      directory shared by processes (and containers, through a bind mount):
 *                       each process keeps its live bytes per card (keyed by UUID) in its own
 *                       file there, so the out-of-memory check, cuMemGetInfo and NVML count
 *                       the whole card. Without it, a process sees only its own memory.
 *   FAKEGPU_TRACE       1: log every driver/runtime/NVML call to stderr.
 *   FAKEGPU_CUDART_VERSION  what the fake cudart's cudaRuntimeGetVersion returns
 *                       (default 12050; 11080 for libcudart.so.11.0).
 *   CUDA_VISIBLE_DEVICES is honoured by the driver API (indices or UUID prefixes; parsing stops
 *                       at the first invalid entry, as the real driver does); NVML ignores it.
 * An invalid value prints one line on stderr naming the variable and the value; cuInit then
 * fails with CUDA_ERROR_INVALID_VALUE and nvmlInit with NVML_ERROR_INVALID_ARGUMENT.
 *
 * Types and enum values below are the few this fake needs, declared here (no CUDA headers
 * needed), with values from the CUDA Driver API reference (docs.nvidia.com/cuda/cuda-driver-api,
 * "Data types used by CUDA driver": CUresult, CUdevice_attribute, CUpointer_attribute,
 * CUfunction_attribute, CUmemPool_attribute) and the NVML API reference
 * (docs.nvidia.com/deploy/nvml-api: nvmlReturn_t, nvmlMemory_t, nvmlPciInfo_t).
 */
#ifndef FAKEGPU_H
#define FAKEGPU_H

#include <stddef.h>
#include <stdint.h>

/* Bind the few glibc symbols that moved into libc in glibc 2.34 to their original versions, so
 * that libraries compiled on a new host also load in older images (Ubuntu 20.04, glibc 2.31:
 * the TensorFlow 2.12/2.13 bases). build() links with --no-as-needed -ldl -lpthread, so that
 * libdl.so.2 and libpthread.so.0 (stubs since glibc 2.34) are there to provide them. */
#if defined(__GLIBC__) && defined(__x86_64__)
#define FG_GLIBC_BASE "GLIBC_2.2.5"
#elif defined(__GLIBC__) && defined(__aarch64__)
#define FG_GLIBC_BASE "GLIBC_2.17"
#endif
#ifdef FG_GLIBC_BASE
__asm__(".symver dlopen,dlopen@" FG_GLIBC_BASE);
__asm__(".symver dlsym,dlsym@" FG_GLIBC_BASE);
__asm__(".symver dladdr,dladdr@" FG_GLIBC_BASE);
__asm__(".symver pthread_create,pthread_create@" FG_GLIBC_BASE);
__asm__(".symver pthread_once,pthread_once@" FG_GLIBC_BASE);
#endif

#define FG_EXPORT __attribute__((visibility("default")))
#define FG_HIDDEN __attribute__((visibility("hidden")))

/* ---- CUDA driver API types (cuda.h) ---- */
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct fg_ctx *CUcontext;
typedef struct fg_stream *CUstream;
typedef struct fg_event *CUevent;
typedef struct fg_module *CUmodule;
typedef struct fg_function *CUfunction;
typedef struct fg_pool *CUmemoryPool;
typedef struct {
    char bytes[16];
} CUuuid;

enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_SOURCE = 300,
    CUDA_ERROR_FILE_NOT_FOUND = 301,
    CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND = 302,
    CUDA_ERROR_OPERATING_SYSTEM = 304,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED = 704,
    CUDA_ERROR_PEER_ACCESS_NOT_ENABLED = 705,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999
};

/* CUmemorytype */
enum { CU_MEMORYTYPE_HOST = 1, CU_MEMORYTYPE_DEVICE = 2, CU_MEMORYTYPE_ARRAY = 3, CU_MEMORYTYPE_UNIFIED = 4 };

/* ---- the fake's own model ---- */
#define FG_MAX_CARDS 16
#define FG_NAME_LEN 96
#define FG_UUID_LEN 41 /* "GPU-" + 36 + NUL */
#define FG_PATH_LEN 4096

typedef struct {
    char name[FG_NAME_LEN];
    uint64_t total_bytes;
    int cc_major, cc_minor;
    char uuid[FG_UUID_LEN];
    unsigned char uuid_bytes[16];
    int pci_bus; /* PCI bus number; domain 0, device 0, function 0 */
} fg_card;

typedef struct {
    int count;                   /* physical cards (NVML's view) */
    fg_card cards[FG_MAX_CARDS];
    char driver_version[32];     /* "560.35.03" */
    int cuda_version;            /* 12060 */
    char log_path[FG_PATH_LEN];  /* "" = no log */
    char ledger_dir[FG_PATH_LEN];/* "" = no ledger */
    int trace;
    int visible_count;           /* CUDA's view after CUDA_VISIBLE_DEVICES */
    int visible[FG_MAX_CARDS];   /* CUDA ordinal -> physical index */
} fg_config;

typedef struct {
    long pid;
    char token[24];
    uint64_t bytes;
} fg_proc_usage;

/* ---- interface of the core (exported by libcuda.so.1, used by libcudart and libnvidia-ml) ---- */
/* The parsed configuration, or NULL when it is invalid (the message went to stderr once). */
FG_EXPORT const fg_config *fakegpu_config(void);
FG_EXPORT const char *fakegpu_config_error(void);
FG_EXPORT int fakegpu_trace_enabled(void);
FG_EXPORT void fakegpu_trace(const char *lib, const char *fn, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Bytes in use on physical card `phys`: every process in the ledger, or this process alone. */
FG_EXPORT uint64_t fakegpu_card_used(int phys);
/* Processes with memory on card `phys` (at most `max`); returns how many there are. */
FG_EXPORT int fakegpu_card_processes(int phys, fg_proc_usage *out, int max);
/* Device memory for the runtime: allocated in the primary context of CUDA ordinal `ordinal`,
 * logged with `api` as the caller. */
FG_EXPORT CUresult fakegpu_alloc(int ordinal, size_t bytes, const char *api, CUdeviceptr *out);
FG_EXPORT CUresult fakegpu_free(CUdeviceptr ptr, const char *api);
/* Which CUDA ordinal a device pointer belongs to (-1: not device memory of this fake). */
FG_EXPORT int fakegpu_pointer_device(CUdeviceptr ptr);

/* ---- internal to libcuda.so.1 (fakegpu_core.c <-> fakecuda.c) ---- */
typedef enum { FG_KIND_DEVICE = 0, FG_KIND_MANAGED = 1, FG_KIND_POOL = 2 } fg_kind;

FG_HIDDEN CUresult fg_core_init(void);
FG_HIDDEN int fg_core_ready(void);
FG_HIDDEN CUresult fg_mem_alloc(int ordinal, void *owner, size_t bytes, fg_kind kind,
                                const char *api, CUdeviceptr *out);
FG_HIDDEN CUresult fg_mem_free(CUdeviceptr ptr, const char *api);
FG_HIDDEN void fg_mem_free_owner(void *owner, const char *api);
FG_HIDDEN int fg_mem_lookup(CUdeviceptr ptr, int *ordinal, CUdeviceptr *base, size_t *size,
                            void **owner, fg_kind *kind);
FG_HIDDEN int fg_mem_in_device_range(CUdeviceptr ptr);
FG_HIDDEN void fg_mem_info(int ordinal, uint64_t *free_bytes, uint64_t *total);
FG_HIDDEN uint64_t fg_mem_process_live(int ordinal);
FG_HIDDEN void fg_host_add(void *p, size_t size, int kind);
FG_HIDDEN int fg_host_remove(void *p, size_t *size, int *kind);
FG_HIDDEN int fg_host_lookup(const void *p, void **base, size_t *size, int *kind);

#define FG_HOST_PINNED 1
#define FG_HOST_REGISTERED 2
#define FG_HOST_MANAGED 3

#endif /* FAKEGPU_H */
