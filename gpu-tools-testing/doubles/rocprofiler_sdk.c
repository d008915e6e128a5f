/*
 * Test double of AMD rocprofiler-sdk 1.0 (librocprofiler-sdk.so.1, ROCm 7.0), written from its headers.
 *
 * Exports the SDK functions the crate binds, with the vendor's ABI (record layouts asserted below), and the tool
 * lifecycle the crate must cope with:
 *   - tools register by exporting rocprofiler_configure (found through ROCP_TOOL_LIBRARIES when the "runtime
 *     starts", rpsdk_start_runtime) or through rocprofiler_force_configure; configure, then initialize, then, at
 *     exit or when the tool asks, finalize; contexts, buffers and services only while a tool initialises
 *     (CONFIGURATION_LOCKED otherwise); force_configure after initialisation is CONFIGURATION_LOCKED;
 *   - buffers of `size` bytes holding headers and payloads, two arenas that swap: one fills while a consumer
 *     thread hands the other to the callback as an array of header pointers with the drop count; the watermark
 *     hands an arena over; a full arena waits (LOSSLESS) or drops and counts (DISCARD); flush hands the filling
 *     arena over and waits; after the callback the arena is scribbled over (and poisoned under AddressSanitizer
 *     or valgrind) so a late read is caught;
 *   - callback tracing calls the tool on the emitting thread; code objects and kernel symbols;
 *   - ROCTx as the SDK wraps it (rocprofiler_sdk_roctx.inc): each call through MARKER_CORE_API (a callback before
 *     and after, a record per call), and, outside that, MARKER_CORE_RANGE_API (a range's callbacks at its push and
 *     pop, one record per range written at its end); `RPSDK_DOUBLE_NO_CORE_RANGE=1` makes it an SDK from before
 *     MARKER_CORE_RANGE_API, which does not name that kind and ends the process when asked to configure it (the
 *     real SDK indexes its per-kind table with `.at(kind)` before checking the kind: std::out_of_range);
 *     `RPSDK_DOUBLE_REFUSE_BUFFER_KIND=N` refuses buffer kind N with NOT_IMPLEMENTED, as an SDK built without it;
 *   - agents (a CPU and two GPUs), counters per GPU, counter configs, the dispatch and device counting services.
 * Test-only controls start with `rpsdk_`: starting the "runtime", emitting records and callbacks, a fake HIP
 * program, statistics.
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define RPS_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RPS_ASAN 1
#endif
#endif
#ifdef RPS_ASAN
#include <sanitizer/asan_interface.h>
#define RPS_POISON(p, n) __asan_poison_memory_region((p), (n))
#define RPS_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#elif defined(RPD_VALGRIND)
#include <valgrind/memcheck.h>
#define RPS_POISON(p, n) VALGRIND_MAKE_MEM_NOACCESS((p), (n))
#define RPS_UNPOISON(p, n) VALGRIND_MAKE_MEM_UNDEFINED((p), (n))
#else
#define RPS_POISON(p, n) ((void)(p), (void)(n))
#define RPS_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define EXPORT __attribute__((visibility("default")))

/* ---- ABI (rocprofiler-sdk/fwd.h, buffer_tracing.h, callback_tracing.h, agent.h, registration.h) ---- */
typedef uint32_t status_t;
enum {
    OK = 0, ERROR = 1, CONTEXT_NOT_FOUND = 2, BUFFER_NOT_FOUND = 3, KIND_NOT_FOUND = 4, OPERATION_NOT_FOUND = 5,
    AGENT_NOT_FOUND = 7, COUNTER_NOT_FOUND = 8, CONTEXT_ERROR = 9, CONTEXT_INVALID = 10, CONTEXT_ID_NOT_ZERO = 13,
    BUFFER_BUSY = 14, SERVICE_ALREADY_CONFIGURED = 15, CONFIGURATION_LOCKED = 16, INVALID_ARGUMENT = 19,
    NOT_IMPLEMENTED = 17, FINALIZED = 21, OUT_OF_RESOURCES = 29,
};
enum { CATEGORY_TRACING = 1, CATEGORY_PC_SAMPLING = 2, CATEGORY_COUNTERS = 3 };
enum {
    BT_HSA_CORE_API = 1, BT_HIP_RUNTIME_API = 5, BT_MARKER_CORE_API = 7, BT_MEMORY_COPY = 10,
    BT_KERNEL_DISPATCH = 11, BT_SCRATCH_MEMORY = 12, BT_CORRELATION_ID_RETIREMENT = 13, BT_MEMORY_ALLOCATION = 16,
    BT_MARKER_CORE_RANGE_API = 32, BT_LAST = 33,
};
enum { CT_MARKER_CORE_API = 7, CT_CODE_OBJECT = 10, CT_MARKER_CORE_RANGE_API = 21, CT_LAST = 23 };
enum { CODE_OBJECT_LOAD = 1, CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER = 2 };
enum { PHASE_NONE = 0, PHASE_ENTER = 1, PHASE_EXIT = 2 };
enum { POLICY_DISCARD = 1, POLICY_LOSSLESS = 2 };
enum { COUNTER_RECORD_DISPATCH_HEADER = 1, COUNTER_RECORD_VALUE = 2 };
enum { AGENT_CPU = 1, AGENT_GPU = 2 };
enum { MEMORY_COPY_HOST_TO_DEVICE = 2, MEMORY_COPY_DEVICE_TO_HOST = 3 };

