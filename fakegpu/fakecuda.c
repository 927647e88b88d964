/*
 * fakecuda.c - libcuda.so.1, the CUDA driver API of the fake NVIDIA driver.
 *
 * NO COMPUTE. Kernel launches, module loads, host-to-device and device-to-device copies and
 * memsets succeed doing nothing; device-to-host copies write zeros into the host buffer.
 * Host callbacks (cuLaunchHostFunc, cuStreamAddCallback) do run, in order, on a worker
 * thread, because TensorFlow waits for them. Streams and events are plain handles; an event
 * is complete once the host callbacks queued before it have run. Contexts are tracked per
 * thread as the real driver does. Device memory is accounted for real (fakegpu_core.c).
 *
 * What is implemented is what TensorFlow 2.17 and 2.21 (XLA's stream executor and the CUDA
 * runtime fake next to this file) were seen to call, plus the neighbours of those calls.
 * Function signatures and enum values follow the CUDA Driver API reference
 * (docs.nvidia.com/cuda/cuda-driver-api). A name TensorFlow resolves that is missing here
 * makes it log CUDA_ERROR_SHARED_OBJECT_INIT_FAILED / "symbol not found" for that call:
 * run with FAKEGPU_TRACE=1 and LD_DEBUG=symbols to find it.
 */
#define _GNU_SOURCE
#include "fakegpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define T(...) fakegpu_trace("libcuda", __func__, __VA_ARGS__)
#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (!g_inited) return CUDA_ERROR_NOT_INITIALIZED;                                          \
    } while (0)

typedef unsigned long long cuuint64_t;
typedef unsigned int cuuint32_t;

#define MAGIC_CTX 0x43545831u
#define MAGIC_STREAM 0x53544d31u
#define MAGIC_EVENT 0x45564e31u
#define MAGIC_MODULE 0x4d4f4431u
#define MAGIC_FUNC 0x46554e31u
#define MAGIC_POOL 0x504f4f31u

struct fg_ctx {
    unsigned magic;
    int ordinal;
    int primary;
    int refcount;
    unsigned flags;
    unsigned long long id;
    size_t limits[16];
};

struct fg_stream {
    unsigned magic;
    CUcontext ctx;
    unsigned flags;
    int priority;
    unsigned long long id;
    unsigned long long enq, done; /* host callbacks queued / run (guarded by g_cb_mu) */
};

struct fg_event {
    unsigned magic;
    unsigned flags;
    struct fg_stream *stream;
    unsigned long long target;
    struct timespec when;
};

struct fg_module {
    unsigned magic;
};

struct fg_function {
    unsigned magic;
    char name[128];
};

struct fg_pool {
    unsigned magic;
    int ordinal;
    cuuint64_t threshold, used, used_high;
};

static int g_inited;
static const fg_config *C;
static struct fg_ctx g_primary[FG_MAX_CARDS];
static struct fg_pool g_default_pool[FG_MAX_CARDS];
static struct fg_pool *g_current_pool[FG_MAX_CARDS];
static struct fg_stream g_null_stream = {MAGIC_STREAM, NULL, 0, 0, 0, 0, 0};
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long long g_next_id = 1;

static __thread CUcontext t_stack[64];
static __thread int t_depth;

static unsigned long long next_id(void) { return __atomic_fetch_add(&g_next_id, 1, __ATOMIC_RELAXED); }

static CUcontext current_ctx(void) { return t_depth ? t_stack[t_depth - 1] : NULL; }

static int valid_ctx(CUcontext c) { return c && c->magic == MAGIC_CTX; }

static int valid_dev(CUdevice d) { return C && d >= 0 && d < C->visible_count; }

static const fg_card *card(CUdevice d) { return &C->cards[C->visible[d]]; }

static struct fg_stream *stream_of(CUstream h) {
    if (h == NULL || h == (CUstream)1 || h == (CUstream)2) return &g_null_stream;
    return h->magic == MAGIC_STREAM ? h : NULL;
}

/* ------------------------------------------------------------------ host callbacks */

typedef void (*CUhostFn)(void *userData);
typedef void (*CUstreamCallback)(CUstream hStream, CUresult status, void *userData);

typedef struct cb_item {
    struct cb_item *next;
    CUhostFn host_fn;
    CUstreamCallback stream_fn;
    CUstream handle;
    void *user;
    struct fg_stream *s;
} cb_item;

static pthread_mutex_t g_cb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cb_work = PTHREAD_COND_INITIALIZER;
static pthread_cond_t g_cb_progress = PTHREAD_COND_INITIALIZER;
static cb_item *g_cb_head, *g_cb_tail;
static unsigned long long g_cb_enq, g_cb_done;
static int g_cb_started;
static pthread_t g_cb_thread;

static void *cb_worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_cb_mu);
    for (;;) {
        while (!g_cb_head) pthread_cond_wait(&g_cb_work, &g_cb_mu);
        cb_item *it = g_cb_head;
        g_cb_head = it->next;
        if (!g_cb_head) g_cb_tail = NULL;
        pthread_mutex_unlock(&g_cb_mu);
        if (it->host_fn) it->host_fn(it->user);
        if (it->stream_fn) it->stream_fn(it->handle, CUDA_SUCCESS, it->user);
        pthread_mutex_lock(&g_cb_mu);
        it->s->done++;
        g_cb_done++;
        pthread_cond_broadcast(&g_cb_progress);
        free(it);
    }
    return NULL;
}

static CUresult enqueue_cb(CUstream h, CUhostFn hf, CUstreamCallback sf, void *user) {
    struct fg_stream *s = stream_of(h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    cb_item *it = calloc(1, sizeof *it);
    if (!it) return CUDA_ERROR_OUT_OF_MEMORY;
    it->host_fn = hf;
    it->stream_fn = sf;
    it->handle = h;
    it->user = user;
    it->s = s;
    pthread_mutex_lock(&g_cb_mu);
    if (!g_cb_started) {
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&g_cb_thread, &a, cb_worker, NULL) != 0) {
            pthread_attr_destroy(&a);
            pthread_mutex_unlock(&g_cb_mu);
            free(it);
            return CUDA_ERROR_OPERATING_SYSTEM;
        }
        pthread_attr_destroy(&a);
        g_cb_started = 1;
    }
    s->enq++;
    g_cb_enq++;
    if (g_cb_tail)
        g_cb_tail->next = it;
    else
        g_cb_head = it;
    g_cb_tail = it;
    pthread_cond_signal(&g_cb_work);
    pthread_mutex_unlock(&g_cb_mu);
    return CUDA_SUCCESS;
}

static int on_cb_thread(void) { return g_cb_started && pthread_equal(pthread_self(), g_cb_thread); }

static void wait_stream(struct fg_stream *s) {
    if (on_cb_thread()) return;
    pthread_mutex_lock(&g_cb_mu);
    while (s->done < s->enq) pthread_cond_wait(&g_cb_progress, &g_cb_mu);
    pthread_mutex_unlock(&g_cb_mu);
}

static void wait_all(void) {
    if (on_cb_thread()) return;
    pthread_mutex_lock(&g_cb_mu);
    unsigned long long target = g_cb_enq;
    while (g_cb_done < target) pthread_cond_wait(&g_cb_progress, &g_cb_mu);
    pthread_mutex_unlock(&g_cb_mu);
}

/* ------------------------------------------------------------------ initialization, versions */

