/*
 * fakenvml.c - libnvidia-ml.so.1, NVML of the fake NVIDIA driver: what nvidia-ml-py (pynvml)
 * and the kit's runtime ask (driver and CUDA versions, cards, memory, processes).
 *
 * Like the real NVML it ignores CUDA_VISIBLE_DEVICES and numbers cards in PCI order. Memory
 * "used" is the bytes allocated on the card by every process in FAKEGPU_LEDGER (or by this
 * process alone without a ledger), read from the fake libcuda.so.1 next to this file, which
 * holds the configuration and the accounting (dlopen'ed by path). Struct layouts follow the
 * NVML API reference (docs.nvidia.com/deploy/nvml-api) and nvidia-ml-py's pynvml.py.
 */
#define _GNU_SOURCE
#include "fakegpu.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_FUNCTION_NOT_FOUND = 13,
    NVML_ERROR_ARGUMENT_VERSION_MISMATCH = 25,
    NVML_ERROR_UNKNOWN = 999
};

typedef struct fg_nvml_device {
    int index;
} *nvmlDevice_t;

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;

typedef struct {
    unsigned int version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;
#define NVML_MEMORY_V2 ((unsigned int)(sizeof(nvmlMemory_v2_t) | (2u << 24))) /* 0x02000028 */

typedef struct {
    char busIdLegacy[16];
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[32];
} nvmlPciInfo_t;

typedef struct {
    unsigned int pid;
    unsigned long long usedGpuMemory;
    unsigned int gpuInstanceId, computeInstanceId;
} nvmlProcessInfo_t; /* _v2 and _v3 */

typedef struct {
    unsigned int gpu, memory;
} nvmlUtilization_t;

#define T(...) trace(__func__, __VA_ARGS__)

static struct {
    void *h;
    const fg_config *(*config)(void);
    const char *(*config_error)(void);
    void (*trace)(const char *, const char *, const char *, ...);
    int (*trace_enabled)(void);
    uint64_t (*card_used)(int);
    int (*card_processes)(int, fg_proc_usage *, int);
} D;

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_loaded, g_refcount;
static const fg_config *C;
static struct fg_nvml_device g_devices[FG_MAX_CARDS];

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
    if (!D.h) return;
    *(void **)&D.config = dlsym(D.h, "fakegpu_config");
    *(void **)&D.config_error = dlsym(D.h, "fakegpu_config_error");
    *(void **)&D.trace = dlsym(D.h, "fakegpu_trace");
    *(void **)&D.trace_enabled = dlsym(D.h, "fakegpu_trace_enabled");
    *(void **)&D.card_used = dlsym(D.h, "fakegpu_card_used");
    *(void **)&D.card_processes = dlsym(D.h, "fakegpu_card_processes");
    g_loaded = D.config && D.config_error && D.trace && D.trace_enabled && D.card_used && D.card_processes;
    for (int i = 0; i < FG_MAX_CARDS; i++) g_devices[i].index = i;
}

static int loaded(void) {
    pthread_once(&g_once, load);
    return g_loaded;
}

static void trace(const char *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void trace(const char *fn, const char *fmt, ...) {
    if (!loaded() || !D.trace_enabled()) return;
    char buf[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    D.trace("libnvidia-ml", fn, "%s", buf);
}

static int dev_index(nvmlDevice_t d) {
    if (!C || d < &g_devices[0] || d >= &g_devices[C->count]) return -1;
    return d->index;
}

#define NEED_INIT()                                                                                \
    do {                                                                                           \
        if (g_refcount <= 0) return NVML_ERROR_UNINITIALIZED;                                      \
    } while (0)
#define DEVICE(d, i)                                                                               \
    NEED_INIT();                                                                                   \
    int i = dev_index(d);                                                                          \
    if (i < 0) return NVML_ERROR_INVALID_ARGUMENT

static nvmlReturn_t copy_str(char *out, unsigned int len, const char *s) {
    if (!out) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len) return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

/* ---- init ---- */

FG_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    T("flags=%u", flags);
    if (!loaded()) {
        const char *m = "fakegpu: the fake libnvidia-ml needs the fake libcuda.so.1 next to it\n";
        ssize_t w = write(2, m, strlen(m));
        (void)w;
        return NVML_ERROR_LIBRARY_NOT_FOUND;
    }
    const fg_config *c = D.config(); /* an invalid configuration was reported on stderr */
    if (!c) return NVML_ERROR_INVALID_ARGUMENT;
    pthread_mutex_lock(&g_mu);
    C = c;
    g_refcount++;
    pthread_mutex_unlock(&g_mu);
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }

FG_EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

FG_EXPORT nvmlReturn_t nvmlShutdown(void) {
    T("%s", "");
    pthread_mutex_lock(&g_mu);
    nvmlReturn_t r = NVML_SUCCESS;
    if (g_refcount <= 0)
        r = NVML_ERROR_UNINITIALIZED;
    else
        g_refcount--;
    pthread_mutex_unlock(&g_mu);
    return r;
}

FG_EXPORT const char *nvmlErrorString(nvmlReturn_t r) {
    switch (r) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 5: return "Already Initialized";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 25: return "Argument Version Mismatch";
    default: return "Unknown Error";
    }
}

