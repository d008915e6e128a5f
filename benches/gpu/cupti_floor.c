/* The raw CUPTI floor of a tracer, as an injection library: what any CUPTI client recording the same activity kinds
 * pays, with nothing of gpu-tools in the process. Loaded by CUDA from CUDA_INJECTION64_PATH (so the same programs,
 * C or Python, run under it unchanged), it enables the kinds named in CUPTI_FLOOR_KINDS, lends CUPTI buffers of
 * 4 MiB from a small pool (gpu-tools' default size; reused, as gpu-tools' pool reuses them) and hands every
 * completed buffer back unread: its valid bytes are counted, no record is walked, decoded or written. At exit it
 * forces a flush and reports what it was handed.
 *
 *   CUPTI_FLOOR_KINDS    comma-separated: kernel, memcpy (MEMCPY and MEMCPY2), memset, driver, runtime, sync,
 *                        overhead, nvtx (MARKER and MARKER_DATA), graph (GRAPH_TRACE) [default: kernel]
 *   CUPTI_FLOOR_API      essential: CUPTI leaves out the API records of host-side bookkeeping, which gpu-tools'
 *                        default API records leave out in its writer (`ApiCbid::is_bookkeeping` in src/cupti/cbid.rs: names with `Get`, `cudaPeekAt*`,
 *                        `cudaOccupancy*`/`cuOccupancy*`, `*IsCapturing*`, the current device or context), by
 *                        cuptiActivityEnableDriverApi/RuntimeApi(id, 0) over every id cuptiGetCallbackName names
 *                        [default: every API call of the kinds enabled]
 *   CUPTI_FLOOR_CLOCK    1: a CLOCK_MONOTONIC timestamp callback, as gpu-tools registers (CUPTI reads
 *                        CLOCK_REALTIME itself otherwise); count: the same, its calls counted in the report
 *   CUPTI_FLOOR_FLUSH_MS N: a thread flushes completed buffers every N ms, as gpu-tools' flush thread does (200)
 *   CUPTI_FLOOR_SUBSCRIBE resource: a callback subscriber with the resource domain enabled and a callback that does
 *                        nothing, as a launched gpu-tools session holds one (it flushes at a context's destruction)
 *   CUPTI_FLOOR_ZEROED   1: buffers are handed to CUPTI already zeroed (new ones from calloc, returned ones zeroed in
 *                        the completion callback, off the launching thread) and CUPTI is told so
 *                        (CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER), so that it does not zero each buffer it
 *                        asks for on the thread that asked, which is the program's launching thread
 *   CUPTI_FLOOR_ATTRS    comma-separated ATTR=VALUE pairs set with cuptiActivitySetAttribute before the callbacks are
 *                        registered, ATTR the number of a CUpti_ActivityAttribute: 0 device buffer size, 2 device
 *                        buffer pool limit, 6 device buffers pre-allocated (size_t values); 8 pinned host memory for
 *                        them, 9 per-thread activity buffers (uint8_t values). Which of CUPTI's settings make a
 *                        traced launch cheaper; a setting CUPTI refuses counts as an enable failure
 *   CUPTI_FLOOR_LIB      the libcupti to load when the program has none mapped (else libcupti.so.13, libcupti.so)
 *   CUPTI_FLOOR_REPORT   a file the exit report is appended to (default: stderr)
 *
 * The report, one line: `cupti_floor pid=P cupti_api=V kinds=K buffers=N bytes=B dropped=D enable_failures=F
 * api_left_out=L timestamp_calls=T` (L: the API functions whose records CUPTI_FLOOR_API left out; T: the calls
 * CUPTI made to the CUPTI_FLOOR_CLOCK callback, 0 without one).
 * Build (benches/gpu/tracers.sh does): cc -O2 -shared -fPIC -I<cupti include> -I<cuda include> -o libcupti_floor.so
 * cupti_floor.c -ldl -lpthread. CUPTI is reached through dlsym only: the library links no CUPTI of its own, so it
 * shares the one the program maps (PyTorch maps its wheel's). CI builds it against CUPTI 13.0's headers and runs it
 * against the CUPTI double under valgrind (cupti_floor_check.c, .ci/run). */
#define _GNU_SOURCE
#include <cupti.h>
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BUFFER_SIZE (4u << 20)
#define POOL_MAX 64

