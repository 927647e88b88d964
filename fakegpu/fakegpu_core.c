/*
 * fakegpu_core.c - configuration, trace, allocation log, shared ledger and device-memory
 * accounting of the fake NVIDIA driver (see fakegpu.h for what the fake is and is not, and
 * for the environment variables). Linked into libcuda.so.1 only: libcudart and libnvidia-ml
 * reach this state through the exported fakegpu_* functions, so a process has one copy.
 *
 * Device memory has no backing store. Each card gets a range of the process's address space
 * reserved PROT_NONE (never readable or writable by host code: a stray dereference faults, as
 * it would on a real GPU pointer) and allocations are carved out of it, 512-byte aligned
 * (2 MiB aligned from 2 MiB up, like the real driver's large pages). The range is twice the
 * card's size, so fragmentation never refuses an allocation: only the accounting does.
 * Accounting counts the bytes asked for, exactly.
 */
#define _GNU_SOURCE
#include "fakegpu.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define MIB (1024ull * 1024ull)
#define PATHBUF (FG_PATH_LEN + 128) /* a ledger path: directory + token + suffix */

/* ------------------------------------------------------------------ trace */

static int g_trace = -1;

static int trace_on(void) {
    if (g_trace < 0) {
        const char *v = getenv("FAKEGPU_TRACE");
        g_trace = v && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
    }
    return g_trace;
}

FG_EXPORT int fakegpu_trace_enabled(void) { return trace_on(); }

FG_EXPORT void fakegpu_trace(const char *lib, const char *fn, const char *fmt, ...) {
    if (!trace_on()) return;
    char line[1024];
    int n = snprintf(line, sizeof line, "fakegpu[%ld] %s: %s(", (long)getpid(), lib, fn);
    if (n < 0) return;
    if (fmt && (size_t)n < sizeof line) {
        va_list ap;
        va_start(ap, fmt);
        int m = vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
        va_end(ap);
        if (m > 0) n += m;
    }
    if ((size_t)n > sizeof line - 3) n = (int)sizeof line - 3;
    line[n++] = ')';
    line[n++] = '\n';
    ssize_t w = write(2, line, (size_t)n);
    (void)w;
}

/* ------------------------------------------------------------------ configuration */

static fg_config g_cfg;
static char g_err[1024];
static int g_cfg_ok;
static pthread_once_t g_cfg_once = PTHREAD_ONCE_INIT;

#define MAX_ITEMS (FG_MAX_CARDS + 1)
#define ITEM_LEN 128

static int bad(const char *var, const char *value, const char *why) {
    snprintf(g_err, sizeof g_err, "fakegpu: invalid %s='%s': %s", var, value ? value : "", why);
    return 0;
}

/* Split "a, b,c" into trimmed items; -1 when an item is empty or too long, or too many. */
static int split(const char *value, char items[MAX_ITEMS][ITEM_LEN]) {
    int n = 0;
    const char *p = value;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        if (len == 0 || len >= ITEM_LEN || n >= MAX_ITEMS) return -1;
        memcpy(items[n], p, len);
        items[n][len] = 0;
        n++;
        if (!end) break;
        p = end + 1;
    }
    return n;
}

static int parse_uint(const char *s, unsigned long long max, unsigned long long *out) {
    if (!*s) return 0;
    unsigned long long v = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p)) return 0;
        v = v * 10 + (unsigned long long)(*p - '0');
        if (v > max) return 0;
    }
    *out = v;
    return 1;
}

static int parse_cc(const char *s, int *major, int *minor) {
    unsigned long long a, b;
    char buf[ITEM_LEN];
    snprintf(buf, sizeof buf, "%s", s);
    char *dot = strchr(buf, '.');
    if (!dot) return 0;
    *dot = 0;
    if (!parse_uint(buf, 99, &a) || !parse_uint(dot + 1, 9, &b) || a == 0 || strlen(dot + 1) != 1)
        return 0;
    *major = (int)a;
    *minor = (int)b;
    return 1;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    c = (char)tolower((unsigned char)c);
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
}

/* "GPU-8-4-4-4-12" hex; stores the canonical lowercase text and the 16 bytes. */
static int parse_uuid(const char *s, char out[FG_UUID_LEN], unsigned char bytes[16]) {
    static const int groups[5] = {8, 4, 4, 4, 12};
    if (strncmp(s, "GPU-", 4) != 0 || strlen(s) != 40) return 0;
    const char *p = s + 4;
    int nb = 0, half = -1;
    for (int g = 0; g < 5; g++) {
        for (int i = 0; i < groups[g]; i++, p++) {
            int v = hexval(*p);
            if (v < 0) return 0;
            if (half < 0) {
                half = v;
            } else {
                bytes[nb++] = (unsigned char)(half * 16 + v);
                half = -1;
            }
        }
        if (g < 4 && *p++ != '-') return 0;
    }
    snprintf(out, FG_UUID_LEN, "GPU-");
    for (int i = 4; i < 40; i++) out[i] = (char)tolower((unsigned char)s[i]);
    out[40] = 0;
    return 1;
}

