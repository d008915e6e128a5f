/* A CUPTI double: the Activity API's buffer protocol and the Callback API, with the record layouts of CUPTI 13.0
 * (and 12.9 for kernels) written out from the header's documentation; no vendor header is included.
 *
 * Records are written with `cd_*` test controls into buffers the client lends through its buffer-requested
 * callback. A buffer that cannot take the next record is completed (on the emitting thread, or on a worker thread
 * after `cd_async(1)`, as CUPTI's worker does) and a new one requested; a refused request drops the record and
 * counts it for cuptiActivityGetNumDroppedRecords. cuptiActivityFlushAll completes the current buffer on the
 * calling thread after the worker has drained (`cd_empty_buffer_kept(1)`: an empty one stays, and a new one is asked
 * for right after a completion, as CUPTI 13.0 does; `cd_in_flight`: kernels still running, whose records a default
 * flush holds back and a forced one returns incomplete). API, resource and synchronize callbacks are fired with
 * `cd_api_callback` (`cd_api_callback_params` with a parameter struct), `cd_resource` (`cd_graph_resource` for
 * graphs) and `cd_sync_callback` for a subscriber that enabled them. NVTX: `InitializeInjectionNvtx2` takes a
 * module's nvtxRangePushA, nvtxRangePop and nvtxMarkA, which write marker records while MARKER is enabled. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

typedef int CUptiResult;

enum {
    SUCCESS = 0,
    INVALID_PARAMETER = 1,
    INVALID_OPERATION = 7,
    MAX_LIMIT_REACHED = 12,
    NOT_INITIALIZED = 15,
    INVALID_KIND = 21,
    MULTIPLE_SUBSCRIBERS = 39,
    UNKNOWN = 999,
};

/* Activity kinds (CUpti_ActivityKind). */
enum {
    K_MEMCPY = 1,
    K_MEMSET = 2,
    K_KERNEL = 3,
    K_DRIVER = 4,
    K_RUNTIME = 5,
    K_CONCURRENT_KERNEL = 10,
    K_MARKER = 12,
    K_OVERHEAD = 17,
    K_STREAM = 37,
    K_SYNCHRONIZATION = 38,
    K_EXTERNAL_CORRELATION = 39,
    K_COUNT = 56,
};

/* Every record is `__attribute__((packed, aligned(8)))` in cupti_activity.h (PACKED_ALIGNMENT). */
#define PACKED __attribute__((packed, aligned(8)))

/* CUpti_ActivityKernel10 (13.0); CUpti_ActivityKernel9 (12.9) is the same without the last 8 bytes. */
struct PACKED kernel10 {
    uint32_t kind;
    uint8_t cache_config;
    uint8_t shared_memory_config;
    uint16_t registers_per_thread;
    uint32_t partitioned_global_cache_requested;
    uint32_t partitioned_global_cache_executed;
    uint64_t start, end, completed;
    uint32_t device_id, context_id, stream_id;
    int32_t grid_x, grid_y, grid_z;
    int32_t block_x, block_y, block_z;
    int32_t static_shared_memory, dynamic_shared_memory;
    uint32_t local_memory_per_thread, local_memory_total;
    uint32_t correlation_id;
    int64_t grid_id;
    const char *name;
    void *reserved0;
    uint64_t queued, submitted;
    uint8_t launch_type, is_shared_memory_carveout_requested, shared_memory_carveout_requested, padding;
    uint32_t shared_memory_executed;
    uint64_t graph_node_id;
    uint32_t shmem_limit_config;
    uint32_t graph_id;
    void *access_policy_window;
    uint32_t channel_id, channel_type;
    uint32_t cluster_x, cluster_y, cluster_z, cluster_scheduling_policy;
    uint64_t local_memory_total_v2;
    uint32_t max_potential_cluster_size, max_active_clusters;
    uint8_t is_device_launched;
    uint8_t padding3[7];
};
#define KERNEL9_SIZE 208

/* CUpti_ActivityMemcpy6. */
struct PACKED memcpy6 {
    uint32_t kind;
    uint8_t copy_kind, src_kind, dst_kind, flags;
    uint64_t bytes, start, end;
    uint32_t device_id, context_id, stream_id, correlation_id, runtime_correlation_id, pad;
    void *reserved0;
    uint64_t graph_node_id;
    uint32_t graph_id, channel_id, channel_type;
    uint8_t is_device_launched;
    uint8_t pad2[3];
    uint64_t copy_count;
};

/* CUpti_ActivityMemset4. */
struct PACKED memset4 {
    uint32_t kind;
    uint32_t value;
    uint64_t bytes, start, end;
    uint32_t device_id, context_id, stream_id, correlation_id;
    uint16_t flags, memory_kind;
    uint32_t pad;
    void *reserved0;
    uint64_t graph_node_id;
    uint32_t graph_id, channel_id, channel_type;
    uint8_t is_device_launched;
    uint8_t pad2[3];
};

/* CUpti_ActivityAPI. */
struct PACKED api {
    uint32_t kind, cbid;
    uint64_t start, end;
    uint32_t process_id, thread_id, correlation_id, return_value;
};

/* CUpti_ActivitySynchronization2. */
struct PACKED sync2 {
    uint32_t kind, type;
    uint64_t start, end;
    uint32_t correlation_id, context_id, stream_id, cuda_event_id;
    uint64_t cuda_event_sync_id;
    uint32_t return_value, pad;
};

/* CUpti_ActivityOverhead3: the object id is a 12-byte union. */
struct PACKED overhead3 {
    uint32_t kind, overhead_kind, object_kind;
    uint32_t object_id[3];
    uint64_t start, end;
    uint32_t correlation_id, reserved0;
    void *overhead_data;
};

/* CUpti_ActivityStream. */
struct PACKED stream_rec {
    uint32_t kind, context_id, stream_id, priority, flag, correlation_id;
};

/* CUpti_ActivityMarker2: an NVTX mark, or a range's start or end. The object is a CUpti_ActivityObjectKindId
 * union of 12 bytes ({processId, threadId} for a thread). */
struct PACKED marker2 {
    uint32_t kind, flags;
    uint64_t timestamp;
    uint32_t id, object_kind;
    uint32_t object_id[3];
    uint32_t pad;
    const char *name, *domain;
};

/* CUpti_ActivityExternalCorrelation. */
struct PACKED external_correlation {
    uint32_t kind, external_kind;
    uint64_t external_id;
    uint32_t correlation_id, reserved;
};

