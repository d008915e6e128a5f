/* A CUDA driver double: the driver entry points gpu-tools binds, on host memory, with one device (or more for
 * the device queries: `dbl_set_device_count`, or GPU_TOOLS_DOUBLE_DEVICES in the environment; contexts are of
 * device 0 only), modules whose launches run nothing and are counted (`dbl_launches`), and CUDA graphs the
 * tests build for the graph queries (`dbl_graph_*`, at the end).
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
    INVALID_HANDLE = 400,
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
    case INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
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

/* Modules and functions: handles of the context that loaded the module, for any image and any name; a launch runs
 * nothing and is counted (dbl_launches). An unloaded module stays allocated and marked dead, as contexts do. */
struct dbl_module;
struct dbl_function {
    unsigned magic;
    struct dbl_module *module;
};
struct dbl_module {
    unsigned magic;
    struct dbl_ctx *ctx;
    struct dbl_function function;
};
#define DBL_MODULE_MAGIC 0x444f4d44u   /* "DMOD" */
#define DBL_FUNCTION_MAGIC 0x434e5546u /* "FUNC" */
static int g_launches;

CUresult cuModuleLoadData(struct dbl_module **m, const void *image) {
    struct dbl_ctx *c = current();
    NEED_CTX(c);
    if (!m || !image) return INVALID_VALUE;
    struct dbl_module *mod = calloc(1, sizeof *mod);
    if (!mod) return OUT_OF_MEMORY;
    mod->magic = DBL_MODULE_MAGIC;
    mod->ctx = c;
    mod->function.magic = DBL_FUNCTION_MAGIC;
    mod->function.module = mod;
    *m = mod;
    return OK;
}

CUresult cuModuleUnload(struct dbl_module *m) {
    NEED_INIT();
    if (!m || m->magic != DBL_MODULE_MAGIC) return INVALID_HANDLE;
    m->magic = 0;
    m->function.magic = 0;
    return OK;
}

CUresult cuModuleGetFunction(struct dbl_function **f, struct dbl_module *m, const char *name) {
    NEED_INIT();
    if (!f || !name) return INVALID_VALUE;
    if (!m || m->magic != DBL_MODULE_MAGIC) return INVALID_HANDLE;
    *f = &m->function;
    return OK;
}