/* Default CUDA version supported by a driver branch (the CUDA toolkit release notes, table
 * "CUDA Toolkit and Corresponding Driver Versions": the first driver of each release). */
static int cuda_for_driver(int branch) {
    static const int table[][2] = {
        {450, 11000}, {455, 11010}, {460, 11020}, {465, 11030}, {470, 11040},
        {495, 11050}, {510, 11060}, {515, 11070}, {520, 11080}, {525, 12000},
        {530, 12010}, {535, 12020}, {545, 12030}, {550, 12040}, {555, 12050},
        {560, 12060}, {570, 12080}, {575, 12090}, {580, 13000}, {590, 13010},
    };
    int v = 0;
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (branch >= table[i][0]) v = table[i][1];
    return v;
}

static const char *env(const char *name) {
    const char *v = getenv(name);
    return v;
}

/* A per-card list: one value for all cards, or exactly one per card. */
static int list_for(const char *var, const char *value, char items[MAX_ITEMS][ITEM_LEN], int *n) {
    *n = split(value, items);
    if (*n < 0) return bad(var, value, "expected one value or a comma list, one per card (no empty items)");
    return 1;
}

static int parse_visible(void) {
    const char *v = getenv("CUDA_VISIBLE_DEVICES");
    int n = 0;
    if (!v) {
        for (int i = 0; i < g_cfg.count; i++) g_cfg.visible[n++] = i;
        g_cfg.visible_count = n;
        return 1;
    }
    /* The CUDA Programming Guide, "CUDA Environment Variables": indices or UUIDs, comma
     * separated; devices after an invalid entry are hidden. */
    const char *p = v;
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[ITEM_LEN];
        while (len && isspace((unsigned char)*p)) p++, len--;
        while (len && isspace((unsigned char)p[len - 1])) len--;
        if (len == 0 || len >= sizeof item) break;
        memcpy(item, p, len);
        item[len] = 0;
        int found = -1;
        unsigned long long idx;
        if (strncasecmp(item, "GPU-", 4) == 0) {
            for (int i = 0; i < g_cfg.count; i++) {
                if (strncasecmp(g_cfg.cards[i].uuid, item, len) == 0) {
                    if (found >= 0) { found = -2; break; } /* ambiguous prefix */
                    found = i;
                }
            }
        } else if (parse_uint(item, 1000, &idx) && idx < (unsigned long long)g_cfg.count) {
            found = (int)idx;
        }
        if (found < 0) break;
        for (int j = 0; j < n; j++)
            if (g_cfg.visible[j] == found) found = -1;
        if (found < 0 || n >= FG_MAX_CARDS) break;
        g_cfg.visible[n++] = found;
        if (!end) break;
        p = end + 1;
    }
    g_cfg.visible_count = n;
    return 1;
}

