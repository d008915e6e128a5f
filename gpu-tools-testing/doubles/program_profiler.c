/* A profiler inside a traced program, using CUPTI as PyTorch's Kineto does: at the start of each session it
 * registers its own buffer callbacks and enables its kinds; at the end it disables them and forces a flush; it
 * counts the records handed to it, by kind. Its CUPTI calls are imports, left undefined here and bound by the
 * loader to the CUPTI loaded before it (load that one with RTLD_GLOBAL first): they go through its import slots,
 * as a program's calls do. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

typedef uint32_t CUptiResult;
typedef void (*request_fn)(uint8_t **, size_t *, size_t *);
typedef void (*complete_fn)(void *, uint32_t, uint8_t *, size_t, size_t);
typedef void (*callback_fn)(void *, uint32_t, uint32_t, const void *);

CUptiResult cuptiActivityRegisterCallbacks(request_fn request, complete_fn complete);
CUptiResult cuptiActivityEnable(uint32_t kind);
CUptiResult cuptiActivityDisable(uint32_t kind);
CUptiResult cuptiActivityFlushAll(uint32_t flag);
CUptiResult cuptiActivityGetNextRecord(uint8_t *buffer, size_t valid, void **record);
CUptiResult cuptiSubscribe(void **handle, callback_fn cb, void *userdata);

/* The size of the buffers it lends CUPTI (Kineto's are 4 MB): pp_buffer_bytes sets it. */
static size_t g_buffer_bytes = 4096;

void pp_buffer_bytes(size_t bytes) { __atomic_store_n(&g_buffer_bytes, bytes, __ATOMIC_SEQ_CST); }

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t g_counts[64];
static uint64_t g_buffers;
static uint64_t g_callbacks;
static void *g_subscriber;

/* pp_kineto(1): as Kineto, it keeps the buffers it lent CUPTI, passes over a completed buffer it did not lend (and
 * counts it), and forces a flush at a session's end only while a buffer of its is outstanding
 * (`CuptiActivityApi::activityBuffers`). */
static int g_kineto;
#define LENT_MAX 256
static uint8_t *g_lent[LENT_MAX];
static uint64_t g_unknown;

void pp_kineto(int on) { __atomic_store_n(&g_kineto, on, __ATOMIC_SEQ_CST); }

/* Buffers of its own CUPTI holds now (pp_kineto only). */
static int outstanding(void) {
    int n = 0;
    for (int i = 0; i < LENT_MAX; i++) n += g_lent[i] != NULL;
    return n;
}

static void on_request(uint8_t **buffer, size_t *size, size_t *max_records) {
    size_t bytes = __atomic_load_n(&g_buffer_bytes, __ATOMIC_SEQ_CST);
    *buffer = aligned_alloc(8, bytes);
    *size = *buffer ? bytes : 0;
    *max_records = 0;
    if (*buffer && __atomic_load_n(&g_kineto, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&g_lock);
        for (int i = 0; i < LENT_MAX; i++) {
            if (!g_lent[i]) {
                g_lent[i] = *buffer;
                break;
            }
        }
        pthread_mutex_unlock(&g_lock);
    }
}

/* Kernel records handed over more than once: CUPTI makes one per launch, each with its own correlation id (at byte
 * 92 of CUpti_ActivityKernel9 and 10). Ids below 2^20 are told apart. */
#define KERNEL_KIND 3
#define CONCURRENT_KERNEL_KIND 10
#define CORRELATION_AT 92
#define SEEN_IDS (1u << 20)
static uint8_t g_seen[SEEN_IDS / 8];
static uint64_t g_repeats;
/* Kernel records handed over without a start (a kernel CUPTI handed out while it still ran): Kineto counts such a
 * record outside its session's time. The start is at byte 16 of CUpti_ActivityKernel9 and 10. */
#define START_AT 16
static uint64_t g_incomplete;
/* Kernel records handed over with a start on another clock than CUPTI's before a tool registered its own (the
 * CUPTI double's: CLOCK_REALTIME): more than a day before now. Kineto counts such a record outside its session's
 * time and drops it. */
