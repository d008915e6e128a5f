/* A module with NVTX v3 compiled in, as a library built with NVTX's header-only implementation carries it: a
 * `static` struct named `nvtxGlobals_v3` with NVTX v3's layout, the module's own export-table getter, the init-once
 * protocol (FRESH, STARTED, COMPLETE) that reads NVTX_INJECTION64_PATH at the module's first NVTX call, and the
 * fallback to no-ops without a tool. Written from the layout NVTX v3's implementation documents (nvtxImpl.h,
 * nvtxInit.h, nvtxInitDefs.h, nvtxTypes.h); no NVTX header is included. Built with -g like every double, so its
 * full symbol table (.symtab) names the static struct, as the symbol tables of PyTorch's libraries do.
 *
 * The struct (1,168 bytes, as in torch 2.11's libtorch_python.so and libtorch_cuda.so): initState at 0; the
 * callbacks export table {struct_size = 16, GetModuleFunctionTable} at 8; the version export table {struct_size =
 * 24, version = 3, reserved, SetInjectionNvtxVersion} at 24; 64 implementation function pointers ("slots") from 48,
 * each first holding its `*_impl_init` function; then one table per callback module (CORE, CUDA, OPENCL, CUDART,
 * CORE2, SYNC) listing the addresses of that module's slots between a leading and a trailing NULL.
 *
 * Exported for the tests: nvtx_module_push(name), nvtx_module_pop(), nvtx_module_mark(name) (nvtxRangePushA,
 * nvtxRangePop and nvtxMarkA as NVTX's inline functions are: a call through the slot, or nothing when it is NULL),
 * nvtx_module_init_state() and nvtx_module_live_slots() (how many slots are not NULL). */
#include <dlfcn.h>
#include <sched.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

typedef void (*nvtx_fn)(void);
/* NvtxFunctionTable: the addresses of one callback module's slots. */
typedef nvtx_fn **function_table;
typedef const void *(*get_export_table_fn)(uint32_t id);

enum { FRESH = 0, STARTED = 1, COMPLETE = 2 };
enum { MODULE_CORE = 1, MODULE_CUDA, MODULE_OPENCL, MODULE_CUDART, MODULE_CORE2, MODULE_SYNC };
/* NVTX_CBID_CORE_*: a CORE function's slot is its callback id - 1. */
enum { CBID_MARK_A = 2, CBID_RANGE_PUSH_A = 9, CBID_RANGE_POP = 11 };
enum { ETID_CALLBACKS = 1, ETID_VERSIONINFO = 3 };
/* nvtxRangePushA's and nvtxRangePop's answer without a tool (NVTX_NO_PUSH_POP_TRACKING). */
#define NO_PUSH_POP_TRACKING (-2)
#define SLOTS 64

struct callbacks {
    size_t struct_size;
    int (*get_module_function_table)(int module, function_table *out_table, unsigned int *out_size);
};

struct version_info {
    size_t struct_size;
    uint32_t version;
    uint32_t reserved0;
    void (*set_injection_nvtx_version)(uint32_t version);
};

struct globals {
    volatile unsigned int init_state;
    struct callbacks etbl_callbacks;
    struct version_info etbl_version_info;
    /* CORE (15), CUDA (8), OPENCL (14), CUDART (6), CORE2 (15), SYNC (6), in the header's order. */
    nvtx_fn slots[SLOTS];
    nvtx_fn *table_core[15 + 2];
    nvtx_fn *table_cuda[8 + 2];
    nvtx_fn *table_opencl[14 + 2];
    nvtx_fn *table_cudart[6 + 2];
    nvtx_fn *table_core2[15 + 2];
    nvtx_fn *table_sync[6 + 2];
};
_Static_assert(offsetof(struct globals, etbl_callbacks) == 8, "callbacks at 8");
_Static_assert(offsetof(struct globals, etbl_version_info) == 24, "version info at 24");
_Static_assert(offsetof(struct globals, slots) == 48, "slots from 48");
_Static_assert(sizeof(struct globals) == 1168, "nvtxGlobals_t is 1,168 bytes");

static int get_module_function_table(int module, function_table *out_table, unsigned int *out_size);
static void set_injection_nvtx_version(uint32_t version) { (void)version; }
static void init_once(void);
static int push(const char *message);
static int pop(void);
static void mark(const char *message);

/* The `*_impl_init` functions: the first call of a function initialises NVTX, then calls it again. */
static int range_push_a_init(const char *message) {
    init_once();
    return push(message);
}
static int range_pop_init(void) {
    init_once();
    return pop();
}
static void mark_a_init(const char *message) {
    init_once();
    mark(message);
}
/* Every other function's (the tests never call them; each still has a non-NULL initial slot, as in NVTX). */
static void other_init(void) { init_once(); }

#define O other_init
#define O5 O, O, O, O, O
#define O10 O5, O5
/* The slots' initial values, the struct's and the reference that nvtxSetInitFunctionsToNoops compares with. */
#define INITIAL_SLOTS                                                                                          \
    {                                                                                                          \
        O, (nvtx_fn)mark_a_init, O, O, O, O, O, O, (nvtx_fn)range_push_a_init, O, (nvtx_fn)range_pop_init, O, O, \
            O, O, O10, O10, O10, O10, O5, O, O, O, O                                                           \
    }
static const nvtx_fn initial_slots[] = INITIAL_SLOTS;