static int parse_all(void) {
    const char *v;
    int count = -1, lens[4] = {0, 0, 0, 0};
    const char *vars[4] = {"FAKEGPU_MEMORY_MIB", "FAKEGPU_NAME", "FAKEGPU_CC", "FAKEGPU_UUID"};
    static char lists[4][MAX_ITEMS][ITEM_LEN];

    if ((v = env("FAKEGPU_COUNT")) != NULL) {
        unsigned long long c;
        if (!parse_uint(v, FG_MAX_CARDS, &c)) return bad("FAKEGPU_COUNT", v, "expected a number of cards, 0-16");
        count = (int)c;
    }
    int longest = 0;
    for (int k = 0; k < 4; k++) {
        if ((v = env(vars[k])) == NULL) continue;
        if (!list_for(vars[k], v, lists[k], &lens[k])) return 0;
        if (lens[k] > FG_MAX_CARDS) return bad(vars[k], v, "more than 16 cards");
        if (lens[k] > longest) longest = lens[k];
    }
    if (count < 0) count = longest > 0 ? longest : 1;
    for (int k = 0; k < 4; k++) {
        if (lens[k] == 0 || count == 0) continue;
        if (lens[k] != 1 && lens[k] != count) {
            char why[200];
            snprintf(why, sizeof why, "%d values for %d cards: give one value or one per card", lens[k], count);
            return bad(vars[k], env(vars[k]), why);
        }
        if (k == 3 && lens[k] != count)
            return bad(vars[k], env(vars[k]), "needs one UUID per card");
    }
    g_cfg.count = count;
    for (int i = 0; i < count; i++) {
        fg_card *c = &g_cfg.cards[i];
        unsigned long long mib = 16384;
        if (lens[0]) {
            const char *s = lists[0][lens[0] == 1 ? 0 : i];
            if (!parse_uint(s, 1ull << 24, &mib) || mib == 0)
                return bad(vars[0], env(vars[0]), "expected a whole number of MiB (1-16777216), one or one per card");
        }
        c->total_bytes = mib * MIB;
        const char *name = lens[1] ? lists[1][lens[1] == 1 ? 0 : i] : "Fake A100-SXM4-16GB";
        size_t name_len = strlen(name);
        if (name_len >= FG_NAME_LEN) return bad(vars[1], env(vars[1]), "a name has at most 95 characters");
        memcpy(c->name, name, name_len + 1);
        c->cc_major = 8;
        c->cc_minor = 0;
        if (lens[2] && !parse_cc(lists[2][lens[2] == 1 ? 0 : i], &c->cc_major, &c->cc_minor))
            return bad(vars[2], env(vars[2]), "expected a compute capability such as 8.0 or 9.0, one or one per card");
        if (lens[3]) {
            if (!parse_uuid(lists[3][i], c->uuid, c->uuid_bytes))
                return bad(vars[3], env(vars[3]), "expected GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx (hex), one per card");
            for (int j = 0; j < i; j++)
                if (strcmp(g_cfg.cards[j].uuid, c->uuid) == 0) return bad(vars[3], env(vars[3]), "UUIDs must differ");
        } else {
            char u[64];
            snprintf(u, sizeof u, "GPU-fa6e0000-0000-4000-8000-%012x", i);
            parse_uuid(u, c->uuid, c->uuid_bytes);
        }
        c->pci_bus = 0x07 + i * 0x08; /* 0000:07:00.0, 0000:0f:00.0, ... (A100 HGX-like) */
    }

    snprintf(g_cfg.driver_version, sizeof g_cfg.driver_version, "560.35.03");
    if ((v = env("FAKEGPU_DRIVER")) != NULL) {
        /* NNN.NN or NNN.NN.NN */
        int parts = 0, digits = 0, ok = strlen(v) < sizeof g_cfg.driver_version && *v;
        for (const char *p = v; ok && *p; p++) {
            if (isdigit((unsigned char)*p)) {
                digits++;
            } else if (*p == '.' && digits) {
                parts++;
                digits = 0;
            } else {
                ok = 0;
            }
        }
        if (!ok || !digits || parts < 1 || parts > 2 || atoi(v) < 100)
            return bad("FAKEGPU_DRIVER", v, "expected a driver version such as 560.35.03 or 570.124.06");
        snprintf(g_cfg.driver_version, sizeof g_cfg.driver_version, "%s", v);
    }
    if ((v = env("FAKEGPU_CUDA")) != NULL) {
        char buf[ITEM_LEN];
        unsigned long long a, b;
        snprintf(buf, sizeof buf, "%s", v);
        char *dot = strchr(buf, '.');
        if (!dot) return bad("FAKEGPU_CUDA", v, "expected a CUDA version such as 12.6");
        *dot = 0;
        if (!parse_uint(buf, 99, &a) || !parse_uint(dot + 1, 99, &b) || a < 1 || strlen(dot + 1) > 2)
            return bad("FAKEGPU_CUDA", v, "expected a CUDA version such as 12.6");
        g_cfg.cuda_version = (int)(a * 1000 + b * 10);
    } else {
        g_cfg.cuda_version = cuda_for_driver(atoi(g_cfg.driver_version));
        if (!g_cfg.cuda_version)
            return bad("FAKEGPU_DRIVER", g_cfg.driver_version,
                       "no default CUDA version for a driver older than 450; set FAKEGPU_CUDA");
    }
    if ((v = env("FAKEGPU_TRACE")) != NULL && *v && strcmp(v, "0") && strcmp(v, "1") &&
        strcmp(v, "true") && strcmp(v, "false"))
        return bad("FAKEGPU_TRACE", v, "expected 1 or 0");
    g_cfg.trace = trace_on();
    if ((v = env("FAKEGPU_LOG")) != NULL && *v) {
        if (strlen(v) >= FG_PATH_LEN) return bad("FAKEGPU_LOG", v, "path too long");
        int fd = open(v, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
        if (fd < 0) {
            char why[300];
            snprintf(why, sizeof why, "cannot open it for appending: %s", strerror(errno));
            return bad("FAKEGPU_LOG", v, why);
        }
        close(fd);
        snprintf(g_cfg.log_path, sizeof g_cfg.log_path, "%s", v);
    }
    if ((v = env("FAKEGPU_LEDGER")) != NULL && *v) {
        if (strlen(v) >= FG_PATH_LEN - 64) return bad("FAKEGPU_LEDGER", v, "path too long");
        int created = mkdir(v, 0700) == 0;
        if (!created && errno != EEXIST) {
            char why[300];
            snprintf(why, sizeof why, "cannot create the directory: %s", strerror(errno));
            return bad("FAKEGPU_LEDGER", v, why);
        }
        /* O_NOFOLLOW: a symbolic link planted at the path is refused, never followed (a chmod
         * through it made the folder it points to world-writable). */
        int dfd = open(v, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
            return bad("FAKEGPU_LEDGER", v, "not a directory (a symbolic link is refused)");
        /* Containers of one test run as different users (root model servers, a Jupyter kernel as
         * uid 1000) and share this directory, like /tmp: the process that created it makes it
         * 1777 (sticky: no uid can delete or replace another's entries), whatever the umask. A
         * folder it did not create keeps its owner's mode. */
        if (created) (void)fchmod(dfd, 01777);
        close(dfd);
        if (access(v, W_OK | X_OK) != 0) return bad("FAKEGPU_LEDGER", v, "directory not writable");
        snprintf(g_cfg.ledger_dir, sizeof g_cfg.ledger_dir, "%s", v);
    }
    return parse_visible();
}

static void new_token(void);

static void load_config(void) {
    g_cfg_ok = parse_all();
    if (!g_cfg_ok) {
        char line[sizeof g_err + 2];
        int n = snprintf(line, sizeof line, "%s\n", g_err);
        ssize_t w = write(2, line, (size_t)n);
        (void)w;
    }
    new_token();
}

FG_EXPORT const fg_config *fakegpu_config(void) {
    pthread_once(&g_cfg_once, load_config);
    return g_cfg_ok ? &g_cfg : NULL;
}

FG_EXPORT const char *fakegpu_config_error(void) {
    pthread_once(&g_cfg_once, load_config);
    return g_cfg_ok ? NULL : g_err;
}

/* ------------------------------------------------------------------ process state */

typedef struct {
    CUdeviceptr addr; /* base address returned */
    size_t span;      /* address range taken (rounded) */
    size_t bytes;     /* bytes asked for (accounted) */
    void *owner;      /* context or pool */
    int kind;
} fg_block;

typedef struct {
    CUdeviceptr base; /* reserved range [base, base + va_size) */
    size_t va_size;
    fg_block *blocks; /* device blocks, sorted by address */
    size_t n, cap;
    fg_block *managed; /* managed (host-backed) blocks */
    size_t mn, mcap;
    uint64_t live; /* bytes this process holds on the card */
} fg_card_state;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static fg_card_state g_cards[FG_MAX_CARDS];
static char g_token[24];
static long g_pid;
static int g_ready;

typedef struct {
    void *p;
    size_t size;
    int kind;
} fg_host;
static fg_host *g_hosts;
static size_t g_nhosts, g_caphosts;

static int g_log_fd = -1;
static int g_own_lock_fd = -1; /* held for the process's life: others see we are alive */
static int g_ledger_written;

static void new_token(void) {
    unsigned char r[8];
    if (getrandom(r, sizeof r, GRND_NONBLOCK) != (ssize_t)sizeof r) {
        unsigned long long x = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 32) ^
                               (unsigned long long)(uintptr_t)&r;
        memcpy(r, &x, sizeof r);
    }
    for (int i = 0; i < 8; i++) snprintf(g_token + 2 * i, 3, "%02x", r[i]);
    g_pid = (long)getpid();
}

static void ledger_remove_own(void);

/* After fork the child owns no device memory (CUDA is not usable across fork anyway). */
static void atfork_child(void) {
    pthread_mutex_init(&g_mu, NULL);
    for (int i = 0; i < FG_MAX_CARDS; i++) {
        g_cards[i].n = g_cards[i].mn = 0;
        g_cards[i].live = 0;
    }
    if (g_own_lock_fd >= 0) close(g_own_lock_fd);
    g_own_lock_fd = -1;
    g_ledger_written = 0;
    if (g_log_fd >= 0) close(g_log_fd);
    g_log_fd = -1;
    new_token();
}

static pthread_once_t g_init_once = PTHREAD_ONCE_INIT;

static void init_once(void) {
    pthread_atfork(NULL, NULL, atfork_child);
    g_ready = 1;
}

FG_HIDDEN CUresult fg_core_init(void) {
    const fg_config *c = fakegpu_config();
    if (!c) return CUDA_ERROR_INVALID_VALUE;
    pthread_once(&g_init_once, init_once);
    if (c->visible_count == 0) return CUDA_ERROR_NO_DEVICE;
    return CUDA_SUCCESS;
}

FG_HIDDEN int fg_core_ready(void) { return g_ready && g_cfg_ok; }

/* ------------------------------------------------------------------ log */

static void log_event(const char *event, const char *api, int phys, size_t bytes, CUdeviceptr ptr,
                      uint64_t proc_live, uint64_t dev_live) {
    if (!g_cfg.log_path[0]) return;
    if (g_log_fd < 0) {
        g_log_fd = open(g_cfg.log_path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
        if (g_log_fd < 0) return;
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int ordinal = -1;
    for (int i = 0; i < g_cfg.visible_count; i++)
        if (g_cfg.visible[i] == phys) ordinal = i;
    char ptrs[32];
    if (ptr)
        snprintf(ptrs, sizeof ptrs, "\"0x%llx\"", (unsigned long long)ptr);
    else
        snprintf(ptrs, sizeof ptrs, "null");
    char line[1024];
    int n = snprintf(line, sizeof line,
                     "{\"time\": %lld.%06ld, \"token\": \"%s\", \"pid\": %ld, \"event\": \"%s\", "
                     "\"api\": \"%s\", \"device\": %d, \"ordinal\": %d, \"uuid\": \"%s\", "
                     "\"bytes\": %zu, \"ptr\": %s, \"process_live\": %llu, \"device_live\": %llu, "
                     "\"total\": %llu}\n",
                     (long long)ts.tv_sec, ts.tv_nsec / 1000, g_token, g_pid, event, api, phys, ordinal,
                     g_cfg.cards[phys].uuid, bytes, ptrs, (unsigned long long)proc_live,
                     (unsigned long long)dev_live, (unsigned long long)g_cfg.cards[phys].total_bytes);
    if (n > 0 && (size_t)n < sizeof line) {
        ssize_t w = write(g_log_fd, line, (size_t)n); /* one write per line: O_APPEND keeps lines whole */
        (void)w;
    }
}

/* ------------------------------------------------------------------ ledger */

static void ledger_path(char *out, size_t len, const char *token, const char *suffix) {
    snprintf(out, len, "%s/%s%s", g_cfg.ledger_dir, token, suffix);
}

/* The ledger's files, shared by processes of several uids:
 *   ledger.lock, TOKEN.lock  0444: flock needs only a read-only descriptor, so nobody needs to
 *                            write them, and nobody can;
 *   TOKEN.live               0644: written by its process alone (through a new temporary file
 *                            renamed over it), read by all;
 * in a 1777 folder: one uid cannot delete, rename or replace another's files. A uid can add
 * entries of its own (as a real process can allocate on a real card), never change another's.
 * Every open is O_NOFOLLOW: a link planted at a ledger name is never followed. An entry counts
 * only when its .live and .lock have the same owner (no uid can keep another's stale entry
 * alive with a lock of its own). */
#define LEDGER_OPEN (O_CLOEXEC | O_NOFOLLOW)

/* The owner of an open file (statx: glibc 2.28; stat and fstat are GLIBC_2.33 symbols). */
static long fd_owner(int fd) {
    struct statx sx;
    if (statx(fd, "", AT_EMPTY_PATH, STATX_UID, &sx) != 0) return -1;
    return (long)sx.stx_uid;
}

static int ledger_lock(void) {
    char p[PATHBUF];
    snprintf(p, sizeof p, "%s/ledger.lock", g_cfg.ledger_dir);
    int fd = open(p, O_RDONLY | O_CREAT | LEDGER_OPEN, 0444);
    if (fd < 0) return -1;
    while (flock(fd, LOCK_EX) != 0 && errno == EINTR) {
    }
    return fd;
}

static void ledger_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing releases the flock */
}

static void ledger_write_own(void) {
    if (!g_cfg.ledger_dir[0]) return;
    char p[PATHBUF], tmp[PATHBUF];
    if (g_own_lock_fd < 0) {
        ledger_path(p, sizeof p, g_token, ".lock");
        g_own_lock_fd = open(p, O_RDONLY | O_CREAT | O_EXCL | LEDGER_OPEN, 0444);
        if (g_own_lock_fd < 0) return;
        flock(g_own_lock_fd, LOCK_EX | LOCK_NB);
    }
    char body[4096];
    int n = snprintf(body, sizeof body, "fakegpu-ledger 1\npid %ld\ntoken %s\n", g_pid, g_token);
    for (int i = 0; i < g_cfg.count && n > 0 && (size_t)n < sizeof body; i++)
        if (g_cards[i].live)
            n += snprintf(body + n, sizeof body - (size_t)n, "%s %llu\n", g_cfg.cards[i].uuid,
                          (unsigned long long)g_cards[i].live);
    snprintf(tmp, sizeof tmp, "%s/.%s.tmp", g_cfg.ledger_dir, g_token);
    (void)unlink(tmp); /* a leftover of ours; another uid's cannot be removed (sticky folder) */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | LEDGER_OPEN, 0644);
    if (fd < 0) return;
    (void)fchmod(fd, 0644); /* readable by every uid whatever the umask */
    ssize_t w = write(fd, body, (size_t)n);
    (void)w;
    close(fd);
    ledger_path(p, sizeof p, g_token, ".live");
    rename(tmp, p); /* readers see the old or the new file, never half of one */
    g_ledger_written = 1;
}

static void ledger_remove_own(void) {
    if (!g_cfg.ledger_dir[0] || !g_ledger_written) return;
    char p[PATHBUF];
    ledger_path(p, sizeof p, g_token, ".live");
    unlink(p);
    ledger_path(p, sizeof p, g_token, ".lock");
    unlink(p);
}

__attribute__((destructor)) static void at_unload(void) {
    if (g_cfg_ok && g_pid == (long)getpid()) ledger_remove_own();
}

/* Is the process that wrote ledger entry `token` alive? It holds an flock on TOKEN.lock for
 * its whole life (flock works across containers sharing the directory's filesystem). */
static int ledger_alive(const char *token, long owner) {
    char p[PATHBUF];
    ledger_path(p, sizeof p, token, ".lock");
    int fd = open(p, O_RDONLY | LEDGER_OPEN);
    if (fd < 0) return 0;
    if (fd_owner(fd) != owner) { /* not the lock of the entry's writer */
        close(fd);
        return 0;
    }
    int alive = flock(fd, LOCK_EX | LOCK_NB) != 0 && errno == EWOULDBLOCK;
    if (!alive) { /* the owner died without cleaning up (killed): drop its entry */
        char q[PATHBUF];
        ledger_path(q, sizeof q, token, ".live");
        unlink(q);
        unlink(p);
    }
    close(fd);
    return alive;
}

typedef void (*ledger_visit)(const char *uuid, uint64_t bytes, long pid, const char *token, void *arg);

/* Visit the entries of every other live process in the ledger. */
static void ledger_scan(ledger_visit visit, void *arg) {
    DIR *d = opendir(g_cfg.ledger_dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 6 || len > 40 || e->d_name[0] == '.' || strcmp(e->d_name + len - 5, ".live") != 0) continue;
        char token[48];
        memcpy(token, e->d_name, len - 5);
        token[len - 5] = 0;
        if (strcmp(token, g_token) == 0) continue;
        char p[PATHBUF];
        ledger_path(p, sizeof p, token, ".live");
        int lfd = open(p, O_RDONLY | LEDGER_OPEN);
        if (lfd < 0) continue;
        long owner = fd_owner(lfd);
        FILE *f = owner < 0 ? NULL : fdopen(lfd, "r");
        if (!f) {
            close(lfd);
            continue;
        }
        char line[256];
        long pid = 0;
        char uuids[FG_MAX_CARDS][FG_UUID_LEN];
        unsigned long long amounts[FG_MAX_CARDS];
        int k = 0;
        while (fgets(line, sizeof line, f)) {
            char key[64];
            unsigned long long val;
            if (sscanf(line, "pid %ld", &pid) == 1) continue;
            if (sscanf(line, "%63s %llu", key, &val) == 2 && strncmp(key, "GPU-", 4) == 0 &&
                strlen(key) < FG_UUID_LEN && k < FG_MAX_CARDS) {
                snprintf(uuids[k], FG_UUID_LEN, "%s", key);
                amounts[k++] = val;
            }
        }
        fclose(f);
        if (!ledger_alive(token, owner)) continue;
        for (int i = 0; i < k; i++) visit(uuids[i], amounts[i], pid, token, arg);
    }
    closedir(d);
}

