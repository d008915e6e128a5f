/*
 * Test double of AMD rocprofiler v2 (librocprofiler64.so.2, ROCm 6.1+ ABI).
 *
 * Exports the library's symbols with the same ABI (structs passed by value have the vendor's sizes) and
 * reproduces the behaviour the crate must cope with:
 *   - a buffer is one pool of 2 x max(32, size) bytes split into two halves of `size` bytes that swap;
 *     fixed-size records grow from the front of a half, variable data (counter arrays, names) from its back,
 *     with the record's pointer patched to the copy; data too large for a half is not copied, the record
 *     points at the producer's memory and the half is handed over at once and waited for;
 *   - one consumer thread per buffer runs the callback with [begin, end); after it returns the half is
 *     scribbled over (and poisoned under AddressSanitizer or valgrind) so a late read is caught;
 *   - flush_data swaps and blocks until the callback returns, and returns at once when the half is empty;
 *     terminate and destroy flush; destroy joins the consumer thread;
 *   - one active session per process (HAS_ACTIVE_SESSION);
 *   - next_record checks initialisation, looks the session up twice and the buffer once (each under the
 *     library lock, as the vendor's does) and steps by the size of the record's kind, with no PC-sampling case;
 *   - device profiling poll copies names with strcpy and leaves unknown metrics unwritten;
 *   - codeobj_capture_get invalidates (frees) the previous result.
 * Test-only controls start with `rpd_`: emitting records, failing a named call, corrupting the next record.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__SANITIZE_ADDRESS__)
#define RPD_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RPD_ASAN 1
#endif
#endif
#ifdef RPD_ASAN
#include <sanitizer/asan_interface.h>
#define RPD_POISON(p, n) __asan_poison_memory_region((p), (n))
#define RPD_UNPOISON(p, n) __asan_unpoison_memory_region((p), (n))
#elif defined(RPD_VALGRIND)
#include <valgrind/memcheck.h>
#define RPD_POISON(p, n) VALGRIND_MAKE_MEM_NOACCESS((p), (n))
#define RPD_UNPOISON(p, n) VALGRIND_MAKE_MEM_UNDEFINED((p), (n))
#else
#define RPD_POISON(p, n) ((void)(p), (void)(n))
#define RPD_UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define EXPORT __attribute__((visibility("default")))

/* ---- ABI types (sizes checked below against the vendor's) ---- */
typedef int status_t;
typedef struct { uint64_t handle; } session_id_t;
typedef struct { uint64_t value; } buffer_id_t;
typedef struct { uint64_t value; } filter_id_t;
typedef struct { uint64_t handle; } record_id_t;
typedef struct { uint64_t handle; } agent_id_t;
typedef struct { uint64_t handle; } queue_id_t;
typedef struct { uint64_t handle; } kernel_id_t;
typedef struct { uint64_t handle; } counter_id_t;
typedef struct { uint32_t id; } operation_id_t;
typedef struct { uint64_t value; } timestamp_t;
typedef struct { uint32_t kind; uint64_t id; } record_header_t;
typedef void (*buffer_callback_t)(const record_header_t *, const record_header_t *, session_id_t, buffer_id_t);
typedef union {
    void *pointer;
    struct { void *counters; int num; uint32_t rate, duration, delay; int gpu; } sampler;
} filter_data_t;
typedef struct {
    uint32_t kind;
    union { void *pointer; uint32_t range[2]; } u;
    uint64_t data_count;
} filter_property_t;
typedef struct { uint32_t kind; uint64_t value; } buffer_property_t;
typedef struct {
    const char *name, *description, *expression;
    uint32_t instances_count;
    const char *block_name;
    uint32_t block_counters;
} counter_info_t;
typedef int (*counters_info_callback_t)(counter_info_t, const char *, uint32_t);
typedef struct { char metric_name[64]; double value; } device_metric_t;
typedef struct {
    const char *filepath;
    uint64_t base_address, mem_size;
    const char *data;
    uint64_t data_size;
    timestamp_t clock_start, clock_end;
    uint32_t att_marker_id;
} intercepted_codeobj_t;
typedef struct { const intercepted_codeobj_t *symbols; uint64_t count, userdata; } codeobj_symbols_t;
typedef void (*sync_callback_t)(void);

_Static_assert(sizeof(record_header_t) == 16, "header");
_Static_assert(sizeof(filter_data_t) == 32, "filter data");
_Static_assert(sizeof(filter_property_t) == 24, "filter property");
_Static_assert(sizeof(buffer_property_t) == 16, "buffer property");
_Static_assert(sizeof(device_metric_t) == 72, "device metric");
_Static_assert(sizeof(intercepted_codeobj_t) == 64, "codeobj");
_Static_assert(sizeof(codeobj_symbols_t) == 24, "codeobj symbols");
_Static_assert(sizeof(counter_info_t) == 48, "counter info");

