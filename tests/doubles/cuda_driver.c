/* A CUDA driver double: the driver entry points gpu-tools binds, on host memory, with one device (or more for
 * the device queries: `dbl_set_device_count`, or GPU_TOOLS_DOUBLE_DEVICES in the environment; contexts are of
 * device 0 only).
 *
 * Contexts are `struct dbl_ctx` (dbl_ctx.h, shared with checkpoint.c): a destroyed context stays allocated and
 * marked dead, so a stale handle is detected rather than reused. Device pointers are host pointers; each
 * context records its allocations so the checkpoint double can save and restore them. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbl_ctx.h"

typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;

enum {
    OK = 0,
    INVALID_VALUE = 1,
    OUT_OF_MEMORY = 2,
    NOT_INITIALIZED = 3,
    INVALID_DEVICE = 101,
    INVALID_CONTEXT = 201,
    NOT_FOUND = 500,
    NOT_SUPPORTED = 801,
};

#define DBL_TOTAL_MEM (1024ull << 20)

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static int g_initialized;
static struct dbl_ctx g_primary = {DBL_CTX_MAGIC, 1, PTHREAD_MUTEX_INITIALIZER, {{0}}};
static int g_primary_refs;

static __thread struct dbl_ctx *t_stack[32];
static __thread int t_depth;

static int live(struct dbl_ctx *c) { return c && c->magic == DBL_CTX_MAGIC && c->alive; }
static struct dbl_ctx *current(void) { return t_depth > 0 ? t_stack[t_depth - 1] : NULL; }

#define NEED_INIT() \
    do { \
        if (!g_initialized) return NOT_INITIALIZED; \
    } while (0)
#define NEED_CTX(c) \
    do { \
        NEED_INIT(); \
        if (!live(c)) return INVALID_CONTEXT; \
    } while (0)

CUresult cuInit(unsigned flags) {
    if (flags != 0) return INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    g_initialized = 1;
    pthread_mutex_unlock(&g_lock);
    return OK;
}

CUresult cuDriverGetVersion(int *v) {
    if (!v) return INVALID_VALUE;
    *v = 13000;
    return OK;
}

static const char *name_of(CUresult r) {
    switch (r) {
    case OK: return "CUDA_SUCCESS";
    case INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult r, const char **s) {
    if (!s || !name_of(r)) return INVALID_VALUE;
    *s = name_of(r);
    return OK;
}

CUresult cuGetErrorString(CUresult r, const char **s) {
    if (!s || !name_of(r)) return INVALID_VALUE;
    *s = "test double error";
    return OK;
}

/* Devices the queries answer for: 0 until set, then GPU_TOOLS_DOUBLE_DEVICES (1 to 8) or 1. */
static int g_devices;

void dbl_set_device_count(int n) { g_devices = n; }

static int devices(void) {
    if (g_devices == 0) {
        const char *env = getenv("GPU_TOOLS_DOUBLE_DEVICES");
        int n = env ? atoi(env) : 1;
        g_devices = n >= 1 && n <= 8 ? n : 1;
    }
    return g_devices;
}

static int valid_device(CUdevice d) { return d >= 0 && d < devices(); }

CUresult cuDeviceGet(CUdevice *d, int ordinal) {
    NEED_INIT();
    if (!d) return INVALID_VALUE;
    if (!valid_device(ordinal)) return INVALID_DEVICE;
    *d = ordinal;
    return OK;
}

CUresult cuDeviceGetCount(int *n) {
    NEED_INIT();
    if (!n) return INVALID_VALUE;
    *n = devices();
    return OK;
}

/* Device 0 is "gpu-tools test double", device N "gpu-tools test double N". */
CUresult cuDeviceGetName(char *name, int len, CUdevice d) {
    NEED_INIT();
    if (!name || len <= 0 || !valid_device(d)) return INVALID_VALUE;
    if (d == 0) snprintf(name, (size_t)len, "gpu-tools test double");
    else snprintf(name, (size_t)len, "gpu-tools test double %d", d);
    return OK;
}

CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice d) {
    NEED_INIT();
    if (!bytes || !valid_device(d)) return INVALID_VALUE;
    *bytes = DBL_TOTAL_MEM;
    return OK;
}

/* Compute capability of the one device (9.0 unless a test sets another). */
static int g_cc_major = 9, g_cc_minor = 0;

void dbl_set_capability(int major, int minor) {
    g_cc_major = major;
    g_cc_minor = minor;
}