typedef struct {
    const char *uuid;
    uint64_t sum;
} sum_arg;

static void sum_visit(const char *uuid, uint64_t bytes, long pid, const char *token, void *arg) {
    (void)pid;
    (void)token;
    sum_arg *s = arg;
    if (strcmp(uuid, s->uuid) == 0) s->sum += bytes;
}

/* Bytes other processes hold on physical card `phys` (0 without a ledger). */
static uint64_t others_used(int phys) {
    if (!g_cfg.ledger_dir[0]) return 0;
    sum_arg s = {g_cfg.cards[phys].uuid, 0};
    ledger_scan(sum_visit, &s);
    return s.sum;
}

FG_EXPORT uint64_t fakegpu_card_used(int phys) {
    if (!fakegpu_config() || phys < 0 || phys >= g_cfg.count) return 0;
    pthread_mutex_lock(&g_mu);
    uint64_t own = g_cards[phys].live;
    pthread_mutex_unlock(&g_mu);
    return own + others_used(phys);
}

typedef struct {
    const char *uuid;
    fg_proc_usage *out;
    int max, n;
} procs_arg;

static void procs_visit(const char *uuid, uint64_t bytes, long pid, const char *token, void *arg) {
    procs_arg *a = arg;
    if (strcmp(uuid, a->uuid) != 0 || bytes == 0) return;
    if (a->n < a->max) {
        a->out[a->n].pid = pid;
        snprintf(a->out[a->n].token, sizeof a->out[a->n].token, "%s", token);
        a->out[a->n].bytes = bytes;
    }
    a->n++;
}