static uint64_t g_foreign_clock;
#define DAY_NS (86400ull * 1000000000ull)

static void note_kernel(const uint8_t *record) {
    uint64_t start;
    memcpy(&start, record + START_AT, sizeof start);
    if (start == 0) g_incomplete++;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    uint32_t id;
    memcpy(&id, record + CORRELATION_AT, sizeof id);
    if (start != 0 && start + DAY_NS < now_ns) g_foreign_clock++;
    if (id >= SEEN_IDS) return;
    uint8_t bit = (uint8_t)(1u << (id % 8));
    if (g_seen[id / 8] & bit) g_repeats++;
    g_seen[id / 8] |= bit;
}

static void on_complete(void *ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)ctx;
    (void)stream;
    (void)size;
    void *record = NULL;
    pthread_mutex_lock(&g_lock);
    if (__atomic_load_n(&g_kineto, __ATOMIC_SEQ_CST)) {
        int known = 0;
        for (int i = 0; i < LENT_MAX; i++) {
            if (g_lent[i] == buffer) {
                g_lent[i] = NULL;
                known = 1;
                break;
            }
        }
        if (!known) {
            g_unknown++;
            pthread_mutex_unlock(&g_lock);
            return;
        }
    }
    g_buffers++;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == 0) {
        uint32_t kind = *(const uint32_t *)record;
        if (kind < 64) g_counts[kind]++;
        if (kind == KERNEL_KIND || kind == CONCURRENT_KERNEL_KIND) note_kernel(record);
    }
    pthread_mutex_unlock(&g_lock);
    free(buffer);
}

static void on_callback(void *userdata, uint32_t domain, uint32_t cbid, const void *data) {
    (void)userdata;
    (void)domain;
    (void)cbid;
    (void)data;
    __atomic_add_fetch(&g_callbacks, 1, __ATOMIC_SEQ_CST);
}

/* Starts a session: registers, then enables the `n` kinds. Returns the first failing code, or 0. */
int pp_start(const uint32_t *kinds, int n) {
    CUptiResult r = cuptiActivityRegisterCallbacks(on_request, on_complete);
    if (r) return (int)r;
    for (int i = 0; i < n; i++) {
        r = cuptiActivityEnable(kinds[i]);
        if (r) return (int)r;
    }
    return 0;
}

/* Ends a session: disables the kinds, then forces a flush, as Kineto collects the end of its session. */
int pp_stop(const uint32_t *kinds, int n) {
    for (int i = 0; i < n; i++) {
        CUptiResult r = cuptiActivityDisable(kinds[i]);
        if (r) return (int)r;
    }
    if (__atomic_load_n(&g_kineto, __ATOMIC_SEQ_CST)) {
        pthread_mutex_lock(&g_lock);
        int none = outstanding() == 0;
        pthread_mutex_unlock(&g_lock);
        if (none) return 0;
    }
    return (int)cuptiActivityFlushAll(1);
}