CUresult cuDeviceGetAttribute(int *v, int attr, CUdevice d) {
    NEED_INIT();
    if (!v || !valid_device(d)) return INVALID_VALUE;
    *v = attr == 75 ? g_cc_major : attr == 76 ? g_cc_minor : 1;
    return OK;
}

CUresult cuDevicePrimaryCtxRetain(struct dbl_ctx **c, CUdevice d) {
    NEED_INIT();
    if (!c) return INVALID_VALUE;
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    g_primary_refs++;
    pthread_mutex_unlock(&g_lock);
    *c = &g_primary;
    return OK;
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    NEED_INIT();
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    int ok = g_primary_refs > 0;
    if (ok) g_primary_refs--;
    pthread_mutex_unlock(&g_lock);
    return ok ? OK : INVALID_CONTEXT;
}

CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned *flags, int *active) {
    NEED_INIT();
    if (!flags || !active) return INVALID_VALUE;
    if (d != 0) return INVALID_DEVICE;
    pthread_mutex_lock(&g_lock);
    *flags = 0;
    *active = g_primary_refs > 0;
    pthread_mutex_unlock(&g_lock);
    return OK;
}

CUresult cuCtxCreate_v4(struct dbl_ctx **out, void *params, unsigned flags, CUdevice d) {
    NEED_INIT();
    (void)params;
    (void)flags;
    if (!out) return INVALID_VALUE;
    if (d != 0) return INVALID_DEVICE;
    if (t_depth == 32) return OUT_OF_MEMORY;
    struct dbl_ctx *c = calloc(1, sizeof *c);
    if (!c) return OUT_OF_MEMORY;
    c->magic = DBL_CTX_MAGIC;
    c->alive = 1;
    pthread_mutex_init(&c->lock, NULL);
    t_stack[t_depth++] = c;
    *out = c;
    return OK;
}

/* The struct is kept (marked dead) so a stale handle is reported, never reused. */
CUresult cuCtxDestroy_v2(struct dbl_ctx *c) {
    NEED_CTX(c);
    if (c == &g_primary) return INVALID_CONTEXT;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        free(c->allocs[i].ptr);
        c->allocs[i].ptr = NULL;
        c->allocs[i].size = 0;
    }
    c->alive = 0;
    pthread_mutex_unlock(&c->lock);
    return OK;
}

CUresult cuCtxPushCurrent_v2(struct dbl_ctx *c) {
    NEED_CTX(c);
    if (t_depth == 32) return OUT_OF_MEMORY;
    t_stack[t_depth++] = c;
    return OK;
}

CUresult cuCtxPopCurrent_v2(struct dbl_ctx **c) {
    NEED_INIT();
    if (t_depth == 0) return INVALID_CONTEXT;
    t_depth--;
    if (c) *c = t_stack[t_depth];
    return OK;
}

CUresult cuCtxGetCurrent(struct dbl_ctx **c) {
    NEED_INIT();
    if (!c) return INVALID_VALUE;
    *c = current();
    return OK;
}

CUresult cuCtxGetDevice(CUdevice *d) {
    NEED_CTX(current());
    if (!d) return INVALID_VALUE;
    *d = 0;
    return OK;
}

CUresult cuCtxGetApiVersion(struct dbl_ctx *c, unsigned *v) {
    NEED_CTX(c);
    if (!v) return INVALID_VALUE;
    *v = 13000;
    return OK;
}

CUresult cuCtxSynchronize(void) {
    NEED_CTX(current());
    return OK;
}