enum {
    OK = 0, ERR = -1, ALREADY_INITIALIZED = -2, NOT_INITIALIZED = -3, SESSION_MISSING_BUFFER = -4,
    AGENT_NOT_FOUND = -6, SESSION_NOT_FOUND = -17, RECORD_CORRUPTED = -19, SESSION_MISSING_FILTER = -21,
    INCORRECT_SIZE = -22, SESSION_FILTER_DATA_MISMATCH = -24, HAS_ACTIVE_SESSION = -29, SESSION_NOT_ACTIVE = -30,
    FILTER_NOT_FOUND = -31, BUFFER_NOT_FOUND = -32, INVALID_ARGUMENTS = -34, NOT_IMPLEMENTED = -37,
};
enum { PROFILER = 0, TRACER = 1, ATT = 2, PC_SAMPLING = 3, SPM = 4, COUNTERS_SAMPLER = 5 };
static size_t kind_size(uint32_t kind) {
    switch (kind) {
    case PROFILER: return 176;
    case ATT: return 176;
    case SPM: return 288;
    case COUNTERS_SAMPLER: return 40;
    default: return 96; /* the vendor's default case: tracer size, also for PC sampling (56) */
    }
}

/* ---- state ---- */
#define MAX_SESSIONS 32
#define MAX_BUFFERS 64
#define MAX_FILTERS 8

struct buffer {
    int used;
    uint64_t id, session;
    buffer_callback_t callback;
    size_t size;
    unsigned char *pool, *pool_end, *begin, *end, *rec, *data;
    pthread_mutex_t producer;
    pthread_mutex_t cmtx;
    pthread_cond_t ccond;
    const unsigned char *arg_begin, *arg_end;
    int arg_valid;
    pthread_t thread;
};

struct filter { uint64_t id; uint32_t kind; uint64_t buffer; int has_buffer; };

struct session {
    int used, active;
    uint64_t id;
    struct filter filters[MAX_FILTERS];
    int nfilters;
    int inflight;
};

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cond = PTHREAD_COND_INITIALIZER;
static int g_initialized;
static uint64_t g_next_id = 1;
static uint64_t g_active;
static struct session g_sessions[MAX_SESSIONS];
static struct buffer g_buffers[MAX_BUFFERS];

/* statistics, read with rpd_stats */
static uint64_t st_records, st_callbacks, st_flushes, st_destroyed, st_next_record, st_initialize, st_finalize;
static uint64_t st_callback_records_bytes;

/* faults */
static char g_fail_name[96];
static int g_fail_status;
static int g_corrupt_mode;
static int g_truncate_next;