/* ---- system ---- */

FG_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    T("%s", "");
    NEED_INIT();
    return copy_str(version, length, C->driver_version);
}

FG_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    T("%s", "");
    NEED_INIT();
    char v[64];
    snprintf(v, sizeof v, "%d.%s", C->cuda_version / 1000, C->driver_version); /* "12.560.35.03" */
    return copy_str(version, length, v);
}

FG_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) {
    T("%s", "");
    NEED_INIT();
    if (!v) return NVML_ERROR_INVALID_ARGUMENT;
    *v = C->cuda_version;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v) { return nvmlSystemGetCudaDriverVersion(v); }

/* ---- devices ---- */

FG_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    T("%s", "");
    NEED_INIT();
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = (unsigned)C->count;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    T("index=%u", index);
    NEED_INIT();
    if (!device || index >= (unsigned)C->count) return NVML_ERROR_INVALID_ARGUMENT;
    *device = &g_devices[index];
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    T("uuid=%s", uuid ? uuid : "(null)");
    NEED_INIT();
    if (!uuid || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < C->count; i++)
        if (strcasecmp(C->cards[i].uuid, uuid) == 0) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    return NVML_ERROR_NOT_FOUND;
}

static void pci_info(int i, nvmlPciInfo_t *p) {
    memset(p, 0, sizeof *p);
    p->domain = 0;
    p->bus = (unsigned)C->cards[i].pci_bus;
    p->device = 0;
    p->pciDeviceId = 0x20B010DEu;    /* A100 SXM4 (device 0x20B0, vendor 0x10DE) */
    p->pciSubSystemId = 0x134F10DEu;
    snprintf(p->busIdLegacy, sizeof p->busIdLegacy, "0000:%02X:00.0", p->bus);
    snprintf(p->busId, sizeof p->busId, "00000000:%02X:00.0", p->bus);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *busId, nvmlDevice_t *device) {
    T("bus=%s", busId ? busId : "(null)");
    NEED_INIT();
    if (!busId || !device) return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < C->count; i++) {
        nvmlPciInfo_t p;
        pci_info(i, &p);
        if (strcasecmp(p.busId, busId) == 0 || strcasecmp(p.busIdLegacy, busId) == 0) {
            *device = &g_devices[i];
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned int length) {
    T("%s", "");
    DEVICE(d, i);
    return copy_str(name, length, C->cards[i].name);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned int length) {
    T("%s", "");
    DEVICE(d, i);
    return copy_str(uuid, length, C->cards[i].uuid);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetSerial(nvmlDevice_t d, char *serial, unsigned int length) {
    T("%s", "");
    DEVICE(d, i);
    char s[32];
    snprintf(s, sizeof s, "FAKE%010d", i);
    return copy_str(serial, length, s);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned int *index) {
    T("%s", "");
    DEVICE(d, i);
    if (!index) return NVML_ERROR_INVALID_ARGUMENT;
    *index = (unsigned)i;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned int *minor) {
    T("%s", "");
    DEVICE(d, i);
    if (!minor) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = (unsigned)i; /* /dev/nvidiaN */
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetBrand(nvmlDevice_t d, int *type) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!type) return NVML_ERROR_INVALID_ARGUMENT;
    *type = 2; /* NVML_BRAND_TESLA: a data-centre card */
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetArchitecture(nvmlDevice_t d, unsigned int *arch) {
    T("%s", "");
    DEVICE(d, i);
    if (!arch) return NVML_ERROR_INVALID_ARGUMENT;
    /* nvmlDeviceArchitecture_t: VOLTA 5, TURING 6, AMPERE 7, ADA 8, HOPPER 9, BLACKWELL 10 */
    int m = C->cards[i].cc_major, n = C->cards[i].cc_minor;
    *arch = m >= 10 ? 10 : m == 9 ? 9 : m == 8 && n >= 9 ? 8 : m == 8 ? 7 : m == 7 && n >= 5 ? 6 : m == 7 ? 5 : 4;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor) {
    T("%s", "");
    DEVICE(d, i);
    if (!major || !minor) return NVML_ERROR_INVALID_ARGUMENT;
    *major = C->cards[i].cc_major;
    *minor = C->cards[i].cc_minor;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    T("%s", "");
    DEVICE(d, i);
    if (!pci) return NVML_ERROR_INVALID_ARGUMENT;
    pci_info(i, pci);
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v2(nvmlDevice_t d, nvmlPciInfo_t *pci) {
    return nvmlDeviceGetPciInfo_v3(d, pci); /* same size; v2 has the legacy id in busId */
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m) {
    T("%s", "");
    DEVICE(d, i);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    uint64_t total = C->cards[i].total_bytes, used = D.card_used(i);
    if (used > total) used = total;
    m->total = total;
    m->used = used;
    m->free = total - used;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m) {
    T("%s", "");
    DEVICE(d, i);
    if (!m) return NVML_ERROR_INVALID_ARGUMENT;
    if (m->version != NVML_MEMORY_V2) return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    uint64_t total = C->cards[i].total_bytes, used = D.card_used(i);
    if (used > total) used = total;
    m->total = total;
    m->reserved = 0; /* the fake reserves nothing for the driver */
    m->used = used;
    m->free = total - used;
    return NVML_SUCCESS;
}

static nvmlReturn_t processes(nvmlDevice_t d, unsigned int *count, nvmlProcessInfo_t *infos) {
    DEVICE(d, i);
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    fg_proc_usage procs[256];
    int n = D.card_processes(i, procs, 256);
    if (n > 256) n = 256;
    if (!infos || *count < (unsigned)n) {
        *count = (unsigned)n;
        return n == 0 ? NVML_SUCCESS : NVML_ERROR_INSUFFICIENT_SIZE;
    }
    for (int k = 0; k < n; k++)
        infos[k] = (nvmlProcessInfo_t){(unsigned)procs[k].pid, procs[k].bytes, 0xFFFFFFFFu, 0xFFFFFFFFu};
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                               nvmlProcessInfo_t *infos) {
    T("%s", "");
    return processes(d, count, infos);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeRunningProcesses_v2(nvmlDevice_t d, unsigned int *count,
                                                               nvmlProcessInfo_t *infos) {
    T("%s", "");
    return processes(d, count, infos);
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetGraphicsRunningProcesses_v3(nvmlDevice_t d, unsigned int *count,
                                                                nvmlProcessInfo_t *infos) {
    T("%s", "");
    DEVICE(d, i);
    (void)i, (void)infos;
    if (!count) return NVML_ERROR_INVALID_ARGUMENT;
    *count = 0;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t d, nvmlUtilization_t *u) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!u) return NVML_ERROR_INVALID_ARGUMENT;
    u->gpu = 0; /* nothing ever runs */
    u->memory = 0;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetPersistenceMode(nvmlDevice_t d, int *mode) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = 1;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetComputeMode(nvmlDevice_t d, int *mode) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!mode) return NVML_ERROR_INVALID_ARGUMENT;
    *mode = 0; /* NVML_COMPUTEMODE_DEFAULT */
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t d, unsigned int *current, unsigned int *pending) {
    T("%s", "");
    DEVICE(d, i);
    (void)i, (void)current, (void)pending;
    return NVML_ERROR_NOT_SUPPORTED;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetTemperature(nvmlDevice_t d, int sensor, unsigned int *temp) {
    T("sensor=%d", sensor);
    DEVICE(d, i);
    (void)i;
    if (!temp) return NVML_ERROR_INVALID_ARGUMENT;
    *temp = 30;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetPowerUsage(nvmlDevice_t d, unsigned int *mw) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!mw) return NVML_ERROR_INVALID_ARGUMENT;
    *mw = 55000;
    return NVML_SUCCESS;
}

/* XLA asks these for its PCIe/NVLink bandwidth model and multi-node NVLink fabric. */
FG_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkGeneration(nvmlDevice_t d, unsigned int *gen) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!gen) return NVML_ERROR_INVALID_ARGUMENT;
    *gen = 4;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetCurrPcieLinkWidth(nvmlDevice_t d, unsigned int *width) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!width) return NVML_ERROR_INVALID_ARGUMENT;
    *width = 16;
    return NVML_SUCCESS;
}