typedef CUptiResult (*register_callbacks_fn)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
typedef CUptiResult (*enable_fn)(CUpti_ActivityKind);
typedef CUptiResult (*flush_all_fn)(uint32_t);
typedef CUptiResult (*dropped_fn)(CUcontext, uint32_t, size_t *);
typedef CUptiResult (*timestamp_fn)(CUpti_TimestampCallbackFunc);
typedef CUptiResult (*version_fn)(uint32_t *);
typedef CUptiResult (*callback_name_fn)(CUpti_CallbackDomain, uint32_t, const char **);
typedef CUptiResult (*enable_api_fn)(CUpti_CallbackId, uint8_t);
typedef CUptiResult (*subscribe_fn)(CUpti_SubscriberHandle *, CUpti_CallbackFunc, void *);
typedef CUptiResult (*enable_domain_fn)(uint32_t, CUpti_SubscriberHandle, CUpti_CallbackDomain);
typedef CUptiResult (*set_attribute_fn)(CUpti_ActivityAttribute, size_t *, void *);

static struct {
    enable_fn enable;
    flush_all_fn flush_all;
    dropped_fn dropped;
} g_cupti;

static char g_kinds[256] = "kernel";
static uint32_t g_version;
static unsigned long long g_buffers, g_bytes, g_dropped, g_enable_failures, g_api_left_out;
static int g_stop;
static pthread_t g_flusher;
static int g_flusher_running;
static unsigned g_flush_ms;

static pthread_mutex_t g_pool_lock = PTHREAD_MUTEX_INITIALIZER;
static uint8_t *g_pool[POOL_MAX];
static int g_pool_len;
/* CUPTI_FLOOR_ZEROED=1: every buffer lent is zeroed before CUPTI has it. */
static int g_zeroed;

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    uint8_t *b = NULL;
    pthread_mutex_lock(&g_pool_lock);
    if (g_pool_len > 0) b = g_pool[--g_pool_len];
    pthread_mutex_unlock(&g_pool_lock);
    if (!b) b = g_zeroed ? calloc(1, BUFFER_SIZE) : aligned_alloc(8, BUFFER_SIZE);
    *buffer = b;
    *size = b ? BUFFER_SIZE : 0;
    *max_records = 0;
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    size_t dropped = 0;
    __atomic_add_fetch(&g_buffers, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&g_bytes, (unsigned long long)valid, __ATOMIC_RELAXED);
    if (g_cupti.dropped && g_cupti.dropped(ctx, stream, &dropped) == CUPTI_SUCCESS && dropped)
        __atomic_add_fetch(&g_dropped, (unsigned long long)dropped, __ATOMIC_RELAXED);
    if (!buffer) return;
    if (g_zeroed) memset(buffer, 0, BUFFER_SIZE);
    pthread_mutex_lock(&g_pool_lock);
    if (g_pool_len < POOL_MAX) {
        g_pool[g_pool_len++] = buffer;
        buffer = NULL;
    }
    pthread_mutex_unlock(&g_pool_lock);
    free(buffer);
}

/* The calls CUPTI makes to the timestamp callback: how often a traced launch reads the clock through it. */
static unsigned long long g_timestamp_calls;

static uint64_t CUPTIAPI monotonic_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* CUPTI_FLOOR_CLOCK=count: the same, counted (an atomic add a call, kept out of the timed runs). */
static uint64_t CUPTIAPI monotonic_ns_counted(void) {
    __atomic_fetch_add(&g_timestamp_calls, 1, __ATOMIC_RELAXED);
    return monotonic_ns();
}

/* The path of the libcupti the process has mapped, if any. */
static int find_mapped(struct dl_phdr_info *info, size_t size, void *out) {
    (void)size;
    if (info->dlpi_name && strstr(info->dlpi_name, "libcupti.so")) {
        snprintf((char *)out, 4096, "%s", info->dlpi_name);
        return 1;
    }
    return 0;
}