#define S(i) (&nvtxGlobals_v3.slots[i])
static struct globals nvtxGlobals_v3;
static struct globals nvtxGlobals_v3 = {
    FRESH,
    {sizeof(struct callbacks), get_module_function_table},
    {sizeof(struct version_info), 3, 0, set_injection_nvtx_version},
    INITIAL_SLOTS,
    {NULL, S(0), S(1), S(2), S(3), S(4), S(5), S(6), S(7), S(8), S(9), S(10), S(11), S(12), S(13), S(14), NULL},
    {NULL, S(15), S(16), S(17), S(18), S(19), S(20), S(21), S(22), NULL},
    {NULL, S(23), S(24), S(25), S(26), S(27), S(28), S(29), S(30), S(31), S(32), S(33), S(34), S(35), S(36), NULL},
    {NULL, S(37), S(38), S(39), S(40), S(41), S(42), NULL},
    {NULL, S(43), S(44), S(45), S(46), S(47), S(48), S(49), S(50), S(51), S(52), S(53), S(54), S(55), S(56), S(57),
     NULL},
    {NULL, S(58), S(59), S(60), S(61), S(62), S(63), NULL},
};
_Static_assert(sizeof initial_slots / sizeof initial_slots[0] == SLOTS, "one initial value a slot");

static int get_module_function_table(int module, function_table *out_table, unsigned int *out_size) {
    function_table table;
    size_t bytes;
    switch (module) {
    case MODULE_CORE: table = nvtxGlobals_v3.table_core; bytes = sizeof nvtxGlobals_v3.table_core; break;
    case MODULE_CUDA: table = nvtxGlobals_v3.table_cuda; bytes = sizeof nvtxGlobals_v3.table_cuda; break;
    case MODULE_OPENCL: table = nvtxGlobals_v3.table_opencl; bytes = sizeof nvtxGlobals_v3.table_opencl; break;
    case MODULE_CUDART: table = nvtxGlobals_v3.table_cudart; bytes = sizeof nvtxGlobals_v3.table_cudart; break;
    case MODULE_CORE2: table = nvtxGlobals_v3.table_core2; bytes = sizeof nvtxGlobals_v3.table_core2; break;
    case MODULE_SYNC: table = nvtxGlobals_v3.table_sync; bytes = sizeof nvtxGlobals_v3.table_sync; break;
    default: return 0;
    }
    /* As NVTX counts it: the entries but the trailing NULL. */
    if (out_size) *out_size = (unsigned int)(bytes / sizeof(nvtx_fn *)) - 1;
    if (out_table) *out_table = table;
    return 1;
}

/* What a tool's InitializeInjectionNvtx2 is given: this module's export tables. */
static const void *get_export_table(uint32_t id) {
    switch (id) {
    case ETID_CALLBACKS: return &nvtxGlobals_v3.etbl_callbacks;
    case ETID_VERSIONINFO: return &nvtxGlobals_v3.etbl_version_info;
    default: return NULL;
    }
}

/* NVTX's load sequence, the environment variable only: 1 when a tool took this module. */
static int initialize_injection_library(void) {
    const char *path = getenv("NVTX_INJECTION64_PATH");
    if (!path) return 0;
    void *lib = dlopen(path, RTLD_LAZY);
    if (!lib) return 0;
    int (*init)(get_export_table_fn) = (int (*)(get_export_table_fn))dlsym(lib, "InitializeInjectionNvtx2");
    if (!init || !init(get_export_table)) {
        dlclose(lib);
        return 0;
    }
    return 1;
}

/* nvtxSetInitFunctionsToNoops: a slot no tool took (or every slot, when none did) does nothing from now on. */
static void set_init_functions_to_noops(int force_all) {
    for (int i = 0; i < SLOTS; i++)
        if (force_all || nvtxGlobals_v3.slots[i] == initial_slots[i]) nvtxGlobals_v3.slots[i] = NULL;
}

/* nvtxInitOnce: the first caller initialises; the others wait for COMPLETE. */
static void init_once(void) {
    if (nvtxGlobals_v3.init_state == COMPLETE) return;
    unsigned int old = __sync_val_compare_and_swap(&nvtxGlobals_v3.init_state, FRESH, STARTED);
    if (old == FRESH) {
        int taken = initialize_injection_library();
        set_init_functions_to_noops(!taken);
        __sync_synchronize();
        nvtxGlobals_v3.init_state = COMPLETE;
        __sync_synchronize();
    } else {
        __sync_synchronize();
        while (nvtxGlobals_v3.init_state != COMPLETE) {
            sched_yield();
            __sync_synchronize();
        }
    }
}

/* nvtxRangePushA, nvtxRangePop and nvtxMarkA as NVTX defines them: a call through the slot. */
static int push(const char *message) {
    int (*f)(const char *) = (int (*)(const char *))nvtxGlobals_v3.slots[CBID_RANGE_PUSH_A - 1];
    return f ? f(message) : NO_PUSH_POP_TRACKING;
}

static int pop(void) {
    int (*f)(void) = (int (*)(void))nvtxGlobals_v3.slots[CBID_RANGE_POP - 1];
    return f ? f() : NO_PUSH_POP_TRACKING;
}

static void mark(const char *message) {
    void (*f)(const char *) = (void (*)(const char *))nvtxGlobals_v3.slots[CBID_MARK_A - 1];
    if (f) f(message);
}

int nvtx_module_push(const char *message) { return push(message); }

int nvtx_module_pop(void) { return pop(); }

void nvtx_module_mark(const char *message) { mark(message); }

unsigned int nvtx_module_init_state(void) { return nvtxGlobals_v3.init_state; }

int nvtx_module_live_slots(void) {
    int live = 0;
    for (int i = 0; i < SLOTS; i++) live += nvtxGlobals_v3.slots[i] != NULL;
    return live;
}