FG_EXPORT int fakegpu_card_processes(int phys, fg_proc_usage *out, int max) {
    if (!fakegpu_config() || phys < 0 || phys >= g_cfg.count) return 0;
    procs_arg a = {g_cfg.cards[phys].uuid, out, max, 0};
    pthread_mutex_lock(&g_mu);
    uint64_t own = g_cards[phys].live;
    pthread_mutex_unlock(&g_mu);
    if (own) procs_visit(a.uuid, own, g_pid, g_token, &a);
    if (g_cfg.ledger_dir[0]) ledger_scan(procs_visit, &a);
    return a.n;
}

/* ------------------------------------------------------------------ device memory */

static int reserve(fg_card_state *s, int phys) {
    if (s->base) return 1;
    size_t size = (size_t)(2 * g_cfg.cards[phys].total_bytes + 64 * MIB);
    void *p = mmap(NULL, size + 2 * MIB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return 0;
    CUdeviceptr base = ((CUdeviceptr)(uintptr_t)p + 2 * MIB - 1) & ~(CUdeviceptr)(2 * MIB - 1);
    s->base = base;
    s->va_size = size;
    return 1;
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem) {
    if (need <= *cap) return 1;
    size_t nc = *cap ? *cap * 2 : 64;
    while (nc < need) nc *= 2;
    void *p = realloc(*arr, nc * elem);
    if (!p) return 0;
    *arr = p;
    *cap = nc;
    return 1;
}

static int phys_of(int ordinal) {
    if (ordinal < 0 || ordinal >= g_cfg.visible_count) return -1;
    return g_cfg.visible[ordinal];
}

FG_HIDDEN CUresult fg_mem_alloc(int ordinal, void *owner, size_t bytes, fg_kind kind, const char *api,
                                CUdeviceptr *out) {
    if (!fg_core_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    int phys = phys_of(ordinal);
    if (phys < 0) return CUDA_ERROR_INVALID_DEVICE;
    if (!out || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
    fg_card_state *s = &g_cards[phys];
    uint64_t total = g_cfg.cards[phys].total_bytes;
    CUresult rc = CUDA_SUCCESS;

    pthread_mutex_lock(&g_mu);
    int lk = g_cfg.ledger_dir[0] ? ledger_lock() : -1;
    uint64_t others = others_used(phys);
    if (bytes > total || others + s->live + bytes > total) {
        log_event("oom", api, phys, bytes, 0, s->live, others + s->live);
        ledger_unlock(lk);
        pthread_mutex_unlock(&g_mu);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    CUdeviceptr addr = 0;
    size_t span = 0;
    if (kind == FG_KIND_MANAGED) {
        /* Managed memory is host memory the host may touch: back it for real. */
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED || !grow((void **)&s->managed, &s->mcap, s->mn + 1, sizeof(fg_block))) {
            if (p != MAP_FAILED) munmap(p, bytes);
            rc = CUDA_ERROR_OUT_OF_MEMORY;
        } else {
            addr = (CUdeviceptr)(uintptr_t)p;
            span = bytes;
            s->managed[s->mn++] = (fg_block){addr, span, bytes, owner, kind};
        }
    } else if (!reserve(s, phys) || !grow((void **)&s->blocks, &s->cap, s->n + 1, sizeof(fg_block))) {
        rc = CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        size_t align = bytes >= 2 * MIB ? 2 * MIB : 512;
        span = (bytes + align - 1) & ~(align - 1);
        CUdeviceptr cur = s->base;
        size_t at = 0;
        for (; at <= s->n; at++) {
            CUdeviceptr start = (cur + align - 1) & ~(CUdeviceptr)(align - 1);
            CUdeviceptr limit = at < s->n ? s->blocks[at].addr : s->base + s->va_size;
            if (start + span <= limit) {
                addr = start;
                break;
            }
            if (at < s->n) cur = s->blocks[at].addr + s->blocks[at].span;
        }
        if (!addr) {
            rc = CUDA_ERROR_OUT_OF_MEMORY; /* address range exhausted: cannot happen below 2x total */
        } else {
            memmove(&s->blocks[at + 1], &s->blocks[at], (s->n - at) * sizeof(fg_block));
            s->blocks[at] = (fg_block){addr, span, bytes, owner, kind};
            s->n++;
        }
    }
    if (rc == CUDA_SUCCESS) {
        s->live += bytes;
        ledger_write_own();
        *out = addr;
        log_event("alloc", api, phys, bytes, addr, s->live, others + s->live);
    } else {
        log_event("oom", api, phys, bytes, 0, s->live, others + s->live);
    }
    ledger_unlock(lk);
    pthread_mutex_unlock(&g_mu);
    return rc;
}

/* Index of the block containing ptr in a sorted array, or -1. */
static long find_block(const fg_block *b, size_t n, CUdeviceptr ptr) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (b[mid].addr + (b[mid].span ? b[mid].span : 1) <= ptr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < n && b[lo].addr <= ptr && ptr < b[lo].addr + (b[lo].span ? b[lo].span : 1)) return (long)lo;
    return -1;
}

/* Remove block `i` of card `phys` (device array when managed == 0). Caller holds g_mu. */
static void drop_block(int phys, int managed, size_t i, const char *api) {
    fg_card_state *s = &g_cards[phys];
    fg_block b = managed ? s->managed[i] : s->blocks[i];
    if (managed) {
        s->managed[i] = s->managed[--s->mn];
        munmap((void *)(uintptr_t)b.addr, b.span);
    } else {
        memmove(&s->blocks[i], &s->blocks[i + 1], (s->n - i - 1) * sizeof(fg_block));
        s->n--;
    }
    s->live -= b.bytes;
    int lk = g_cfg.ledger_dir[0] ? ledger_lock() : -1;
    ledger_write_own();
    uint64_t dev = g_cfg.log_path[0] ? others_used(phys) + s->live : 0;
    ledger_unlock(lk);
    log_event("free", api, phys, b.bytes, b.addr, s->live, dev);
}

FG_HIDDEN CUresult fg_mem_free(CUdeviceptr ptr, const char *api) {
    if (!fg_core_ready()) return CUDA_ERROR_NOT_INITIALIZED;
    if (ptr == 0) return CUDA_SUCCESS;
    pthread_mutex_lock(&g_mu);
    for (int phys = 0; phys < g_cfg.count; phys++) {
        fg_card_state *s = &g_cards[phys];
        long i = find_block(s->blocks, s->n, ptr);
        if (i >= 0 && s->blocks[i].addr == ptr) {
            drop_block(phys, 0, (size_t)i, api);
            pthread_mutex_unlock(&g_mu);
            return CUDA_SUCCESS;
        }
        for (size_t j = 0; j < s->mn; j++) {
            if (s->managed[j].addr == ptr) {
                drop_block(phys, 1, j, api);
                pthread_mutex_unlock(&g_mu);
                return CUDA_SUCCESS;
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    return CUDA_ERROR_INVALID_VALUE;
}

FG_HIDDEN void fg_mem_free_owner(void *owner, const char *api) {
    pthread_mutex_lock(&g_mu);
    for (int phys = 0; phys < g_cfg.count; phys++) {
        fg_card_state *s = &g_cards[phys];
        for (size_t i = s->n; i-- > 0;)
            if (s->blocks[i].owner == owner) drop_block(phys, 0, i, api);
        for (size_t j = s->mn; j-- > 0;)
            if (s->managed[j].owner == owner) drop_block(phys, 1, j, api);
    }
    pthread_mutex_unlock(&g_mu);
}

static int ordinal_of(int phys) {
    for (int i = 0; i < g_cfg.visible_count; i++)
        if (g_cfg.visible[i] == phys) return i;
    return -1;
}

FG_HIDDEN int fg_mem_lookup(CUdeviceptr ptr, int *ordinal, CUdeviceptr *base, size_t *size, void **owner,
                            fg_kind *kind) {
    int found = 0;
    pthread_mutex_lock(&g_mu);
    for (int phys = 0; phys < g_cfg.count && !found; phys++) {
        fg_card_state *s = &g_cards[phys];
        const fg_block *b = NULL;
        long i = find_block(s->blocks, s->n, ptr);
        if (i >= 0) b = &s->blocks[i];
        for (size_t j = 0; !b && j < s->mn; j++)
            if (s->managed[j].addr <= ptr && ptr < s->managed[j].addr + s->managed[j].span) b = &s->managed[j];
        if (b) {
            found = 1;
            if (ordinal) *ordinal = ordinal_of(phys);
            if (base) *base = b->addr;
            if (size) *size = b->bytes;
            if (owner) *owner = b->owner;
            if (kind) *kind = (fg_kind)b->kind;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

/* Ordinal of the card whose reserved (unbacked) range holds ptr, or -1. */
FG_HIDDEN int fg_mem_in_device_range(CUdeviceptr ptr) {
    for (int phys = 0; phys < g_cfg.count; phys++) {
        fg_card_state *s = &g_cards[phys];
        if (s->base && ptr >= s->base && ptr < s->base + s->va_size) return ordinal_of(phys);
    }
    return -1;
}

FG_HIDDEN void fg_mem_info(int ordinal, uint64_t *free_bytes, uint64_t *total) {
    int phys = phys_of(ordinal);
    if (phys < 0) {
        *free_bytes = *total = 0;
        return;
    }
    uint64_t used = fakegpu_card_used(phys);
    *total = g_cfg.cards[phys].total_bytes;
    *free_bytes = used >= *total ? 0 : *total - used;
}

FG_HIDDEN uint64_t fg_mem_process_live(int ordinal) {
    int phys = phys_of(ordinal);
    if (phys < 0) return 0;
    pthread_mutex_lock(&g_mu);
    uint64_t v = g_cards[phys].live;
    pthread_mutex_unlock(&g_mu);
    return v;
}

FG_EXPORT CUresult fakegpu_free(CUdeviceptr ptr, const char *api) { return fg_mem_free(ptr, api); }

FG_EXPORT int fakegpu_pointer_device(CUdeviceptr ptr) {
    int ordinal = -1;
    if (fg_mem_lookup(ptr, &ordinal, NULL, NULL, NULL, NULL)) return ordinal;
    return fg_mem_in_device_range(ptr);
}

/* ------------------------------------------------------------------ host memory (pinned, registered) */

FG_HIDDEN void fg_host_add(void *p, size_t size, int kind) {
    pthread_mutex_lock(&g_mu);
    if (grow((void **)&g_hosts, &g_caphosts, g_nhosts + 1, sizeof(fg_host))) g_hosts[g_nhosts++] = (fg_host){p, size, kind};
    pthread_mutex_unlock(&g_mu);
}

FG_HIDDEN int fg_host_remove(void *p, size_t *size, int *kind) {
    int found = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nhosts; i++) {
        if (g_hosts[i].p == p) {
            if (size) *size = g_hosts[i].size;
            if (kind) *kind = g_hosts[i].kind;
            g_hosts[i] = g_hosts[--g_nhosts];
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}

FG_HIDDEN int fg_host_lookup(const void *p, void **base, size_t *size, int *kind) {
    int found = 0;
    uintptr_t a = (uintptr_t)p;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_nhosts; i++) {
        uintptr_t b = (uintptr_t)g_hosts[i].p;
        if (a >= b && a < b + g_hosts[i].size) {
            if (base) *base = g_hosts[i].p;
            if (size) *size = g_hosts[i].size;
            if (kind) *kind = g_hosts[i].kind;
            found = 1;
            break;
        }
    }
    pthread_mutex_unlock(&g_mu);
    return found;
}