static void *open_cupti(void) {
    char mapped[4096] = "";
    dl_iterate_phdr(find_mapped, mapped);
    const char *named = getenv("CUPTI_FLOOR_LIB");
    const char *tries[] = {mapped[0] ? mapped : NULL, named, "libcupti.so.13", "libcupti.so"};
    for (size_t i = 0; i < sizeof tries / sizeof tries[0]; i++) {
        if (!tries[i] || !tries[i][0]) continue;
        void *h = dlopen(tries[i], RTLD_NOW | RTLD_GLOBAL);
        if (h) return h;
    }
    fprintf(stderr, "cupti_floor: no libcupti could be loaded (set CUPTI_FLOOR_LIB): %s\n", dlerror());
    return NULL;
}

static void enable(const char *name, CUpti_ActivityKind kind) {
    CUptiResult r = g_cupti.enable(kind);
    if (r != CUPTI_SUCCESS) {
        g_enable_failures++;
        fprintf(stderr, "cupti_floor: enabling %s (kind %d) failed: %d\n", name, (int)kind, (int)r);
    }
}

/* Enables each kind of the comma-separated list; returns the number of names not understood. */
static int enable_kinds(const char *list) {
    static const struct {
        const char *name;
        CUpti_ActivityKind kinds[2];
    } table[] = {
        {"kernel", {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_INVALID}},
        {"memcpy", {CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMCPY2}},
        {"memset", {CUPTI_ACTIVITY_KIND_MEMSET, CUPTI_ACTIVITY_KIND_INVALID}},
        {"driver", {CUPTI_ACTIVITY_KIND_DRIVER, CUPTI_ACTIVITY_KIND_INVALID}},
        {"runtime", {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_INVALID}},
        {"sync", {CUPTI_ACTIVITY_KIND_SYNCHRONIZATION, CUPTI_ACTIVITY_KIND_INVALID}},
        {"overhead", {CUPTI_ACTIVITY_KIND_OVERHEAD, CUPTI_ACTIVITY_KIND_INVALID}},
        {"nvtx", {CUPTI_ACTIVITY_KIND_MARKER, CUPTI_ACTIVITY_KIND_MARKER_DATA}},
        {"graph", {CUPTI_ACTIVITY_KIND_GRAPH_TRACE, CUPTI_ACTIVITY_KIND_INVALID}},
    };
    int unknown = 0;
    char copy[256];
    snprintf(copy, sizeof copy, "%s", list);
    char *save = NULL;
    for (char *name = strtok_r(copy, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < sizeof table / sizeof table[0] && strcmp(table[i].name, name) != 0) i++;
        if (i == sizeof table / sizeof table[0]) {
            fprintf(stderr, "cupti_floor: unknown kind %s\n", name);
            unknown++;
            continue;
        }
        for (int k = 0; k < 2; k++)
            if (table[i].kinds[k] != CUPTI_ACTIVITY_KIND_INVALID) enable(name, table[i].kinds[k]);
    }
    return unknown;
}

/* Whether an API function (its callback name, without a `_vNNNN` version or `_ptsz` suffix) is host-side
 * bookkeeping: the rule of gpu-tools' ApiCbid::is_bookkeeping (src/cupti/cbid.rs), written again here because the
 * floor links nothing of gpu-tools. */
static int is_bookkeeping(const char *full) {
    char name[128];
    snprintf(name, sizeof name, "%s", full);
    char *v = strrchr(name, '_');
    if (v && v[1] == 'v') {
        size_t digits = strspn(v + 2, "0123456789");
        if (digits >= 4 && digits <= 6 && v[2 + digits] == 0) *v = 0;
    }
    size_t len = strlen(name);
    if (len > 5 && strcmp(name + len - 5, "_ptsz") == 0) name[len - 5] = 0;
    static const char *const current[] = {"cudaSetDevice", "cuCtxSetCurrent", "cuCtxPushCurrent", "cuCtxPopCurrent",
                                          "cuCtxPushCurrent_v2", "cuCtxPopCurrent_v2"};
    for (size_t i = 0; i < sizeof current / sizeof current[0]; i++)
        if (strcmp(name, current[i]) == 0) return 1;
    return strstr(name, "Get") || strncmp(name, "cudaPeekAt", 10) == 0 || strncmp(name, "cudaOccupancy", 13) == 0 ||
           strncmp(name, "cuOccupancy", 11) == 0 || strstr(name, "IsCapturing");
}