typedef struct { uint64_t handle; } id_t_;
typedef id_t_ context_id_t, buffer_id_t, agent_id_t, counter_id_t, config_id_t, queue_id_t;
typedef union { uint64_t value; void *ptr; } user_data_t;
typedef struct { uint64_t internal; user_data_t external; uint64_t ancestor; } correlation_id_t;
typedef struct { uint64_t internal; user_data_t external; } async_correlation_id_t;
typedef struct { uint32_t x, y, z; } dim3_t;
typedef struct {
    union { struct { uint32_t category, kind; }; uint64_t hash; };
    void *payload;
} record_header_t;
typedef struct {
    context_id_t context_id;
    uint64_t thread_id;
    correlation_id_t correlation_id;
    uint32_t kind;
    int32_t operation;
    uint32_t phase;
    void *payload;
} callback_record_t;
typedef struct {
    uint64_t size;
    agent_id_t agent_id;
    queue_id_t queue_id;
    uint64_t kernel_id, dispatch_id;
    uint32_t private_segment_size, group_segment_size;
    dim3_t workgroup_size, grid_size;
    uint8_t reserved_padding[56];
} dispatch_info_t;
typedef struct {
    uint64_t size; uint32_t kind; int32_t operation; correlation_id_t correlation_id;
    uint64_t start_timestamp, end_timestamp, thread_id;
} api_record_t;
typedef struct {
    uint64_t size; uint32_t kind; uint32_t operation; async_correlation_id_t correlation_id; uint64_t thread_id;
    uint64_t start_timestamp, end_timestamp; dispatch_info_t dispatch_info;
} kernel_dispatch_record_t;
typedef struct {
    uint64_t size; uint32_t kind; uint32_t operation; async_correlation_id_t correlation_id; uint64_t thread_id;
    uint64_t start_timestamp, end_timestamp; agent_id_t dst_agent_id, src_agent_id; uint64_t bytes;
    uint64_t dst_address, src_address;
} memory_copy_record_t;
typedef struct {
    uint64_t size; uint32_t kind; uint32_t operation; correlation_id_t correlation_id; uint64_t thread_id;
    uint64_t start_timestamp, end_timestamp; agent_id_t agent_id; uint64_t address, allocation_size;
} memory_allocation_record_t;
typedef struct { uint64_t size; uint32_t kind; uint64_t timestamp; uint64_t internal_correlation_id; } retirement_record_t;
typedef struct {
    uint64_t size, num_records; async_correlation_id_t correlation_id; uint64_t start_timestamp, end_timestamp;
    dispatch_info_t dispatch_info;
} dispatch_counting_record_t;
typedef struct {
    uint64_t size; async_correlation_id_t correlation_id; uint64_t start_timestamp, end_timestamp;
    dispatch_info_t dispatch_info;
} dispatch_counting_data_t;
typedef struct { uint64_t id; double counter_value; uint64_t dispatch_id; user_data_t user_data; agent_id_t agent_id; } counter_record_t;
typedef struct {
    uint64_t size, code_object_id; agent_id_t agent_id; uint64_t hsa_agent; const char *uri;
    uint64_t load_base, load_size; int64_t load_delta; uint32_t storage_type;
    union { struct { int storage_file; }; struct { uint64_t memory_base, memory_size; }; };
} code_object_load_t;
typedef struct {
    uint64_t size, kernel_id, code_object_id; const char *kernel_name; uint64_t kernel_object;
    uint32_t kernarg_segment_size, kernarg_segment_alignment, group_segment_size, private_segment_size;
    uint32_t sgpr_count, arch_vgpr_count, accum_vgpr_count; int64_t kernel_code_entry_byte_offset;
    uint64_t kernel_address;
} kernel_symbol_t;
typedef struct {
    uint64_t size; agent_id_t id; uint32_t type;
    uint32_t cpu_cores_count, simd_count, mem_banks_count, caches_count, io_links_count, cpu_core_id_base,
        simd_id_base, max_waves_per_simd, lds_size_in_kb, gds_size_in_kb, num_gws, wave_front_size, num_xcc,
        cu_count, array_count, num_shader_banks, simd_arrays_per_engine, cu_per_simd_array, simd_per_cu,
        max_slots_scratch_cu, gfx_target_version;
    uint16_t vendor_id, device_id;
    uint32_t location_id, domain, drm_render_minor, num_sdma_engines, num_sdma_xgmi_engines,
        num_sdma_queues_per_engine, num_cp_queues, max_engine_clk_ccompute, max_engine_clk_fcompute;
    uint32_t sdma_fw_version, fw_version, capability; /* hsakmt unions of one 32-bit word */
    uint32_t cu_per_engine, max_waves_per_cu, family_id, workgroup_max_size, grid_max_size;
    uint64_t local_mem_size, hive_id, gpu_id;
    dim3_t workgroup_max_dim, grid_max_dim;
    const void *mem_banks, *caches, *io_links;
    const char *name, *vendor_name, *product_name, *model_name;
    uint32_t node_id; int32_t logical_node_id, logical_node_type_id;
    uint32_t runtime_visibility;
    uint64_t uuid;
} agent_v0_t;
typedef struct {
    counter_id_t id; const char *name, *description, *block, *expression;
    uint8_t flags; uint8_t pad[7];
} counter_info_v0_t;
typedef struct { size_t size; const char *name; uint32_t handle; } client_id_t;
typedef void (*client_finalize_t)(client_id_t);
typedef int (*tool_initialize_t)(client_finalize_t, void *);
typedef void (*tool_finalize_t)(void *);
typedef struct { size_t size; tool_initialize_t initialize; tool_finalize_t finalize; void *tool_data; } configure_result_t;
typedef configure_result_t *(*configure_func_t)(uint32_t, const char *, uint32_t, client_id_t *);
typedef void (*buffer_cb_t)(context_id_t, buffer_id_t, record_header_t **, size_t, void *, uint64_t);
typedef void (*callback_cb_t)(callback_record_t, user_data_t *, void *);
typedef status_t (*agents_cb_t)(uint32_t, const void **, size_t, void *);
typedef status_t (*counters_cb_t)(agent_id_t, counter_id_t *, size_t, void *);
typedef void (*dispatch_counting_cb_t)(dispatch_counting_data_t, config_id_t *, user_data_t *, void *);
typedef status_t (*set_config_t)(context_id_t, config_id_t);
typedef void (*device_counting_cb_t)(context_id_t, agent_id_t, set_config_t, void *);

_Static_assert(sizeof(record_header_t) == 16, "header");
_Static_assert(sizeof(callback_record_t) == 64, "callback record");
_Static_assert(sizeof(dispatch_info_t) == 128, "dispatch info");
_Static_assert(sizeof(api_record_t) == 64, "api record");
_Static_assert(sizeof(kernel_dispatch_record_t) == 184, "kernel dispatch record");
_Static_assert(sizeof(memory_copy_record_t) == 96, "memory copy record");
_Static_assert(sizeof(memory_allocation_record_t) == 88, "memory allocation record");
_Static_assert(sizeof(retirement_record_t) == 32, "retirement record");
_Static_assert(sizeof(dispatch_counting_record_t) == 176, "dispatch counting record");
_Static_assert(sizeof(counter_record_t) == 40, "counter record");
_Static_assert(sizeof(code_object_load_t) == 88, "code object load");
_Static_assert(sizeof(agent_v0_t) == 304, "agent");
_Static_assert(__builtin_offsetof(agent_v0_t, name) == 248, "agent name");
_Static_assert(__builtin_offsetof(agent_v0_t, uuid) == 296, "agent uuid");
_Static_assert(sizeof(counter_info_v0_t) == 48, "counter info");
_Static_assert(sizeof(configure_result_t) == 32, "configure result");
_Static_assert(sizeof(client_id_t) == 24, "client id");

/* ---- state ---- */
#define MAX_CONTEXTS 16
#define MAX_BUFFERS 16
#define MAX_SERVICES 64
#define MAX_CONFIGS 16

struct arena {
    unsigned char *bytes;       /* payloads */
    record_header_t *headers;   /* headers, in order */
    record_header_t **pointers; /* what the callback receives */
    size_t used, count, cap_headers;
    uint64_t drops;
    int state; /* 0 filling or free, 1 handed over */
};

struct buffer {
    int used;
    uint64_t id, context;
    size_t size, watermark;
    int policy;
    buffer_cb_t callback;
    void *data;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    struct arena arenas[2];
    int filling;       /* index of the arena producers write */
    int pending;       /* index handed to the consumer, -1 none */
    int delivering;    /* the consumer is in the callback */
    uint64_t drops_pending;
    int stop;
    pthread_t thread;
};

struct service {
    uint64_t context;
    int is_callback; /* 0 buffer tracing, 1 callback tracing */
    uint32_t kind;
    uint64_t buffer;
    callback_cb_t callback;
    void *data;
};

struct context { int used, active; uint64_t id; };
struct config { int used; uint64_t id, agent; size_t n; uint64_t counters[8]; };

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_configuring, g_initialized, g_finalized;
static uint64_t g_next_id = 1;
static struct context g_contexts[MAX_CONTEXTS];
static struct buffer g_buffers[MAX_BUFFERS];
static struct service g_services[MAX_SERVICES];
static int g_nservices;
static struct config g_configs[MAX_CONFIGS];
static struct { uint64_t context, buffer; dispatch_counting_cb_t cb; void *data; } g_dispatch_counting;
static struct { uint64_t context, agent; device_counting_cb_t cb; void *data; uint64_t config; int set; } g_device_counting;
static uint64_t g_samples;