FG_EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t d, unsigned int link, int *isActive) {
    T("link=%u", link);
    DEVICE(d, i);
    (void)i;
    if (!isActive) return NVML_ERROR_INVALID_ARGUMENT;
    *isActive = 0; /* NVML_FEATURE_DISABLED: no NVLink modelled */
    return NVML_SUCCESS;
}

/* nvmlGpuFabricInfoV_t: version, clusterUuid[16], status, cliqueId, state (+ healthMask ...).
 * Only `state` is written: NVML_GPU_FABRIC_STATE_NOT_SUPPORTED (no multi-node NVLink). */
typedef struct {
    unsigned int version;
    unsigned char clusterUuid[16];
    nvmlReturn_t status;
    unsigned int cliqueId;
    unsigned char state;
} nvmlGpuFabricInfo_head;

FG_EXPORT nvmlReturn_t nvmlDeviceGetGpuFabricInfoV(nvmlDevice_t d, nvmlGpuFabricInfo_head *info) {
    T("%s", "");
    DEVICE(d, i);
    (void)i;
    if (!info) return NVML_ERROR_INVALID_ARGUMENT;
    memset(info->clusterUuid, 0, sizeof info->clusterUuid);
    info->status = NVML_ERROR_NOT_SUPPORTED;
    info->cliqueId = 0;
    info->state = 0;
    return NVML_SUCCESS;
}