/* Kernel records it was handed without a start. */
uint64_t pp_incomplete(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_incomplete;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Kernel records it was handed on another clock than its own. */
uint64_t pp_foreign_clock(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_foreign_clock;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Completed buffers it passed over, not having lent them (pp_kineto only). */
uint64_t pp_unknown(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_unknown;
    pthread_mutex_unlock(&g_lock);
    return n;
}

int pp_subscribe(void) { return (int)cuptiSubscribe(&g_subscriber, on_callback, NULL); }

uint64_t pp_count(uint32_t kind) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = kind < 64 ? g_counts[kind] : 0;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Kernel records it was handed twice or more (by correlation id). */
uint64_t pp_repeats(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_repeats;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* Whether a kernel record of correlation id `id` was handed to it (ids below 2^20). */
int pp_seen(uint32_t id) {
    if (id >= SEEN_IDS) return 0;
    pthread_mutex_lock(&g_lock);
    int seen = (g_seen[id / 8] >> (id % 8)) & 1;
    pthread_mutex_unlock(&g_lock);
    return seen;
}

uint64_t pp_buffers(void) {
    pthread_mutex_lock(&g_lock);
    uint64_t n = g_buffers;
    pthread_mutex_unlock(&g_lock);
    return n;
}

/* A profiler on a schedule (torch.profiler's `schedule`, as training frameworks run it): a thread of its own starts
 * and stops a session every millisecond or so, registering its callbacks again each time, until pp_cycle_stop.
 * And, the worst moment for a tracer: whenever someone else registers buffer callbacks, it registers its own
 * again at once (the CUPTI double's cd_after_register hook; the registering thread waits for it, at most 1 s). */
void cd_after_register(void (*hook)(request_fn));

static volatile int g_cycling;
static pthread_t g_cycler;
static uint32_t g_cycle_kinds[8];
static int g_cycle_n;
static uint64_t g_cycles;
static pthread_mutex_t g_wake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_wake = PTHREAD_COND_INITIALIZER;
static uint64_t g_woken, g_answered;
static __thread int t_cycler;

static void after_register(request_fn request) {
    if (request == on_request || t_cycler) return;
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    pthread_mutex_lock(&g_wake_lock);
    uint64_t mine = ++g_woken;
    pthread_cond_broadcast(&g_wake);
    while (g_answered < mine && __atomic_load_n(&g_cycling, __ATOMIC_SEQ_CST)) {
        if (pthread_cond_timedwait(&g_wake, &g_wake_lock, &until) != 0) break;
    }
    pthread_mutex_unlock(&g_wake_lock);
}

static void *cycle(void *arg) {
    (void)arg;
    t_cycler = 1;
    while (__atomic_load_n(&g_cycling, __ATOMIC_SEQ_CST)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 1000000;
        if (until.tv_nsec >= 1000000000) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000;
        }
        pthread_mutex_lock(&g_wake_lock);
        if (g_woken == g_answered) pthread_cond_timedwait(&g_wake, &g_wake_lock, &until);
        uint64_t woken = g_woken;
        pthread_mutex_unlock(&g_wake_lock);
        pp_start(g_cycle_kinds, g_cycle_n);
        pp_stop(g_cycle_kinds, g_cycle_n);
        __atomic_add_fetch(&g_cycles, 1, __ATOMIC_SEQ_CST);
        pthread_mutex_lock(&g_wake_lock);
        g_answered = woken;
        pthread_cond_broadcast(&g_wake);
        pthread_mutex_unlock(&g_wake_lock);
    }
    return NULL;
}

/* Starts the cycling thread over `n` kinds (at most 8). Returns 0, or -1. */
int pp_cycle_start(const uint32_t *kinds, int n) {
    if (n < 0 || n > 8 || __atomic_load_n(&g_cycling, __ATOMIC_SEQ_CST)) return -1;
    for (int i = 0; i < n; i++) g_cycle_kinds[i] = kinds[i];
    g_cycle_n = n;
    __atomic_store_n(&g_cycling, 1, __ATOMIC_SEQ_CST);
    if (pthread_create(&g_cycler, NULL, cycle, NULL) != 0) {
        __atomic_store_n(&g_cycling, 0, __ATOMIC_SEQ_CST);
        return -1;
    }
    cd_after_register(after_register);
    return 0;
}

/* Stops the cycling thread; returns how many sessions it ran. */
uint64_t pp_cycle_stop(void) {
    if (!__atomic_load_n(&g_cycling, __ATOMIC_SEQ_CST)) return 0;
    cd_after_register(NULL);
    __atomic_store_n(&g_cycling, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&g_wake_lock);
    pthread_cond_broadcast(&g_wake);
    pthread_mutex_unlock(&g_wake_lock);
    pthread_join(g_cycler, NULL);
    return __atomic_load_n(&g_cycles, __ATOMIC_SEQ_CST);
}