_Static_assert(sizeof(struct kernel10) == 216, "CUpti_ActivityKernel10 is 216 bytes");
_Static_assert(offsetof(struct kernel10, name) == 104, "Kernel10 name at 104");
_Static_assert(offsetof(struct kernel10, is_device_launched) == KERNEL9_SIZE, "Kernel9 ends where Kernel10 grows");
_Static_assert(sizeof(struct memcpy6) == 96, "CUpti_ActivityMemcpy6 is 96 bytes");
_Static_assert(sizeof(struct memset4) == 88, "CUpti_ActivityMemset4 is 88 bytes");
_Static_assert(sizeof(struct api) == 40, "CUpti_ActivityAPI is 40 bytes");
_Static_assert(sizeof(struct sync2) == 56, "CUpti_ActivitySynchronization2 is 56 bytes");
_Static_assert(sizeof(struct overhead3) == 56, "CUpti_ActivityOverhead3 is 56 bytes");
_Static_assert(sizeof(struct marker2) == 56, "CUpti_ActivityMarker2 is 56 bytes");
_Static_assert(offsetof(struct marker2, name) == 40, "Marker2 name at 40");
_Static_assert(sizeof(struct stream_rec) == 24, "CUpti_ActivityStream is 24 bytes");
_Static_assert(sizeof(struct external_correlation) == 24, "CUpti_ActivityExternalCorrelation is 24 bytes");

typedef void (*request_fn)(uint8_t **buffer, size_t *size, size_t *max_records);
typedef void (*complete_fn)(void *ctx, uint32_t stream_id, uint8_t *buffer, size_t size, size_t valid);
typedef uint64_t (*timestamp_fn)(void);

/* Callback API (cupti_callbacks.h): natural C layouts. */
typedef void (*callback_fn)(void *userdata, uint32_t domain, uint32_t cbid, const void *data);

struct callback_data {
    uint32_t callback_site;
    const char *function_name;
    const void *function_params;
    void *function_return_value;
    const char *symbol_name;
    void *context;
    uint32_t context_uid;
    uint64_t *correlation_data;
    uint32_t correlation_id;
};
_Static_assert(sizeof(struct callback_data) == 72, "CUpti_CallbackData is 72 bytes");

struct resource_data {
    void *context;
    void *stream; /* union resourceHandle { CUstream stream; } */
    void *resource_descriptor;
};

struct module_resource_data {
    uint32_t module_id;
    size_t cubin_size;
    const char *cubin;
};

struct synchronize_data {
    void *context;
    void *stream;
};

struct subscriber_params {
    size_t struct_size;
    const char *subscriber_name;
    char *old_subscriber_name;
    size_t old_subscriber_size;
};

enum { DOMAIN_DRIVER = 1, DOMAIN_RUNTIME = 2, DOMAIN_RESOURCE = 3, DOMAIN_SYNCHRONIZE = 4, DOMAIN_COUNT = 7 };
#define MAX_CBID 1024