/* the registered tool */
static configure_result_t *g_tool;
static client_id_t g_client;
static int g_tool_finalized;

/* statistics, read with rpsdk_stats */
static uint64_t st_records, st_callbacks, st_flushes, st_dropped, st_tool_inits, st_tool_finis, st_callbacks_traced;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- library info ---- */
EXPORT status_t rocprofiler_get_version(uint32_t *major, uint32_t *minor, uint32_t *patch) {
    const char *forced = getenv("RPSDK_DOUBLE_MAJOR");
    if (major) *major = forced ? (uint32_t)atoi(forced) : 1;
    if (minor) *minor = 0;
    if (patch) *patch = 0;
    return OK;
}
EXPORT const char *rocprofiler_get_status_name(status_t s) {
    switch (s) {
    case OK: return "ROCPROFILER_STATUS_SUCCESS";
    case CONFIGURATION_LOCKED: return "ROCPROFILER_STATUS_ERROR_CONFIGURATION_LOCKED";
    default: return "ROCPROFILER_STATUS_ERROR";
    }
}
EXPORT const char *rocprofiler_get_status_string(status_t s) {
    switch (s) {
    case OK: return "Success";
    case CONFIGURATION_LOCKED: return "Function invoked outside of configuration";
    case INVALID_ARGUMENT: return "Invalid argument";
    case OUT_OF_RESOURCES: return "Insufficient resources";
    default: return "rocprofiler-sdk double error";
    }
}
EXPORT status_t rocprofiler_get_timestamp(uint64_t *ts) { *ts = now_ns(); return OK; }
EXPORT status_t rocprofiler_is_initialized(int *s) { pthread_mutex_lock(&g_lock); *s = g_initialized; pthread_mutex_unlock(&g_lock); return OK; }
EXPORT status_t rocprofiler_is_finalized(int *s) { pthread_mutex_lock(&g_lock); *s = g_finalized; pthread_mutex_unlock(&g_lock); return OK; }

/* ---- tool lifecycle ---- */
static void finalize_tool(void);
static void client_finalize(client_id_t client) { (void)client; finalize_tool(); }

/* Runs the tool's configure and initialize, as the SDK does once per tool. Returns 1 when a tool registered. */
static int run_configure(configure_func_t configure) {
    client_id_t client = {sizeof(client_id_t), NULL, 1};
    configure_result_t *result = configure(10000, "1.0.0", 0, &client);
    if (!result || !result->initialize) return 0;
    pthread_mutex_lock(&g_lock);
    g_tool = result;
    g_client = client;
    g_configuring = 1;
    pthread_mutex_unlock(&g_lock);
    int rc = result->initialize(client_finalize, result->tool_data);
    pthread_mutex_lock(&g_lock);
    g_configuring = 0;
    st_tool_inits++;
    if (rc != 0) g_tool = NULL; /* a failed tool is left out */
    pthread_mutex_unlock(&g_lock);
    return rc == 0;
}

EXPORT status_t rocprofiler_force_configure(configure_func_t configure) {
    pthread_mutex_lock(&g_lock);
    int locked = g_initialized;
    if (!locked) g_initialized = 1;
    pthread_mutex_unlock(&g_lock);
    if (locked) return CONFIGURATION_LOCKED;
    if (!configure) return INVALID_ARGUMENT;
    run_configure(configure);
    return OK;
}

/* Test control: the HIP runtime starts: the SDK initialises and configures the tools named in ROCP_TOOL_LIBRARIES
 * (':'-separated paths). Returns how many registered. */
EXPORT int rpsdk_start_runtime(void) {
    pthread_mutex_lock(&g_lock);
    int already = g_initialized;
    g_initialized = 1;
    pthread_mutex_unlock(&g_lock);
    if (already) return 0;
    const char *list = getenv("ROCP_TOOL_LIBRARIES");
    int registered = 0;
    if (!list) return 0;
    char *copy = strdup(list), *save = NULL;
    for (char *path = strtok_r(copy, ":", &save); path; path = strtok_r(NULL, ":", &save)) {
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) { fprintf(stderr, "rocprofiler-sdk double: %s\n", dlerror()); continue; }
        configure_func_t f = (configure_func_t)dlsym(h, "rocprofiler_configure");
        if (f) registered += run_configure(f);
    }
    free(copy);
    return registered;
}

static void finalize_tool(void) {
    pthread_mutex_lock(&g_lock);
    configure_result_t *tool = g_tool;
    int done = g_tool_finalized;
    g_tool_finalized = 1;
    pthread_mutex_unlock(&g_lock);
    if (done) return;
    if (tool && tool->finalize) tool->finalize(tool->tool_data);
    pthread_mutex_lock(&g_lock);
    g_finalized = 1;
    st_tool_finis++;
    pthread_mutex_unlock(&g_lock);
}

/* Test control: the process ends (the SDK's exit handler): the tool finalises. */
EXPORT void rpsdk_finalize(void) { finalize_tool(); }

/* ---- contexts ---- */
static struct context *find_context(uint64_t id) {
    for (int i = 0; i < MAX_CONTEXTS; i++)
        if (g_contexts[i].used && g_contexts[i].id == id) return &g_contexts[i];
    return NULL;
}