CUresult cuMemAlloc_v2(CUdeviceptr *p, size_t bytes) {
    struct dbl_ctx *c = current();
    NEED_CTX(c);
    if (!p || bytes == 0) return INVALID_VALUE;
    pthread_mutex_lock(&c->lock);
    CUresult r = OUT_OF_MEMORY;
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        if (c->allocs[i].ptr) continue;
        void *mem = calloc(1, bytes);
        if (mem) {
            c->allocs[i].ptr = mem;
            c->allocs[i].size = bytes;
            *p = (CUdeviceptr)(uintptr_t)mem;
            r = OK;
        }
        break;
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

CUresult cuMemFree_v2(CUdeviceptr p) {
    struct dbl_ctx *c = current();
    NEED_CTX(c);
    pthread_mutex_lock(&c->lock);
    CUresult r = INVALID_VALUE;
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) {
        if (c->allocs[i].ptr && (CUdeviceptr)(uintptr_t)c->allocs[i].ptr == p) {
            free(c->allocs[i].ptr);
            c->allocs[i].ptr = NULL;
            c->allocs[i].size = 0;
            r = OK;
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

CUresult cuMemGetInfo_v2(size_t *free_bytes, size_t *total) {
    struct dbl_ctx *c = current();
    NEED_CTX(c);
    if (!free_bytes || !total) return INVALID_VALUE;
    size_t used = 0;
    pthread_mutex_lock(&c->lock);
    for (int i = 0; i < DBL_MAX_ALLOCS; i++) used += c->allocs[i].size;
    pthread_mutex_unlock(&c->lock);
    *total = DBL_TOTAL_MEM;
    *free_bytes = used < DBL_TOTAL_MEM ? DBL_TOTAL_MEM - used : 0;
    return OK;
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n) {
    NEED_CTX(current());
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n) {
    NEED_CTX(current());
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    NEED_CTX(current());
    memmove((void *)(uintptr_t)dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned value, size_t words) {
    NEED_CTX(current());
    unsigned *p = (unsigned *)(uintptr_t)dst;
    for (size_t i = 0; i < words; i++) p[i] = value;
    return OK;
}

/* Modules and launches are not simulated. */
CUresult cuModuleLoadData(void **m, const void *image) {
    NEED_CTX(current());
    (void)m;
    (void)image;
    return NOT_SUPPORTED;
}

CUresult cuModuleUnload(void *m) {
    (void)m;
    return NOT_SUPPORTED;
}

CUresult cuModuleGetFunction(void **f, void *m, const char *name) {
    (void)f;
    (void)m;
    (void)name;
    return NOT_FOUND;
}

CUresult cuLaunchKernel(void *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,
                        unsigned shared, void *stream, void **params, void **extra) {
    (void)f, (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)stream;
    (void)params, (void)extra;
    return NOT_SUPPORTED;
}

/* Streams run their work at once (the double has no device to queue on); ids count up per process, contexts get
 * theirs from their address, as real ids are unique per process. */
struct dbl_stream {
    unsigned magic;
    struct dbl_ctx *ctx;
    unsigned long long id;
};
#define DBL_STREAM_MAGIC 0x4d525453u /* "STRM" */
static unsigned long long g_next_stream_id = 100;

CUresult cuStreamCreate(struct dbl_stream **s, unsigned flags) {
    struct dbl_ctx *c = current();
    NEED_CTX(c);
    if (!s) return INVALID_VALUE;
    (void)flags;
    struct dbl_stream *st = calloc(1, sizeof *st);
    if (!st) return OUT_OF_MEMORY;
    st->magic = DBL_STREAM_MAGIC;
    st->ctx = c;
    pthread_mutex_lock(&g_lock);
    st->id = g_next_stream_id++;
    pthread_mutex_unlock(&g_lock);
    *s = st;
    return OK;
}

static int live_stream(struct dbl_stream *s) { return s && s->magic == DBL_STREAM_MAGIC && live(s->ctx); }

CUresult cuStreamDestroy_v2(struct dbl_stream *s) {
    NEED_INIT();
    if (!live_stream(s)) return INVALID_VALUE;
    s->magic = 0;
    free(s);
    return OK;
}

CUresult cuStreamSynchronize(struct dbl_stream *s) {
    NEED_INIT();
    return live_stream(s) ? OK : INVALID_VALUE;
}

CUresult cuStreamGetId(struct dbl_stream *s, unsigned long long *id) {
    NEED_INIT();
    if (!live_stream(s) || !id) return INVALID_VALUE;
    *id = s->id;
    return OK;
}

CUresult cuCtxGetId(struct dbl_ctx *c, unsigned long long *id) {
    NEED_CTX(c);
    if (!id) return INVALID_VALUE;
    *id = (unsigned long long)(uintptr_t)c;
    return OK;
}

#define NEED_STREAM(s) \
    do { \
        NEED_CTX(current()); \
        if (!live_stream(s) || (s)->ctx != current()) return INVALID_VALUE; \
    } while (0)

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, struct dbl_stream *s) {
    NEED_STREAM(s);
    memcpy((void *)(uintptr_t)dst, src, n);
    return OK;
}

CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, struct dbl_stream *s) {
    NEED_STREAM(s);
    memcpy(dst, (const void *)(uintptr_t)src, n);
    return OK;
}

CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char value, size_t n, struct dbl_stream *s) {
    NEED_STREAM(s);
    memset((void *)(uintptr_t)dst, value, n);
    return OK;
}

CUresult cuMemAllocHost_v2(void **p, size_t bytes) {
    NEED_CTX(current());
    if (!p || bytes == 0) return INVALID_VALUE;
    *p = malloc(bytes);
    return *p ? OK : OUT_OF_MEMORY;
}

CUresult cuMemFreeHost(void *p) {
    NEED_INIT();
    free(p);
    return OK;
}