/* What the double counted (layout mirrored in gpu-tools-testing/src/cupti_double.rs). */
struct cd_stats {
    uint64_t requests;
    uint64_t refused;
    uint64_t completions;
    uint64_t completed_bytes;
    uint64_t records;
    uint64_t dropped_total;
    uint64_t flushes;
    uint64_t enabled_mask;
    uint64_t timestamp_callback;
    uint64_t subscribed;
    uint64_t unsubscribes;
    uint64_t worker_completions;
    uint64_t flush_period_ms;
    /* cuptiFinalize calls; of those, made inside a subscriber's callback at an API exit (where CUPTI's header
     * says a running process may call it); of those, made while an activity kind was still enabled. */
    uint64_t finalizes;
    uint64_t finalizes_at_api_exit;
    uint64_t finalizes_recording;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static uint32_t g_version = 130001;
/* The registered pair, side by side in writable data, request then completion, as CUPTI 12.9 and 13.0 keep it (seen
 * with the wheels' libraries; the injection library finds a program's profiler there, coexist/probe.rs). A struct,
 * so that the compiler cannot reorder or part them. */
static struct {
    request_fn request;
    complete_fn complete;
} g_callbacks;
#define g_request g_callbacks.request
#define g_complete g_callbacks.complete
static timestamp_fn g_timestamp;
static uint64_t g_enabled;
static uint8_t *g_buf;
static size_t g_buf_size, g_buf_used;
static uint64_t g_dropped;
static struct cd_stats g_stats;
static uint32_t g_private_kind, g_private_size;
static const char *g_fail_fn;
static int g_fail_code;

/* Buffers waiting for the worker thread. */
#define QUEUE_MAX 256
static int g_async;
/* cd_empty_buffer_kept: a forced flush keeps an empty current buffer, and right after it completes one, while a kind
 * is enabled, asks for the next one and holds it, empty, as CUPTI 13.0 on driver 580 was seen to (a tracer stopped
 * with such a buffer still lent after two forced flushes). */
static int g_keep_empty;
/* cd_in_flight: kernel records written from now on are of kernels still running: in the buffer with start and end 0
 * until cd_land fills them in. A default flush does not return a buffer holding one; a forced flush returns it as it
 * is, and they stay incomplete (CUPTI writes no complete record of them later). */
#define IN_FLIGHT_MAX 64
static int g_in_flight_on;
static int g_in_flight;
static struct { size_t at; uint64_t start, end; } g_in_flight_times[IN_FLIGHT_MAX];
static struct {
    uint8_t *buf;
    size_t size, used;
} g_queue[QUEUE_MAX];
static int g_queue_len;
static int g_worker_busy;
static pthread_t g_worker;
static int g_worker_started;

/* Subscriber. */
static callback_fn g_cb;
static void *g_cb_userdata;
static char g_subscriber_name[64];
static char g_other_subscriber[64];
static uint8_t g_enabled_cb[DOMAIN_COUNT][MAX_CBID];

static int take_failure(const char *fn) {
    int code = 0;
    pthread_mutex_lock(&g_lock);
    if (g_fail_fn && strcmp(g_fail_fn, fn) == 0) {
        code = g_fail_code;
        g_fail_fn = NULL;
    }
    pthread_mutex_unlock(&g_lock);
    return code;
}

#define FAIL_POINT(name) \
    do { \
        int f_ = take_failure(name); \
        if (f_) return f_; \
    } while (0)

static uint64_t realtime_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- Version and result strings. ---- */

CUptiResult cuptiGetVersion(uint32_t *version) {
    if (!version) return INVALID_PARAMETER;
    *version = g_version;
    return SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
    if (!s) return INVALID_PARAMETER;
    switch (r) {
    case SUCCESS: *s = "CUPTI_SUCCESS"; return SUCCESS;
    case INVALID_PARAMETER: *s = "CUPTI_ERROR_INVALID_PARAMETER"; return SUCCESS;
    case INVALID_OPERATION: *s = "CUPTI_ERROR_INVALID_OPERATION"; return SUCCESS;
    case MAX_LIMIT_REACHED: *s = "CUPTI_ERROR_MAX_LIMIT_REACHED"; return SUCCESS;
    case NOT_INITIALIZED: *s = "CUPTI_ERROR_NOT_INITIALIZED"; return SUCCESS;
    case INVALID_KIND: *s = "CUPTI_ERROR_INVALID_KIND"; return SUCCESS;
    case MULTIPLE_SUBSCRIBERS: *s = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED"; return SUCCESS;
    case UNKNOWN: *s = "CUPTI_ERROR_UNKNOWN"; return SUCCESS;
    default: return INVALID_PARAMETER;
    }
}

/* ---- Activity API. ---- */

static size_t kernel_size(void) { return g_version >= 130000 ? sizeof(struct kernel10) : KERNEL9_SIZE; }

static size_t record_size(uint32_t kind) {
    /* A release that resized a kind, or one with a kind the header does not define. */
    if (g_private_kind && kind == g_private_kind) return g_private_size;
    switch (kind) {
    case K_MEMCPY: return sizeof(struct memcpy6);
    case K_MEMSET: return sizeof(struct memset4);
    case K_KERNEL:
    case K_CONCURRENT_KERNEL: return kernel_size();
    case K_DRIVER:
    case K_RUNTIME: return sizeof(struct api);
    case K_OVERHEAD: return sizeof(struct overhead3);
    case K_STREAM: return sizeof(struct stream_rec);
    case K_SYNCHRONIZATION: return sizeof(struct sync2);
    case K_EXTERNAL_CORRELATION: return sizeof(struct external_correlation);
    case K_MARKER: return sizeof(struct marker2);
    default: return 0;
    }
}

/* A test's hook, run after each registration of buffer callbacks (outside the lock) with the request callback
 * registered: a profiler of the program that registers again right after someone else did. */
static void (*volatile g_after_register)(request_fn);

void cd_after_register(void (*hook)(request_fn)) { g_after_register = hook; }

CUptiResult cuptiActivityRegisterCallbacks(request_fn request, complete_fn complete) {
    if (!request || !complete) return INVALID_PARAMETER;
    FAIL_POINT("cuptiActivityRegisterCallbacks");
    pthread_mutex_lock(&g_lock);
    g_request = request;
    g_complete = complete;
    pthread_mutex_unlock(&g_lock);
    void (*hook)(request_fn) = g_after_register;
    if (hook) hook(request);
    return SUCCESS;
}

CUptiResult cuptiActivityRegisterTimestampCallback(timestamp_fn f) {
    if (!f) return INVALID_PARAMETER;
    FAIL_POINT("cuptiActivityRegisterTimestampCallback");
    pthread_mutex_lock(&g_lock);
    g_timestamp = f;
    g_stats.timestamp_callback++;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiGetTimestamp(uint64_t *t) {
    if (!t) return INVALID_PARAMETER;
    timestamp_fn f = g_timestamp;
    *t = f ? f() : realtime_ns();
    return SUCCESS;
}

CUptiResult cuptiActivityFlushPeriod(uint32_t ms) {
    pthread_mutex_lock(&g_lock);
    g_stats.flush_period_ms = ms;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

/* cuptiSetThreadIdType: 0 DEFAULT (pthread_self), 1 SYSTEM (gettid); the double only keeps the setting. */
static uint32_t g_thread_id_type;

CUptiResult cuptiGetThreadIdType(uint32_t *type) {
    if (!type) return INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    *type = g_thread_id_type;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiSetThreadIdType(uint32_t type) {
    if (type > 1) return INVALID_PARAMETER;
    FAIL_POINT("cuptiSetThreadIdType");
    pthread_mutex_lock(&g_lock);
    g_thread_id_type = type;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

/* CUPTI_ACTIVITY_ATTR_ZEROED_OUT_ACTIVITY_BUFFER: set, the client promises zeroed buffers (CUPTI then skips its own
 * zeroing on the requesting thread); the double checks each buffer it takes then, and counts those that are not. */
#define ATTR_ZEROED_OUT_ACTIVITY_BUFFER 5u
static int g_zeroed_promised;
static uint64_t g_unzeroed_buffers;

static void check_zeroed(const uint8_t *buffer, size_t size) {
    if (!g_zeroed_promised) return;
    for (size_t i = 0; i < size; i++)
        if (buffer[i]) {
            g_unzeroed_buffers++;
            return;
        }
}

/* Only the zeroed-buffer attribute is kept; the others are accepted and ignored, as they change nothing the double
 * models. */
CUptiResult cuptiActivitySetAttribute(uint32_t attribute, size_t *size, void *value) {
    if (!size || !value) return INVALID_PARAMETER;
    if (attribute == ATTR_ZEROED_OUT_ACTIVITY_BUFFER) {
        if (*size < 1) return INVALID_PARAMETER;
        pthread_mutex_lock(&g_lock);
        g_zeroed_promised = *(const uint8_t *)value != 0;
        pthread_mutex_unlock(&g_lock);
    }
    return SUCCESS;
}

/* Buffers taken while the zeroed-buffer attribute was set that held a non-zero byte. */
uint64_t cd_unzeroed_buffers(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_unzeroed_buffers;
    pthread_mutex_unlock(&g_lock);
    return n;
}

CUptiResult cuptiActivityEnable(uint32_t kind) {
    if (kind == 0 || kind >= K_COUNT) return INVALID_KIND;
    FAIL_POINT("cuptiActivityEnable");
    pthread_mutex_lock(&g_lock);
    g_enabled |= 1ull << kind;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

/* Per-function API records (cuptiActivityEnableDriverApi/RuntimeApi): the functions turned off, per API kind, and
 * how many choices were made (tests read it: CUPTI's choice is process-wide, so a trace should make none unasked). */
#define API_OFF_MAX 64
static uint32_t g_api_off[2][API_OFF_MAX];
static int g_api_off_len[2];
static uint64_t g_api_choices;

static CUptiResult api_choice(int runtime, uint32_t cbid, uint8_t enable) {
    pthread_mutex_lock(&g_lock);
    g_api_choices++;
    uint32_t *list = g_api_off[runtime];
    int *len = &g_api_off_len[runtime];
    for (int i = 0; i < *len; i++) {
        if (list[i] == cbid) {
            list[i] = list[--*len];
            break;
        }
    }
    CUptiResult r = SUCCESS;
    if (!enable) {
        if (*len < API_OFF_MAX) list[(*len)++] = cbid;
        else r = MAX_LIMIT_REACHED;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

CUptiResult cuptiActivityEnableRuntimeApi(uint32_t cbid, uint8_t enable) { return api_choice(1, cbid, enable); }
CUptiResult cuptiActivityEnableDriverApi(uint32_t cbid, uint8_t enable) { return api_choice(0, cbid, enable); }

/* Whether `cbid` of API kind `kind` is turned off (under g_lock). */
static int api_off(uint32_t kind, uint32_t cbid) {
    int runtime = kind == K_RUNTIME;
    if (!runtime && kind != K_DRIVER) return 0;
    for (int i = 0; i < g_api_off_len[runtime]; i++)
        if (g_api_off[runtime][i] == cbid) return 1;
    return 0;
}

CUptiResult cuptiActivityDisable(uint32_t kind) {
    if (kind == 0 || kind >= K_COUNT) return INVALID_KIND;
    FAIL_POINT("cuptiActivityDisable");
    pthread_mutex_lock(&g_lock);
    g_enabled &= ~(1ull << kind);
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiActivityGetNumDroppedRecords(void *ctx, uint32_t stream_id, size_t *dropped) {
    (void)ctx;
    (void)stream_id;
    if (!dropped) return INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    *dropped = (size_t)g_dropped;
    g_dropped = 0;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record) {
    if (!buffer || !record) return INVALID_PARAMETER;
    uint8_t *at;
    if (*record == NULL) {
        at = buffer;
    } else {
        uint8_t *prev = *record;
        size_t size = record_size(*(uint32_t *)prev);
        if (size == 0) return INVALID_KIND;
        at = prev + size;
    }
    if (at + 4 > buffer + valid) return MAX_LIMIT_REACHED;
    size_t size = record_size(*(uint32_t *)at);
    if (size == 0 || at + size > buffer + valid) return INVALID_KIND;
    *record = at;
    return SUCCESS;
}

/* Hands a buffer back to the client: now on this thread, or queued for the worker. Called without g_lock. */
static void complete(uint8_t *buf, size_t size, size_t used) {
    pthread_mutex_lock(&g_lock);
    g_stats.completions++;
    g_stats.completed_bytes += used;
    complete_fn f = g_complete;
    if (g_async && g_queue_len < QUEUE_MAX) {
        g_queue[g_queue_len].buf = buf;
        g_queue[g_queue_len].size = size;
        g_queue[g_queue_len].used = used;
        g_queue_len++;
        pthread_cond_broadcast(&g_cond);
        pthread_mutex_unlock(&g_lock);
        return;
    }
    pthread_mutex_unlock(&g_lock);
    if (f) f(NULL, 0, buf, size, used);
}

static void *worker(void *arg) {
    (void)arg;
    pthread_mutex_lock(&g_lock);
    for (;;) {
        while (g_queue_len == 0) pthread_cond_wait(&g_cond, &g_lock);
        uint8_t *buf = g_queue[0].buf;
        size_t size = g_queue[0].size, used = g_queue[0].used;
        memmove(&g_queue[0], &g_queue[1], sizeof(g_queue[0]) * (size_t)(g_queue_len - 1));
        g_queue_len--;
        g_worker_busy = 1;
        complete_fn f = g_complete;
        g_stats.worker_completions++;
        pthread_mutex_unlock(&g_lock);
        if (f) f(NULL, 0, buf, size, used);
        pthread_mutex_lock(&g_lock);
        g_worker_busy = 0;
        pthread_cond_broadcast(&g_cond);
    }
    return NULL;
}

/* Under g_lock, for a record just copied to offset `at` of the current buffer: a kernel still running keeps start and
 * end 0 there until cd_land. */
static void hold_in_flight(uint32_t kind, size_t at) {
    if (!g_in_flight_on || (kind != K_KERNEL && kind != K_CONCURRENT_KERNEL) || g_in_flight >= IN_FLIGHT_MAX) return;
    struct kernel10 *k = (struct kernel10 *)(g_buf + at);
    g_in_flight_times[g_in_flight].at = at;
    g_in_flight_times[g_in_flight].start = k->start;
    g_in_flight_times[g_in_flight].end = k->end;
    g_in_flight++;
    k->start = 0;
    k->end = 0;
}

/* cd_stamp_at_write(1): a kernel record's start and end are taken from CUPTI's clock as the record goes into a buffer
 * (its duration kept), under the lock that a clock's registration takes, as CUPTI stamps the records it builds with
 * the clock registered then. Off, the writer's own stamps stay, and a record stamped on one clock can be written
 * after another was registered. */
static int g_stamp_at_write;

void cd_stamp_at_write(int on) { __atomic_store_n(&g_stamp_at_write, on, __ATOMIC_SEQ_CST); }

/* Under g_lock, for a record just copied to offset `at` of the current buffer (before hold_in_flight). */
static void stamp_at_write(uint32_t kind, size_t at) {
    if (!__atomic_load_n(&g_stamp_at_write, __ATOMIC_SEQ_CST) || (kind != K_KERNEL && kind != K_CONCURRENT_KERNEL))
        return;
    struct kernel10 *k = (struct kernel10 *)(g_buf + at);
    if (k->start == 0) return;
    uint64_t length = k->end >= k->start ? k->end - k->start : 0;
    timestamp_fn f = g_timestamp;
    k->start = f ? f() : realtime_ns();
    k->end = k->start + length;
}

/* cd_after_request: called by a thread writing a record once the client's buffer-requested callback has returned
 * a buffer, before the record goes into it (CUPTI's lock not held): the moment in which another thread's disable
 * and forced flush find no buffer to return, and the record is written after them. */
static void (*g_after_request)(void);

void cd_after_request(void (*hook)(void)) { __atomic_store_n(&g_after_request, hook, __ATOMIC_SEQ_CST); }

/* Writes one record, as CUPTI would: into the current buffer, completing it and requesting another when full.
 * Returns 1 when written, 0 when dropped for want of a buffer, -1 when its kind is not enabled. */
static int emit(const void *record, size_t size) {
    uint32_t kind = *(const uint32_t *)record;
    pthread_mutex_lock(&g_lock);
    if ((kind < 64 && !(g_enabled & (1ull << kind))) ||
        ((kind == K_DRIVER || kind == K_RUNTIME) && size >= 8 && api_off(kind, ((const uint32_t *)record)[1]))) {
        pthread_mutex_unlock(&g_lock);
        return -1;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        if (g_buf && g_buf_used + size <= g_buf_size) {
            memcpy(g_buf + g_buf_used, record, size);
            stamp_at_write(kind, g_buf_used);
            hold_in_flight(kind, g_buf_used);
            g_buf_used += size;
            g_stats.records++;
            pthread_mutex_unlock(&g_lock);
            return 1;
        }
        if (g_buf) {
            uint8_t *full = g_buf;
            size_t full_size = g_buf_size, used = g_buf_used;
            g_buf = NULL;
            g_in_flight = 0;
            pthread_mutex_unlock(&g_lock);
            complete(full, full_size, used);
            pthread_mutex_lock(&g_lock);
        }
        request_fn req = g_request;
        g_stats.requests++;
        pthread_mutex_unlock(&g_lock);
        uint8_t *nb = NULL;
        size_t ns = 0, max_records = 99;
        if (req) req(&nb, &ns, &max_records);
        void (*after_request)(void) = __atomic_load_n(&g_after_request, __ATOMIC_SEQ_CST);
        if (nb && after_request) after_request();
        pthread_mutex_lock(&g_lock);
        if (!nb || ns < size || ((uintptr_t)nb & 7) != 0) {
            g_stats.refused++;
            if (nb) {
                /* A buffer that cannot take the record goes straight back, empty. */
                pthread_mutex_unlock(&g_lock);
                complete(nb, ns, 0);
                pthread_mutex_lock(&g_lock);
            }
            break;
        }
        if (g_buf) {
            /* Another thread installed a buffer meanwhile: hand this one back empty. */
            pthread_mutex_unlock(&g_lock);
            complete(nb, ns, 0);
            pthread_mutex_lock(&g_lock);
            continue;
        }
        /* The record goes into the new buffer now, as CUPTI's does: left for another pass, a forced flush from
         * another thread in between (which completes even an empty buffer) would take the buffer away again, and
         * after a second request the record was dropped, which CUPTI does not do while buffers are given. */
        check_zeroed(nb, ns);
        g_buf = nb;
        g_buf_size = ns;
        memcpy(g_buf, record, size);
        g_in_flight = 0;
        stamp_at_write(kind, 0);
        hold_in_flight(kind, 0);
        g_buf_used = size;
        g_stats.records++;
        pthread_mutex_unlock(&g_lock);
        return 1;
    }
    g_dropped++;
    g_stats.dropped_total++;
    pthread_mutex_unlock(&g_lock);
    return 0;
}

/* CUPTI 13.0 keeps a buffer per thread. Its own thread's holds the overhead records of each flush, complete at once,
 * and a flush returns it ahead of a buffer whose kernels still run (seen on an H200: a buffer of two overhead records
 * at each flush beside torch.profiler). `cd_flush_overhead(1)`: each flush, while OVERHEAD is enabled, first fills a
 * buffer of the client's with two such records and completes it. */
static int g_flush_overhead;

void cd_flush_overhead(int on) {
    pthread_mutex_lock(&g_lock);
    g_flush_overhead = on;
    pthread_mutex_unlock(&g_lock);
}

static void own_thread_overhead(void) {
    pthread_mutex_lock(&g_lock);
    int on = g_flush_overhead && (g_enabled & (1ull << K_OVERHEAD));
    request_fn req = g_request;
    complete_fn f = g_complete;
    pthread_mutex_unlock(&g_lock);
    if (!on || !req || !f) return;
    uint8_t *nb = NULL;
    size_t ns = 0, max_records = 0;
    req(&nb, &ns, &max_records);
    pthread_mutex_lock(&g_lock);
    g_stats.requests++;
    pthread_mutex_unlock(&g_lock);
    if (!nb) return;
    size_t used = 0;
    if (((uintptr_t)nb & 7) == 0) {
        uint64_t t;
        cuptiGetTimestamp(&t);
        for (int i = 0; i < 2 && used + sizeof(struct overhead3) <= ns; i++) {
            struct overhead3 o;
            memset(&o, 0, sizeof o);
            o.kind = K_OVERHEAD;
            o.overhead_kind = 1u << 16; /* CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH */
            o.object_kind = 1;          /* CUPTI_ACTIVITY_OBJECT_PROCESS */
            o.object_id[0] = (uint32_t)getpid();
            o.start = t + (uint64_t)i * 10;
            o.end = t + (uint64_t)i * 10 + 5;
            memcpy(nb + used, &o, sizeof o);
            used += sizeof o;
        }
    }
    pthread_mutex_lock(&g_lock);
    g_stats.completions++;
    g_stats.completed_bytes += used;
    pthread_mutex_unlock(&g_lock);
    f(NULL, 0, nb, ns, used);
}

static void land_locked(void);
static uint64_t monotonic_ns(void);
static uint64_t g_land_at;

CUptiResult cuptiActivityFlushAll(uint32_t flag) {
    FAIL_POINT("cuptiActivityFlushAll");
    own_thread_overhead();
    pthread_mutex_lock(&g_lock);
    if (!g_complete) {
        pthread_mutex_unlock(&g_lock);
        return INVALID_OPERATION;
    }
    g_stats.flushes++;
    while (g_queue_len > 0 || g_worker_busy) pthread_cond_wait(&g_cond, &g_lock);
    if (g_land_at != 0 && monotonic_ns() >= g_land_at) {
        land_locked();
        g_land_at = 0;
    }
    uint8_t *buf = NULL;
    size_t size = 0, used = 0;
    /* A forced flush returns the current buffer even when empty (unless cd_empty_buffer_kept); a normal one only with
     * records. */
    if (g_buf && (g_buf_used > 0 || ((flag & 1) && !g_keep_empty)) && ((flag & 1) || g_in_flight == 0)) {
        buf = g_buf;
        size = g_buf_size;
        used = g_buf_used;
        g_buf = NULL;
        /* Forced: those still running stay incomplete. */
        g_in_flight = 0;
    }
    complete_fn f = g_complete;
    if (buf) {
        g_stats.completions++;
        g_stats.completed_bytes += used;
    }
    pthread_mutex_unlock(&g_lock);
    /* The flushing thread delivers, as CUPTI's FlushAll does. */
    if (buf && f) f(NULL, 0, buf, size, used);
    pthread_mutex_lock(&g_lock);
    int ask = g_keep_empty && buf && used > 0 && g_enabled != 0 && !g_buf;
    request_fn req = g_request;
    pthread_mutex_unlock(&g_lock);
    if (ask && req) {
        uint8_t *nb = NULL;
        size_t ns = 0, max_records = 0;
        req(&nb, &ns, &max_records);
        pthread_mutex_lock(&g_lock);
        g_stats.requests++;
        int usable = nb && ns >= 8 && ((uintptr_t)nb & 7) == 0 && !g_buf;
        if (usable) {
            check_zeroed(nb, ns);
            g_buf = nb;
            g_buf_size = ns;
            g_buf_used = 0;
        }
        pthread_mutex_unlock(&g_lock);
        if (nb && !usable) complete(nb, ns, 0);
    }
    return SUCCESS;
}

CUptiResult cuptiGetContextId(void *ctx, uint32_t *id) {
    if (!ctx || !id) return INVALID_PARAMETER;
    *id = (uint32_t)((uintptr_t)ctx & 0xffffffffu);
    return SUCCESS;
}

CUptiResult cuptiGetStreamId(void *ctx, void *stream, uint32_t *id) {
    (void)ctx;
    if (!id) return INVALID_PARAMETER;
    *id = (uint32_t)((uintptr_t)stream & 0xffffffffu);
    return SUCCESS;
}

/* ---- Callback API. ---- */

static CUptiResult subscribe(void **handle, callback_fn cb, void *userdata, const char *name, char *holder,
                             size_t holder_size) {
    if (!handle) return INVALID_PARAMETER;
    FAIL_POINT("cuptiSubscribe");
    pthread_mutex_lock(&g_lock);
    const char *taken = g_cb ? g_subscriber_name : (g_other_subscriber[0] ? g_other_subscriber : NULL);
    if (taken) {
        if (holder && holder_size > 0) {
            strncpy(holder, taken, holder_size - 1);
            holder[holder_size - 1] = 0;
        }
        pthread_mutex_unlock(&g_lock);
        return MULTIPLE_SUBSCRIBERS;
    }
    g_cb = cb;
    g_cb_userdata = userdata;
    snprintf(g_subscriber_name, sizeof g_subscriber_name, "CUPTI for %s", name ? name : "");
    memset(g_enabled_cb, 0, sizeof g_enabled_cb);
    g_stats.subscribed++;
    *handle = (void *)&g_cb;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiSubscribe(void **handle, callback_fn cb, void *userdata) {
    return subscribe(handle, cb, userdata, NULL, NULL, 0);
}

CUptiResult cuptiSubscribe_v2(void **handle, callback_fn cb, void *userdata, struct subscriber_params *p) {
    if (p && p->struct_size != sizeof(struct subscriber_params)) return INVALID_PARAMETER;
    return subscribe(handle, cb, userdata, p ? p->subscriber_name : NULL, p ? p->old_subscriber_name : NULL,
                     p ? p->old_subscriber_size : 0);
}

CUptiResult cuptiUnsubscribe(void *handle) {
    pthread_mutex_lock(&g_lock);
    if (handle != (void *)&g_cb || !g_cb) {
        pthread_mutex_unlock(&g_lock);
        return INVALID_PARAMETER;
    }
    g_cb = NULL;
    g_subscriber_name[0] = 0;
    g_stats.unsubscribes++;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiEnableDomain(uint32_t enable, void *handle, uint32_t domain) {
    if (handle != (void *)&g_cb || domain == 0 || domain >= DOMAIN_COUNT) return INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    memset(g_enabled_cb[domain], enable ? 1 : 0, MAX_CBID);
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiEnableCallback(uint32_t enable, void *handle, uint32_t domain, uint32_t cbid) {
    if (handle != (void *)&g_cb || domain == 0 || domain >= DOMAIN_COUNT || cbid >= MAX_CBID)
        return INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    g_enabled_cb[domain][cbid] = enable ? 1 : 0;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

/* The subscriber's function if (domain, cbid) is enabled, else NULL. */
static callback_fn enabled(uint32_t domain, uint32_t cbid, void **userdata) {
    pthread_mutex_lock(&g_lock);
    callback_fn f = (g_cb && domain < DOMAIN_COUNT && cbid < MAX_CBID && g_enabled_cb[domain][cbid]) ? g_cb : NULL;
    *userdata = g_cb_userdata;
    pthread_mutex_unlock(&g_lock);
    return f;
}

/* Set on a thread while it runs a subscriber's callback at an API exit. */
static __thread int t_at_api_exit;

/* Detaches the double from the process, as CUPTI's cuptiFinalize does: the subscription ends, every kind is
 * disabled, the registered buffer and timestamp callbacks are forgotten; a later call initialises it again. */
CUptiResult cuptiFinalize(void) {
    FAIL_POINT("cuptiFinalize");
    pthread_mutex_lock(&g_lock);
    g_stats.finalizes++;
    if (t_at_api_exit) g_stats.finalizes_at_api_exit++;
    if (g_enabled) g_stats.finalizes_recording++;
    g_cb = NULL;
    g_subscriber_name[0] = 0;
    memset(g_enabled_cb, 0, sizeof g_enabled_cb);
    g_enabled = 0;
    g_request = NULL;
    g_complete = NULL;
    g_timestamp = NULL;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

/* ---- NVTX: CUPTI implements NVTX (libcupti exports InitializeInjectionNvtx2) and records its calls as markers. ---- */

/* NVTX's injection protocol (nvtxTypes.h): the module's export-table getter, its callbacks table (id 1), and the
 * addresses of a callback module's function slots (NvtxFunctionTable). */
typedef void (*nvtx_fn)(void);
typedef const void *(*nvtx_get_export_table_fn)(uint32_t id);
struct nvtx_callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, nvtx_fn ***out_table, unsigned int *out_size);
};
enum { NVTX_ETID_CALLBACKS = 1, NVTX_MODULE_CORE = 1 };
enum { NVTX_CBID_MARK_A = 2, NVTX_CBID_RANGE_PUSH_A = 9, NVTX_CBID_RANGE_POP = 11 };
enum { MARKER_INSTANTANEOUS = 1, MARKER_START = 2, MARKER_END = 4, OBJECT_THREAD = 2 };

static uint32_t g_marker_id;
/* Calls of the NVTX functions the double implements, and InitializeInjectionNvtx2 calls that took a module. */
static uint64_t g_nvtx_calls, g_nvtx_inits;
/* This thread's open ranges (their marker ids), as CUPTI pairs a pop with its push. */
#define NVTX_DEPTH 64
static __thread uint32_t t_ranges[NVTX_DEPTH];
static __thread int t_depth;

/* Writes one marker record; CUPTI keeps its own copy of the name (here never freed: a double's test runs). */
static void nvtx_marker(uint32_t flags, uint32_t id, const char *name) {
    struct marker2 m;
    memset(&m, 0, sizeof m);
    m.kind = K_MARKER;
    m.flags = flags;
    cuptiGetTimestamp(&m.timestamp);
    m.id = id;
    m.object_kind = OBJECT_THREAD;
    m.object_id[0] = (uint32_t)getpid();
    m.object_id[1] = (uint32_t)syscall(SYS_gettid);
    m.name = name ? strdup(name) : NULL;
    if (emit(&m, sizeof m) != 1) free((void *)m.name);
}

static int nvtx_range_push_a(const char *message) {
    __sync_fetch_and_add(&g_nvtx_calls, 1);
    uint32_t id = __sync_add_and_fetch(&g_marker_id, 1);
    int level = t_depth;
    if (t_depth < NVTX_DEPTH) t_ranges[t_depth] = id;
    t_depth++;
    nvtx_marker(MARKER_START, id, message);
    return level;
}

static int nvtx_range_pop(void) {
    __sync_fetch_and_add(&g_nvtx_calls, 1);
    if (t_depth == 0) return -1;
    t_depth--;
    nvtx_marker(MARKER_END, t_depth < NVTX_DEPTH ? t_ranges[t_depth] : 0, NULL);
    return t_depth;
}

static void nvtx_mark_a(const char *message) {
    __sync_fetch_and_add(&g_nvtx_calls, 1);
    nvtx_marker(MARKER_INSTANTANEOUS, __sync_add_and_fetch(&g_marker_id, 1), message);
}

/* Takes the module's nvtxMarkA, nvtxRangePushA and nvtxRangePop: 1, or 0 where the module's tables are not NVTX's
 * (or after cd_fail_next("InitializeInjectionNvtx2", any)). */
int InitializeInjectionNvtx2(nvtx_get_export_table_fn get) {
    if (!get || take_failure("InitializeInjectionNvtx2")) return 0;
    const struct nvtx_callbacks *cb = get(NVTX_ETID_CALLBACKS);
    if (!cb || cb->struct_size < sizeof *cb || !cb->get_module_function_table) return 0;
    nvtx_fn **table = NULL;
    unsigned int size = 0;
    if (!cb->get_module_function_table(NVTX_MODULE_CORE, &table, &size) || !table || size <= NVTX_CBID_RANGE_POP)
        return 0;
    *table[NVTX_CBID_MARK_A] = (nvtx_fn)nvtx_mark_a;
    *table[NVTX_CBID_RANGE_PUSH_A] = (nvtx_fn)nvtx_range_push_a;
    *table[NVTX_CBID_RANGE_POP] = (nvtx_fn)nvtx_range_pop;
    __sync_fetch_and_add(&g_nvtx_inits, 1);
    return 1;
}

/* How often the double's NVTX functions were called, and how many modules InitializeInjectionNvtx2 took. */
void cd_nvtx_counts(uint64_t *calls, uint64_t *inits) {
    *calls = __sync_fetch_and_add(&g_nvtx_calls, 0);
    *inits = __sync_fetch_and_add(&g_nvtx_inits, 0);
}

/* ---- Test controls. ---- */

void cd_set_version(uint32_t v) { g_version = v; }

/* How many per-function API choices were made, and how many functions are off now (both kinds). */
uint64_t cd_api_choices(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_api_choices;
    pthread_mutex_unlock(&g_lock);
    return n;
}

int cd_api_off_count(void) {
    pthread_mutex_lock(&g_lock);
    int n = g_api_off_len[0] + g_api_off_len[1];
    pthread_mutex_unlock(&g_lock);
    return n;
}

uint32_t cd_thread_id_type(void) {
    pthread_mutex_lock(&g_lock);
    uint32_t t = g_thread_id_type;
    pthread_mutex_unlock(&g_lock);
    return t;
}

/* Kernel records written from now on (`on`) are of kernels still running (see g_in_flight_on). */
void cd_in_flight(int on) {
    pthread_mutex_lock(&g_lock);
    g_in_flight_on = on;
    pthread_mutex_unlock(&g_lock);
}

/* The request callback registered now (CUPTI reads it, then calls it without its lock: a consumer that registers
 * meanwhile does not stop a call to the one before). */
request_fn cd_current_request(void) {
    pthread_mutex_lock(&g_lock);
    request_fn r = g_request;
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Under g_lock: the running kernels of the current buffer end. */
static void land_locked(void) {
    for (int i = 0; i < g_in_flight && g_buf; i++) {
        struct kernel10 *k = (struct kernel10 *)(g_buf + g_in_flight_times[i].at);
        k->start = g_in_flight_times[i].start;
        k->end = g_in_flight_times[i].end;
    }
    g_in_flight = 0;
}

/* The running kernels of the current buffer end: their records are complete. */
void cd_land(void) {
    pthread_mutex_lock(&g_lock);
    land_locked();
    pthread_mutex_unlock(&g_lock);
}

/* cd_land_after(ms): the running kernels end `ms` milliseconds from now, as seen by the first flush after that
 * moment (a kernel that outlives a window's stop by a few milliseconds); `g_land_at`, 0 when none is due. */

static uint64_t monotonic_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void cd_land_after(uint32_t ms) {
    pthread_mutex_lock(&g_lock);
    g_land_at = monotonic_ns() + (uint64_t)ms * 1000000ull;
    pthread_mutex_unlock(&g_lock);
}

void cd_empty_buffer_kept(int on) {
    pthread_mutex_lock(&g_lock);
    g_keep_empty = on;
    pthread_mutex_unlock(&g_lock);
}

void cd_async(int on) {
    pthread_mutex_lock(&g_lock);
    g_async = on;
    if (on && !g_worker_started) {
        g_worker_started = pthread_create(&g_worker, NULL, worker, NULL) == 0;
        if (g_worker_started) pthread_detach(g_worker);
    }
    pthread_mutex_unlock(&g_lock);
}

void cd_fail_next(const char *fn, int code) {
    pthread_mutex_lock(&g_lock);
    g_fail_fn = fn;
    g_fail_code = code;
    pthread_mutex_unlock(&g_lock);
}

void cd_set_private_kind(uint32_t kind, uint32_t size) {
    g_private_kind = kind;
    g_private_size = size;
}

void cd_stats(struct cd_stats *out) {
    pthread_mutex_lock(&g_lock);
    *out = g_stats;
    out->enabled_mask = g_enabled;
    pthread_mutex_unlock(&g_lock);
}

/* The graph the next kernels ran in (cd_set_kernel_graph; 0: none), and their node ids, counted up. */
static uint32_t g_kernel_graph_id;
static uint64_t g_kernel_graph_node_id;

/* Kernels emitted from now on ran as nodes of graph `graph_id` (0: outside any graph), nodes from `first_node` on. */
void cd_set_kernel_graph(uint32_t graph_id, uint64_t first_node) {
    g_kernel_graph_id = graph_id;
    g_kernel_graph_node_id = graph_id ? first_node : 0;
}

uint64_t cd_now(void) {
    uint64_t t;
    cuptiGetTimestamp(&t);
    return t;
}

int cd_raw(const void *record, size_t size) { return emit(record, size); }

int cd_kernel(uint32_t kind, uint64_t start, uint64_t end, uint32_t device, uint32_t context, uint32_t stream,
              uint32_t correlation, const char *name, int32_t grid_x, int32_t grid_y, int32_t grid_z,
              int32_t block_x, int32_t block_y, int32_t block_z) {
    struct kernel10 k;
    memset(&k, 0, sizeof k);
    k.kind = kind;
    k.registers_per_thread = 32;
    k.start = start;
    k.end = end;
    k.device_id = device;
    k.context_id = context;
    k.stream_id = stream;
    k.grid_x = grid_x;
    k.grid_y = grid_y;
    k.grid_z = grid_z;
    k.block_x = block_x;
    k.block_y = block_y;
    k.block_z = block_z;
    k.static_shared_memory = 256;
    k.dynamic_shared_memory = 1024;
    k.correlation_id = correlation;
    k.grid_id = correlation;
    k.name = name;
    k.launch_type = 0;
    k.graph_id = g_kernel_graph_id;
    k.graph_node_id = g_kernel_graph_node_id++;
    k.cluster_x = k.cluster_y = k.cluster_z = 1;
    k.is_device_launched = 1;
    return emit(&k, kernel_size());
}

int cd_memcpy(uint8_t copy_kind, uint8_t src_kind, uint8_t dst_kind, uint8_t flags, uint64_t bytes, uint64_t start,
              uint64_t end, uint32_t device, uint32_t context, uint32_t stream, uint32_t correlation) {
    struct memcpy6 m;
    memset(&m, 0, sizeof m);
    m.kind = K_MEMCPY;
    m.copy_kind = copy_kind;
    m.src_kind = src_kind;
    m.dst_kind = dst_kind;
    m.flags = flags;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.device_id = device;
    m.context_id = context;
    m.stream_id = stream;
    m.correlation_id = correlation;
    m.runtime_correlation_id = correlation + 1;
    m.copy_count = 1;
    /* In 12.9 this byte is padding, which CUPTI leaves zero; 13.0 sets it for device-launched copies. */
    m.is_device_launched = 0;
    return emit(&m, sizeof m);
}

int cd_memset(uint32_t value, uint64_t bytes, uint64_t start, uint64_t end, uint32_t device, uint32_t context,
              uint32_t stream, uint32_t correlation, uint16_t flags, uint16_t memory_kind) {
    struct memset4 m;
    memset(&m, 0, sizeof m);
    m.kind = K_MEMSET;
    m.value = value;
    m.bytes = bytes;
    m.start = start;
    m.end = end;
    m.device_id = device;
    m.context_id = context;
    m.stream_id = stream;
    m.correlation_id = correlation;
    m.flags = flags;
    m.memory_kind = memory_kind;
    return emit(&m, sizeof m);
}

int cd_api(uint32_t kind, uint32_t cbid, uint64_t start, uint64_t end, uint32_t pid, uint32_t tid,
           uint32_t correlation, uint32_t ret) {
    struct api a = {kind, cbid, start, end, pid, tid, correlation, ret};
    return emit(&a, sizeof a);
}

int cd_sync(uint32_t type, uint64_t start, uint64_t end, uint32_t correlation, uint32_t context, uint32_t stream,
            uint32_t event) {
    struct sync2 s;
    memset(&s, 0, sizeof s);
    s.kind = K_SYNCHRONIZATION;
    s.type = type;
    s.start = start;
    s.end = end;
    s.correlation_id = correlation;
    s.context_id = context;
    s.stream_id = stream;
    s.cuda_event_id = event;
    s.cuda_event_sync_id = event == 0xffffffffu ? 0xffffffffu : 77;
    return emit(&s, sizeof s);
}

int cd_overhead(uint32_t overhead_kind, uint32_t object_kind, uint32_t id0, uint32_t id1, uint32_t id2,
                uint64_t start, uint64_t end, uint32_t correlation) {
    struct overhead3 o;
    memset(&o, 0, sizeof o);
    o.kind = K_OVERHEAD;
    o.overhead_kind = overhead_kind;
    o.object_kind = object_kind;
    o.object_id[0] = id0;
    o.object_id[1] = id1;
    o.object_id[2] = id2;
    o.start = start;
    o.end = end;
    o.correlation_id = correlation;
    return emit(&o, sizeof o);
}

/* Fires the entry and exit callbacks of one API call, with `params` as its parameter struct (the layouts of
 * generated_cuda_meta.h); returns what the exit callback finds in the correlation data (what the entry callback
 * stored), or UINT64_MAX when the callback is not enabled. */
uint64_t cd_api_callback_params(uint32_t domain, uint32_t cbid, const char *function_name, const char *symbol,
                                const void *params, void *context, uint32_t context_uid, uint32_t correlation,
                                int32_t ret) {
    void *userdata;
    callback_fn f = enabled(domain, cbid, &userdata);
    if (!f) return UINT64_MAX;
    uint64_t slot = 0;
    int32_t result = ret;
    struct callback_data d = {0, function_name, params, NULL, symbol, context, context_uid, &slot, correlation};
    f(userdata, domain, cbid, &d);
    d.callback_site = 1;
    d.function_return_value = &result;
    t_at_api_exit = 1;
    f(userdata, domain, cbid, &d);
    t_at_api_exit = 0;
    return slot;
}

/* The same without parameters. */
uint64_t cd_api_callback(uint32_t domain, uint32_t cbid, const char *function_name, const char *symbol,
                         void *context, uint32_t context_uid, uint32_t correlation, int32_t ret) {
    return cd_api_callback_params(domain, cbid, function_name, symbol, NULL, context, context_uid, correlation, ret);
}

/* Fires a resource callback; `cubin` non-NULL makes it a module event. Returns 1 if delivered. */
int cd_resource(uint32_t cbid, void *context, void *stream, uint32_t module_id, const char *cubin,
                size_t cubin_size) {
    void *userdata;
    callback_fn f = enabled(DOMAIN_RESOURCE, cbid, &userdata);
    if (!f) return 0;
    struct module_resource_data m = {module_id, cubin_size, cubin};
    struct resource_data r = {context, stream, cubin ? (void *)&m : NULL};
    f(userdata, DOMAIN_RESOURCE, cbid, &r);
    return 1;
}

/* CUpti_GraphData (cupti_callbacks.h), what graph resource callbacks carry in `resourceDescriptor`. */
struct graph_data {
    void *graph;
    void *original_graph;
    void *node;
    void *original_node;
    uint32_t node_type;
    void *dependency;
    void *graph_exec;
};
_Static_assert(sizeof(struct graph_data) == 56, "CUpti_GraphData is 56 bytes");

/* Fires a graph resource callback (GRAPHEXEC_CREATED: `graph` made into `graph_exec`). Returns 1 if delivered. */
int cd_graph_resource(uint32_t cbid, void *context, void *graph, void *graph_exec) {
    void *userdata;
    callback_fn f = enabled(DOMAIN_RESOURCE, cbid, &userdata);
    if (!f) return 0;
    struct graph_data g = {graph, NULL, NULL, NULL, 0, NULL, graph_exec};
    struct resource_data r = {context, NULL, &g};
    f(userdata, DOMAIN_RESOURCE, cbid, &r);
    return 1;
}

/* Graph ids: what cd_graph_id set for a handle, else its low 32 bits (as cuptiGetStreamId here). */
#define GRAPH_IDS 32
static struct {
    void *handle;
    uint32_t id;
} g_graph_ids[GRAPH_IDS];
static int g_graph_id_count;

void cd_graph_id(void *handle, uint32_t id) {
    pthread_mutex_lock(&g_lock);
    if (g_graph_id_count < GRAPH_IDS) {
        g_graph_ids[g_graph_id_count].handle = handle;
        g_graph_ids[g_graph_id_count].id = id;
        g_graph_id_count++;
    }
    pthread_mutex_unlock(&g_lock);
}

static CUptiResult graph_id(void *handle, uint32_t *id) {
    if (!handle || !id) return INVALID_PARAMETER;
    pthread_mutex_lock(&g_lock);
    *id = (uint32_t)((uintptr_t)handle & 0xffffffffu);
    for (int i = 0; i < g_graph_id_count; i++)
        if (g_graph_ids[i].handle == handle) *id = g_graph_ids[i].id;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

CUptiResult cuptiGetGraphId(void *graph, uint32_t *id) { return graph_id(graph, id); }

CUptiResult cuptiGetGraphExecId(void *graph_exec, uint32_t *id) { return graph_id(graph_exec, id); }

/* Fires a synchronize callback. Returns 1 if delivered. */
int cd_sync_callback(uint32_t cbid, void *context, void *stream) {
    void *userdata;
    callback_fn f = enabled(DOMAIN_SYNCHRONIZE, cbid, &userdata);
    if (!f) return 0;
    struct synchronize_data s = {context, stream};
    f(userdata, DOMAIN_SYNCHRONIZE, cbid, &s);
    return 1;
}

/* Makes another tool hold the subscription (NULL releases it). */
void cd_other_subscriber(const char *name) {
    pthread_mutex_lock(&g_lock);
    if (name) {
        strncpy(g_other_subscriber, name, sizeof g_other_subscriber - 1);
    } else {
        g_other_subscriber[0] = 0;
    }
    pthread_mutex_unlock(&g_lock);
}

/* The name CUPTI keeps for the current subscriber ("" when none). */
const char *cd_subscriber_name(void) { return g_subscriber_name; }
