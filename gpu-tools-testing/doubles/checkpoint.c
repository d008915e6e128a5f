/* A libcheckpoint.so double that reproduces the return codes of the real library (CUPTI 13.0):
 * null context -> NOT_INITIALIZED (15), second save without overwrite -> INVALID_OPERATION (7), free twice ->
 * INVALID_PARAMETER (1), restore after free or before save -> NOT_INITIALIZED (15), both reserves (size_t)-1 ->
 * INVALID_PARAMETER (1), reserves that leave no memory -> OUT_OF_MEMORY (8). The double's device has
 * 1024 MiB, its host 4096 MiB. It saves and restores the allocations of a context of the cuda_driver.c double.
 *
 * It also counts, per context, what the caller did, for tests to check through ckpt_double_stats(), and
 * records whether two calls ever ran at the same time. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dbl_ctx.h"

enum {
    SUCCESS = 0,
    INVALID_PARAMETER = 1,
    INVALID_CONTEXT = 3,
    INVALID_OPERATION = 7,
    OUT_OF_MEMORY = 8,
    NOT_INITIALIZED = 15,
};

#define DBL_TOTAL_MB 1024ull
#define DBL_HOST_MB 4096ull

typedef struct {
    size_t structSize;
    struct dbl_ctx *ctx;
    size_t reserveDeviceMB;
    size_t reserveHostMB;
    uint8_t allowOverwrite;
    uint8_t optimizations;
    void *pPriv;
} CUpti_Checkpoint;

/* What tests read back. */
struct ckpt_double_stats {
    unsigned long saves, restores, frees; /* vendor calls that reached the checks below */
    unsigned long live;                   /* handles with private state */
    unsigned long dead_ctx_calls;         /* calls made with a destroyed context */
    size_t last_reserve_device, last_reserve_host;
    unsigned last_overwrite, last_optimizations;
    unsigned long host_saves; /* saves that went to host memory because of the device reserve */
};

struct priv {
    struct dbl_ctx *ctx;
    size_t reserve_device, reserve_host; /* captured at the first call, as the vendor does */
    uint8_t overwrite, optimizations;
    int saved;
    struct dbl_alloc copy[DBL_MAX_ALLOCS];
};

#define MAX_CTX 256
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    struct dbl_ctx *ctx;
    struct ckpt_double_stats s;
} g_stats[MAX_CTX];
static int g_in_flight, g_max_in_flight;

static struct ckpt_double_stats *stats_for(struct dbl_ctx *c) {
    for (int i = 0; i < MAX_CTX; i++) {
        if (g_stats[i].ctx == c) return &g_stats[i].s;
        if (!g_stats[i].ctx) {
            g_stats[i].ctx = c;
            return &g_stats[i].s;
        }
    }
    return &g_stats[MAX_CTX - 1].s;
}

int ckpt_double_stats(void *ctx, struct ckpt_double_stats *out) {
    pthread_mutex_lock(&g_lock);
    *out = *stats_for(ctx);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

int ckpt_double_max_in_flight(void) {
    pthread_mutex_lock(&g_lock);
    int m = g_max_in_flight;
    pthread_mutex_unlock(&g_lock);
    return m;
}

static void enter(void) {
    pthread_mutex_lock(&g_lock);
    if (++g_in_flight > g_max_in_flight) g_max_in_flight = g_in_flight;
    pthread_mutex_unlock(&g_lock);
}

static void leave(void) {
    /* Widen the window in which an unserialised second call would be seen. */
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&g_lock);
    g_in_flight--;
    pthread_mutex_unlock(&g_lock);
}

/* Checks shared by the three calls; counts the call against its context. */
static int common(CUpti_Checkpoint *h, int which) {
    if (!h || h->structSize != sizeof(CUpti_Checkpoint)) return INVALID_PARAMETER;
    if (!h->ctx) return NOT_INITIALIZED; /* the real library ignores the current context */
    if (h->ctx->magic != DBL_CTX_MAGIC) return INVALID_CONTEXT;
    pthread_mutex_lock(&g_lock);
    struct ckpt_double_stats *s = stats_for(h->ctx);
    if (which == 0) s->saves++;
    if (which == 1) s->restores++;
    if (which == 2) s->frees++;
    int dead = !h->ctx->alive;
    if (dead) s->dead_ctx_calls++;
    pthread_mutex_unlock(&g_lock);
    return dead ? INVALID_CONTEXT : SUCCESS;
}