/* CUPTI_FLOOR_API=essential: the bookkeeping functions' records off, for each API kind enabled. */
static void leave_out_bookkeeping(void *h) {
    callback_name_fn callback_name = (callback_name_fn)dlsym(h, "cuptiGetCallbackName");
    enable_api_fn driver = (enable_api_fn)dlsym(h, "cuptiActivityEnableDriverApi");
    enable_api_fn runtime = (enable_api_fn)dlsym(h, "cuptiActivityEnableRuntimeApi");
    if (!callback_name || !driver || !runtime) {
        fprintf(stderr, "cupti_floor: CUPTI_FLOOR_API=essential needs cuptiGetCallbackName and per-function API records\n");
        g_enable_failures++;
        return;
    }
    const struct {
        const char *kind;
        CUpti_CallbackDomain domain;
        uint32_t size;
        enable_api_fn enable;
    } apis[] = {
        {"driver", CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_SIZE, driver},
        {"runtime", CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_RUNTIME_TRACE_CBID_SIZE, runtime},
    };
    for (size_t a = 0; a < sizeof apis / sizeof apis[0]; a++) {
        if (!strstr(g_kinds, apis[a].kind)) continue;
        for (uint32_t id = 1; id < apis[a].size; id++) {
            const char *name = NULL;
            if (callback_name(apis[a].domain, id, &name) != CUPTI_SUCCESS || !name || !is_bookkeeping(name)) continue;
            if (apis[a].enable(id, 0) == CUPTI_SUCCESS)
                g_api_left_out++;
            else
                g_enable_failures++;
        }
    }
}

static void *flush_loop(void *arg) {
    (void)arg;
    struct timespec t = {(time_t)(g_flush_ms / 1000), (long)(g_flush_ms % 1000) * 1000000L};
    while (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) {
        nanosleep(&t, NULL);
        if (!__atomic_load_n(&g_stop, __ATOMIC_ACQUIRE)) g_cupti.flush_all(0);
    }
    return NULL;
}