static int fault(const char *name) {
    int status = 0;
    pthread_mutex_lock(&g_lock);
    if (g_fail_name[0] && strcmp(g_fail_name, name) == 0) {
        status = g_fail_status;
        g_fail_name[0] = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return status;
}
#define FAULT(name) do { int f_ = fault(name); if (f_) return f_; } while (0)

static struct session *find_session(uint64_t id) {
    for (int i = 0; i < MAX_SESSIONS; i++)
        if (g_sessions[i].used && g_sessions[i].id == id) return &g_sessions[i];
    return NULL;
}
static struct buffer *find_buffer(uint64_t session, uint64_t id) {
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (g_buffers[i].used && g_buffers[i].id == id && g_buffers[i].session == session) return &g_buffers[i];
    return NULL;
}

/* ---- library info ---- */
EXPORT uint32_t rocprofiler_version_major(void) { return 9; }
EXPORT uint32_t rocprofiler_version_minor(void) { return 0; }
EXPORT const char *rocprofiler_error_str(status_t s) {
    switch (s) {
    case OK: return "Success\n";
    case HAS_ACTIVE_SESSION: return "Error: A session is already active\n";
    case SESSION_NOT_FOUND: return "Error: Session not found\n";
    case INVALID_ARGUMENTS: return "Error: Invalid arguments\n";
    case NOT_INITIALIZED: return "Error: rocprofiler is not initialized\n";
    default: return "Error: rocprofiler error\n";
    }
}
EXPORT status_t rocprofiler_initialize(void) {
    FAULT("rocprofiler_initialize");
    pthread_mutex_lock(&g_lock);
    int was = g_initialized;
    g_initialized = 1;
    st_initialize++;
    pthread_mutex_unlock(&g_lock);
    return was ? ALREADY_INITIALIZED : OK;
}
EXPORT status_t rocprofiler_finalize(void) {
    FAULT("rocprofiler_finalize");
    pthread_mutex_lock(&g_lock);
    int was = g_initialized;
    g_initialized = 0;
    st_finalize++;
    pthread_mutex_unlock(&g_lock);
    return was ? OK : NOT_INITIALIZED;
}
EXPORT status_t rocprofiler_get_timestamp(timestamp_t *ts) {
    FAULT("rocprofiler_get_timestamp");
    if (!ts) return INVALID_ARGUMENTS;
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    ts->value = (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
    return OK;
}

/* Queries the crate does not use: present for the ABI, not implemented by the double. */
EXPORT status_t rocprofiler_query_agent_info_size(uint32_t k, agent_id_t a, size_t *s) { (void)k; (void)a; (void)s; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_agent_info(uint32_t k, agent_id_t a, const char **n) { (void)k; (void)a; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_queue_info_size(uint32_t k, queue_id_t q, size_t *s) { (void)k; (void)q; (void)s; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_queue_info(uint32_t k, queue_id_t q, const char **n) { (void)k; (void)q; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_kernel_info_size(uint32_t k, kernel_id_t q, size_t *s) { (void)k; (void)q; (void)s; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_kernel_info(uint32_t k, kernel_id_t q, const char **n) { (void)k; (void)q; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_counter_info_size(session_id_t s, uint32_t k, counter_id_t c, size_t *n) { (void)s; (void)k; (void)c; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_counter_info(session_id_t s, uint32_t k, counter_id_t c, const char **n) { (void)s; (void)k; (void)c; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_query_tracer_operation_name(uint32_t d, operation_id_t o, const char **n) { (void)d; (void)o; (void)n; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_tracer_operation_id(uint32_t d, const char *n, operation_id_t *o) { (void)d; (void)n; (void)o; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_set_api_trace_sync_callback(session_id_t s, filter_id_t f, sync_callback_t c) { (void)s; (void)f; (void)c; return NOT_IMPLEMENTED; }
EXPORT status_t rocprofiler_create_ready_session(int m, uint32_t k, filter_data_t d, uint64_t n, size_t sz, buffer_callback_t cb, session_id_t *id, filter_property_t p, sync_callback_t sc) {
    (void)m; (void)k; (void)d; (void)n; (void)sz; (void)cb; (void)id; (void)p; (void)sc;
    return NOT_IMPLEMENTED;
}

static const char *k_counters[][3] = {
    {"SQ_WAVES", "Count number of waves sent to SQs", "SQ"},
    {"SQ_INSTS_VALU", "Number of VALU instructions issued", "SQ"},
    {"GRBM_COUNT", "Tie High - Count Number of Clocks", "GRBM"},
    {"GRBM_GUI_ACTIVE", "The GUI is Active", "GRBM"},
};
#define N_COUNTERS (sizeof k_counters / sizeof k_counters[0])
static int known_counter(const char *name) {
    for (size_t i = 0; i < N_COUNTERS; i++)
        if (strcmp(k_counters[i][0], name) == 0) return 1;
    return 0;
}

EXPORT status_t rocprofiler_iterate_counters(counters_info_callback_t cb) {
    FAULT("rocprofiler_iterate_counters");
    if (!cb) return INVALID_ARGUMENTS;
    for (size_t i = 0; i < N_COUNTERS; i++) {
        counter_info_t c = {k_counters[i][0], k_counters[i][1], NULL, 4, k_counters[i][2], 8};
        if (cb(c, "gfx942", 0) != 0) break;
    }
    return OK;
}

/* ---- buffers ---- */
static void *consumer(void *p) {
    struct buffer *b = p;
    pthread_mutex_lock(&b->cmtx);
    for (;;) {
        while (!b->arg_valid) pthread_cond_wait(&b->ccond, &b->cmtx);
        if (!b->arg_begin && !b->arg_end) break;
        b->callback((const record_header_t *)b->arg_begin, (const record_header_t *)b->arg_end,
                    (session_id_t){b->session}, (buffer_id_t){b->id});
        __atomic_fetch_add(&st_callbacks, 1, __ATOMIC_RELAXED);
        __atomic_fetch_add(&st_callback_records_bytes, (uint64_t)(b->arg_end - b->arg_begin), __ATOMIC_RELAXED);
        /* Records are valid only during the callback: make a late read visible. */
        unsigned char *half = (unsigned char *)b->arg_begin;
        memset(half, 0xA5, b->size);
        RPD_POISON(half, b->size);
        b->arg_valid = 0;
        pthread_cond_broadcast(&b->ccond);
    }
    b->arg_valid = 0;
    pthread_mutex_unlock(&b->cmtx);
    return NULL;
}

static void notify(struct buffer *b, const unsigned char *begin, const unsigned char *end) {
    pthread_mutex_lock(&b->cmtx);
    while (b->arg_valid) pthread_cond_wait(&b->ccond, &b->cmtx);
    b->arg_begin = begin;
    b->arg_end = end;
    b->arg_valid = 1;
    pthread_cond_broadcast(&b->ccond);
    pthread_mutex_unlock(&b->cmtx);
}
static void wait_idle(struct buffer *b) {
    pthread_mutex_lock(&b->cmtx);
    while (b->arg_valid) pthread_cond_wait(&b->ccond, &b->cmtx);
    pthread_mutex_unlock(&b->cmtx);
}
static void switch_halves(struct buffer *b) {
    b->begin = (b->end == b->pool_end) ? b->pool : b->end;
    b->end = b->begin + b->size;
    b->rec = b->begin;
    b->data = b->end;
    RPD_UNPOISON(b->begin, b->size);
}
/* Swaps when the half holds records and waits for the callback; caller holds b->producer. */
static void flush_locked(struct buffer *b) {
    if (b->rec == b->begin) return;
    const unsigned char *end = b->rec;
    if (__atomic_exchange_n(&g_truncate_next, 0, __ATOMIC_SEQ_CST)) /* ends inside the last record */
        end -= 8;
    notify(b, b->begin, end);
    switch_halves(b);
    wait_idle(b);
}

static status_t buffer_flush(struct buffer *b) {
    pthread_mutex_lock(&b->producer);
    __atomic_fetch_add(&st_flushes, 1, __ATOMIC_RELAXED);
    flush_locked(b);
    pthread_mutex_unlock(&b->producer);
    return OK;
}

static void buffer_release(struct buffer *b) {
    buffer_flush(b);
    notify(b, NULL, NULL);
    pthread_join(b->thread, NULL);
    RPD_UNPOISON(b->pool, (size_t)(b->pool_end - b->pool));
    free(b->pool);
    pthread_mutex_destroy(&b->producer);
    pthread_mutex_destroy(&b->cmtx);
    pthread_cond_destroy(&b->ccond);
    pthread_mutex_lock(&g_lock);
    b->used = 0;
    pthread_mutex_unlock(&g_lock);
}

EXPORT status_t rocprofiler_create_buffer(session_id_t s, buffer_callback_t cb, size_t size, buffer_id_t *id) {
    FAULT("rocprofiler_create_buffer");
    if (!cb || !id) return INVALID_ARGUMENTS;
    pthread_mutex_lock(&g_lock);
    if (!g_initialized) { pthread_mutex_unlock(&g_lock); return NOT_INITIALIZED; }
    if (!find_session(s.handle)) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_FOUND; }
    struct buffer *b = NULL;
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (!g_buffers[i].used) { b = &g_buffers[i]; break; }
    if (!b) { pthread_mutex_unlock(&g_lock); return ERR; }
    memset(b, 0, sizeof *b);
    b->used = 1;
    b->id = g_next_id++;
    b->session = s.handle;
    pthread_mutex_unlock(&g_lock);

    size_t alloc = 2 * (size > 32 ? size : 32);
    b->callback = cb;
    b->size = size;
    b->pool = malloc(alloc);
    b->pool_end = b->pool + alloc;
    b->begin = b->pool;
    b->end = b->begin + size;
    b->rec = b->begin;
    b->data = b->end;
    pthread_mutex_init(&b->producer, NULL);
    pthread_mutex_init(&b->cmtx, NULL);
    pthread_cond_init(&b->ccond, NULL);
    pthread_create(&b->thread, NULL, consumer, b);
    *id = (buffer_id_t){b->id};
    return OK;
}
EXPORT status_t rocprofiler_set_buffer_properties(session_id_t s, buffer_id_t id, buffer_property_t *p, uint32_t n) {
    FAULT("rocprofiler_set_buffer_properties");
    (void)p; (void)n; /* stored and ignored by the vendor; ignored here */
    pthread_mutex_lock(&g_lock);
    status_t r = !find_session(s.handle) ? SESSION_NOT_FOUND : !find_buffer(s.handle, id.value) ? BUFFER_NOT_FOUND : OK;
    pthread_mutex_unlock(&g_lock);
    return r;
}
EXPORT status_t rocprofiler_destroy_buffer(session_id_t s, buffer_id_t id) {
    FAULT("rocprofiler_destroy_buffer");
    pthread_mutex_lock(&g_lock);
    struct buffer *b = find_session(s.handle) ? find_buffer(s.handle, id.value) : NULL;
    pthread_mutex_unlock(&g_lock);
    if (!b) return BUFFER_NOT_FOUND;
    buffer_release(b);
    return OK;
}
EXPORT status_t rocprofiler_flush_data(session_id_t s, buffer_id_t id) {
    FAULT("rocprofiler_flush_data");
    pthread_mutex_lock(&g_lock);
    if (!g_initialized) { pthread_mutex_unlock(&g_lock); return NOT_INITIALIZED; }
    if (!find_session(s.handle)) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_FOUND; }
    struct buffer *b = find_buffer(s.handle, id.value);
    pthread_mutex_unlock(&g_lock);
    if (!b) return BUFFER_NOT_FOUND;
    return buffer_flush(b);
}
/* Like the vendor's: the initialisation check, then the session looked up (FindSession, then GetSession) and
 * its buffer looked up, each under the library lock, then the step by the kind's size. */
static int initialized_locked_check(void) {
    pthread_mutex_lock(&g_lock);
    int r = g_initialized;
    pthread_mutex_unlock(&g_lock);
    return r;
}
static int session_exists(uint64_t id) {
    pthread_mutex_lock(&g_lock);
    int r = find_session(id) != NULL;
    pthread_mutex_unlock(&g_lock);
    return r;
}
EXPORT status_t rocprofiler_next_record(const record_header_t *record, const record_header_t **next,
                                        session_id_t s, buffer_id_t id) {
    __atomic_fetch_add(&st_next_record, 1, __ATOMIC_RELAXED);
    if (!initialized_locked_check()) return NOT_INITIALIZED;
    if (!session_exists(s.handle)) return SESSION_NOT_FOUND;
    if (!session_exists(s.handle)) return SESSION_NOT_FOUND;
    pthread_mutex_lock(&g_lock);
    int found = find_buffer(s.handle, id.value) != NULL;
    pthread_mutex_unlock(&g_lock);
    if (!found) return BUFFER_NOT_FOUND;
    *next = (const record_header_t *)((const unsigned char *)record + kind_size(record->kind));
    return OK;
}

/* ---- sessions and filters ---- */
EXPORT status_t rocprofiler_create_session(int replay, session_id_t *id) {
    FAULT("rocprofiler_create_session");
    (void)replay;
    if (!id) return INVALID_ARGUMENTS;
    pthread_mutex_lock(&g_lock);
    if (!g_initialized) { pthread_mutex_unlock(&g_lock); return NOT_INITIALIZED; }
    for (int i = 0; i < MAX_SESSIONS; i++) {
        if (!g_sessions[i].used) {
            memset(&g_sessions[i], 0, sizeof g_sessions[i]);
            g_sessions[i].used = 1;
            g_sessions[i].id = g_next_id++;
            *id = (session_id_t){g_sessions[i].id};
            pthread_mutex_unlock(&g_lock);
            return OK;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return ERR;
}

EXPORT status_t rocprofiler_create_filter(session_id_t s, uint32_t kind, filter_data_t data, uint64_t count,
                                          filter_id_t *id, filter_property_t prop) {
    FAULT("rocprofiler_create_filter");
    if (!id || kind < 1 || kind > 7) return INVALID_ARGUMENTS;
    if ((kind == 2 || kind == 6) && (!data.pointer || count == 0)) return SESSION_FILTER_DATA_MISMATCH;
    if (kind == 2) { /* read the names the way the vendor does: every pointer must be valid now */
        const char **names = data.pointer;
        for (uint64_t i = 0; i < count; i++)
            if (!names[i] || !names[i][0]) return SESSION_FILTER_DATA_MISMATCH;
    }
    if (prop.kind == 5 || prop.kind == 3) { /* kernel names, GPU names */
        const char **names = prop.u.pointer;
        for (uint64_t i = 0; i < prop.data_count; i++)
            if (!names || !names[i]) return INVALID_ARGUMENTS;
    }
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    status_t r = OK;
    if (!ss) r = SESSION_NOT_FOUND;
    else if (ss->nfilters == MAX_FILTERS) r = ERR;
    else {
        struct filter *f = &ss->filters[ss->nfilters++];
        f->id = g_next_id++;
        f->kind = kind;
        f->has_buffer = 0;
        *id = (filter_id_t){f->id};
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}
EXPORT status_t rocprofiler_set_filter_buffer(session_id_t s, filter_id_t f, buffer_id_t b) {
    FAULT("rocprofiler_set_filter_buffer");
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    status_t r = ss ? FILTER_NOT_FOUND : SESSION_NOT_FOUND;
    if (ss && !find_buffer(s.handle, b.value)) r = BUFFER_NOT_FOUND;
    else if (ss)
        for (int i = 0; i < ss->nfilters; i++)
            if (ss->filters[i].id == f.value) {
                ss->filters[i].buffer = b.value;
                ss->filters[i].has_buffer = 1;
                r = OK;
            }
    pthread_mutex_unlock(&g_lock);
    return r;
}
EXPORT status_t rocprofiler_destroy_filter(session_id_t s, filter_id_t f) {
    FAULT("rocprofiler_destroy_filter");
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    status_t r = ss ? FILTER_NOT_FOUND : SESSION_NOT_FOUND;
    if (ss)
        for (int i = 0; i < ss->nfilters; i++)
            if (ss->filters[i].id == f.value) {
                ss->filters[i] = ss->filters[--ss->nfilters];
                r = OK;
                break;
            }
    pthread_mutex_unlock(&g_lock);
    return r;
}
EXPORT status_t rocprofiler_start_session(session_id_t s) {
    FAULT("rocprofiler_start_session");
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    status_t r = OK;
    if (!ss) r = SESSION_NOT_FOUND;
    else if (g_active) r = HAS_ACTIVE_SESSION;
    else if (ss->nfilters == 0) r = SESSION_MISSING_FILTER;
    else {
        for (int i = 0; i < ss->nfilters; i++)
            if (!ss->filters[i].has_buffer) r = SESSION_MISSING_BUFFER;
    }
    if (r == OK) {
        ss->active = 1;
        g_active = ss->id;
    }
    pthread_mutex_unlock(&g_lock);
    return r;
}

/* Deactivates and waits for producers inside the session; caller holds g_lock. */
static void deactivate_locked(struct session *ss) {
    ss->active = 0;
    if (g_active == ss->id) g_active = 0;
    while (ss->inflight) pthread_cond_wait(&g_cond, &g_lock);
}
static int session_buffers_locked(uint64_t sid, struct buffer **out) {
    int n = 0;
    for (int i = 0; i < MAX_BUFFERS; i++)
        if (g_buffers[i].used && g_buffers[i].session == sid) out[n++] = &g_buffers[i];
    return n;
}
EXPORT status_t rocprofiler_terminate_session(session_id_t s) {
    FAULT("rocprofiler_terminate_session");
    struct buffer *bufs[MAX_BUFFERS];
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    if (!ss) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_FOUND; }
    if (!ss->active) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_ACTIVE; }
    deactivate_locked(ss);
    int n = session_buffers_locked(s.handle, bufs);
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < n; i++) buffer_flush(bufs[i]);
    return OK;
}
EXPORT status_t rocprofiler_destroy_session(session_id_t s) {
    FAULT("rocprofiler_destroy_session");
    struct buffer *bufs[MAX_BUFFERS];
    pthread_mutex_lock(&g_lock);
    struct session *ss = find_session(s.handle);
    if (!ss) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_FOUND; }
    deactivate_locked(ss);
    int n = session_buffers_locked(s.handle, bufs);
    pthread_mutex_unlock(&g_lock);
    for (int i = 0; i < n; i++) buffer_release(bufs[i]);
    pthread_mutex_lock(&g_lock);
    ss->used = 0;
    st_destroyed++;
    pthread_mutex_unlock(&g_lock);
    return OK;
}

/* ---- device profiling ---- */
struct device_session { int used, started; uint64_t id; uint64_t n; char **names; uint64_t polls; };
static struct device_session g_dev[8];

EXPORT status_t rocprofiler_device_profiling_session_create(const char **names, uint64_t n, session_id_t *id,
                                                            int cpu, int gpu) {
    FAULT("rocprofiler_device_profiling_session_create");
    (void)cpu;
    if (!names || !id || n == 0) return INVALID_ARGUMENTS;
    if (gpu != 0) return AGENT_NOT_FOUND;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 8; i++) {
        if (!g_dev[i].used) {
            struct device_session *d = &g_dev[i];
            d->used = 1;
            d->started = 0;
            d->polls = 0;
            d->id = g_next_id++;
            d->n = n;
            d->names = calloc(n, sizeof(char *));
            for (uint64_t k = 0; k < n; k++) d->names[k] = strdup(names[k]);
            *id = (session_id_t){d->id};
            pthread_mutex_unlock(&g_lock);
            return OK;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return ERR;
}
static struct device_session *find_dev(uint64_t id) {
    for (int i = 0; i < 8; i++)
        if (g_dev[i].used && g_dev[i].id == id) return &g_dev[i];
    return NULL;
}
EXPORT status_t rocprofiler_device_profiling_session_start(session_id_t s) {
    FAULT("rocprofiler_device_profiling_session_start");
    pthread_mutex_lock(&g_lock);
    struct device_session *d = find_dev(s.handle);
    if (d) d->started = 1;
    pthread_mutex_unlock(&g_lock);
    return d ? OK : SESSION_NOT_FOUND;
}
EXPORT status_t rocprofiler_device_profiling_session_poll(session_id_t s, device_metric_t *data) {
    FAULT("rocprofiler_device_profiling_session_poll");
    pthread_mutex_lock(&g_lock);
    struct device_session *d = find_dev(s.handle);
    if (d) {
        d->polls++;
        for (uint64_t k = 0; k < d->n; k++) {
            if (!known_counter(d->names[k])) continue; /* left unwritten, as the vendor does */
            strcpy(data[k].metric_name, d->names[k]);
            data[k].value = (double)(d->polls * 1000 + k);
        }
    }
    pthread_mutex_unlock(&g_lock);
    return d ? OK : SESSION_NOT_FOUND;
}
EXPORT status_t rocprofiler_device_profiling_session_stop(session_id_t s) {
    FAULT("rocprofiler_device_profiling_session_stop");
    pthread_mutex_lock(&g_lock);
    struct device_session *d = find_dev(s.handle);
    if (d) d->started = 0;
    pthread_mutex_unlock(&g_lock);
    return d ? OK : SESSION_NOT_FOUND;
}
EXPORT status_t rocprofiler_device_profiling_session_destroy(session_id_t s) {
    FAULT("rocprofiler_device_profiling_session_destroy");
    pthread_mutex_lock(&g_lock);
    struct device_session *d = find_dev(s.handle);
    if (d) {
        for (uint64_t k = 0; k < d->n; k++) free(d->names[k]);
        free(d->names);
        d->used = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return d ? OK : SESSION_NOT_FOUND;
}

/* ---- code-object capture ---- */
struct capture {
    int used, started;
    uint64_t id, userdata;
    uint32_t mode;
    intercepted_codeobj_t *out; /* the last result handed out; freed by the next get or by free */
    char *paths[2];
    char *bytes[2];
};
static struct capture g_cap[8];
static struct capture *find_cap(uint64_t id) {
    for (int i = 0; i < 8; i++)
        if (g_cap[i].used && g_cap[i].id == id) return &g_cap[i];
    return NULL;
}
static void cap_release_output(struct capture *c) {
    for (int i = 0; i < 2; i++) {
        free(c->paths[i]);
        free(c->bytes[i]);
        c->paths[i] = c->bytes[i] = NULL;
    }
    free(c->out);
    c->out = NULL;
}
EXPORT status_t rocprofiler_codeobj_capture_create(record_id_t *id, uint32_t mode, uint64_t userdata) {
    FAULT("rocprofiler_codeobj_capture_create");
    if (!id || mode > 2) return INVALID_ARGUMENTS;
    pthread_mutex_lock(&g_lock);
    for (int i = 0; i < 8; i++) {
        if (!g_cap[i].used) {
            memset(&g_cap[i], 0, sizeof g_cap[i]);
            g_cap[i].used = 1;
            g_cap[i].id = g_next_id++;
            g_cap[i].mode = mode;
            g_cap[i].userdata = userdata;
            *id = (record_id_t){g_cap[i].id};
            pthread_mutex_unlock(&g_lock);
            return OK;
        }
    }
    pthread_mutex_unlock(&g_lock);
    return ERR;
}
EXPORT status_t rocprofiler_codeobj_capture_get(record_id_t id, codeobj_symbols_t *out) {
    FAULT("rocprofiler_codeobj_capture_get");
    if (!out) return INVALID_ARGUMENTS;
    pthread_mutex_lock(&g_lock);
    struct capture *c = find_cap(id.handle);
    if (!c) { pthread_mutex_unlock(&g_lock); return INVALID_ARGUMENTS; }
    cap_release_output(c);
    c->out = calloc(2, sizeof *c->out);
    for (int i = 0; i < 2; i++) {
        c->paths[i] = malloc(64);
        strcpy(c->paths[i], i == 0 ? "file:///opt/app/kernels.hsaco" : "memory://4242#offset=0x1000&size=64");
        c->out[i].filepath = c->paths[i];
        c->out[i].base_address = 0x7f0000000000ull + 0x10000ull * (uint64_t)i;
        c->out[i].mem_size = 64;
        if (c->mode != 0) {
            c->bytes[i] = malloc(64);
            memset(c->bytes[i], i, 64);
            memcpy(c->bytes[i], "\x7f" "ELF", 4);
            c->out[i].data = c->bytes[i];
            c->out[i].data_size = 64;
        }
        c->out[i].clock_start.value = 100 + (uint64_t)i;
        c->out[i].clock_end.value = 200 + (uint64_t)i;
        c->out[i].att_marker_id = (uint32_t)i + 1;
    }
    out->symbols = c->out;
    out->count = 2;
    out->userdata = c->userdata;
    pthread_mutex_unlock(&g_lock);
    return OK;
}
EXPORT status_t rocprofiler_codeobj_capture_free(record_id_t id) {
    FAULT("rocprofiler_codeobj_capture_free");
    pthread_mutex_lock(&g_lock);
    struct capture *c = find_cap(id.handle);
    if (c) {
        cap_release_output(c);
        c->used = 0;
    }
    pthread_mutex_unlock(&g_lock);
    return c ? OK : INVALID_ARGUMENTS;
}
EXPORT status_t rocprofiler_codeobj_capture_start(record_id_t id) {
    FAULT("rocprofiler_codeobj_capture_start");
    pthread_mutex_lock(&g_lock);
    struct capture *c = find_cap(id.handle);
    if (c) c->started = 1;
    pthread_mutex_unlock(&g_lock);
    return c ? OK : INVALID_ARGUMENTS;
}
EXPORT status_t rocprofiler_codeobj_capture_stop(record_id_t id) {
    FAULT("rocprofiler_codeobj_capture_stop");
    pthread_mutex_lock(&g_lock);
    struct capture *c = find_cap(id.handle);
    if (c) c->started = 0;
    pthread_mutex_unlock(&g_lock);
    return c ? OK : INVALID_ARGUMENTS;
}

/* ---- test controls ---- */

/* The next call of the named function returns `status`. */
EXPORT void rpd_fail_next(const char *name, int status) {
    pthread_mutex_lock(&g_lock);
    strncpy(g_fail_name, name, sizeof g_fail_name - 1);
    g_fail_name[sizeof g_fail_name - 1] = 0;
    g_fail_status = status;
    pthread_mutex_unlock(&g_lock);
}

/* Corrupts the next emitted record: 1 unknown kind, 2 pointer outside the buffer, 3 truncated hand-over. */
EXPORT void rpd_corrupt_next(int mode) {
    pthread_mutex_lock(&g_lock);
    if (mode == 3)
        __atomic_store_n(&g_truncate_next, 1, __ATOMIC_SEQ_CST);
    else
        g_corrupt_mode = mode;
    pthread_mutex_unlock(&g_lock);
}

/*
 * Writes one record into the buffer that the active session's filter of `filter_kind` feeds, as the library
 * does when the GPU or a runtime produces one. `record` is `record_size` bytes (the kind's size); when
 * `data_size` is non-zero, `data` is copied to the back of the half and the pointer at `pointer_offset`
 * in the record is patched to the copy (or left pointing at `data` when it does not fit a half).
 * Returns 0, SESSION_NOT_ACTIVE when no session is active, FILTER_NOT_FOUND when it has no such filter.
 */
EXPORT int rpd_emit(uint32_t filter_kind, const void *record, size_t record_size, const void *data,
                    size_t data_size, size_t pointer_offset) {
    unsigned char tmp[512];
    if (record_size > sizeof tmp || record_size < sizeof(record_header_t)) return INVALID_ARGUMENTS;
    if (data_size && pointer_offset + sizeof(void *) > record_size) return INVALID_ARGUMENTS;
    pthread_mutex_lock(&g_lock);
    struct session *ss = g_active ? find_session(g_active) : NULL;
    if (!ss || !ss->active) { pthread_mutex_unlock(&g_lock); return SESSION_NOT_ACTIVE; }
    struct buffer *b = NULL;
    for (int i = 0; i < ss->nfilters; i++)
        if (ss->filters[i].kind == filter_kind && ss->filters[i].has_buffer)
            b = find_buffer(ss->id, ss->filters[i].buffer);
    if (!b) { pthread_mutex_unlock(&g_lock); return FILTER_NOT_FOUND; }
    /* The vendor only asserts here (and overruns the half in a release build); refuse instead. */
    if (record_size > b->size) { pthread_mutex_unlock(&g_lock); return INCORRECT_SIZE; }
    int corrupt = g_corrupt_mode == 1 || g_corrupt_mode == 2 ? g_corrupt_mode : 0;
    if (corrupt) g_corrupt_mode = 0;
    ss->inflight++;
    pthread_mutex_unlock(&g_lock);

    memcpy(tmp, record, record_size);
    pthread_mutex_lock(&b->producer);
    size_t reserve = data_size <= b->size - record_size ? data_size : 0;
    if (b->rec + record_size > b->data - reserve) {
        notify(b, b->begin, b->rec);
        switch_halves(b);
    }
    if (reserve) {
        b->data -= data_size;
        memcpy(b->data, data, data_size);
        memcpy(tmp + pointer_offset, &b->data, sizeof(void *));
    } else if (data) {
        memcpy(tmp + pointer_offset, &data, sizeof(void *));
    }
    if (corrupt == 1) {
        uint32_t bad = 0x77;
        memcpy(tmp, &bad, sizeof bad);
    } else if (corrupt == 2) {
        uintptr_t bad = 0x10;
        memcpy(tmp + pointer_offset, &bad, sizeof bad);
    }
    memcpy(b->rec, tmp, record_size);
    b->rec += record_size;
    __atomic_fetch_add(&st_records, 1, __ATOMIC_RELAXED);
    if (data && !reserve) { /* data not copied: hand the half over now and wait, so `data` stays valid */
        notify(b, b->begin, b->rec);
        switch_halves(b);
        wait_idle(b);
    }
    pthread_mutex_unlock(&b->producer);

    pthread_mutex_lock(&g_lock);
    ss->inflight--;
    pthread_cond_broadcast(&g_cond);
    pthread_mutex_unlock(&g_lock);
    return OK;
}

/* Counters: records written, callbacks run, flushes, sessions destroyed, next_record calls, initialize and
 * finalize calls, bytes of records handed to callbacks, active session id. */
EXPORT void rpd_stats(uint64_t out[9]) {
    pthread_mutex_lock(&g_lock);
    out[0] = __atomic_load_n(&st_records, __ATOMIC_RELAXED);
    out[1] = __atomic_load_n(&st_callbacks, __ATOMIC_RELAXED);
    out[2] = __atomic_load_n(&st_flushes, __ATOMIC_RELAXED);
    out[3] = st_destroyed;
    out[4] = __atomic_load_n(&st_next_record, __ATOMIC_RELAXED);
    out[5] = st_initialize;
    out[6] = st_finalize;
    out[7] = __atomic_load_n(&st_callback_records_bytes, __ATOMIC_RELAXED);
    out[8] = g_active;
    pthread_mutex_unlock(&g_lock);
}