EXPORT status_t rocprofiler_create_context(context_id_t *id) {
    if (!id) return INVALID_ARGUMENT;
    if (id->handle != 0) return CONTEXT_ID_NOT_ZERO;
    pthread_mutex_lock(&g_lock);
    status_t s = CONFIGURATION_LOCKED;
    if (g_configuring) {
        s = OUT_OF_RESOURCES;
        for (int i = 0; i < MAX_CONTEXTS; i++)
            if (!g_contexts[i].used) {
                g_contexts[i] = (struct context){1, 0, g_next_id++};
                id->handle = g_contexts[i].id;
                s = OK;
                break;
            }
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

static void device_counting_start(uint64_t ctx);

EXPORT status_t rocprofiler_start_context(context_id_t id) {
    pthread_mutex_lock(&g_lock);
    struct context *c = find_context(id.handle);
    status_t s = !c ? CONTEXT_NOT_FOUND : g_finalized ? FINALIZED : OK;
    if (s == OK) c->active = 1;
    pthread_mutex_unlock(&g_lock);
    if (s == OK) device_counting_start(id.handle);
    return s;
}
EXPORT status_t rocprofiler_stop_context(context_id_t id) {
    pthread_mutex_lock(&g_lock);
    struct context *c = find_context(id.handle);
    if (c) c->active = 0;
    pthread_mutex_unlock(&g_lock);
    return c ? OK : CONTEXT_NOT_FOUND;
}
EXPORT status_t rocprofiler_context_is_active(context_id_t id, int *status) {
    pthread_mutex_lock(&g_lock);
    struct context *c = find_context(id.handle);
    if (c) *status = c->active;
    pthread_mutex_unlock(&g_lock);
    return c ? OK : CONTEXT_NOT_FOUND;
}

/* ---- buffers ---- */
static struct buffer *find_buffer(uint64_t id) {
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (g_buffers[i].used && g_buffers[i].id == id) return &g_buffers[i];
    return NULL;
}

static void arena_reset(struct buffer *b, struct arena *a) {
    RPS_UNPOISON(a->bytes, b->size);
    RPS_UNPOISON(a->headers, a->cap_headers * sizeof(record_header_t));
    RPS_UNPOISON(a->pointers, a->cap_headers * sizeof(record_header_t *));
    a->used = 0;
    a->count = 0;
    a->drops = 0;
    a->state = 0;
}

/* The consumer: hands each arena given to it to the callback, then scribbles over it. */
static void *consumer(void *arg) {
    struct buffer *b = arg;
    pthread_mutex_lock(&b->lock);
    for (;;) {
        while (b->pending < 0 && !b->stop) pthread_cond_wait(&b->cond, &b->lock);
        if (b->pending < 0 && b->stop) break;
        struct arena *a = &b->arenas[b->pending];
        b->delivering = 1;
        pthread_mutex_unlock(&b->lock);
        b->callback((context_id_t){b->context}, (buffer_id_t){b->id}, a->pointers, a->count, b->data, a->drops);
        memset(a->bytes, 0xdb, b->size);
        memset(a->headers, 0xdb, a->cap_headers * sizeof(record_header_t));
        RPS_POISON(a->bytes, b->size);
        RPS_POISON(a->headers, a->cap_headers * sizeof(record_header_t));
        RPS_POISON(a->pointers, a->cap_headers * sizeof(record_header_t *));
        pthread_mutex_lock(&b->lock);
        __atomic_add_fetch(&st_callbacks, 1, __ATOMIC_RELAXED);
        a->state = 0;
        b->pending = -1;
        b->delivering = 0;
        pthread_cond_broadcast(&b->cond);
    }
    pthread_mutex_unlock(&b->lock);
    return NULL;
}

/* Hands the filling arena to the consumer (lock held), waiting for the other one to be free. */
static void hand_over(struct buffer *b) {
    while (b->pending >= 0) pthread_cond_wait(&b->cond, &b->lock);
    struct arena *a = &b->arenas[b->filling];
    a->drops += b->drops_pending;
    b->drops_pending = 0;
    a->state = 1;
    b->pending = b->filling;
    b->filling ^= 1;
    arena_reset(b, &b->arenas[b->filling]);
    pthread_cond_broadcast(&b->cond);
}

EXPORT status_t rocprofiler_create_buffer(context_id_t context, size_t size, size_t watermark, uint32_t policy,
                                          buffer_cb_t callback, void *data, buffer_id_t *id) {
    if (!callback || !id || watermark > size || size < 64) return INVALID_ARGUMENT;
    pthread_mutex_lock(&g_lock);
    status_t s = !g_configuring ? CONFIGURATION_LOCKED : !find_context(context.handle) ? CONTEXT_NOT_FOUND : OUT_OF_RESOURCES;
    struct buffer *b = NULL;
    if (s == OUT_OF_RESOURCES)
        for (int i = 0; i < MAX_BUFFERS; i++)
            if (!g_buffers[i].used) { b = &g_buffers[i]; break; }
    if (b) {
        memset(b, 0, sizeof *b);
        b->used = 1;
        b->id = g_next_id++;
        b->context = context.handle;
        b->size = size;
        b->watermark = watermark;
        b->policy = (int)policy;
        b->callback = callback;
        b->data = data;
        b->pending = -1;
        pthread_mutex_init(&b->lock, NULL);
        pthread_cond_init(&b->cond, NULL);
        for (int i = 0; i < 2; i++) {
            struct arena *a = &b->arenas[i];
            a->cap_headers = size / 16 + 1;
            a->bytes = malloc(size);
            a->headers = calloc(a->cap_headers, sizeof(record_header_t));
            a->pointers = calloc(a->cap_headers, sizeof(record_header_t *));
        }
        pthread_create(&b->thread, NULL, consumer, b);
        id->handle = b->id;
        s = OK;
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

EXPORT status_t rocprofiler_flush_buffer(buffer_id_t id) {
    pthread_mutex_lock(&g_lock);
    struct buffer *b = find_buffer(id.handle);
    pthread_mutex_unlock(&g_lock);
    if (!b) return BUFFER_NOT_FOUND;
    __atomic_add_fetch(&st_flushes, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&b->lock);
    if (b->arenas[b->filling].count > 0 || b->drops_pending > 0) hand_over(b);
    while (b->pending >= 0) pthread_cond_wait(&b->cond, &b->lock);
    pthread_mutex_unlock(&b->lock);
    return OK;
}

EXPORT status_t rocprofiler_destroy_buffer(buffer_id_t id) {
    status_t s = rocprofiler_flush_buffer(id);
    if (s != OK) return s;
    pthread_mutex_lock(&g_lock);
    struct buffer *b = find_buffer(id.handle);
    if (b) b->used = 0;
    pthread_mutex_unlock(&g_lock);
    if (!b) return BUFFER_NOT_FOUND;
    pthread_mutex_lock(&b->lock);
    b->stop = 1;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->lock);
    pthread_join(b->thread, NULL);
    for (int i = 0; i < 2; i++) {
        RPS_UNPOISON(b->arenas[i].bytes, b->size);
        RPS_UNPOISON(b->arenas[i].headers, b->arenas[i].cap_headers * sizeof(record_header_t));
        RPS_UNPOISON(b->arenas[i].pointers, b->arenas[i].cap_headers * sizeof(record_header_t *));
        free(b->arenas[i].bytes);
        free(b->arenas[i].headers);
        free(b->arenas[i].pointers);
    }
    return OK;
}

/* Appends one record to a buffer; 0 when written, 1 when dropped. */
static int append(struct buffer *b, uint32_t category, uint32_t kind, const void *payload, size_t size) {
    size_t need = (size + 7) & ~(size_t)7;
    if (need > b->size) return 1;
    pthread_mutex_lock(&b->lock);
    struct arena *a = &b->arenas[b->filling];
    if (a->used + need > b->size || a->count + 1 >= a->cap_headers) {
        if (b->policy == POLICY_DISCARD && b->pending >= 0) {
            b->drops_pending++;
            __atomic_add_fetch(&st_dropped, 1, __ATOMIC_RELAXED);
            pthread_mutex_unlock(&b->lock);
            return 1;
        }
        hand_over(b);
        a = &b->arenas[b->filling];
    }
    unsigned char *p = a->bytes + a->used;
    memcpy(p, payload, size);
    a->used += need;
    record_header_t *h = &a->headers[a->count];
    h->category = category;
    h->kind = kind;
    h->payload = p;
    a->pointers[a->count] = h;
    a->count++;
    __atomic_add_fetch(&st_records, 1, __ATOMIC_RELAXED);
    if (a->used >= b->watermark) hand_over(b);
    pthread_mutex_unlock(&b->lock);
    return 0;
}

/* ---- services ---- */
/* Whether this is an SDK from before MARKER_CORE_RANGE_API (buffer kind 32, callback kind 21). */
static int old_sdk(void) {
    const char *v = getenv("RPSDK_DOUBLE_NO_CORE_RANGE");
    return v && *v && strcmp(v, "0") != 0;
}
static uint32_t buffer_kinds(void) { return old_sdk() ? 32 : BT_LAST; }
static uint32_t callback_kinds(void) { return old_sdk() ? 21 : CT_LAST; }

/* The real SDK's std::out_of_range, uncaught across its C interface, for a kind past its last. */
static void past_last_kind(const char *service, uint32_t kind) {
    fprintf(stderr, "rocprofiler-sdk double: %s kind %u is past this SDK's last: terminate (std::out_of_range)\n",
            service, kind);
    abort();
}

static status_t add_service(struct service s) {
    pthread_mutex_lock(&g_lock);
    status_t r = !g_configuring ? CONFIGURATION_LOCKED : !find_context(s.context) ? CONTEXT_NOT_FOUND : OK;
    if (r == OK && !s.is_callback && !find_buffer(s.buffer)) r = BUFFER_NOT_FOUND;
    if (r == OK && g_nservices == MAX_SERVICES) r = OUT_OF_RESOURCES;
    for (int i = 0; r == OK && i < g_nservices; i++)
        if (g_services[i].context == s.context && g_services[i].is_callback == s.is_callback && g_services[i].kind == s.kind)
            r = SERVICE_ALREADY_CONFIGURED;
    if (r == OK) g_services[g_nservices++] = s;
    pthread_mutex_unlock(&g_lock);
    return r;
}

EXPORT status_t rocprofiler_configure_buffer_tracing_service(context_id_t ctx, uint32_t kind, const int32_t *ops,
                                                             size_t nops, buffer_id_t buffer) {
    (void)ops; (void)nops;
    if (old_sdk() && kind >= buffer_kinds() && kind < BT_LAST) past_last_kind("buffer tracing", kind);
    if (kind == 0 || kind >= BT_LAST) return KIND_NOT_FOUND;
    /* A kind the SDK has but refuses (its build left the service out: NOT_IMPLEMENTED). */
    const char *refused = getenv("RPSDK_DOUBLE_REFUSE_BUFFER_KIND");
    if (refused && *refused && strtoul(refused, NULL, 10) == kind) return NOT_IMPLEMENTED;
    return add_service((struct service){ctx.handle, 0, kind, buffer.handle, NULL, NULL});
}

EXPORT status_t rocprofiler_configure_callback_tracing_service(context_id_t ctx, uint32_t kind, const int32_t *ops,
                                                               size_t nops, callback_cb_t cb, void *data) {
    (void)ops; (void)nops;
    if (old_sdk() && kind >= callback_kinds() && kind < CT_LAST) past_last_kind("callback tracing", kind);
    if (kind == 0 || kind >= CT_LAST) return KIND_NOT_FOUND;
    if (!cb) return INVALID_ARGUMENT;
    return add_service((struct service){ctx.handle, 1, kind, 0, cb, data});
}

/* ---- names ---- */
static const char *hip_ops[] = {"hipApiName", "hipMalloc", "hipMemcpy", "hipLaunchKernel", "hipDeviceSynchronize", "hipFree"};
static const char *hsa_ops[] = {"hsa_init", "hsa_queue_create", "hsa_signal_wait_scacquire"};
static const char *marker_ops[] = {"roctxMarkA", "roctxRangePushA", "roctxRangePop", "roctxRangeStartA", "roctxRangeStop"};
static const char *marker_range_ops[] = {"roctxMarkA", "roctxThreadRangeA", "roctxProcessRangeA", "roctxGetThreadId"};
/* fwd.h: rocprofiler_buffer_tracing_kind_t and rocprofiler_callback_tracing_kind_t, by value. */
static const char *buffer_kind_names[] = {
    "NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API", "HIP_RUNTIME_API",
    "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API", "MARKER_NAME_API", "MEMORY_COPY",
    "KERNEL_DISPATCH", "SCRATCH_MEMORY", "CORRELATION_ID_RETIREMENT", "RCCL_API", "OMPT", "MEMORY_ALLOCATION",
    "RUNTIME_INITIALIZATION", "ROCDECODE_API", "ROCJPEG_API", "HIP_STREAM", "HIP_RUNTIME_API_EXT",
    "HIP_COMPILER_API_EXT", "ROCDECODE_API_EXT", "KFD_EVENT_PAGE_MIGRATE", "KFD_EVENT_PAGE_FAULT", "KFD_EVENT_QUEUE",
    "KFD_EVENT_UNMAP_FROM_GPU", "KFD_EVENT_DROPPED_EVENTS", "KFD_PAGE_MIGRATE", "KFD_PAGE_FAULT", "KFD_QUEUE",
    "MARKER_CORE_RANGE_API",
};
_Static_assert(sizeof buffer_kind_names / sizeof *buffer_kind_names == BT_LAST, "a name per buffer kind");
static const char *callback_kind_names[] = {
    "NONE", "HSA_CORE_API", "HSA_AMD_EXT_API", "HSA_IMAGE_EXT_API", "HSA_FINALIZE_EXT_API", "HIP_RUNTIME_API",
    "HIP_COMPILER_API", "MARKER_CORE_API", "MARKER_CONTROL_API", "MARKER_NAME_API", "CODE_OBJECT", "SCRATCH_MEMORY",
    "KERNEL_DISPATCH", "MEMORY_COPY", "RCCL_API", "OMPT", "MEMORY_ALLOCATION", "RUNTIME_INITIALIZATION",
    "ROCDECODE_API", "ROCJPEG_API", "HIP_STREAM", "MARKER_CORE_RANGE_API",
};

/* Every kind below the SDK's last has a name, as in the real SDK; none past it. */
EXPORT status_t rocprofiler_query_buffer_tracing_kind_name(uint32_t kind, const char **name, uint64_t *len) {
    if (kind >= buffer_kinds()) return KIND_NOT_FOUND;
    const char *n = buffer_kind_names[kind];
    if (name) *name = n;
    if (len) *len = strlen(n);
    return OK;
}
EXPORT status_t rocprofiler_query_callback_tracing_kind_name(uint32_t kind, const char **name, uint64_t *len) {
    size_t named = sizeof callback_kind_names / sizeof *callback_kind_names;
    if (kind >= callback_kinds() || kind >= named) return KIND_NOT_FOUND;
    const char *n = callback_kind_names[kind];
    if (name) *name = n;
    if (len) *len = strlen(n);
    return OK;
}
EXPORT status_t rocprofiler_query_buffer_tracing_kind_operation_name(uint32_t kind, int32_t op, const char **name, uint64_t *len) {
    const char **table = kind == BT_HIP_RUNTIME_API ? hip_ops : kind == BT_HSA_CORE_API ? hsa_ops
                       : kind == BT_MARKER_CORE_API ? marker_ops : kind == BT_MARKER_CORE_RANGE_API ? marker_range_ops : NULL;
    size_t n = kind == BT_HIP_RUNTIME_API ? 6 : kind == BT_HSA_CORE_API ? 3 : kind == BT_MARKER_CORE_API ? 5
             : kind == BT_MARKER_CORE_RANGE_API ? 4 : 0;
    if (!table || kind >= buffer_kinds()) return KIND_NOT_FOUND;
    if (op < 0 || (size_t)op >= n) return OPERATION_NOT_FOUND;
    if (name) *name = table[op];
    if (len) *len = strlen(table[op]);
    return OK;
}
EXPORT status_t rocprofiler_query_callback_tracing_kind_operation_name(uint32_t kind, int32_t op, const char **name, uint64_t *len) {
    if (kind != CT_CODE_OBJECT) return KIND_NOT_FOUND;
    const char *n = op == CODE_OBJECT_LOAD ? "CODE_OBJECT_LOAD" : op == CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER ? "CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER" : NULL;
    if (!n) return OPERATION_NOT_FOUND;
    if (name) *name = n;
    if (len) *len = strlen(n);
    return OK;
}

/* ---- agents ---- */
static agent_v0_t g_agents[3];
static pthread_once_t g_agents_once = PTHREAD_ONCE_INIT;
static void make_agents(void) {
    for (int i = 0; i < 3; i++) {
        agent_v0_t *a = &g_agents[i];
        memset(a, 0, sizeof *a);
        a->size = sizeof *a;
        a->id.handle = 0x1000 + (uint64_t)i;
        a->node_id = (uint32_t)i;
        a->logical_node_id = i;
        if (i == 0) {
            a->type = AGENT_CPU;
            a->cpu_cores_count = 64;
            a->name = "AMD EPYC 9654";
            a->product_name = "AMD EPYC 9654";
            a->vendor_name = "CPU";
            a->model_name = "";
        } else {
            a->type = AGENT_GPU;
            a->logical_node_type_id = i - 1;
            a->simd_count = 1216;
            a->cu_count = 304;
            a->wave_front_size = 64;
            a->num_xcc = 8;
            a->gfx_target_version = 90402;
            a->vendor_id = 0x1002;
            a->device_id = 0x74a1;
            a->max_engine_clk_fcompute = 2100;
            a->local_mem_size = 192ull << 30;
            a->gpu_id = 40000 + (uint64_t)i;
            a->drm_render_minor = 127 + (uint32_t)i;
            a->uuid = 0xabcdef00ull + (uint64_t)i;
            a->name = "gfx942";
            a->product_name = "AMD Instinct MI300X";
            a->vendor_name = "AMD";
            a->model_name = "ip discovery";
        }
    }
}

EXPORT status_t rocprofiler_query_available_agents(uint32_t version, agents_cb_t cb, size_t agent_size, void *user) {
    if (version != 1 || !cb || agent_size != sizeof(agent_v0_t)) return INVALID_ARGUMENT;
    pthread_once(&g_agents_once, make_agents);
    const void *list[3] = {&g_agents[0], &g_agents[1], &g_agents[2]};
    return cb(version, list, 3, user);
}

static int is_gpu(uint64_t agent) { return agent == 0x1001 || agent == 0x1002; }

/* ---- counters ---- */
static const char *counter_names[] = {"GRBM_COUNT", "GRBM_GUI_ACTIVE", "SQ_WAVES", "SQ_INSTS_VALU", "TCC_HIT"};
#define NCOUNTERS 5
#define INSTANCES 2 /* every counter has two instances (two XCCs) */

EXPORT status_t rocprofiler_iterate_agent_supported_counters(agent_id_t agent, counters_cb_t cb, void *user) {
    if (!is_gpu(agent.handle)) return AGENT_NOT_FOUND;
    counter_id_t ids[NCOUNTERS];
    for (int i = 0; i < NCOUNTERS; i++) ids[i].handle = (uint64_t)i + 1;
    return cb(agent, ids, NCOUNTERS, user);
}
EXPORT status_t rocprofiler_query_counter_info(counter_id_t id, uint32_t version, void *info) {
    if (version != 1 || !info) return INVALID_ARGUMENT;
    if (id.handle < 1 || id.handle > NCOUNTERS) return COUNTER_NOT_FOUND;
    counter_info_v0_t *c = info;
    memset(c, 0, sizeof *c);
    c->id = id;
    c->name = counter_names[id.handle - 1];
    c->description = "a counter of the double";
    c->block = id.handle <= 2 ? "GRBM" : id.handle <= 4 ? "SQ" : "TCC";
    c->expression = "";
    return OK;
}
EXPORT status_t rocprofiler_create_counter_config(agent_id_t agent, counter_id_t *ids, size_t n, config_id_t *out) {
    if (!is_gpu(agent.handle)) return AGENT_NOT_FOUND;
    if (!ids || !out || n == 0 || n > 8) return INVALID_ARGUMENT;
    for (size_t i = 0; i < n; i++)
        if (ids[i].handle < 1 || ids[i].handle > NCOUNTERS) return COUNTER_NOT_FOUND;
    pthread_mutex_lock(&g_lock);
    status_t s = OUT_OF_RESOURCES;
    for (int i = 0; i < MAX_CONFIGS; i++)
        if (!g_configs[i].used) {
            g_configs[i].used = 1;
            g_configs[i].id = g_next_id++;
            g_configs[i].agent = agent.handle;
            g_configs[i].n = n;
            for (size_t k = 0; k < n; k++) g_configs[i].counters[k] = ids[k].handle;
            out->handle = g_configs[i].id;
            s = OK;
            break;
        }
    pthread_mutex_unlock(&g_lock);
    return s;
}
EXPORT status_t rocprofiler_destroy_counter_config(config_id_t id) {
    pthread_mutex_lock(&g_lock);
    status_t s = INVALID_ARGUMENT;
    for (int i = 0; i < MAX_CONFIGS; i++)
        if (g_configs[i].used && g_configs[i].id == id.handle) { g_configs[i].used = 0; s = OK; }
    pthread_mutex_unlock(&g_lock);
    return s;
}
static struct config *find_config(uint64_t id) {
    for (int i = 0; i < MAX_CONFIGS; i++)
        if (g_configs[i].used && g_configs[i].id == id) return &g_configs[i];
    return NULL;
}
/* instance id = counter id << 32 | instance */
EXPORT status_t rocprofiler_query_record_counter_id(uint64_t instance, counter_id_t *id) {
    if (!id) return INVALID_ARGUMENT;
    id->handle = instance >> 32;
    return OK;
}

EXPORT status_t rocprofiler_configure_buffer_dispatch_counting_service(context_id_t ctx, buffer_id_t buffer,
                                                                       dispatch_counting_cb_t cb, void *data) {
    pthread_mutex_lock(&g_lock);
    status_t s = !g_configuring ? CONFIGURATION_LOCKED : !find_context(ctx.handle) ? CONTEXT_NOT_FOUND
               : !find_buffer(buffer.handle) ? BUFFER_NOT_FOUND : !cb ? INVALID_ARGUMENT
               : g_dispatch_counting.cb ? SERVICE_ALREADY_CONFIGURED : OK;
    if (s == OK) {
        g_dispatch_counting.context = ctx.handle;
        g_dispatch_counting.buffer = buffer.handle;
        g_dispatch_counting.cb = cb;
        g_dispatch_counting.data = data;
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

EXPORT status_t rocprofiler_configure_device_counting_service(context_id_t ctx, buffer_id_t buffer, agent_id_t agent,
                                                              device_counting_cb_t cb, void *data) {
    pthread_mutex_lock(&g_lock);
    status_t s = !g_configuring ? CONFIGURATION_LOCKED : !find_context(ctx.handle) ? CONTEXT_INVALID
               : (buffer.handle && !find_buffer(buffer.handle)) ? BUFFER_NOT_FOUND : !is_gpu(agent.handle) ? AGENT_NOT_FOUND
               : g_device_counting.cb ? INVALID_ARGUMENT : OK;
    if (s == OK) {
        g_device_counting.context = ctx.handle;
        g_device_counting.agent = agent.handle;
        g_device_counting.cb = cb;
        g_device_counting.data = data;
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

static status_t set_device_config(context_id_t ctx, config_id_t config) {
    pthread_mutex_lock(&g_lock);
    status_t s = ctx.handle != g_device_counting.context ? CONTEXT_INVALID : !find_config(config.handle) ? INVALID_ARGUMENT : OK;
    if (s == OK) { g_device_counting.config = config.handle; g_device_counting.set = 1; }
    pthread_mutex_unlock(&g_lock);
    return s;
}

static void device_counting_start(uint64_t ctx) {
    pthread_mutex_lock(&g_lock);
    int mine = g_device_counting.cb && g_device_counting.context == ctx;
    device_counting_cb_t cb = g_device_counting.cb;
    void *data = g_device_counting.data;
    agent_id_t agent = {g_device_counting.agent};
    pthread_mutex_unlock(&g_lock);
    if (mine) cb((context_id_t){ctx}, agent, set_device_config, data);
}

/* Sample k (1, 2, ...) reads, for the i-th counter of the config (0-based) and instance j: k * 100 + i * 10 + j. */
EXPORT status_t rocprofiler_sample_device_counting_service(context_id_t ctx, user_data_t user, uint32_t flags,
                                                           counter_record_t *out, size_t *count) {
    (void)flags;
    pthread_mutex_lock(&g_lock);
    struct context *c = find_context(ctx.handle);
    struct config *cfg = g_device_counting.set ? find_config(g_device_counting.config) : NULL;
    status_t s = (!c || g_device_counting.context != ctx.handle) ? CONTEXT_INVALID : (!c->active || !cfg) ? CONTEXT_ERROR : OK;
    size_t need = cfg ? cfg->n * INSTANCES : 0;
    if (s == OK && out && (!count || *count < need)) s = OUT_OF_RESOURCES;
    if (s == OK) {
        uint64_t k = ++g_samples;
        for (size_t i = 0; i < cfg->n; i++)
            for (size_t j = 0; j < INSTANCES; j++) {
                counter_record_t *r = &out[i * INSTANCES + j];
                r->id = cfg->counters[i] << 32 | j;
                r->counter_value = (double)(k * 100 + i * 10 + j);
                r->dispatch_id = 0;
                r->user_data = user;
                r->agent_id.handle = g_device_counting.agent;
            }
        *count = need;
    }
    pthread_mutex_unlock(&g_lock);
    return s;
}

/* ---- emission (test controls) ---- */

/* Writes a tracing record of `kind` to every active context's buffer tracing it; returns how many took it. */
EXPORT int rpsdk_emit(uint32_t kind, const void *payload, size_t size) {
    struct buffer *targets[MAX_SERVICES];
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nservices; i++) {
        struct service *s = &g_services[i];
        struct context *c = find_context(s->context);
        if (!s->is_callback && s->kind == kind && c && c->active) {
            struct buffer *b = find_buffer(s->buffer);
            if (b) targets[n++] = b;
        }
    }
    pthread_mutex_unlock(&g_lock);
    int took = 0;
    for (int i = 0; i < n; i++) took += append(targets[i], CATEGORY_TRACING, kind, payload, size) == 0;
    return took;
}

/* Writes any record (category, kind) straight into a buffer, for kinds no service produces here; -1 for no
 * such buffer, 1 when dropped. */
EXPORT int rpsdk_emit_to(uint64_t buffer, uint32_t category, uint32_t kind, const void *payload, size_t size) {
    pthread_mutex_lock(&g_lock);
    struct buffer *b = find_buffer(buffer);
    pthread_mutex_unlock(&g_lock);
    return b ? append(b, category, kind, payload, size) : -1;
}

/* Calls the callbacks of every active context tracing callback `kind`, as from `thread`; returns how many were
 * called. */
static int callbacks_for(uint32_t kind, int32_t operation, uint32_t phase, uint64_t correlation, uint64_t thread,
                         void *payload) {
    struct service targets[MAX_SERVICES];
    int n = 0;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < g_nservices; i++) {
        struct service *s = &g_services[i];
        struct context *c = find_context(s->context);
        if (s->is_callback && s->kind == kind && c && c->active) targets[n++] = *s;
    }
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < n; i++) {
        callback_record_t r;
        memset(&r, 0, sizeof r);
        r.context_id.handle = targets[i].context;
        r.thread_id = thread;
        r.correlation_id.internal = correlation;
        r.kind = kind;
        r.operation = operation;
        r.phase = phase;
        r.payload = payload;
        user_data_t user = {0};
        targets[i].callback(r, &user, targets[i].data);
        __atomic_add_fetch(&st_callbacks_traced, 1, __ATOMIC_RELAXED);
    }
    return n;
}

/* Calls the callbacks of every active context tracing callback `kind`; returns how many were called. */
EXPORT int rpsdk_callback(uint32_t kind, int32_t operation, uint32_t phase, uint64_t correlation, void *payload) {
    return callbacks_for(kind, operation, phase, correlation, (uint64_t)pthread_self(), payload);
}

static void dispatch_counting(const kernel_dispatch_record_t *k) {
    pthread_mutex_lock(&g_lock);
    dispatch_counting_cb_t cb = g_dispatch_counting.cb;
    struct context *c = cb ? find_context(g_dispatch_counting.context) : NULL;
    int active = c && c->active;
    uint64_t buffer = g_dispatch_counting.buffer;
    void *data = g_dispatch_counting.data;
    pthread_mutex_unlock(&g_lock);
    if (!active) return;
    dispatch_counting_data_t d;
    memset(&d, 0, sizeof d);
    d.size = sizeof d;
    d.correlation_id = k->correlation_id;
    d.start_timestamp = k->start_timestamp;
    d.end_timestamp = k->end_timestamp;
    d.dispatch_info = k->dispatch_info;
    config_id_t config = {0};
    user_data_t user = {0};
    cb(d, &config, &user, data);
    pthread_mutex_lock(&g_lock);
    struct config *cfg = config.handle ? find_config(config.handle) : NULL;
    struct config copy = cfg ? *cfg : (struct config){0};
    pthread_mutex_unlock(&g_lock);
    if (!cfg) return;
    dispatch_counting_record_t h;
    memset(&h, 0, sizeof h);
    h.size = sizeof h;
    h.num_records = copy.n * INSTANCES;
    h.correlation_id = k->correlation_id;
    h.start_timestamp = k->start_timestamp;
    h.end_timestamp = k->end_timestamp;
    h.dispatch_info = k->dispatch_info;
    rpsdk_emit_to(buffer, CATEGORY_COUNTERS, COUNTER_RECORD_DISPATCH_HEADER, &h, sizeof h);
    for (size_t i = 0; i < copy.n; i++)
        for (size_t j = 0; j < INSTANCES; j++) {
            counter_record_t r = {copy.counters[i] << 32 | j, (double)(k->dispatch_info.dispatch_id * 10 + i), k->dispatch_info.dispatch_id, {0}, k->dispatch_info.agent_id};
            rpsdk_emit_to(buffer, CATEGORY_COUNTERS, COUNTER_RECORD_VALUE, &r, sizeof r);
        }
}

/* A kernel dispatch record, with dispatch counting where configured. */
EXPORT int rpsdk_emit_kernel(uint64_t dispatch_id, uint64_t kernel_id, uint64_t agent, uint64_t correlation,
                             uint64_t start, uint64_t end) {
    kernel_dispatch_record_t k;
    memset(&k, 0, sizeof k);
    k.size = sizeof k;
    k.kind = BT_KERNEL_DISPATCH;
    k.operation = 2; /* COMPLETE */
    k.correlation_id.internal = correlation;
    k.thread_id = 4242;
    k.start_timestamp = start;
    k.end_timestamp = end;
    k.dispatch_info.size = sizeof k.dispatch_info - sizeof k.dispatch_info.reserved_padding;
    k.dispatch_info.agent_id.handle = agent;
    k.dispatch_info.queue_id.handle = 0x7000;
    k.dispatch_info.kernel_id = kernel_id;
    k.dispatch_info.dispatch_id = dispatch_id;
    k.dispatch_info.private_segment_size = 16;
    k.dispatch_info.group_segment_size = 4096;
    k.dispatch_info.workgroup_size = (dim3_t){256, 1, 1};
    k.dispatch_info.grid_size = (dim3_t){1u << 20, 1, 1};
    int took = rpsdk_emit(BT_KERNEL_DISPATCH, &k, sizeof k);
    dispatch_counting(&k);
    return took;
}

EXPORT int rpsdk_emit_api(uint32_t kind, int32_t operation, uint64_t correlation, uint64_t start, uint64_t end) {
    api_record_t r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.kind = kind;
    r.operation = operation;
    r.correlation_id.internal = correlation;
    r.start_timestamp = start;
    r.end_timestamp = end;
    r.thread_id = 4242;
    return rpsdk_emit(kind, &r, sizeof r);
}

EXPORT int rpsdk_emit_copy(uint32_t direction, uint64_t bytes, uint64_t correlation, uint64_t start, uint64_t end) {
    memory_copy_record_t r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.kind = BT_MEMORY_COPY;
    r.operation = direction;
    r.correlation_id.internal = correlation;
    r.thread_id = 4242;
    r.start_timestamp = start;
    r.end_timestamp = end;
    r.src_agent_id.handle = direction == MEMORY_COPY_HOST_TO_DEVICE ? 0x1000 : 0x1001;
    r.dst_agent_id.handle = direction == MEMORY_COPY_HOST_TO_DEVICE ? 0x1001 : 0x1000;
    r.bytes = bytes;
    return rpsdk_emit(BT_MEMORY_COPY, &r, sizeof r);
}

/* A memory copy between two given agents (a device-to-device copy may stay on one GPU or cross to another). */
EXPORT int rpsdk_emit_copy_between(uint32_t direction, uint64_t src_agent, uint64_t dst_agent, uint64_t bytes,
                                   uint64_t correlation, uint64_t start, uint64_t end) {
    memory_copy_record_t r;
    memset(&r, 0, sizeof r);
    r.size = sizeof r;
    r.kind = BT_MEMORY_COPY;
    r.operation = direction;
    r.correlation_id.internal = correlation;
    r.thread_id = 4242;
    r.start_timestamp = start;
    r.end_timestamp = end;
    r.src_agent_id.handle = src_agent;
    r.dst_agent_id.handle = dst_agent;
    r.bytes = bytes;
    return rpsdk_emit(BT_MEMORY_COPY, &r, sizeof r);
}

/* A code object with `n` kernel symbols (ids 1..n), names `_Z7kernel<i>Pfi` with the `.kd` suffix the loader
 * gives kernel descriptors. */
EXPORT void rpsdk_load_code_object(uint64_t id, int n) {
    code_object_load_t co;
    memset(&co, 0, sizeof co);
    co.size = sizeof co;
    co.code_object_id = id;
    co.agent_id.handle = 0x1001;
    co.uri = "file:///opt/app/vecadd#offset=8192&size=40960";
    co.load_base = 0x7f0000000000ull;
    co.load_size = 40960;
    co.storage_type = 1;
    co.storage_file = 3;
    rpsdk_callback(CT_CODE_OBJECT, CODE_OBJECT_LOAD, PHASE_ENTER, 0, &co);
    for (int i = 1; i <= n; i++) {
        char name[64];
        snprintf(name, sizeof name, "_Z7kernel%dPfi.kd", i);
        kernel_symbol_t ks;
        memset(&ks, 0, sizeof ks);
        ks.size = sizeof ks;
        ks.kernel_id = (uint64_t)i;
        ks.code_object_id = id;
        ks.kernel_name = name;
        ks.kernel_object = 0x7f0000001000ull + (uint64_t)i * 64;
        ks.group_segment_size = 4096;
        ks.private_segment_size = 16;
        ks.sgpr_count = 24;
        ks.arch_vgpr_count = 32;
        rpsdk_callback(CT_CODE_OBJECT, CODE_OBJECT_DEVICE_KERNEL_SYMBOL_REGISTER, PHASE_ENTER, 0, &ks);
    }
}

/* A fake HIP program: the runtime starts (tools register), a code object with 2 kernels loads, then per iteration
 * hipMalloc, an HtoD copy, `kernels` launches alternating kernels 1 and 2 (each with its hipLaunchKernel call),
 * a DtoH copy, hipDeviceSynchronize; a ROCTx mark; one record of a tracing kind newer than the bindings (kind 200)
 * and one PC sample (category 2), where a buffer traces kernels; then the process ends. */
EXPORT void rpsdk_fake_hip_program(int kernels) {
    rpsdk_start_runtime();
    rpsdk_load_code_object(77, 2);
    uint64_t t = now_ns(), corr = 1, dispatch = 1;
    rpsdk_emit_api(BT_HIP_RUNTIME_API, 1, corr++, t, t + 2000); /* hipMalloc */
    t += 3000;
    uint64_t c = corr++;
    rpsdk_emit_api(BT_HIP_RUNTIME_API, 2, c, t, t + 9000); /* hipMemcpy */
    rpsdk_emit_copy(MEMORY_COPY_HOST_TO_DEVICE, 1 << 20, c, t + 1000, t + 8000);
    t += 10000;
    for (int i = 0; i < kernels; i++) {
        c = corr++;
        uint64_t kernel = (uint64_t)(i % 2) + 1;
        rpsdk_emit_api(BT_HIP_RUNTIME_API, 3, c, t, t + 1500); /* hipLaunchKernel */
        rpsdk_emit_kernel(dispatch++, kernel, 0x1001, c, t + 2000, t + 2000 + 5000 * kernel);
        t += 2000 + 5000 * kernel + 500;
    }
    c = corr++;
    rpsdk_emit_api(BT_HIP_RUNTIME_API, 2, c, t, t + 9000);
    rpsdk_emit_copy(MEMORY_COPY_DEVICE_TO_HOST, 1 << 20, c, t + 1000, t + 8000);
    t += 10000;
    rpsdk_emit_api(BT_HIP_RUNTIME_API, 4, corr++, t, t + 300);  /* hipDeviceSynchronize */
    rpsdk_emit_api(BT_MARKER_CORE_API, 0, corr++, t, t + 100);  /* roctxMarkA */
    /* Kinds newer than the bindings, into the buffer tracing kernels. */
    pthread_mutex_lock(&g_lock);
    uint64_t buffer = 0;
    for (int i = 0; i < g_nservices; i++)
        if (!g_services[i].is_callback && g_services[i].kind == BT_KERNEL_DISPATCH) buffer = g_services[i].buffer;
    pthread_mutex_unlock(&g_lock);
    if (buffer) {
        uint64_t newer[8] = {64, 200, 0, 0, 0, 0, 0, 0};
        rpsdk_emit_to(buffer, CATEGORY_TRACING, 200, newer, sizeof newer);
        rpsdk_emit_to(buffer, CATEGORY_PC_SAMPLING, 1, newer, sizeof newer);
    }
    rpsdk_finalize();
}

#include "rocprofiler_sdk_roctx.inc"

/* ---- statistics ---- */
EXPORT void rpsdk_stats(uint64_t out[7]) {
    out[0] = __atomic_load_n(&st_records, __ATOMIC_RELAXED);
    out[1] = __atomic_load_n(&st_callbacks, __ATOMIC_RELAXED);
    out[2] = __atomic_load_n(&st_flushes, __ATOMIC_RELAXED);
    out[3] = __atomic_load_n(&st_dropped, __ATOMIC_RELAXED);
    out[4] = __atomic_load_n(&st_tool_inits, __ATOMIC_RELAXED);
    out[5] = __atomic_load_n(&st_tool_finis, __ATOMIC_RELAXED);
    out[6] = __atomic_load_n(&st_callbacks_traced, __ATOMIC_RELAXED);
}