static void at_exit(void) {
    __atomic_store_n(&g_stop, 1, __ATOMIC_RELEASE);
    if (g_flusher_running) pthread_join(g_flusher, NULL);
    g_cupti.flush_all(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    const char *path = getenv("CUPTI_FLOOR_REPORT");
    FILE *out = path && path[0] ? fopen(path, "a") : NULL;
    fprintf(out ? out : stderr,
            "cupti_floor pid=%d cupti_api=%u kinds=%s buffers=%llu bytes=%llu dropped=%llu enable_failures=%llu "
            "api_left_out=%llu timestamp_calls=%llu\n",
            (int)getpid(), g_version, g_kinds, g_buffers, g_bytes, g_dropped, g_enable_failures, g_api_left_out,
            __atomic_load_n(&g_timestamp_calls, __ATOMIC_RELAXED));
    if (out) fclose(out);
}

static void CUPTIAPI on_callback(void *userdata, CUpti_CallbackDomain domain, CUpti_CallbackId id, const void *data) {
    (void)userdata;
    (void)domain;
    (void)id;
    (void)data;
}

/* CUPTI_FLOOR_SUBSCRIBE=resource: a subscriber of the resource domain, kept for the process's life. */
static void subscribe_resource(void *h) {
    subscribe_fn subscribe = (subscribe_fn)dlsym(h, "cuptiSubscribe");
    enable_domain_fn enable_domain = (enable_domain_fn)dlsym(h, "cuptiEnableDomain");
    CUpti_SubscriberHandle subscriber = NULL;
    if (!subscribe || !enable_domain || subscribe(&subscriber, on_callback, NULL) != CUPTI_SUCCESS ||
        enable_domain(1, subscriber, CUPTI_CB_DOMAIN_RESOURCE) != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_floor: no resource subscriber\n");
        g_enable_failures++;
    }
}

/* Called by CUDA once, from inside the program's first cuInit; 1: loaded. */
int InitializeInjection(void) {
    const char *kinds = getenv("CUPTI_FLOOR_KINDS");
    if (kinds && kinds[0]) snprintf(g_kinds, sizeof g_kinds, "%s", kinds);
    void *h = open_cupti();
    if (!h) return 0;
    register_callbacks_fn register_callbacks = (register_callbacks_fn)dlsym(h, "cuptiActivityRegisterCallbacks");
    g_cupti.enable = (enable_fn)dlsym(h, "cuptiActivityEnable");
    g_cupti.flush_all = (flush_all_fn)dlsym(h, "cuptiActivityFlushAll");
    g_cupti.dropped = (dropped_fn)dlsym(h, "cuptiActivityGetNumDroppedRecords");
    if (!register_callbacks || !g_cupti.enable || !g_cupti.flush_all) {
        fprintf(stderr, "cupti_floor: the CUPTI loaded lacks the activity API\n");
        return 0;
    }
    version_fn version = (version_fn)dlsym(h, "cuptiGetVersion");
    if (version) version(&g_version);
    const char *clock = getenv("CUPTI_FLOOR_CLOCK");
    if (clock && (strcmp(clock, "1") == 0 || strcmp(clock, "count") == 0)) {
        timestamp_fn register_timestamp = (timestamp_fn)dlsym(h, "cuptiActivityRegisterTimestampCallback");
        int counted = strcmp(clock, "count") == 0;
        if (!register_timestamp || register_timestamp(counted ? monotonic_ns_counted : monotonic_ns) != CUPTI_SUCCESS) {
            fprintf(stderr, "cupti_floor: no timestamp callback\n");
            g_enable_failures++;
        }
    }
    const char *zeroed = getenv("CUPTI_FLOOR_ZEROED");
    if (zeroed && strcmp(zeroed, "1") == 0) {
        set_attribute_fn set_attribute = (set_attribute_fn)dlsym(h, "cuptiActivitySetAttribute");
        uint8_t on = 1;
        size_t size = sizeof on;
        if (set_attribute && set_attribute(CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER, &size, &on) == CUPTI_SUCCESS) {
            g_zeroed = 1;
        } else {
            fprintf(stderr, "cupti_floor: CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER could not be set\n");
            g_enable_failures++;
        }
    }
    const char *attrs = getenv("CUPTI_FLOOR_ATTRS");
    if (attrs && *attrs) {
        set_attribute_fn set_attribute = (set_attribute_fn)dlsym(h, "cuptiActivitySetAttribute");
        const char *p = attrs;
        while (*p) {
            char *end = NULL;
            unsigned long attr = strtoul(p, &end, 10);
            if (end == p || *end != '=') break;
            p = end + 1;
            unsigned long long value = strtoull(p, &end, 10);
            if (end == p) break;
            p = *end == ',' ? end + 1 : end;
            CUptiResult set = CUPTI_ERROR_UNKNOWN;
            if (set_attribute && (attr == 5 || attr == 8 || attr == 9)) {
                uint8_t v = (uint8_t)value;
                size_t size = sizeof v;
                set = set_attribute((CUpti_ActivityAttribute)attr, &size, &v);
            } else if (set_attribute) {
                size_t v = (size_t)value;
                size_t size = sizeof v;
                set = set_attribute((CUpti_ActivityAttribute)attr, &size, &v);
            }
            if (set != CUPTI_SUCCESS) {
                fprintf(stderr, "cupti_floor: attribute %lu=%llu not set: %d\n", attr, value, (int)set);
                g_enable_failures++;
            }
        }
        if (*p) {
            fprintf(stderr, "cupti_floor: CUPTI_FLOOR_ATTRS: cannot read %s (ATTR=VALUE,...)\n", p);
            g_enable_failures++;
        }
    }
    CUptiResult r = register_callbacks(buffer_requested, buffer_completed);
    if (r != CUPTI_SUCCESS) {
        fprintf(stderr, "cupti_floor: cuptiActivityRegisterCallbacks failed: %d\n", (int)r);
        return 0;
    }
    if (enable_kinds(g_kinds) > 0) g_enable_failures++;
    const char *subscriber = getenv("CUPTI_FLOOR_SUBSCRIBE");
    if (subscriber && strcmp(subscriber, "resource") == 0) subscribe_resource(h);
    const char *api = getenv("CUPTI_FLOOR_API");
    if (api && strcmp(api, "essential") == 0) leave_out_bookkeeping(h);
    const char *every = getenv("CUPTI_FLOOR_FLUSH_MS");
    g_flush_ms = every ? (unsigned)strtoul(every, NULL, 10) : 0;
    if (g_flush_ms > 0 && pthread_create(&g_flusher, NULL, flush_loop, NULL) == 0) g_flusher_running = 1;
    atexit(at_exit);
    return 1;
}