static void drop_copy(struct priv *p) {
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        free(p->copy[i].ptr);
        p->copy[i].ptr = NULL;
        p->copy[i].size = 0;
    }
    p->saved = 0;
}

static int do_save(CUpti_Checkpoint *h) {
    int r = common(h, 0);
    if (r) return r;
    if (h->reserveDeviceMB == (size_t)-1 && h->reserveHostMB == (size_t)-1) return INVALID_PARAMETER;
    struct priv *p = h->pPriv;
    if (!p) {
        p = calloc(1, sizeof *p);
        if (!p) return OUT_OF_MEMORY;
        p->ctx = h->ctx;
        p->reserve_device = h->reserveDeviceMB;
        p->reserve_host = h->reserveHostMB;
        p->overwrite = h->allowOverwrite;
        p->optimizations = h->optimizations;
        h->pPriv = p;
        pthread_mutex_lock(&g_lock);
        struct ckpt_double_stats *s = stats_for(h->ctx);
        s->live++;
        s->last_reserve_device = p->reserve_device;
        s->last_reserve_host = p->reserve_host;
        s->last_overwrite = p->overwrite;
        s->last_optimizations = p->optimizations;
        pthread_mutex_unlock(&g_lock);
    } else if (p->saved && !p->overwrite) {
        return INVALID_OPERATION;
    }
    /* Device memory usable when the reserve leaves room (the double's device has 1024 MiB); else host. */
    int device_ok = p->reserve_device != (size_t)-1 && p->reserve_device < DBL_TOTAL_MB;
    int host_ok = p->reserve_host != (size_t)-1 && p->reserve_host < DBL_HOST_MB;
    if (!device_ok && !host_ok) return OUT_OF_MEMORY;
    drop_copy(p);
    struct dbl_ctx *c = h->ctx;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        if (!c->allocs[i].ptr) continue;
        p->copy[i].ptr = malloc(c->allocs[i].size);
        if (!p->copy[i].ptr) {
            pthread_mutex_unlock(&c->lock);
            drop_copy(p);
            return OUT_OF_MEMORY;
        }
        memcpy(p->copy[i].ptr, c->allocs[i].ptr, c->allocs[i].size);
        p->copy[i].size = c->allocs[i].size;
    }
    pthread_mutex_unlock(&c->lock);
    p->saved = 1;
    if (!device_ok) {
        pthread_mutex_lock(&g_lock);
        stats_for(h->ctx)->host_saves++;
        pthread_mutex_unlock(&g_lock);
    }
    return SUCCESS;
}

static int do_restore(CUpti_Checkpoint *h) {
    int r = common(h, 1);
    if (r) return r;
    struct priv *p = h->pPriv;
    if (!p || !p->saved) return NOT_INITIALIZED;
    struct dbl_ctx *c = h->ctx;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        if (c->allocs[i].ptr && p->copy[i].ptr && c->allocs[i].size == p->copy[i].size)
            memcpy(c->allocs[i].ptr, p->copy[i].ptr, p->copy[i].size);
    }
    pthread_mutex_unlock(&c->lock);
    return SUCCESS;
}

static int do_free(CUpti_Checkpoint *h) {
    int r = common(h, 2);
    if (r) return r;
    struct priv *p = h->pPriv;
    if (!p) return INVALID_PARAMETER;
    drop_copy(p);
    free(p);
    h->pPriv = NULL;
    pthread_mutex_lock(&g_lock);
    stats_for(h->ctx)->live--;
    pthread_mutex_unlock(&g_lock);
    return SUCCESS;
}

int cuptiCheckpointSave(CUpti_Checkpoint *h) {
    enter();
    int r = do_save(h);
    leave();
    return r;
}

int cuptiCheckpointRestore(CUpti_Checkpoint *h) {
    enter();
    int r = do_restore(h);
    leave();
    return r;
}

int cuptiCheckpointFree(CUpti_Checkpoint *h) {
    enter();
    int r = do_free(h);
    leave();
    return r;
}