/* Launches that reached the double. */
int dbl_launches(void) {
    pthread_mutex_lock(&g_lock);
    int n = g_launches;
    pthread_mutex_unlock(&g_lock);
    return n;
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

static int query_ends_a_capture(void *s);

/* Any handle, as the flight recorder asks about the program's streams: an odd one has work left
 * (CUDA_ERROR_NOT_READY), an even one none. A question the driver forbids during a capture (see
 * query_ends_a_capture) fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and ends the capture. */
CUresult cuStreamQuery(void *s) {
    NEED_INIT();
    if (query_ends_a_capture(s)) return 900;
    return ((uintptr_t)s & 1) ? 600 : OK;
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

/* The function's context must be current and the stream null or live. That the stream is of the function's
 * context is not checked: the crate checks it before the call (Stream::launch), not leaving it to the driver, and
 * this double shows whether a launch got through. */
CUresult cuLaunchKernel(struct dbl_function *f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by,
                        unsigned bz, unsigned shared, struct dbl_stream *stream, void **params, void **extra) {
    (void)gx, (void)gy, (void)gz, (void)bx, (void)by, (void)bz, (void)shared, (void)params, (void)extra;
    NEED_CTX(current());
    if (!f || f->magic != DBL_FUNCTION_MAGIC) return INVALID_HANDLE;
    if (f->module->ctx != current()) return INVALID_CONTEXT;
    if (stream && !live_stream(stream)) return INVALID_HANDLE;
    pthread_mutex_lock(&g_lock);
    g_launches++;
    pthread_mutex_unlock(&g_lock);
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

/* ---- CUDA graphs, for the queries a profiler makes (cuGraphGetNodes, cuGraphGetEdges_v2, cuGraphNodeGetType,
 * cuGraphKernelNodeGetParams_v2, cuGraphChildGraphNodeGetGraph, cuFuncGetName, cuKernelGetName), built by the
 * tests with the dbl_graph_* controls; nothing runs. Layouts from cuda.h (CUDA 13.0): CUDA_KERNEL_NODE_PARAMS_v2,
 * CUgraphEdgeData (8 bytes), CUgraphNodeType and CUstreamCaptureStatus values. Handles point into fixed tables,
 * checked by their magic. A kernel node holds a function (`kind` 0), a library kernel handed over as a function
 * (1: cuFuncGetName refuses it, cuKernelGetName names it), or a library kernel in `kern` (2). */
enum { NODE_KERNEL = 0, NODE_GRAPH = 4 };
#define DBL_GRAPHS 32
#define DBL_NODES 64
#define DBL_EDGES 128
#define DBL_GRAPH_MAGIC 0x48505247u /* "GRPH" */
#define DBL_NODE_MAGIC 0x45444f4eu  /* "NODE" */
#define DBL_FUNC_MAGIC 0x434e5546u  /* "FUNC" */

struct dbl_func {
    unsigned magic;
    int library; /* a CUkernel */
    char name[128];
};

struct dbl_node {
    unsigned magic;
    int type;
    struct dbl_func func;
    int kind;
    struct dbl_graph *child;
};

struct dbl_graph {
    unsigned magic;
    int n, e;
    struct dbl_node nodes[DBL_NODES];
    int from[DBL_EDGES], to[DBL_EDGES];
};

struct kernel_node_params {
    void *func;
    unsigned grid[3], block[3], shared_mem_bytes;
    void **kernel_params;
    void **extra;
    void *kern;
    void *ctx;
};
_Static_assert(sizeof(struct kernel_node_params) == 72, "CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes");

static struct dbl_graph g_graphs[DBL_GRAPHS];
static int g_graph_count;
static int g_edges_unsupported;

/* A new empty graph, NULL when the table is full. */
void *dbl_graph_create(void) {
    pthread_mutex_lock(&g_lock);
    struct dbl_graph *g = g_graph_count < DBL_GRAPHS ? &g_graphs[g_graph_count++] : NULL;
    if (g) {
        memset(g, 0, sizeof *g);
        g->magic = DBL_GRAPH_MAGIC;
    }
    pthread_mutex_unlock(&g_lock);
    return g;
}

static struct dbl_graph *graph_of(void *h) {
    struct dbl_graph *g = h;
    for (int i = 0; i < DBL_GRAPHS; i++)
        if (g == &g_graphs[i]) return g->magic == DBL_GRAPH_MAGIC ? g : NULL;
    return NULL;
}

static struct dbl_node *add_node(void *graph, int type) {
    struct dbl_graph *g = graph_of(graph);
    if (!g || g->n >= DBL_NODES) return NULL;
    struct dbl_node *n = &g->nodes[g->n++];
    memset(n, 0, sizeof *n);
    n->magic = DBL_NODE_MAGIC;
    n->type = type;
    return n;
}

static int index_of(void *graph, struct dbl_node *n) {
    return n ? (int)(n - ((struct dbl_graph *)graph)->nodes) : -1;
}

/* Adds a kernel node (`kind` as above) named `name`; returns its index, -1 when it does not fit. */
int dbl_graph_add_kernel(void *graph, const char *name, int kind) {
    struct dbl_node *n = add_node(graph, NODE_KERNEL);
    if (!n) return -1;
    n->kind = kind;
    n->func.magic = DBL_FUNC_MAGIC;
    n->func.library = kind != 0;
    snprintf(n->func.name, sizeof n->func.name, "%s", name ? name : "");
    return index_of(graph, n);
}

/* Adds a node of another type (CUgraphNodeType: 2 memset, 5 empty, 13 conditional, ...). */
int dbl_graph_add_node(void *graph, int type) { return index_of(graph, add_node(graph, type)); }

/* Adds a child-graph node running `child`. */
int dbl_graph_add_child(void *graph, void *child) {
    if (!graph_of(child)) return -1;
    struct dbl_node *n = add_node(graph, NODE_GRAPH);
    if (!n) return -1;
    n->child = child;
    return index_of(graph, n);
}

/* Makes node `to` depend on node `from`. */
int dbl_graph_add_edge(void *graph, int from, int to) {
    struct dbl_graph *g = graph_of(graph);
    if (!g || g->e >= DBL_EDGES || from < 0 || to < 0 || from >= g->n || to >= g->n) return -1;
    g->from[g->e] = from;
    g->to[g->e] = to;
    g->e++;
    return 0;
}

/* Makes cuGraphGetEdges_v2 answer CUDA_ERROR_NOT_SUPPORTED (as a driver older than CUDA 12.3 lacks it). */
void dbl_graph_edges_unsupported(int on) { g_edges_unsupported = on; }

static struct dbl_node *node_of(void *h) {
    struct dbl_node *n = h;
    for (int i = 0; i < DBL_GRAPHS; i++)
        if (n >= g_graphs[i].nodes && n < g_graphs[i].nodes + DBL_NODES)
            return n->magic == DBL_NODE_MAGIC ? n : NULL;
    return NULL;
}

CUresult cuGraphGetNodes(void *graph, void **nodes, size_t *count) {
    struct dbl_graph *g = graph_of(graph);
    if (!g || !count) return INVALID_VALUE;
    if (!nodes) {
        *count = (size_t)g->n;
        return OK;
    }
    size_t n = *count < (size_t)g->n ? *count : (size_t)g->n;
    for (size_t i = 0; i < n; i++) nodes[i] = &g->nodes[i];
    *count = n;
    return OK;
}

CUresult cuGraphGetEdges_v2(void *graph, void **from, void **to, uint8_t *edge_data, size_t *count) {
    if (g_edges_unsupported) return NOT_SUPPORTED;
    struct dbl_graph *g = graph_of(graph);
    if (!g || !count || (!from != !to)) return INVALID_VALUE;
    if (!from) {
        *count = (size_t)g->e;
        return OK;
    }
    size_t n = *count < (size_t)g->e ? *count : (size_t)g->e;
    for (size_t i = 0; i < n; i++) {
        from[i] = &g->nodes[g->from[i]];
        to[i] = &g->nodes[g->to[i]];
        if (edge_data) memset(edge_data + 8 * i, 0, 8);
    }
    *count = n;
    return OK;
}

CUresult cuGraphNodeGetType(void *node, int *type) {
    struct dbl_node *n = node_of(node);
    if (!n || !type) return INVALID_VALUE;
    *type = n->type;
    return OK;
}

CUresult cuGraphKernelNodeGetParams_v2(void *node, struct kernel_node_params *p) {
    struct dbl_node *n = node_of(node);
    if (!n || !p || n->type != NODE_KERNEL) return INVALID_VALUE;
    memset(p, 0, sizeof *p);
    p->grid[0] = p->grid[1] = p->grid[2] = 1;
    p->block[0] = p->block[1] = p->block[2] = 32;
    if (n->kind == 2) {
        p->kern = &n->func;
    } else {
        p->func = &n->func;
    }
    return OK;
}

CUresult cuGraphChildGraphNodeGetGraph(void *node, void **graph) {
    struct dbl_node *n = node_of(node);
    if (!n || !graph || n->type != NODE_GRAPH) return INVALID_VALUE;
    *graph = n->child;
    return OK;
}

static struct dbl_func *func_of(void *h) {
    struct dbl_func *f = h;
    return (node_of((char *)h - offsetof(struct dbl_node, func)) && f->magic == DBL_FUNC_MAGIC) ? f : NULL;
}

CUresult cuFuncGetName(const char **name, void *func) {
    struct dbl_func *f = func_of(func);
    if (!name) return INVALID_VALUE;
    if (!f || f->library) return INVALID_HANDLE;
    *name = f->name;
    return OK;
}

CUresult cuKernelGetName(const char **name, void *kernel) {
    struct dbl_func *f = func_of(kernel);
    if (!name) return INVALID_VALUE;
    if (!f || !f->library) return INVALID_HANDLE;
    *name = f->name;
    return OK;
}

/* Streams that capture (CU_STREAM_CAPTURE_STATUS_ACTIVE), by handle value (the null stream included). */
#define DBL_CAPTURING 8
static void *g_capturing[DBL_CAPTURING];
static int g_capturing_count;

/* Makes `stream` capture (on) or not. */
void dbl_set_capturing(void *stream, int on) {
    pthread_mutex_lock(&g_lock);
    int at = -1;
    for (int i = 0; i < g_capturing_count; i++)
        if (g_capturing[i] == stream) at = i;
    if (on && at < 0 && g_capturing_count < DBL_CAPTURING) g_capturing[g_capturing_count++] = stream;
    if (!on && at >= 0) g_capturing[at] = g_capturing[--g_capturing_count];
    pthread_mutex_unlock(&g_lock);
}

/* The calling thread's capture mode (CUstreamCaptureMode: 0 global, the default; 1 thread-local; 2 relaxed). */
static __thread int t_capture_mode;
/* Captures a forbidden question ended (dbl_captures_ended). */
static int g_captures_ended;

CUresult cuThreadExchangeStreamCaptureMode(int *mode) {
    NEED_INIT();
    if (!mode || *mode < 0 || *mode > 2) return INVALID_VALUE;
    int previous = t_capture_mode;
    t_capture_mode = *mode;
    *mode = previous;
    return OK;
}

/* As the driver has it (the capture modes of cuda.h), with every capture taken as begun in the global mode: a
 * question about a capturing stream is forbidden, and so is one about any stream from a thread in the global mode
 * while a capture runs. A forbidden question ends one capture (counted). */
static int query_ends_a_capture(void *s) {
    pthread_mutex_lock(&g_lock);
    int capturing = 0;
    for (int i = 0; i < g_capturing_count; i++)
        if (g_capturing[i] == s) capturing = 1;
    int forbidden = capturing || (g_capturing_count > 0 && t_capture_mode == 0);
    if (forbidden) g_captures_ended++;
    pthread_mutex_unlock(&g_lock);
    return forbidden;
}

/* Captures ended by a question the driver forbids during capture, since the process started. */
int dbl_captures_ended(void) {
    pthread_mutex_lock(&g_lock);
    int n = g_captures_ended;
    pthread_mutex_unlock(&g_lock);
    return n;
}

CUresult cuStreamIsCapturing(void *stream, int *status) {
    NEED_INIT();
    if (!status) return INVALID_VALUE;
    pthread_mutex_lock(&g_lock);
    *status = 0;
    for (int i = 0; i < g_capturing_count; i++)
        if (g_capturing[i] == stream) *status = 1;
    pthread_mutex_unlock(&g_lock);
    return OK;
}