FG_EXPORT CUresult cuInit(unsigned int flags) {
    T("flags=%u", flags);
    CUresult rc = fg_core_init();
    if (rc != CUDA_SUCCESS) return rc;
    pthread_mutex_lock(&g_mu);
    if (!g_inited) {
        C = fakegpu_config();
        for (int i = 0; i < C->visible_count; i++) {
            g_primary[i] = (struct fg_ctx){MAGIC_CTX, i, 1, 0, 0, next_id(), {0}};
            g_primary[i].limits[0] = 1024;          /* CU_LIMIT_STACK_SIZE */
            g_primary[i].limits[1] = 1048576;       /* CU_LIMIT_PRINTF_FIFO_SIZE */
            g_primary[i].limits[2] = 8388608;       /* CU_LIMIT_MALLOC_HEAP_SIZE */
            g_primary[i].limits[3] = 2;             /* CU_LIMIT_DEV_RUNTIME_SYNC_DEPTH */
            g_primary[i].limits[4] = 2048;          /* CU_LIMIT_DEV_RUNTIME_PENDING_LAUNCH_COUNT */
            g_primary[i].limits[5] = 128;           /* CU_LIMIT_MAX_L2_FETCH_GRANULARITY */
            g_default_pool[i] = (struct fg_pool){MAGIC_POOL, i, 0, 0, 0};
            g_current_pool[i] = &g_default_pool[i];
        }
        g_inited = 1;
    }
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDriverGetVersion(int *version) {
    T("%s", "");
    const fg_config *c = fakegpu_config();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    /* Valid before cuInit, as with the real driver; with a bad configuration it still answers
     * (the newest the default driver supports) so that callers can report the real problem. */
    *version = c ? c->cuda_version : 12060;
    return CUDA_SUCCESS;
}

/* Error names and strings: CUDA Driver API reference, "CUresult". */
static const struct {
    int code;
    const char *name, *text;
} k_errors[] = {
    {0, "CUDA_SUCCESS", "no error"},
    {1, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {2, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {3, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {4, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {34, "CUDA_ERROR_STUB_LIBRARY", "CUDA driver is a stub library"},
    {100, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {101, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {200, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {201, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {209, "CUDA_ERROR_NO_BINARY_FOR_GPU", "no kernel image is available for execution on the device"},
    {300, "CUDA_ERROR_INVALID_SOURCE", "device kernel image is invalid"},
    {301, "CUDA_ERROR_FILE_NOT_FOUND", "file not found"},
    {302, "CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND", "shared object symbol not found"},
    {303, "CUDA_ERROR_SHARED_OBJECT_INIT_FAILED", "shared object initialization failed"},
    {304, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
    {400, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {500, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {600, "CUDA_ERROR_NOT_READY", "device not ready"},
    {700, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {704, "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED", "peer access is already enabled"},
    {705, "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED", "peer access has not been enabled"},
    {709, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {712, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED", "part or all of the requested memory range is already mapped"},
    {713, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED", "pointer does not correspond to a registered memory region"},
    {800, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {801, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {999, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

FG_EXPORT CUresult cuGetErrorName(CUresult error, const char **str) {
    T("error=%d", error);
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == error) {
            *str = k_errors[i].name;
            return CUDA_SUCCESS;
        }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

FG_EXPORT CUresult cuGetErrorString(CUresult error, const char **str) {
    T("error=%d", error);
    if (!str) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < sizeof k_errors / sizeof k_errors[0]; i++)
        if (k_errors[i].code == error) {
            *str = k_errors[i].text;
            return CUDA_SUCCESS;
        }
    *str = NULL;
    return CUDA_ERROR_INVALID_VALUE;
}

/* The real driver hands its private tables to the real CUDA runtime (and to cuBLAS/cuDNN,
 * which embed one). This fake has none: those libraries cannot run on it. */
FG_EXPORT CUresult cuGetExportTable(const void **table, const void *id) {
    T("%s", "");
    (void)id;
    if (table) *table = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}

/* ------------------------------------------------------------------ devices */

FG_EXPORT CUresult cuDeviceGetCount(int *count) {
    T("%s", "");
    NEED_INIT();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = C->visible_count;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    T("ordinal=%d", ordinal);
    NEED_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "%s", card(dev)->name);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    memcpy(uuid->bytes, card(dev)->uuid_bytes, 16);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) { return cuDeviceGetUuid(uuid, dev); }

FG_EXPORT CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)card(dev)->total_bytes;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *major = card(dev)->cc_major;
    *minor = card(dev)->cc_minor;
    return CUDA_SUCCESS;
}

/* Attribute values of an A100-SXM4 (CUDA Driver API "CUdevice_attribute"; figures from
 * NVIDIA's A100 datasheet / deviceQuery), except the compute capability, from the config. */
static int attribute(int attr, CUdevice dev, int *ok) {
    const fg_card *c = card(dev);
    *ok = 1;
    switch (attr) {
    case 1: return 1024;                 /* MAX_THREADS_PER_BLOCK */
    case 2: return 1024;                 /* MAX_BLOCK_DIM_X */
    case 3: return 1024;                 /* MAX_BLOCK_DIM_Y */
    case 4: return 64;                   /* MAX_BLOCK_DIM_Z */
    case 5: return 2147483647;           /* MAX_GRID_DIM_X */
    case 6: return 65535;                /* MAX_GRID_DIM_Y */
    case 7: return 65535;                /* MAX_GRID_DIM_Z */
    case 8: return 49152;                /* MAX_SHARED_MEMORY_PER_BLOCK */
    case 9: return 65536;                /* TOTAL_CONSTANT_MEMORY */
    case 10: return 32;                  /* WARP_SIZE */
    case 11: return 2147483647;          /* MAX_PITCH */
    case 12: return 65536;               /* MAX_REGISTERS_PER_BLOCK */
    case 13: return 1410000;             /* CLOCK_RATE (kHz) */
    case 14: return 512;                 /* TEXTURE_ALIGNMENT */
    case 15: return 1;                   /* GPU_OVERLAP */
    case 16: return 108;                 /* MULTIPROCESSOR_COUNT */
    case 17: return 0;                   /* KERNEL_EXEC_TIMEOUT */
    case 18: return 0;                   /* INTEGRATED */
    case 19: return 1;                   /* CAN_MAP_HOST_MEMORY */
    case 20: return 0;                   /* COMPUTE_MODE: default */
    case 21: return 131072;              /* MAXIMUM_TEXTURE1D_WIDTH */
    case 22: return 131072;              /* MAXIMUM_TEXTURE2D_WIDTH */
    case 23: return 65536;               /* MAXIMUM_TEXTURE2D_HEIGHT */
    case 24: case 25: case 26: return 16384; /* MAXIMUM_TEXTURE3D_* */
    case 27: case 28: return 32768;      /* MAXIMUM_TEXTURE2D_LAYERED_WIDTH/HEIGHT */
    case 29: return 2048;                /* MAXIMUM_TEXTURE2D_LAYERED_LAYERS */
    case 30: return 512;                 /* SURFACE_ALIGNMENT */
    case 31: return 1;                   /* CONCURRENT_KERNELS */
    case 32: return 1;                   /* ECC_ENABLED */
    case 33: return c->pci_bus;          /* PCI_BUS_ID */
    case 34: return 0;                   /* PCI_DEVICE_ID */
    case 35: return 0;                   /* TCC_DRIVER */
    case 36: return 1215000;             /* MEMORY_CLOCK_RATE (kHz) */
    case 37: return 5120;                /* GLOBAL_MEMORY_BUS_WIDTH (bits) */
    case 38: return 41943040;            /* L2_CACHE_SIZE (40 MiB) */
    case 39: return 2048;                /* MAX_THREADS_PER_MULTIPROCESSOR */
    case 40: return 3;                   /* ASYNC_ENGINE_COUNT */
    case 41: return 1;                   /* UNIFIED_ADDRESSING */
    case 42: return 32768;               /* MAXIMUM_TEXTURE1D_LAYERED_WIDTH */
    case 43: return 2048;                /* MAXIMUM_TEXTURE1D_LAYERED_LAYERS */
    case 44: return 1;                   /* CAN_TEX2D_GATHER */
    case 45: case 46: return 32768;      /* MAXIMUM_TEXTURE2D_GATHER_* */
    case 47: case 48: return 8192;       /* MAXIMUM_TEXTURE3D_*_ALTERNATE */
    case 49: return 32768;
    case 50: return 0;                   /* PCI_DOMAIN_ID */
    case 51: return 32;                  /* TEXTURE_PITCH_ALIGNMENT */
    case 52: case 53: return 32768;      /* TEXTURECUBEMAP */
    case 54: return 2046;
    case 55: return 32768;               /* SURFACE1D */
    case 56: return 131072;
    case 57: return 65536;
    case 58: case 59: case 60: return 16384;
    case 61: return 32768;
    case 62: return 2048;
    case 63: case 64: return 32768;
    case 65: return 2048;
    case 66: case 67: return 32768;
    case 68: return 2046;
    case 69: return 268435456;           /* MAXIMUM_TEXTURE1D_LINEAR_WIDTH */
    case 70: return 131072;
    case 71: return 65000;
    case 72: return 2097120;
    case 73: case 74: return 32768;      /* MAXIMUM_TEXTURE2D_MIPMAPPED_* */
    case 75: return c->cc_major;         /* COMPUTE_CAPABILITY_MAJOR */
    case 76: return c->cc_minor;         /* COMPUTE_CAPABILITY_MINOR */
    case 77: return 32768;
    case 78: return 1;                   /* STREAM_PRIORITIES_SUPPORTED */
    case 79: return 1;                   /* GLOBAL_L1_CACHE_SUPPORTED */
    case 80: return 1;                   /* LOCAL_L1_CACHE_SUPPORTED */
    case 81: return 167936;              /* MAX_SHARED_MEMORY_PER_MULTIPROCESSOR */
    case 82: return 65536;               /* MAX_REGISTERS_PER_MULTIPROCESSOR */
    case 83: return 1;                   /* MANAGED_MEMORY */
    case 84: return 0;                   /* MULTI_GPU_BOARD */
    case 85: return C->visible[dev];     /* MULTI_GPU_BOARD_GROUP_ID */
    case 86: return 0;                   /* HOST_NATIVE_ATOMIC_SUPPORTED */
    case 87: return 2;                   /* SINGLE_TO_DOUBLE_PRECISION_PERF_RATIO */
    case 88: return 0;                   /* PAGEABLE_MEMORY_ACCESS */
    case 89: return 1;                   /* CONCURRENT_MANAGED_ACCESS */
    case 90: return 1;                   /* COMPUTE_PREEMPTION_SUPPORTED */
    case 91: return 1;                   /* CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM */
    case 92: case 93: case 94: return 0; /* stream mem ops v1 */
    case 95: return 1;                   /* COOPERATIVE_LAUNCH */
    case 96: return 1;                   /* COOPERATIVE_MULTI_DEVICE_LAUNCH */
    case 97: return 166912;              /* MAX_SHARED_MEMORY_PER_BLOCK_OPTIN */
    case 98: return 0;                   /* CAN_FLUSH_REMOTE_WRITES */
    case 99: return 1;                   /* HOST_REGISTER_SUPPORTED */
    case 100: return 0;                  /* PAGEABLE_MEMORY_ACCESS_USES_HOST_PAGE_TABLES */
    case 101: return 0;                  /* DIRECT_MANAGED_MEM_ACCESS_FROM_HOST */
    case 102: return 1;                  /* VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED */
    case 103: return 1;                  /* HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED */
    case 104: case 105: return 0;        /* Windows handles */
    case 106: return 32;                 /* MAX_BLOCKS_PER_MULTIPROCESSOR */
    case 107: return 1;                  /* GENERIC_COMPRESSION_SUPPORTED */
    case 108: return 31457280;           /* MAX_PERSISTING_L2_CACHE_SIZE */
    case 109: return 134213632;          /* MAX_ACCESS_POLICY_WINDOW_SIZE */
    case 110: return 1;                  /* GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED */
    case 111: return 1024;               /* RESERVED_SHARED_MEMORY_PER_BLOCK */
    case 112: return 1;                  /* SPARSE_CUDA_ARRAY_SUPPORTED */
    case 113: return 1;                  /* READ_ONLY_HOST_REGISTER_SUPPORTED */
    case 114: return 1;                  /* TIMELINE_SEMAPHORE_INTEROP_SUPPORTED */
    case 115: return 1;                  /* MEMORY_POOLS_SUPPORTED */
    case 116: return 1;                  /* GPU_DIRECT_RDMA_SUPPORTED */
    case 117: return 0;                  /* GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS */
    case 118: return 0;                  /* GPU_DIRECT_RDMA_WRITES_ORDERING */
    case 119: return 1;                  /* MEMPOOL_SUPPORTED_HANDLE_TYPES: POSIX fd */
    case 120: return c->cc_major >= 9;  /* CLUSTER_LAUNCH */
    case 121: return 1;                  /* DEFERRED_MAPPING_CUDA_ARRAY_SUPPORTED */
    case 122: case 123: return 1;        /* CAN_USE_64_BIT_STREAM_MEM_OPS, ..._WAIT_VALUE_NOR */
    case 124: return 1;                  /* DMA_BUF_SUPPORTED */
    case 125: return 1;                  /* IPC_EVENT_SUPPORTED */
    case 126: return c->cc_major >= 9 ? 4 : 1; /* MEM_SYNC_DOMAIN_COUNT */
    case 127: return c->cc_major >= 9;  /* TENSOR_MAP_ACCESS_SUPPORTED */
    case 128: return 0;                  /* HANDLE_TYPE_FABRIC_SUPPORTED */
    case 129: return 0;                  /* UNIFIED_FUNCTION_POINTERS */
    case 130: return 0;                  /* NUMA_CONFIG: none */
    case 131: return -1;                 /* NUMA_ID */
    case 132: return 0;                  /* MULTICAST_SUPPORTED */
    case 133: return 0;                  /* MPS_ENABLED */
    case 134: return -1;                 /* HOST_NUMA_ID */
    default: *ok = 0; return 0;
    }
}

FG_EXPORT CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev) {
    T("attrib=%d dev=%d", attrib, dev);
    NEED_INIT();
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    int ok;
    *pi = attribute(attrib, dev, &ok);
    if (!ok) {
        T("attrib=%d unknown to the fake: 0", attrib);
        return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

typedef struct {
    int maxThreadsPerBlock, maxThreadsDim[3], maxGridSize[3], sharedMemPerBlock, totalConstantMemory,
        SIMDWidth, memPitch, regsPerBlock, clockRate, textureAlign;
} CUdevprop;

FG_EXPORT CUresult cuDeviceGetProperties(CUdevprop *p, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    int ok;
    *p = (CUdevprop){attribute(1, dev, &ok), {1024, 1024, 64}, {2147483647, 65535, 65535}, 49152, 65536,
                     32, 2147483647, 65536, 1410000, 512};
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!pciBusId || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(pciBusId, (size_t)len, "0000:%02x:00.0", card(dev)->pci_bus);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
    T("bus=%s", pciBusId ? pciBusId : "(null)");
    NEED_INIT();
    if (!dev || !pciBusId) return CUDA_ERROR_INVALID_VALUE;
    unsigned dom = 0, bus = 0, d = 0;
    if (sscanf(pciBusId, "%x:%x:%x", &dom, &bus, &d) != 3 && sscanf(pciBusId, "%x:%x", &bus, &d) != 2)
        return CUDA_ERROR_INVALID_VALUE;
    for (int i = 0; i < C->visible_count; i++)
        if ((unsigned)card(i)->pci_bus == bus) {
            *dev = i;
            return CUDA_SUCCESS;
        }
    return CUDA_ERROR_INVALID_DEVICE;
}

FG_EXPORT CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
    T("dev=%d peer=%d", dev, peerDev);
    NEED_INIT();
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev) || !valid_dev(peerDev)) return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev; /* NVLink-connected, like an HGX board */
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetP2PAttribute(int *value, int attrib, CUdevice src, CUdevice dst) {
    T("attrib=%d src=%d dst=%d", attrib, src, dst);
    NEED_INIT();
    if (!value) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(src) || !valid_dev(dst)) return CUDA_ERROR_INVALID_DEVICE;
    /* PERFORMANCE_RANK=1, ACCESS_SUPPORTED=2, NATIVE_ATOMIC_SUPPORTED=3, CUDA_ARRAY_ACCESS=4 */
    *value = attrib == 1 ? 0 : (src != dst);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *pool = &g_default_pool[dev];
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!pool) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *pool = g_current_pool[dev];
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    if (!pool || pool->magic != MAGIC_POOL || pool->ordinal != dev) return CUDA_ERROR_INVALID_VALUE;
    g_current_pool[dev] = pool;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ contexts */

FG_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    g_primary[dev].refcount++;
    pthread_mutex_unlock(&g_mu);
    *pctx = &g_primary[dev];
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    pthread_mutex_lock(&g_mu);
    if (g_primary[dev].refcount > 0) g_primary[dev].refcount--;
    pthread_mutex_unlock(&g_mu);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxRelease(CUdevice dev) { return cuDevicePrimaryCtxRelease_v2(dev); }

FG_EXPORT CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
    T("dev=%d flags=%u", dev, flags);
    NEED_INIT();
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    g_primary[dev].flags = flags;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
    return cuDevicePrimaryCtxSetFlags_v2(dev, flags);
}

FG_EXPORT CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    *flags = g_primary[dev].flags;
    *active = g_primary[dev].refcount > 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    T("dev=%d", dev);
    NEED_INIT();
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    wait_all();
    fg_mem_free_owner(&g_primary[dev], "cuDevicePrimaryCtxReset_v2");
    fg_mem_free_owner(&g_default_pool[dev], "cuDevicePrimaryCtxReset_v2");
    g_default_pool[dev].used = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuDevicePrimaryCtxReset(CUdevice dev) { return cuDevicePrimaryCtxReset_v2(dev); }

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    NEED_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct fg_ctx *c = calloc(1, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    *c = g_primary[dev];
    c->primary = 0;
    c->refcount = 1;
    c->flags = flags;
    c->id = next_id();
    if (t_depth >= (int)(sizeof t_stack / sizeof t_stack[0])) {
        free(c);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    t_stack[t_depth++] = c;
    *pctx = c;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    T("flags=%u dev=%d", flags, dev);
    return ctx_create(pctx, flags, dev);
}

FG_EXPORT CUresult cuCtxCreate_v3(CUcontext *pctx, void *paramsArray, int numParams, unsigned int flags,
                                  CUdevice dev) {
    T("flags=%u dev=%d", flags, dev);
    (void)paramsArray;
    (void)numParams;
    return ctx_create(pctx, flags, dev);
}

FG_EXPORT CUresult cuCtxCreate_v4(CUcontext *pctx, void *ctxCreateParams, unsigned int flags, CUdevice dev) {
    T("flags=%u dev=%d", flags, dev);
    (void)ctxCreateParams;
    return ctx_create(pctx, flags, dev);
}

FG_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx) {
    T("ctx=%p", (void *)ctx);
    NEED_INIT();
    if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx->primary) return CUDA_ERROR_INVALID_CONTEXT;
    wait_all();
    for (int i = 0; i < t_depth; i++)
        if (t_stack[i] == ctx) t_stack[i] = NULL;
    while (t_depth && t_stack[t_depth - 1] == NULL) t_depth--;
    fg_mem_free_owner(ctx, "cuCtxDestroy_v2");
    ctx->magic = 0;
    free(ctx);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx) {
    T("ctx=%p", (void *)ctx);
    NEED_INIT();
    if (ctx && !valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth == 0) {
        if (ctx) t_stack[t_depth++] = ctx;
    } else if (ctx) {
        t_stack[t_depth - 1] = ctx;
    } else {
        t_depth--;
    }
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetCurrent(CUcontext *pctx) {
    T("%s", "");
    NEED_INIT();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = current_ctx();
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    T("ctx=%p", (void *)ctx);
    NEED_INIT();
    if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (t_depth >= (int)(sizeof t_stack / sizeof t_stack[0])) return CUDA_ERROR_INVALID_VALUE;
    t_stack[t_depth++] = ctx;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxPushCurrent(CUcontext ctx) { return cuCtxPushCurrent_v2(ctx); }

FG_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    T("%s", "");
    NEED_INIT();
    if (t_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    CUcontext c = t_stack[--t_depth];
    if (pctx) *pctx = c;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxPopCurrent(CUcontext *pctx) { return cuCtxPopCurrent_v2(pctx); }

FG_EXPORT CUresult cuCtxGetDevice(CUdevice *device) {
    T("%s", "");
    NEED_INIT();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *device = c->ordinal;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSynchronize(void) {
    T("%s", "");
    NEED_INIT();
    wait_all();
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetFlags(unsigned int *flags) {
    T("%s", "");
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *flags = c->flags;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetFlags(unsigned int flags) {
    T("flags=%u", flags);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    c->flags = flags;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetId(CUcontext ctx, unsigned long long *id) {
    T("%s", "");
    NEED_INIT();
    if (!ctx) ctx = current_ctx();
    if (!valid_ctx(ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    *id = ctx->id;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
    T("%s", "");
    NEED_INIT();
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    (void)ctx;
    *version = 3020;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    T("%s", "");
    NEED_INIT();
    if (leastPriority) *leastPriority = 0;
    if (greatestPriority) *greatestPriority = -5;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetLimit(size_t *value, int limit) {
    T("limit=%d", limit);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!value || limit < 0 || limit >= 16) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *value = c->limits[limit];
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetLimit(int limit, size_t value) {
    T("limit=%d value=%zu", limit, value);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (limit < 0 || limit >= 16) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    c->limits[limit] = value;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetCacheConfig(int *config) {
    T("%s", "");
    NEED_INIT();
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    *config = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetCacheConfig(int config) {
    T("config=%d", config);
    NEED_INIT();
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxGetSharedMemConfig(int *config) {
    T("%s", "");
    NEED_INIT();
    if (!config) return CUDA_ERROR_INVALID_VALUE;
    *config = 1; /* CU_SHARED_MEM_CONFIG_FOUR_BYTE_BANK_SIZE */
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxSetSharedMemConfig(int config) {
    T("config=%d", config);
    NEED_INIT();
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags) {
    T("peer=%p flags=%u", (void *)peer, flags);
    NEED_INIT();
    if (!valid_ctx(peer)) return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer) {
    T("peer=%p", (void *)peer);
    NEED_INIT();
    if (!valid_ctx(peer)) return CUDA_ERROR_INVALID_CONTEXT;
    return CUDA_SUCCESS;
}

/* Ordinal of the current context, or of `stream`'s context. */
static int current_ordinal(void) {
    CUcontext c = current_ctx();
    return valid_ctx(c) ? c->ordinal : -1;
}

/* ------------------------------------------------------------------ device memory */

FG_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    T("bytes=%zu", bytesize);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    return fg_mem_alloc(c->ordinal, c, bytesize, FG_KIND_DEVICE, "cuMemAlloc_v2", dptr);
}

FG_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                                      unsigned int elementSize) {
    T("width=%zu height=%zu", width, height);
    NEED_INIT();
    (void)elementSize;
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    if (!pitch) return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + 511) & ~(size_t)511;
    return fg_mem_alloc(c->ordinal, c, *pitch * height, FG_KIND_DEVICE, "cuMemAllocPitch_v2", dptr);
}

FG_EXPORT CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    T("bytes=%zu flags=%u", bytesize, flags);
    NEED_INIT();
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    return fg_mem_alloc(c->ordinal, c, bytesize, FG_KIND_MANAGED, "cuMemAllocManaged", dptr);
}

static struct fg_pool *pool_of(void *owner) {
    struct fg_pool *p = owner;
    for (int i = 0; C && i < C->visible_count; i++)
        if (p == &g_default_pool[i]) return p;
    return p && p->magic == MAGIC_POOL ? p : NULL;
}

static CUresult mem_free(CUdeviceptr dptr, const char *api) {
    void *owner = NULL;
    fg_kind kind = FG_KIND_DEVICE;
    size_t size = 0;
    if (fg_mem_lookup(dptr, NULL, NULL, &size, &owner, &kind) && kind == FG_KIND_POOL) {
        struct fg_pool *p = pool_of(owner);
        if (p) p->used -= size;
    }
    return fg_mem_free(dptr, api);
}

FG_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr) {
    T("ptr=0x%llx", dptr);
    NEED_INIT();
    return mem_free(dptr, "cuMemFree_v2");
}

FG_EXPORT CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    T("%s", "");
    NEED_INIT();
    int ord = current_ordinal();
    if (ord < 0) return CUDA_ERROR_INVALID_CONTEXT;
    uint64_t f, t;
    fg_mem_info(ord, &f, &t);
    if (free_bytes) *free_bytes = (size_t)f;
    if (total) *total = (size_t)t;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    T("ptr=0x%llx", dptr);
    NEED_INIT();
    CUdeviceptr base;
    size_t size;
    if (!fg_mem_lookup(dptr, NULL, &base, &size, NULL, NULL)) return CUDA_ERROR_NOT_FOUND;
    if (pbase) *pbase = base;
    if (psize) *psize = size;
    return CUDA_SUCCESS;
}

/* Pinned host memory is real memory: TensorFlow writes into it and reads from it. */
FG_EXPORT CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
    T("bytes=%zu flags=%u", bytesize, flags);
    NEED_INIT();
    if (!pp || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    void *p = mmap(NULL, bytesize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    fg_host_add(p, bytesize, FG_HOST_PINNED);
    *pp = p;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) { return cuMemHostAlloc(pp, bytesize, 0); }

FG_EXPORT CUresult cuMemFreeHost(void *p) {
    T("p=%p", p);
    NEED_INIT();
    size_t size;
    int kind;
    if (!fg_host_remove(p, &size, &kind)) return CUDA_ERROR_INVALID_VALUE;
    if (kind == FG_HOST_PINNED) munmap(p, size);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int flags) {
    T("p=%p", p);
    NEED_INIT();
    (void)flags;
    if (!pdptr || !fg_host_lookup(p, NULL, NULL, NULL)) return CUDA_ERROR_INVALID_VALUE;
    *pdptr = (CUdeviceptr)(uintptr_t)p; /* unified addressing: the same address */
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostGetFlags(unsigned int *flags, void *p) {
    T("p=%p", p);
    NEED_INIT();
    if (!flags || !fg_host_lookup(p, NULL, NULL, NULL)) return CUDA_ERROR_INVALID_VALUE;
    *flags = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int flags) {
    T("p=%p bytes=%zu flags=%u", p, bytesize, flags);
    NEED_INIT();
    if (!p || bytesize == 0) return CUDA_ERROR_INVALID_VALUE;
    if (fg_host_lookup(p, NULL, NULL, NULL)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    fg_host_add(p, bytesize, FG_HOST_REGISTERED);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int flags) {
    return cuMemHostRegister_v2(p, bytesize, flags);
}

FG_EXPORT CUresult cuMemHostUnregister(void *p) {
    T("p=%p", p);
    NEED_INIT();
    int kind;
    void *base;
    if (!fg_host_lookup(p, &base, NULL, &kind) || kind != FG_HOST_REGISTERED || base != p)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    fg_host_remove(p, NULL, NULL);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr p, size_t count, CUdevice dst, CUstream s) {
    T("ptr=0x%llx", p);
    NEED_INIT();
    (void)count, (void)dst, (void)s;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemAdvise(CUdeviceptr p, size_t count, int advice, CUdevice dev) {
    T("ptr=0x%llx", p);
    NEED_INIT();
    (void)count, (void)advice, (void)dev;
    return CUDA_SUCCESS;
}

/* ---- stream-ordered allocation (TF_GPU_ALLOCATOR=cuda_malloc_async). Pools cache nothing:
 * every allocation is accounted at once, every free returns memory at once. */

FG_EXPORT CUresult cuMemPoolCreate(CUmemoryPool *pool, const void *props) {
    T("%s", "");
    NEED_INIT();
    if (!pool || !props) return CUDA_ERROR_INVALID_VALUE;
    /* CUmemPoolProps: allocType, handleTypes, location {type, id}, ... */
    const int *f = props;
    int dev = f[3];
    if (!valid_dev(dev)) return CUDA_ERROR_INVALID_DEVICE;
    struct fg_pool *p = calloc(1, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *p = (struct fg_pool){MAGIC_POOL, dev, 0, 0, 0};
    *pool = p;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    T("%s", "");
    NEED_INIT();
    if (!pool_of(pool)) return CUDA_ERROR_INVALID_VALUE;
    fg_mem_free_owner(pool, "cuMemPoolDestroy");
    for (int i = 0; i < C->visible_count; i++) {
        if (pool == &g_default_pool[i]) return CUDA_ERROR_INVALID_VALUE;
        if (g_current_pool[i] == pool) g_current_pool[i] = &g_default_pool[i];
    }
    pool->magic = 0;
    free(pool);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemPoolSetAttribute(CUmemoryPool pool, int attr, void *value) {
    T("attr=%d", attr);
    NEED_INIT();
    struct fg_pool *p = pool_of(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case 1: case 2: case 3: return CUDA_SUCCESS;                 /* REUSE_* */
    case 4: p->threshold = *(cuuint64_t *)value; return CUDA_SUCCESS; /* RELEASE_THRESHOLD */
    case 6: case 8: p->used_high = p->used; return CUDA_SUCCESS;   /* *_HIGH: reset */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

FG_EXPORT CUresult cuMemPoolGetAttribute(CUmemoryPool pool, int attr, void *value) {
    T("attr=%d", attr);
    NEED_INIT();
    struct fg_pool *p = pool_of(pool);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case 1: case 2: case 3: *(int *)value = 1; return CUDA_SUCCESS;
    case 4: *(cuuint64_t *)value = p->threshold; return CUDA_SUCCESS;
    case 5: case 7: *(cuuint64_t *)value = p->used; return CUDA_SUCCESS;      /* *_CURRENT */
    case 6: case 8: *(cuuint64_t *)value = p->used_high; return CUDA_SUCCESS; /* *_HIGH */
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

FG_EXPORT CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    T("keep=%zu", minBytesToKeep);
    NEED_INIT();
    return pool_of(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FG_EXPORT CUresult cuMemPoolSetAccess(CUmemoryPool pool, const void *map, size_t count) {
    T("count=%zu", count);
    NEED_INIT();
    (void)map;
    return pool_of(pool) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

FG_EXPORT CUresult cuMemPoolGetAccess(int *flags, CUmemoryPool pool, void *location) {
    T("%s", "");
    NEED_INIT();
    (void)location;
    if (!flags || !pool_of(pool)) return CUDA_ERROR_INVALID_VALUE;
    *flags = 3; /* CU_MEM_ACCESS_FLAGS_PROT_READWRITE */
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                           CUstream hStream) {
    T("bytes=%zu", bytesize);
    NEED_INIT();
    struct fg_pool *p = pool_of(pool);
    if (!p || !stream_of(hStream)) return CUDA_ERROR_INVALID_VALUE;
    CUresult rc = fg_mem_alloc(p->ordinal, p, bytesize, FG_KIND_POOL, "cuMemAllocFromPoolAsync", dptr);
    if (rc == CUDA_SUCCESS) {
        p->used += bytesize;
        if (p->used > p->used_high) p->used_high = p->used;
    }
    return rc;
}

FG_EXPORT CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    T("bytes=%zu", bytesize);
    NEED_INIT();
    struct fg_stream *s = stream_of(hStream);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    int ord = valid_ctx(s->ctx) ? s->ctx->ordinal : current_ordinal();
    if (ord < 0) return CUDA_ERROR_INVALID_CONTEXT;
    return cuMemAllocFromPoolAsync(dptr, bytesize, g_current_pool[ord], hStream);
}

FG_EXPORT CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    T("ptr=0x%llx", dptr);
    NEED_INIT();
    if (!stream_of(hStream)) return CUDA_ERROR_INVALID_HANDLE;
    return mem_free(dptr, "cuMemFreeAsync");
}

/* ------------------------------------------------------------------ pointers */

FG_EXPORT CUresult cuPointerGetAttribute(void *data, int attribute_, CUdeviceptr ptr) {
    T("attr=%d ptr=0x%llx", attribute_, ptr);
    NEED_INIT();
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    int ordinal = -1;
    CUdeviceptr base = 0;
    size_t size = 0;
    void *owner = NULL;
    fg_kind kind = FG_KIND_DEVICE;
    int is_dev = fg_mem_lookup(ptr, &ordinal, &base, &size, &owner, &kind);
    void *hbase = NULL;
    int hkind = 0;
    int is_host = !is_dev && fg_host_lookup((void *)(uintptr_t)ptr, &hbase, &size, &hkind);
    if (!is_dev && !is_host) return CUDA_ERROR_INVALID_VALUE;
    if (is_host) {
        base = (CUdeviceptr)(uintptr_t)hbase;
        ordinal = current_ordinal() < 0 ? 0 : current_ordinal();
    }
    CUcontext ctx = valid_ctx((CUcontext)owner) ? (CUcontext)owner : &g_primary[ordinal < 0 ? 0 : ordinal];
    switch (attribute_) {
    case 1: *(CUcontext *)data = ctx; break;                                            /* CONTEXT */
    case 2: *(unsigned int *)data = is_dev && kind != FG_KIND_MANAGED ? CU_MEMORYTYPE_DEVICE
                                    : is_dev                    ? CU_MEMORYTYPE_UNIFIED
                                                                : CU_MEMORYTYPE_HOST; break; /* MEMORY_TYPE */
    case 3: *(CUdeviceptr *)data = ptr; break;                                          /* DEVICE_POINTER */
    case 4:                                                                             /* HOST_POINTER */
        if (is_dev && kind != FG_KIND_MANAGED) return CUDA_ERROR_INVALID_VALUE;
        *(void **)data = (void *)(uintptr_t)ptr;
        break;
    case 6: *(unsigned int *)data = 0; break;                                           /* SYNC_MEMOPS */
    case 7: *(unsigned long long *)data = base; break;                                  /* BUFFER_ID */
    case 8: *(unsigned int *)data = is_dev && kind == FG_KIND_MANAGED; break;           /* IS_MANAGED */
    case 9: *(int *)data = ordinal; break;                                              /* DEVICE_ORDINAL */
    case 11: *(CUdeviceptr *)data = base; break;                                        /* RANGE_START_ADDR */
    case 12: *(size_t *)data = size; break;                                             /* RANGE_SIZE */
    case 13: *(unsigned int *)data = 1; break;                                          /* MAPPED */
    case 16: *(unsigned int *)data = 3; break;                                          /* ACCESS_FLAGS */
    case 17: *(CUmemoryPool *)data = is_dev && kind == FG_KIND_POOL ? pool_of(owner) : NULL; break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuPointerGetAttributes(unsigned int numAttributes, int *attributes, void **data,
                                          CUdeviceptr ptr) {
    T("n=%u ptr=0x%llx", numAttributes, ptr);
    NEED_INIT();
    if (!attributes || !data) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < numAttributes; i++) {
        if (!data[i]) continue;
        if (cuPointerGetAttribute(data[i], attributes[i], ptr) == CUDA_SUCCESS) continue;
        /* not a CUDA pointer or not known: default values, not an error (driver API docs) */
        switch (attributes[i]) {
        case 1: case 4: case 17: *(void **)data[i] = NULL; break;
        case 3: case 7: case 11: *(unsigned long long *)data[i] = 0; break;
        case 12: *(size_t *)data[i] = 0; break;
        case 9: *(int *)data[i] = -2; break;
        default: *(unsigned int *)data[i] = 0; break;
        }
    }
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuPointerSetAttribute(const void *value, int attribute_, CUdeviceptr ptr) {
    T("attr=%d ptr=0x%llx", attribute_, ptr);
    NEED_INIT();
    (void)value;
    return fg_mem_lookup(ptr, NULL, NULL, NULL, NULL, NULL) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* ------------------------------------------------------------------ copies and memsets (no data moves) */

/* A device pointer of this fake: its memory does not exist. Anything else is host memory. */
static int is_fake_device(CUdeviceptr p) { return fg_mem_in_device_range(p) >= 0; }

static void copy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    if (!n) return;
    int dd = is_fake_device(dst), sd = is_fake_device(src);
    if (dd) return;                                                  /* to the device: nothing moves */
    if (sd) memset((void *)(uintptr_t)dst, 0, n);                    /* device to host: zeros */
    else memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n); /* host to host (UVA) */
}

static void fill(CUdeviceptr dst, unsigned value, size_t elem, size_t n) {
    if (is_fake_device(dst) || !n) return;
    unsigned char *p = (unsigned char *)(uintptr_t)dst;
    for (size_t i = 0; i < n; i++) memcpy(p + i * elem, &value, elem); /* little-endian */
}

FG_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    copy(dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    T("n=%zu", n);
    NEED_INIT();
    if (!stream_of(s)) return CUDA_ERROR_INVALID_HANDLE;
    copy(dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    copy(dst, (CUdeviceptr)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    copy((CUdeviceptr)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    copy(dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s) {
    return cuMemcpyAsync(dst, (CUdeviceptr)(uintptr_t)src, n, s);
}

FG_EXPORT CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s) {
    return cuMemcpyAsync((CUdeviceptr)(uintptr_t)dst, src, n, s);
}

FG_EXPORT CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    return cuMemcpyAsync(dst, src, n, s);
}

FG_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    (void)dc, (void)sc;
    copy(dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemcpyPeerAsync(CUdeviceptr dst, CUcontext dc, CUdeviceptr src, CUcontext sc, size_t n,
                                     CUstream s) {
    T("n=%zu", n);
    NEED_INIT();
    (void)dc, (void)sc, (void)s;
    copy(dst, src, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    fill(dst, v, 1, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemsetD16_v2(CUdeviceptr dst, unsigned short v, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    fill(dst, v, 2, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int v, size_t n) {
    T("n=%zu", n);
    NEED_INIT();
    fill(dst, v, 4, n);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, CUstream s) {
    if (!stream_of(s)) return CUDA_ERROR_INVALID_HANDLE;
    return cuMemsetD8_v2(dst, v, n);
}

FG_EXPORT CUresult cuMemsetD16Async(CUdeviceptr dst, unsigned short v, size_t n, CUstream s) {
    if (!stream_of(s)) return CUDA_ERROR_INVALID_HANDLE;
    return cuMemsetD16_v2(dst, v, n);
}

FG_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned int v, size_t n, CUstream s) {
    if (!stream_of(s)) return CUDA_ERROR_INVALID_HANDLE;
    return cuMemsetD32_v2(dst, v, n);
}

/* ------------------------------------------------------------------ streams */

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority) {
    NEED_INIT();
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    CUcontext c = current_ctx();
    if (!valid_ctx(c)) return CUDA_ERROR_INVALID_CONTEXT;
    struct fg_stream *s = calloc(1, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    *s = (struct fg_stream){MAGIC_STREAM, c, flags, priority < -5 ? -5 : priority > 0 ? 0 : priority, next_id(), 0, 0};
    *ph = s;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamCreate(CUstream *ph, unsigned int flags) {
    T("flags=%u", flags);
    return stream_create(ph, flags, 0);
}

FG_EXPORT CUresult cuStreamCreateWithPriority(CUstream *ph, unsigned int flags, int priority) {
    T("flags=%u priority=%d", flags, priority);
    return stream_create(ph, flags, priority);
}

FG_EXPORT CUresult cuStreamDestroy_v2(CUstream h) {
    T("stream=%p", (void *)h);
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s || s == &g_null_stream) return CUDA_ERROR_INVALID_HANDLE;
    wait_stream(s);
    /* Kept allocated (and marked): events recorded on it may still point at it. */
    s->magic = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamDestroy(CUstream h) { return cuStreamDestroy_v2(h); }

FG_EXPORT CUresult cuStreamSynchronize(CUstream h) {
    T("stream=%p", (void *)h);
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (s == &g_null_stream)
        wait_all();
    else
        wait_stream(s);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamQuery(CUstream h) {
    T("stream=%p", (void *)h);
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_cb_mu);
    int done = s->done >= s->enq;
    pthread_mutex_unlock(&g_cb_mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FG_EXPORT CUresult cuStreamWaitEvent(CUstream h, CUevent e, unsigned int flags) {
    T("stream=%p event=%p", (void *)h, (void *)e);
    NEED_INIT();
    (void)flags;
    if (!stream_of(h) || !e || e->magic != MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetPriority(CUstream h, int *priority) {
    T("%s", "");
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s || !priority) return CUDA_ERROR_INVALID_VALUE;
    *priority = s->priority;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetFlags(CUstream h, unsigned int *flags) {
    T("%s", "");
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s || !flags) return CUDA_ERROR_INVALID_VALUE;
    *flags = s->flags;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetId(CUstream h, unsigned long long *id) {
    T("%s", "");
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s || !id) return CUDA_ERROR_INVALID_VALUE;
    *id = s->id;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetCtx(CUstream h, CUcontext *pctx) {
    T("%s", "");
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!s || !pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = s->ctx ? s->ctx : current_ctx();
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetCtx_v2(CUstream h, CUcontext *pctx, void **pGreenCtx) {
    if (pGreenCtx) *pGreenCtx = NULL;
    return cuStreamGetCtx(h, pctx);
}

FG_EXPORT CUresult cuStreamAddCallback(CUstream h, CUstreamCallback cb, void *user, unsigned int flags) {
    T("stream=%p", (void *)h);
    NEED_INIT();
    (void)flags;
    if (!cb) return CUDA_ERROR_INVALID_VALUE;
    return enqueue_cb(h, NULL, cb, user);
}

FG_EXPORT CUresult cuLaunchHostFunc(CUstream h, CUhostFn fn, void *user) {
    T("stream=%p", (void *)h);
    NEED_INIT();
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    return enqueue_cb(h, fn, NULL, user);
}

FG_EXPORT CUresult cuStreamIsCapturing(CUstream h, int *status) {
    T("%s", "");
    NEED_INIT();
    if (!stream_of(h) || !status) return CUDA_ERROR_INVALID_VALUE;
    *status = 0; /* CU_STREAM_CAPTURE_STATUS_NONE */
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamGetCaptureInfo_v2(CUstream h, int *status, cuuint64_t *id, void **graph,
                                             const void **deps, size_t *numDeps) {
    T("%s", "");
    NEED_INIT();
    if (!stream_of(h) || !status) return CUDA_ERROR_INVALID_VALUE;
    *status = 0;
    if (id) *id = 0;
    if (graph) *graph = NULL;
    if (deps) *deps = NULL;
    if (numDeps) *numDeps = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamWaitValue32_v2(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    T("%s", "");
    NEED_INIT();
    (void)addr, (void)value, (void)flags;
    return stream_of(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FG_EXPORT CUresult cuStreamWriteValue32_v2(CUstream h, CUdeviceptr addr, cuuint32_t value, unsigned int flags) {
    T("%s", "");
    NEED_INIT();
    (void)flags;
    if (!stream_of(h)) return CUDA_ERROR_INVALID_HANDLE;
    if (!is_fake_device(addr) && addr) *(volatile cuuint32_t *)(uintptr_t)addr = value;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuStreamWaitValue64_v2(CUstream h, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
    T("%s", "");
    NEED_INIT();
    (void)addr, (void)value, (void)flags;
    return stream_of(h) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FG_EXPORT CUresult cuStreamWriteValue64_v2(CUstream h, CUdeviceptr addr, cuuint64_t value, unsigned int flags) {
    T("%s", "");
    NEED_INIT();
    (void)flags;
    if (!stream_of(h)) return CUDA_ERROR_INVALID_HANDLE;
    if (!is_fake_device(addr) && addr) *(volatile cuuint64_t *)(uintptr_t)addr = value;
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ events */

FG_EXPORT CUresult cuEventCreate(CUevent *ph, unsigned int flags) {
    T("flags=%u", flags);
    NEED_INIT();
    if (!ph) return CUDA_ERROR_INVALID_VALUE;
    struct fg_event *e = calloc(1, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->magic = MAGIC_EVENT;
    e->flags = flags;
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    *ph = e;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventDestroy_v2(CUevent e) {
    T("event=%p", (void *)e);
    NEED_INIT();
    if (!e || e->magic != MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
    e->magic = 0;
    free(e);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventDestroy(CUevent e) { return cuEventDestroy_v2(e); }

FG_EXPORT CUresult cuEventRecord(CUevent e, CUstream h) {
    T("event=%p stream=%p", (void *)e, (void *)h);
    NEED_INIT();
    struct fg_stream *s = stream_of(h);
    if (!e || e->magic != MAGIC_EVENT || !s) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_cb_mu);
    e->stream = s;
    e->target = s->enq;
    pthread_mutex_unlock(&g_cb_mu);
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventRecordWithFlags(CUevent e, CUstream h, unsigned int flags) {
    (void)flags;
    return cuEventRecord(e, h);
}

FG_EXPORT CUresult cuEventQuery(CUevent e) {
    T("event=%p", (void *)e);
    NEED_INIT();
    if (!e || e->magic != MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
    pthread_mutex_lock(&g_cb_mu);
    int done = !e->stream || e->stream->done >= e->target;
    pthread_mutex_unlock(&g_cb_mu);
    return done ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FG_EXPORT CUresult cuEventSynchronize(CUevent e) {
    T("event=%p", (void *)e);
    NEED_INIT();
    if (!e || e->magic != MAGIC_EVENT) return CUDA_ERROR_INVALID_HANDLE;
    if (!e->stream || on_cb_thread()) return CUDA_SUCCESS;
    pthread_mutex_lock(&g_cb_mu);
    while (e->stream->done < e->target) pthread_cond_wait(&g_cb_progress, &g_cb_mu);
    pthread_mutex_unlock(&g_cb_mu);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventElapsedTime(float *ms, CUevent start, CUevent end) {
    T("%s", "");
    NEED_INIT();
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    if (!start || start->magic != MAGIC_EVENT || !end || end->magic != MAGIC_EVENT)
        return CUDA_ERROR_INVALID_HANDLE;
    *ms = (float)((double)(end->when.tv_sec - start->when.tv_sec) * 1e3 +
                  (double)(end->when.tv_nsec - start->when.tv_nsec) / 1e6);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuEventElapsedTime_v2(float *ms, CUevent start, CUevent end) {
    return cuEventElapsedTime(ms, start, end);
}

/* ------------------------------------------------------------------ modules, functions, launches (no-ops) */

static CUresult module_new(CUmodule *m) {
    NEED_INIT();
    if (!m) return CUDA_ERROR_INVALID_VALUE;
    struct fg_module *mod = calloc(1, sizeof *mod);
    if (!mod) return CUDA_ERROR_OUT_OF_MEMORY;
    mod->magic = MAGIC_MODULE;
    *m = mod;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuModuleLoad(CUmodule *m, const char *fname) {
    T("file=%s", fname ? fname : "(null)");
    return module_new(m);
}

FG_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
    T("%s", "");
    (void)image;
    return module_new(m);
}

FG_EXPORT CUresult cuModuleLoadDataEx(CUmodule *m, const void *image, unsigned int n, void *opts, void **vals) {
    T("%s", "");
    (void)image, (void)n, (void)opts, (void)vals;
    return module_new(m);
}

FG_EXPORT CUresult cuModuleLoadFatBinary(CUmodule *m, const void *fatCubin) {
    T("%s", "");
    (void)fatCubin;
    return module_new(m);
}

FG_EXPORT CUresult cuModuleUnload(CUmodule m) {
    T("%s", "");
    NEED_INIT();
    if (!m || m->magic != MAGIC_MODULE) return CUDA_ERROR_INVALID_HANDLE;
    m->magic = 0;
    free(m);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
    T("name=%s", name ? name : "(null)");
    NEED_INIT();
    if (!f || !name) return CUDA_ERROR_INVALID_VALUE;
    if (!m || m->magic != MAGIC_MODULE) return CUDA_ERROR_INVALID_HANDLE;
    struct fg_function *fn = calloc(1, sizeof *fn);
    if (!fn) return CUDA_ERROR_OUT_OF_MEMORY;
    fn->magic = MAGIC_FUNC;
    snprintf(fn->name, sizeof fn->name, "%s", name);
    *f = fn;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuModuleGetGlobal_v2(CUdeviceptr *dptr, size_t *bytes, CUmodule m, const char *name) {
    T("name=%s", name ? name : "(null)");
    NEED_INIT();
    (void)dptr, (void)bytes, (void)m;
    return CUDA_ERROR_NOT_FOUND;
}

FG_EXPORT CUresult cuFuncGetAttribute(int *pi, int attrib, CUfunction f) {
    T("attrib=%d", attrib);
    NEED_INIT();
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    (void)f;
    /* CUfunction_attribute: plausible values for a compiled kernel */
    switch (attrib) {
    case 0: *pi = 1024; break; /* MAX_THREADS_PER_BLOCK */
    case 1: *pi = 0; break;    /* SHARED_SIZE_BYTES */
    case 2: *pi = 0; break;    /* CONST_SIZE_BYTES */
    case 3: *pi = 0; break;    /* LOCAL_SIZE_BYTES */
    case 4: *pi = 32; break;   /* NUM_REGS */
    case 5: *pi = 80; break;   /* PTX_VERSION */
    case 6: *pi = 80; break;   /* BINARY_VERSION */
    case 8: *pi = 48 * 1024; break; /* MAX_DYNAMIC_SHARED_SIZE_BYTES */
    default: *pi = 0; break;
    }
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuFuncSetAttribute(CUfunction f, int attrib, int value) {
    T("attrib=%d value=%d", attrib, value);
    NEED_INIT();
    (void)f;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuFuncSetCacheConfig(CUfunction f, int config) {
    T("config=%d", config);
    NEED_INIT();
    (void)f;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuFuncSetSharedMemConfig(CUfunction f, int config) {
    T("config=%d", config);
    NEED_INIT();
    (void)f;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuFuncGetName(const char **name, CUfunction f) {
    T("%s", "");
    NEED_INIT();
    if (!name || !f || f->magic != MAGIC_FUNC) return CUDA_ERROR_INVALID_VALUE;
    *name = f->name;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                                  unsigned bz, unsigned shmem, CUstream s, void **params, void **extra) {
    T("grid=%ux%ux%u block=%ux%ux%u", gx, gy, gz, bx, by, bz);
    NEED_INIT();
    (void)f, (void)shmem, (void)params, (void)extra;
    return stream_of(s) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE; /* nothing is computed */
}

FG_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                                             unsigned by, unsigned bz, unsigned shmem, CUstream s, void **params) {
    return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shmem, s, params, NULL);
}

FG_EXPORT CUresult cuLaunchKernelEx(const void *config, CUfunction f, void **params, void **extra) {
    T("%s", "");
    NEED_INIT();
    (void)config, (void)f, (void)params, (void)extra;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessor(int *numBlocks, CUfunction f, int blockSize,
                                                               size_t dynSmem) {
    T("block=%d", blockSize);
    NEED_INIT();
    (void)f, (void)dynSmem;
    if (!numBlocks || blockSize <= 0) return CUDA_ERROR_INVALID_VALUE;
    int n = 2048 / blockSize;
    *numBlocks = n < 1 ? 1 : n > 32 ? 32 : n;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *numBlocks, CUfunction f,
                                                                        int blockSize, size_t dynSmem,
                                                                        unsigned int flags) {
    (void)flags;
    return cuOccupancyMaxActiveBlocksPerMultiprocessor(numBlocks, f, blockSize, dynSmem);
}

FG_EXPORT CUresult cuOccupancyMaxPotentialBlockSize(int *minGridSize, int *blockSize, CUfunction f,
                                                    void *blockSizeToDynamicSMemSize, size_t dynSmem,
                                                    int blockSizeLimit) {
    T("%s", "");
    NEED_INIT();
    (void)f, (void)blockSizeToDynamicSMemSize, (void)dynSmem;
    if (!minGridSize || !blockSize) return CUDA_ERROR_INVALID_VALUE;
    *blockSize = blockSizeLimit > 0 && blockSizeLimit < 1024 ? blockSizeLimit : 1024;
    *minGridSize = 108 * (2048 / *blockSize);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuOccupancyMaxPotentialBlockSizeWithFlags(int *minGridSize, int *blockSize, CUfunction f,
                                                             void *cb, size_t dynSmem, int limit,
                                                             unsigned int flags) {
    (void)flags;
    return cuOccupancyMaxPotentialBlockSize(minGridSize, blockSize, f, cb, dynSmem, limit);
}

FG_EXPORT CUresult cuOccupancyAvailableDynamicSMemPerBlock(size_t *dynamicSmemSize, CUfunction f, int numBlocks,
                                                           int blockSize) {
    T("%s", "");
    NEED_INIT();
    (void)f, (void)numBlocks, (void)blockSize;
    if (!dynamicSmemSize) return CUDA_ERROR_INVALID_VALUE;
    *dynamicSmemSize = 166912;
    return CUDA_SUCCESS;
}

/* Linking (XLA's PTX/cubin path) produces an empty image: modules load it, nothing runs. */
typedef struct fg_link {
    unsigned magic;
    char image[64];
} *CUlinkState;

FG_EXPORT CUresult cuLinkCreate_v2(unsigned int n, void *opts, void **vals, CUlinkState *state) {
    T("%s", "");
    NEED_INIT();
    (void)n, (void)opts, (void)vals;
    if (!state) return CUDA_ERROR_INVALID_VALUE;
    *state = calloc(1, sizeof **state);
    return *state ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

FG_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, int type, void *data, size_t size, const char *name,
                                    unsigned int n, void *opts, void **vals) {
    T("size=%zu", size);
    NEED_INIT();
    (void)type, (void)data, (void)name, (void)n, (void)opts, (void)vals;
    return state ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FG_EXPORT CUresult cuLinkAddFile_v2(CUlinkState state, int type, const char *path, unsigned int n, void *opts,
                                    void **vals) {
    T("path=%s", path ? path : "(null)");
    NEED_INIT();
    (void)type, (void)n, (void)opts, (void)vals;
    return state ? CUDA_SUCCESS : CUDA_ERROR_INVALID_HANDLE;
}

FG_EXPORT CUresult cuLinkComplete(CUlinkState state, void **cubin, size_t *size) {
    T("%s", "");
    NEED_INIT();
    if (!state || !cubin || !size) return CUDA_ERROR_INVALID_VALUE;
    *cubin = state->image;
    *size = sizeof state->image;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuLinkDestroy(CUlinkState state) {
    T("%s", "");
    free(state);
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuProfilerStart(void) {
    T("%s", "");
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuProfilerStop(void) {
    T("%s", "");
    return CUDA_SUCCESS;
}

/* ------------------------------------------------------------------ cuGetProcAddress */

/* Which implementation a (name, CUDA version) pair means, from cudaTypedefs.h's PFN_*_vNNNN
 * (e.g. PFN_cuMemAlloc_v3020 is cuMemAlloc_v2). Names not listed map to themselves. */
static const struct {
    const char *name;
    int version;
    const char *impl;
} k_versions[] = {
    {"cuCtxCreate", 3020, "cuCtxCreate_v2"},
    {"cuCtxCreate", 11040, "cuCtxCreate_v3"},
    {"cuCtxCreate", 12050, "cuCtxCreate_v4"},
    {"cuCtxDestroy", 4000, "cuCtxDestroy_v2"},
    {"cuCtxPopCurrent", 4000, "cuCtxPopCurrent_v2"},
    {"cuCtxPushCurrent", 4000, "cuCtxPushCurrent_v2"},
    {"cuDeviceGetUuid", 9020, "cuDeviceGetUuid"},
    {"cuDeviceGetUuid", 11040, "cuDeviceGetUuid_v2"},
    {"cuDevicePrimaryCtxRelease", 11000, "cuDevicePrimaryCtxRelease_v2"},
    {"cuDevicePrimaryCtxReset", 11000, "cuDevicePrimaryCtxReset_v2"},
    {"cuDevicePrimaryCtxSetFlags", 11000, "cuDevicePrimaryCtxSetFlags_v2"},
    {"cuDeviceTotalMem", 3020, "cuDeviceTotalMem_v2"},
    {"cuEventDestroy", 4000, "cuEventDestroy_v2"},
    {"cuEventElapsedTime", 2000, "cuEventElapsedTime"},
    {"cuEventElapsedTime", 12080, "cuEventElapsedTime_v2"},
    {"cuGetProcAddress", 11030, "cuGetProcAddress"},
    {"cuGetProcAddress", 12000, "cuGetProcAddress_v2"},
    {"cuMemAlloc", 3020, "cuMemAlloc_v2"},
    {"cuMemAllocHost", 3020, "cuMemAllocHost_v2"},
    {"cuMemAllocPitch", 3020, "cuMemAllocPitch_v2"},
    {"cuMemFree", 3020, "cuMemFree_v2"},
    {"cuMemGetAddressRange", 3020, "cuMemGetAddressRange_v2"},
    {"cuMemGetInfo", 3020, "cuMemGetInfo_v2"},
    {"cuMemHostGetDevicePointer", 3020, "cuMemHostGetDevicePointer_v2"},
    {"cuMemHostRegister", 6050, "cuMemHostRegister_v2"},
    {"cuMemcpyDtoD", 3020, "cuMemcpyDtoD_v2"},
    {"cuMemcpyDtoDAsync", 3020, "cuMemcpyDtoDAsync_v2"},
    {"cuMemcpyDtoH", 3020, "cuMemcpyDtoH_v2"},
    {"cuMemcpyDtoHAsync", 3020, "cuMemcpyDtoHAsync_v2"},
    {"cuMemcpyHtoD", 3020, "cuMemcpyHtoD_v2"},
    {"cuMemcpyHtoDAsync", 3020, "cuMemcpyHtoDAsync_v2"},
    {"cuMemsetD16", 3020, "cuMemsetD16_v2"},
    {"cuMemsetD32", 3020, "cuMemsetD32_v2"},
    {"cuMemsetD8", 3020, "cuMemsetD8_v2"},
    {"cuModuleGetGlobal", 3020, "cuModuleGetGlobal_v2"},
    {"cuStreamDestroy", 4000, "cuStreamDestroy_v2"},
    {"cuStreamGetCaptureInfo", 11030, "cuStreamGetCaptureInfo_v2"},
    {"cuStreamGetCtx", 9020, "cuStreamGetCtx"},
    {"cuStreamGetCtx", 12050, "cuStreamGetCtx_v2"},
    {"cuStreamWaitValue32", 11070, "cuStreamWaitValue32_v2"},
    {"cuStreamWaitValue64", 11070, "cuStreamWaitValue64_v2"},
    {"cuStreamWriteValue32", 11070, "cuStreamWriteValue32_v2"},
    {"cuStreamWriteValue64", 11070, "cuStreamWriteValue64_v2"},
};

static void *self_handle(void) {
    static void *h;
    if (!h) {
        Dl_info info;
        if (dladdr((void *)&cuInit, &info) && info.dli_fname) h = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    }
    return h;
}

static CUresult get_proc(const char *symbol, void **pfn, int version, cuuint64_t flags, int *status) {
    T("symbol=%s version=%d flags=%llu", symbol ? symbol : "(null)", version, flags);
    if (status) *status = 1; /* CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND */
    if (!symbol || !pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    char base[128];
    snprintf(base, sizeof base, "%s", symbol);
    /* per-thread-default-stream variants behave the same here */
    size_t len = strlen(base);
    if (len > 5 && (strcmp(base + len - 5, "_ptds") == 0 || strcmp(base + len - 5, "_ptsz") == 0)) base[len - 5] = 0;
    const char *impl = base;
    int listed = 0, best = -1;
    for (size_t i = 0; i < sizeof k_versions / sizeof k_versions[0]; i++) {
        if (strcmp(k_versions[i].name, base) != 0) continue;
        listed = 1;
        if (k_versions[i].version <= version && k_versions[i].version > best) {
            best = k_versions[i].version;
            impl = k_versions[i].impl;
        }
    }
    if (listed && best < 0) {
        if (status) *status = 2; /* CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT */
        return CUDA_ERROR_NOT_FOUND;
    }
    void *h = self_handle();
    void *p = h ? dlsym(h, impl) : NULL;
    if (!p) {
        T("symbol=%s: not implemented by the fake", impl);
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = p;
    if (status) *status = 0;
    return CUDA_SUCCESS;
}

FG_EXPORT CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags) {
    return get_proc(symbol, pfn, cudaVersion, flags, NULL);
}

FG_EXPORT CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                                       int *symbolStatus) {
    return get_proc(symbol, pfn, cudaVersion, flags, symbolStatus);
}

/* ------------------------------------------------------------------ for the fake runtime */

FG_EXPORT CUresult fakegpu_alloc(int ordinal, size_t bytes, const char *api, CUdeviceptr *out) {
    if (!g_inited) {
        CUresult rc = cuInit(0);
        if (rc != CUDA_SUCCESS) return rc;
    }
    if (!valid_dev(ordinal)) return CUDA_ERROR_INVALID_DEVICE;
    return fg_mem_alloc(ordinal, &g_primary[ordinal], bytes, FG_KIND_DEVICE, api, out);
}
