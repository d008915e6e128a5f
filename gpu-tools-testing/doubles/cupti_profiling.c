/* A CUPTI double for the counter APIs (alone, or with the activity double in one library: cupti_full.c): the profiler host (a small catalogue for chips GH100 and TU102), the
 * profiler target, PM sampling, the range profiler and PC sampling, written from the headers' documentation; no
 * vendor header is included. It also exports NVPW_InitializeHost, so that it stands in for libnvperf_host.so.
 *
 * Its counter-data images have a layout of its own (a header, then one entry per sample or range); the values
 * of metric i in an entry are `base + i`. Samples, kernel launches and PCs are fed by `cp_*` test controls;
 * `cp_fail` makes a named function fail with a code.
 *
 * PM sampling serves up to 8 devices, each with its own object and queue (`cp_set_devices`, or
 * GPU_TOOLS_DOUBLE_DEVICES, as the driver double reads it). For a program that cannot call the controls (the
 * `gpu-tools` binary), GPU_TOOLS_DOUBLE_PM_PATTERN=PERIOD_US:PATTERN makes every started sampler take samples by
 * itself: one per PERIOD_US of CLOCK_REALTIME (as the hardware's samples, whose times are Unix-epoch
 * nanoseconds), each character of PATTERN in turn saying what becomes of one period: `1` a sample, `0` none (a
 * gap), `x` none, and the decode that finds it reports an overflow. As on an H100, the first sample starts early
 * (2 s before its period). GPU_TOOLS_DOUBLE_PM_BUSY=0,2 says another process holds the counters of devices 0 and
 * 2 (CUPTI_ERROR_HARDWARE_BUSY). The catalogue also holds the metrics of `gpu-tools top` with
 * `cp_catalogue_top(1)` or GPU_TOOLS_DOUBLE_TOP_METRICS=1. */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>

typedef int CUptiResult;

/* Built alone, or inside cupti_full.c after the activity double, which has the basics (result codes, version, result
 * strings). */
#ifndef CUPTI_DOUBLE_FULL
enum {
    SUCCESS = 0,
    INVALID_PARAMETER = 1,
    INVALID_OPERATION = 7,
    UNKNOWN = 999,
};
#endif

enum {
    OUT_OF_MEMORY = 8,
    NOT_SUPPORTED = 27,
    INVALID_METRIC_NAME = 17,
    HARDWARE_BUSY = 26,
    INSUFFICIENT_PRIVILEGES = 35,
    INVALID_CHIP_NAME = 46,
};

static pthread_mutex_t g_cp_lock = PTHREAD_MUTEX_INITIALIZER;
#define LOCK() pthread_mutex_lock(&g_cp_lock)
#define UNLOCK() pthread_mutex_unlock(&g_cp_lock)

/* ---------------------------------------------------------------- failures injected by the tests */

static char g_cp_fail_fn[128];
static int g_cp_fail_code;

void cp_fail(const char *fn, int code) {
    LOCK();
    snprintf(g_cp_fail_fn, sizeof g_cp_fail_fn, "%s", fn ? fn : "");
    g_cp_fail_code = code;
    UNLOCK();
}

static int failing(const char *fn) {
    LOCK();
    /* A process the tests start (an attach's target) is told by its environment: GPU_TOOLS_DOUBLE_FAIL=NAME=CODE. */
    static int env_read;
    if (!env_read) {
        env_read = 1;
        const char *e = getenv("GPU_TOOLS_DOUBLE_FAIL");
        const char *eq = e ? strchr(e, '=') : NULL;
        if (eq && (size_t)(eq - e) < sizeof g_cp_fail_fn) {
            memcpy(g_cp_fail_fn, e, (size_t)(eq - e));
            g_cp_fail_fn[eq - e] = 0;
            g_cp_fail_code = atoi(eq + 1);
        }
    }
    int code = (g_cp_fail_code && strcmp(fn, g_cp_fail_fn) == 0) ? g_cp_fail_code : 0;
    UNLOCK();
    return code;
}

#define FAIL_IF_ASKED() \
    do { \
        int c_ = failing(__func__); \
        if (c_) return c_; \
    } while (0)

/* ---------------------------------------------------------------- basics */

#ifndef CUPTI_DOUBLE_FULL
CUptiResult cuptiGetVersion(uint32_t *v) {
    if (!v) return INVALID_PARAMETER;
    *v = 130001;
    return SUCCESS;
}

CUptiResult cuptiGetResultString(CUptiResult r, const char **s) {
    if (!s) return INVALID_PARAMETER;
    switch (r) {
    case SUCCESS: *s = "CUPTI_SUCCESS"; break;
    case INVALID_PARAMETER: *s = "CUPTI_ERROR_INVALID_PARAMETER"; break;
    case INVALID_OPERATION: *s = "CUPTI_ERROR_INVALID_OPERATION"; break;
    case HARDWARE_BUSY: *s = "CUPTI_ERROR_HARDWARE_BUSY"; break;
    case INSUFFICIENT_PRIVILEGES: *s = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"; break;
    default: *s = "CUPTI_ERROR_UNKNOWN"; break;
    }
    return SUCCESS;
}
#endif

/* Stands in for libnvperf_host.so. */
int NVPW_InitializeHost(void *p) {
    (void)p;
    return 0;
}

/* ---------------------------------------------------------------- the catalogue */

enum { COUNTER = 0, RATIO = 1, THROUGHPUT = 2 };
enum { RANGE = 1, PM = 2 };

struct metric {
    const char *name;
    int kind;
    int methods;
    const char *unit;
};

static const struct metric METRICS[] = {
    {"dram__bytes_read", COUNTER, RANGE | PM, "byte"},
    {"dram__bytes_write", COUNTER, RANGE | PM, "byte"},
    {"gpu__time_duration", COUNTER, RANGE, "nanosecond"},
    {"sm__cycles_active", COUNTER, RANGE | PM, "cycle"},
    {"TPC.TriageCompute.sm__cycles_active", COUNTER, RANGE, "cycle"},
    {"lts__t_sector_hit_rate", RATIO, RANGE, "percent"},
    {"sm__throughput", THROUGHPUT, RANGE | PM, "percent"},
    /* Those of `gpu-tools top` and its exporter, listed only with cp_catalogue_top(1). */
    {"sm__pipe_tensor_cycles_active", COUNTER, RANGE | PM, "cycle"},
    {"sm__warps_active", COUNTER, RANGE | PM, "warp"},
    {"dram__cycles_active", COUNTER, RANGE | PM, "cycle"},
};
#define N_ALL_METRICS (sizeof METRICS / sizeof METRICS[0])
#define N_TOP_METRICS 3

static int g_catalogue_top = -1;

void cp_catalogue_top(int on) { g_catalogue_top = on; }

/* Metrics in the catalogue now: the first ones, or all. */
static size_t n_metrics(void) {
    if (g_catalogue_top < 0) {
        const char *env = getenv("GPU_TOOLS_DOUBLE_TOP_METRICS");
        g_catalogue_top = env && strcmp(env, "1") == 0;
    }
    return g_catalogue_top ? N_ALL_METRICS : N_ALL_METRICS - N_TOP_METRICS;
}
#define N_METRICS n_metrics()

static const char *COUNTER_SUBS[] = {".sum", ".avg", ".max", ".min", ".sum.per_second",
                                     ".avg.pct_of_peak_sustained_elapsed", ".avg.pct_of_peak_sustained_active"};
static const char *RATIO_SUBS[] = {".ratio", ".pct", ".max_rate"};
static const char *THROUGHPUT_SUBS[] = {".avg.pct_of_peak_sustained_elapsed", ".max.pct_of_peak_sustained_elapsed"};

static const char *CHIPS[] = {"GH100", "TU102"};

struct host {
    int method;
    int added[N_ALL_METRICS];
    const char *names[N_ALL_METRICS];
    int live;
};

static int g_hosts_live;

static int method_of(int profiler_type) { return profiler_type == 0 ? RANGE : PM; }

static const struct metric *find_base(const char *name, size_t len) {
    for (size_t i = 0; i < N_METRICS; i++)
        if (strlen(METRICS[i].name) == len && strncmp(METRICS[i].name, name, len) == 0) return &METRICS[i];
    return NULL;
}

static void subs_of(int kind, const char ***subs, size_t *n) {
    if (kind == COUNTER) *subs = COUNTER_SUBS, *n = sizeof COUNTER_SUBS / sizeof *COUNTER_SUBS;
    else if (kind == RATIO) *subs = RATIO_SUBS, *n = sizeof RATIO_SUBS / sizeof *RATIO_SUBS;
    else *subs = THROUGHPUT_SUBS, *n = sizeof THROUGHPUT_SUBS / sizeof *THROUGHPUT_SUBS;
}

/* The metric of a full name (`base` + a submetric of its kind) for a method, or NULL. */
static const struct metric *full_metric(const char *name, int method) {
    for (const char *dot = strchr(name, '.'); dot; dot = strchr(dot + 1, '.')) {
        const struct metric *m = find_base(name, (size_t)(dot - name));
        if (!m) continue;
        if (!(m->methods & method)) return NULL;
        const char **subs;
        size_t n;
        subs_of(m->kind, &subs, &n);
        for (size_t i = 0; i < n; i++)
            if (strcmp(dot, subs[i]) == 0) return m;
        return NULL;
    }
    return NULL;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    int profilerType;
    const char *pChipName;
    const uint8_t *pCounterAvailabilityImage;
    struct host *pHostObject;
} HostInit;

CUptiResult cuptiProfilerHostInitialize(HostInit *p) {
    FAIL_IF_ASKED();
    if (!p || p->structSize != offsetof(HostInit, pHostObject) + sizeof(void *) || !p->pChipName)
        return INVALID_PARAMETER;
    int known = 0;
    for (size_t i = 0; i < 2; i++) known |= strcmp(p->pChipName, CHIPS[i]) == 0;
    if (!known) return INVALID_CHIP_NAME;
    struct host *h = calloc(1, sizeof *h);
    if (!h) return OUT_OF_MEMORY;
    h->method = method_of(p->profilerType);
    h->live = 1;
    LOCK();
    g_hosts_live++;
    UNLOCK();
    p->pHostObject = h;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
} HostDeinit;

CUptiResult cuptiProfilerHostDeinitialize(HostDeinit *p) {
    if (!p || !p->pHostObject || !p->pHostObject->live) return INVALID_PARAMETER;
    p->pHostObject->live = 0;
    free(p->pHostObject);
    LOCK();
    g_hosts_live--;
    UNLOCK();
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    size_t numChips;
    const char *const *ppChipNames;
} Chips;

CUptiResult cuptiProfilerHostGetSupportedChips(Chips *p) {
    if (!p) return INVALID_PARAMETER;
    p->numChips = 2;
    p->ppChipNames = CHIPS;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    int metricType;
    const char **ppMetricNames;
    size_t numMetrics;
} BaseMetrics;

CUptiResult cuptiProfilerHostGetBaseMetrics(BaseMetrics *p) {
    if (!p || !p->pHostObject) return INVALID_PARAMETER;
    struct host *h = p->pHostObject;
    size_t n = 0;
    for (size_t i = 0; i < N_METRICS; i++)
        if (METRICS[i].kind == p->metricType && (METRICS[i].methods & h->method)) h->names[n++] = METRICS[i].name;
    p->ppMetricNames = h->names;
    p->numMetrics = n;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    int metricType;
    const char *pMetricName;
    size_t numOfSubmetrics;
    const char **ppSubMetrics;
} SubMetrics;

CUptiResult cuptiProfilerHostGetSubMetrics(SubMetrics *p) {
    if (!p || !p->pHostObject || !p->pMetricName) return INVALID_PARAMETER;
    const struct metric *m = find_base(p->pMetricName, strlen(p->pMetricName));
    if (!m || m->kind != p->metricType) return INVALID_METRIC_NAME;
    subs_of(m->kind, &p->ppSubMetrics, &p->numOfSubmetrics);
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    const char *pMetricName;
    const char *pDescription;
    const char *pHwUnit;
    const char *pDimUnit;
    int metricType;
} Properties;

CUptiResult cuptiProfilerHostGetMetricProperties(Properties *p) {
    /* CUPTI checks the header's struct size (up to the last field), not sizeof. */
    if (!p || p->structSize != offsetof(Properties, metricType) + sizeof(int) || !p->pMetricName)
        return INVALID_PARAMETER;
    const char *dot = strchr(p->pMetricName, '.');
    const char *end = p->pMetricName + strlen(p->pMetricName);
    const struct metric *m = NULL;
    for (const char *d = dot; !m && d; d = strchr(d + 1, '.')) m = find_base(p->pMetricName, (size_t)(d - p->pMetricName));
    if (!m) m = find_base(p->pMetricName, (size_t)(end - p->pMetricName));
    if (!m) return INVALID_METRIC_NAME;
    p->pDescription = "a metric of the double";
    p->pHwUnit = "unit";
    p->pDimUnit = m->unit;
    p->metricType = m->kind;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    const char **ppMetricNames;
    size_t numMetrics;
} AddMetrics;

CUptiResult cuptiProfilerHostConfigAddMetrics(AddMetrics *p) {
    if (!p || !p->pHostObject || !p->ppMetricNames) return INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++) {
        const struct metric *m = full_metric(p->ppMetricNames[i], p->pHostObject->method);
        if (!m) return INVALID_PARAMETER;
        p->pHostObject->added[m - METRICS] = 1;
    }
    return SUCCESS;
}

/* Config image: "CFG1", passes (u32), metrics (u32). sm__throughput needs 2 passes in the range profiler and 3
 * in PM sampling. */
#define CONFIG_SIZE 12

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    size_t configImageSize;
} ConfigSize;

CUptiResult cuptiProfilerHostGetConfigImageSize(ConfigSize *p) {
    if (!p || !p->pHostObject) return INVALID_PARAMETER;
    p->configImageSize = CONFIG_SIZE;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    size_t configImageSize;
    uint8_t *pConfigImage;
} ConfigImage;

CUptiResult cuptiProfilerHostGetConfigImage(ConfigImage *p) {
    if (!p || !p->pHostObject || !p->pConfigImage || p->configImageSize < CONFIG_SIZE) return INVALID_PARAMETER;
    struct host *h = p->pHostObject;
    uint32_t passes = 1, count = 0;
    for (size_t i = 0; i < N_METRICS; i++) {
        if (!h->added[i]) continue;
        count++;
        if (strcmp(METRICS[i].name, "sm__throughput") == 0) passes = h->method == RANGE ? 2 : 3;
    }
    memcpy(p->pConfigImage, "CFG1", 4);
    memcpy(p->pConfigImage + 4, &passes, 4);
    memcpy(p->pConfigImage + 8, &count, 4);
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    size_t configImageSize;
    uint8_t *pConfigImage;
    size_t numOfPasses;
} Passes;

static uint32_t config_passes(const uint8_t *image, size_t size) {
    uint32_t passes = 0;
    if (image && size >= CONFIG_SIZE && memcmp(image, "CFG1", 4) == 0) memcpy(&passes, image + 4, 4);
    return passes;
}

CUptiResult cuptiProfilerHostGetNumOfPasses(Passes *p) {
    if (!p) return INVALID_PARAMETER;
    uint32_t passes = config_passes(p->pConfigImage, p->configImageSize);
    if (!passes) return INVALID_PARAMETER;
    p->numOfPasses = passes;
    return SUCCESS;
}

/* ---------------------------------------------------------------- counter-data images of the double */

#define IMAGE_MAGIC 0x49445043u /* "CPDI" */
enum { IMG_PM = 1, IMG_RANGE = 2 };

struct image_header {
    uint32_t magic, kind, capacity, count;
};

struct entry {
    uint64_t start, end;
    char name[32];
    double base;
};

static size_t image_size(size_t capacity) { return sizeof(struct image_header) + capacity * sizeof(struct entry); }

static struct image_header *image_of(uint8_t *p, size_t size, uint32_t kind) {
    if (!p || size < sizeof(struct image_header) || ((uintptr_t)p & 7)) return NULL;
    struct image_header *h = (struct image_header *)p;
    if (h->magic != IMAGE_MAGIC || h->kind != kind || image_size(h->capacity) > size || h->count > h->capacity)
        return NULL;
    return h;
}

static struct entry *entries(struct image_header *h) { return (struct entry *)(h + 1); }

static void image_init(uint8_t *p, size_t capacity, uint32_t kind) {
    memset(p, 0, image_size(capacity));
    struct image_header *h = (struct image_header *)p;
    h->magic = IMAGE_MAGIC;
    h->kind = kind;
    h->capacity = (uint32_t)capacity;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct host *pHostObject;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char **ppMetricNames;
    size_t numMetrics;
    double *pMetricValues;
} Evaluate;

CUptiResult cuptiProfilerHostEvaluateToGpuValues(Evaluate *p) {
    if (!p || !p->pHostObject || !p->pMetricValues || !p->ppMetricNames) return INVALID_PARAMETER;
    uint8_t *img = (uint8_t *)p->pCounterDataImage;
    struct image_header *h = image_of(img, p->counterDataImageSize, IMG_PM);
    if (!h) h = image_of(img, p->counterDataImageSize, IMG_RANGE);
    if (!h || p->rangeIndex >= h->count) return INVALID_PARAMETER;
    for (size_t i = 0; i < p->numMetrics; i++) {
        if (!full_metric(p->ppMetricNames[i], p->pHostObject->method)) return INVALID_PARAMETER;
        p->pMetricValues[i] = entries(h)[p->rangeIndex].base + (double)i;
    }
    return SUCCESS;
}

/* ---------------------------------------------------------------- profiler target */

static int g_initialized;
static int g_support_arch = 3, g_support_vgpu = 3; /* CUPTI_PROFILER_CONFIGURATION_SUPPORTED */
static const char *g_chip = "GH100";

void cp_set_support(int arch, int vgpu) {
    g_support_arch = arch;
    g_support_vgpu = vgpu;
}

void cp_set_chip(const char *chip) { g_chip = chip; }

typedef struct {
    size_t structSize;
    void *pPriv;
} Init;

CUptiResult cuptiProfilerInitialize(Init *p) {
    FAIL_IF_ASKED();
    if (!p) return INVALID_PARAMETER;
    LOCK();
    g_initialized++;
    UNLOCK();
    return SUCCESS;
}

CUptiResult cuptiProfilerDeInitialize(Init *p) {
    if (!p) return INVALID_PARAMETER;
    LOCK();
    g_initialized--;
    UNLOCK();
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    int cuDevice;
    int isSupported, architecture, sli, vGpu, confidentialCompute, cmp, wsl;
    int api;
} DeviceSupported;

CUptiResult cuptiProfilerDeviceSupported(DeviceSupported *p) {
    if (!p || p->structSize != offsetof(DeviceSupported, api) + sizeof(int)) return INVALID_PARAMETER;
    p->architecture = g_support_arch;
    p->vGpu = g_support_vgpu;
    p->sli = p->confidentialCompute = p->cmp = p->wsl = 3;
    p->isSupported = (g_support_arch == 3 && g_support_vgpu == 3) ? 3 : 1;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    size_t deviceIndex;
    const char *pChipName;
} ChipName;

static int pm_devices(void);

CUptiResult cuptiDeviceGetChipName(ChipName *p) {
    if (!p || p->deviceIndex >= (size_t)pm_devices()) return INVALID_PARAMETER;
    p->pChipName = g_chip;
    return SUCCESS;
}

/* ---------------------------------------------------------------- PM sampling (in its own file for size) */
#include "cupti_profiling_pm_sampling.inc"

/* ---------------------------------------------------------------- range profiler */

struct range {
    void *ctx;
    uint8_t *image;
    size_t image_size;
    int mode, replay, started, passes, pass;
    size_t max_ranges;
    char stack[4][32];
    int depth;
    uint64_t dropped;
    /* Auto ranges made since the profiler was enabled: CUPTI names each by its number, from 0. */
    uint64_t launches;
};

static struct range *g_range;
/* Range profilers enabled so far in the process, for tests that check none was. */
static unsigned g_range_enables;
unsigned cp_range_enables(void) { return g_range_enables; }

typedef struct {
    size_t structSize;
    void *pPriv;
    void *ctx;
    size_t counterAvailabilityImageSize;
    uint8_t *pCounterAvailabilityImage;
} CtxAvailability;

CUptiResult cuptiProfilerGetCounterAvailability(CtxAvailability *p) {
    FAIL_IF_ASKED();
    if (!p) return INVALID_PARAMETER;
    if (g_busy_elsewhere) return HARDWARE_BUSY;
    if (!p->pCounterAvailabilityImage) {
        p->counterAvailabilityImageSize = 32;
        return SUCCESS;
    }
    memset(p->pCounterAvailabilityImage, 0x5A, 32);
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    void *ctx;
    struct range *pRangeProfilerObject;
} RangeEnable;

CUptiResult cuptiRangeProfilerEnable(RangeEnable *p) {
    FAIL_IF_ASKED();
    if (!p || !p->ctx) return INVALID_PARAMETER;
    if (g_range) return INVALID_OPERATION;
    g_range = calloc(1, sizeof *g_range);
    g_range->ctx = p->ctx;
    g_range_enabled = 1;
    g_range_enables++;
    p->pRangeProfilerObject = g_range;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
} RangeObjectOnly;

CUptiResult cuptiRangeProfilerDisable(RangeObjectOnly *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range) return INVALID_PARAMETER;
    free(g_range);
    g_range = NULL;
    g_range_enabled = 0;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    const char **pMetricNames;
    size_t numMetrics;
    size_t maxNumOfRanges;
    uint32_t maxNumRangeTreeNodes;
    size_t counterDataSize;
} RangeDataSize;

CUptiResult cuptiRangeProfilerGetCounterDataSize(RangeDataSize *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range) return INVALID_PARAMETER;
    p->counterDataSize = image_size(p->maxNumOfRanges);
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    size_t counterDataSize;
    uint8_t *pCounterData;
} RangeImageInit;

CUptiResult cuptiRangeProfilerCounterDataImageInitialize(RangeImageInit *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range || !p->pCounterData) return INVALID_PARAMETER;
    image_init(p->pCounterData, (p->counterDataSize - sizeof(struct image_header)) / sizeof(struct entry), IMG_RANGE);
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    size_t configSize;
    const uint8_t *pConfig;
    size_t counterDataImageSize;
    uint8_t *pCounterDataImage;
    int range;
    int replayMode;
    size_t maxRangesPerPass;
    uint16_t numNestingLevels, minNestingLevel;
    size_t passIndex;
    uint16_t targetNestingLevel;
} RangeSetConfig;

CUptiResult cuptiRangeProfilerSetConfig(RangeSetConfig *p) {
    FAIL_IF_ASKED();
    if (!p || p->pRangeProfilerObject != g_range || !g_range) return INVALID_PARAMETER;
    if (!image_of(p->pCounterDataImage, p->counterDataImageSize, IMG_RANGE)) return INVALID_PARAMETER;
    g_range->image = p->pCounterDataImage;
    g_range->image_size = p->counterDataImageSize;
    g_range->mode = p->range;
    g_range->replay = p->replayMode;
    g_range->passes = (int)config_passes(p->pConfig, p->configSize);
    g_range->pass = 0;
    g_range->max_ranges = p->maxRangesPerPass;
    return g_range->passes ? SUCCESS : INVALID_PARAMETER;
}

CUptiResult cuptiRangeProfilerStart(RangeObjectOnly *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range || g_range->started) return INVALID_OPERATION;
    g_range->started = 1;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    size_t passIndex;
    size_t targetNestingLevel;
    uint8_t isAllPassSubmitted;
} RangeStop;

CUptiResult cuptiRangeProfilerStop(RangeStop *p) {
    FAIL_IF_ASKED();
    if (!p || p->pRangeProfilerObject != g_range || !g_range || !g_range->started) return INVALID_OPERATION;
    g_range->started = 0;
    g_range->pass++;
    /* Kernel replay collects every pass inside each launch. */
    int all = g_range->replay == 2 /* KernelReplay */ || g_range->pass >= g_range->passes;
    p->passIndex = (size_t)g_range->pass;
    p->isAllPassSubmitted = (uint8_t)all;
    return SUCCESS;
}

/* Records a range in the image during the first pass (later passes fill the same ranges); with kernel replay every
 * pass is inside each launch, so a profiler stopped and started again keeps recording. */
static void record_range(const char *name) {
    struct image_header *h = image_of(g_range->image, g_range->image_size, IMG_RANGE);
    if (!h || (g_range->replay != 2 /* KernelReplay */ && g_range->pass > 0)) return;
    if (h->count >= h->capacity) {
        g_range->dropped++;
        return;
    }
    struct entry *e = &entries(h)[h->count];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->base = (double)(h->count + 1) * 100.0;
    h->count++;
}

/* A kernel launch in the profiled context: one auto range, named `name`, or with NULL by its number as CUPTI names
 * auto ranges ("0", "1", ... since the profiler was enabled, decodes or not). */
int cp_launch(const char *name) {
    if (!g_range || !g_range->started || g_range->mode != 1 /* AutoRange */) return -1;
    char number[24];
    snprintf(number, sizeof number, "%llu", (unsigned long long)g_range->launches++);
    record_range(name ? name : number);
    return 0;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    const char *pRangeName;
} RangePush;

CUptiResult cuptiRangeProfilerPushRange(RangePush *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range || !g_range->started || g_range->mode != 2)
        return INVALID_OPERATION;
    if (g_range->depth >= 4 || !p->pRangeName) return INVALID_PARAMETER;
    snprintf(g_range->stack[g_range->depth++], 32, "%s", p->pRangeName);
    return SUCCESS;
}

CUptiResult cuptiRangeProfilerPopRange(RangeObjectOnly *p) {
    if (!p || p->pRangeProfilerObject != g_range || !g_range || g_range->depth == 0) return INVALID_OPERATION;
    char name[32] = {0};
    for (int i = 0; i < g_range->depth; i++) {
        if (i) strncat(name, "/", sizeof name - strlen(name) - 1);
        strncat(name, g_range->stack[i], sizeof name - strlen(name) - 1);
    }
    record_range(name);
    g_range->depth--;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    struct range *pRangeProfilerObject;
    size_t numOfRangeDropped;
} RangeDecode;

CUptiResult cuptiRangeProfilerDecodeData(RangeDecode *p) {
    FAIL_IF_ASKED();
    if (!p || p->pRangeProfilerObject != g_range || !g_range || g_range->started) return INVALID_OPERATION;
    p->numOfRangeDropped = (size_t)g_range->dropped;
    g_range->dropped = 0;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t numTotalRanges;
} RangeDataInfo;

CUptiResult cuptiRangeProfilerGetCounterDataInfo(RangeDataInfo *p) {
    if (!p) return INVALID_PARAMETER;
    struct image_header *h = image_of((uint8_t *)p->pCounterDataImage, p->counterDataImageSize, IMG_RANGE);
    if (!h) return INVALID_PARAMETER;
    p->numTotalRanges = h->count;
    return SUCCESS;
}

typedef struct {
    size_t structSize;
    void *pPriv;
    const uint8_t *pCounterDataImage;
    size_t counterDataImageSize;
    size_t rangeIndex;
    const char *rangeDelimiter;
    const char *rangeName;
} RangeInfo;

CUptiResult cuptiRangeProfilerCounterDataGetRangeInfo(RangeInfo *p) {
    if (!p) return INVALID_PARAMETER;
    struct image_header *h = image_of((uint8_t *)p->pCounterDataImage, p->counterDataImageSize, IMG_RANGE);
    if (!h || p->rangeIndex >= h->count) return INVALID_PARAMETER;
    p->rangeName = entries(h)[p->rangeIndex].name;
    return SUCCESS;
}

/* ---------------------------------------------------------------- PC sampling */

#define PACKED __attribute__((packed, aligned(8)))

struct PACKED stall {
    uint32_t index, samples;
};

struct PACKED pc_data {
    size_t size;
    uint64_t cubin_crc, pc_offset;
    uint32_t function_index, pad;
    char *function_name;
    size_t stall_count;
    struct stall *stalls;
    uint32_t correlation;
};

struct PACKED sampling_data {
    size_t size, collect_pcs;
    uint64_t total_samples, dropped_samples;
    size_t total_pcs, remaining_pcs;
    uint64_t range_id;
    struct pc_data *pcs;
    uint64_t non_user_samples;
    uint8_t hardware_buffer_full;
};

static const char *REASONS[] = {"smsp__pcsamp_warps_issue_stalled_long_scoreboard",
                                "smsp__pcsamp_warps_issue_stalled_math_pipe_throttle",
                                "smsp__pcsamp_warps_issue_stalled_selected"};
static const uint32_t REASON_INDEX[] = {4, 9, 17};

struct pc_pending {
    const char *function;
    uint64_t offset;
    uint32_t reason, samples;
};

static struct pc_pending g_pcs[256];
static size_t g_pcs_len;
static struct sampling_data *g_pc_buffer;
static uint64_t g_pc_dropped;

/* Appends a pending PC to `list` (`cap` entries, `*len` used); -1 when it is full. */
static int pc_push(struct pc_pending *list, size_t *len, size_t cap, const char *function, uint64_t offset,
                   uint32_t reason, uint32_t samples) {
    if (*len >= cap) return -1;
    struct pc_pending p = {function, offset, reason, samples};
    list[(*len)++] = p;
    return 0;
}

int cp_pc(const char *function, uint64_t offset, uint32_t reason, uint32_t samples) {
    return pc_push(g_pcs, &g_pcs_len, 256, function, offset, reason, samples);
}

void cp_pc_dropped(uint64_t n) { g_pc_dropped = n; }

/* PCs the next window samples: the program's kernels run while it samples. Enable empties the pending PCs (a new
   window), then takes these; without them an attached window counts no stall record, as a job idle on the GPU did. */
static struct pc_pending g_pcs_at_enable[16];
static size_t g_pcs_at_enable_len;

int cp_pc_at_enable(const char *function, uint64_t offset, uint32_t reason, uint32_t samples) {
    return pc_push(g_pcs_at_enable, &g_pcs_at_enable_len, 16, function, offset, reason, samples);
}

/* Whether samples are being taken: from the configuration without start-stop control, between Start and Stop with
   it. In continuous mode CUPTI's decoding worker runs then. */
static int g_pc_running, g_pc_start_stop, g_pc_serialized;

/* Sampling off without touching the sampler's buffer (the library leaves it to CUPTI after a failed disable or
   stop): a process that ended. */
static void pc_worker_stop(void);
void cp_pc_reset(void) {
    pc_worker_stop();
    g_pc_enabled = 0;
    g_pc_running = 0;
    g_pc_buffer = NULL;
    g_pcs_len = 0;
}

/* GetData calls made while continuous mode's decoding worker ran. CUPTI 13.0's GetData resolves the names of what
   the worker decoded, lets go of its lock, takes it again and copies: a PC the worker added in between is copied
   with no name (strdup(NULL), read from libcupti 13.0.85's code, docs/driver-notes.md), which killed jobs. */
static unsigned g_pc_reads_while_decoding;
unsigned cp_pc_reads_while_decoding(void) { return g_pc_reads_while_decoding; }
int cp_pc_running(void) { return g_pc_running; }

/* The worker threads' sleep span (ms) the last configuration set: 0 where none set it. */
static uint32_t g_pc_sleep_span;
uint32_t cp_pc_sleep_span(void) { return g_pc_sleep_span; }

/* The sampling period (an exponent of 2, in cycles) the last configuration set: 0 where none set it (CUPTI's). */
static uint32_t g_pc_period;
uint32_t cp_pc_period(void) { return g_pc_period; }

typedef struct {
    size_t size;
    void *pPriv;
    void *ctx;
} PcCtxOnly;

/* `cp_pc_worker_spins(1)`: each enable starts a worker thread of the sampling's own, named "cupti-pc-worker", busy on
   the CPU until the disable joins it: the threads that CUPTI and the driver start for PC sampling, which a process's
   CPU time counts (inferred, not seen, as what made a job waiting for its child look busy in its PC sampling primer,
   the survival matrix's fork-child on an H200). */
static int g_pc_worker_spins;
static volatile int g_pc_worker_on;
static pthread_t g_pc_worker;
static int g_pc_worker_started;
void cp_pc_worker_spins(int on) { g_pc_worker_spins = on; }

static void *pc_worker(void *arg) {
    (void)arg;
    prctl(PR_SET_NAME, "cupti-pc-worker", 0, 0, 0);
    volatile uint64_t x = 0;
    while (__atomic_load_n(&g_pc_worker_on, __ATOMIC_SEQ_CST)) x++;
    return NULL;
}

static void pc_worker_start(void) {
    if (!g_pc_worker_spins || g_pc_worker_started) return;
    __atomic_store_n(&g_pc_worker_on, 1, __ATOMIC_SEQ_CST);
    g_pc_worker_started = pthread_create(&g_pc_worker, NULL, pc_worker, NULL) == 0;
}

static void pc_worker_stop(void) {
    if (!g_pc_worker_started) return;
    __atomic_store_n(&g_pc_worker_on, 0, __ATOMIC_SEQ_CST);
    pthread_join(g_pc_worker, NULL);
    g_pc_worker_started = 0;
}

CUptiResult cuptiPCSamplingEnable(PcCtxOnly *p) {
    FAIL_IF_ASKED();
    if (!p || !p->ctx || g_pc_enabled) return INVALID_OPERATION;
    pc_worker_start();
    g_pc_enabled = 1;
    g_pcs_len = 0;
    for (size_t i = 0; i < g_pcs_at_enable_len; i++) g_pcs[g_pcs_len++] = g_pcs_at_enable[i];
    g_pcs_at_enable_len = 0;
    g_pc_buffer = NULL;
    g_pc_running = 1;
    g_pc_start_stop = 0;
    g_pc_serialized = 0;
    return SUCCESS;
}

/* Moves pending PCs into a buffer, as many as it takes; the rest stay for the next read. */
static void fill(struct sampling_data *d) {
    if (!d) return;
    size_t n = g_pcs_len < d->collect_pcs ? g_pcs_len : d->collect_pcs;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        struct pc_data *pc = &d->pcs[i];
        pc->cubin_crc = 0xC0FFEE;
        pc->pc_offset = g_pcs[i].offset;
        pc->function_index = 1;
        pc->function_name = (char *)g_pcs[i].function;
        pc->stall_count = 1;
        pc->stalls[0].index = g_pcs[i].reason;
        pc->stalls[0].samples = g_pcs[i].samples;
        total += g_pcs[i].samples;
    }
    memmove(g_pcs, g_pcs + n, (g_pcs_len - n) * sizeof *g_pcs);
    g_pcs_len -= n;
    d->total_pcs = n;
    d->remaining_pcs = g_pcs_len;
    d->total_samples = total + g_pc_dropped;
    d->dropped_samples = g_pc_dropped;
    g_pc_dropped = 0;
}

CUptiResult cuptiPCSamplingDisable(PcCtxOnly *p) {
    FAIL_IF_ASKED();
    if (!p || !g_pc_enabled) return INVALID_OPERATION;
    /* As CUPTI's: the flush into the configured buffer only where sampling runs (a Stop made it already). */
    if (g_pc_running) fill(g_pc_buffer);
    g_pc_enabled = 0;
    g_pc_running = 0;
    pc_worker_stop();
    return SUCCESS;
}

/* Start and Stop need start-stop control (CUPTI answers CUPTI_ERROR_INVALID_OPERATION without it). Stop joins the
   workers and decodes what is left into the configured buffer, which the next GetData hands over first. */
static unsigned g_pc_starts;
unsigned cp_pc_starts(void) { return g_pc_starts; }
CUptiResult cuptiPCSamplingStart(PcCtxOnly *p) {
    g_pc_starts++;
    FAIL_IF_ASKED();
    if (!p || !g_pc_enabled || !g_pc_start_stop || g_pc_running) return INVALID_OPERATION;
    g_pc_running = 1;
    return SUCCESS;
}
CUptiResult cuptiPCSamplingStop(PcCtxOnly *p) {
    FAIL_IF_ASKED();
    if (!p || !g_pc_enabled || !g_pc_start_stop || !g_pc_running) return INVALID_OPERATION;
    fill(g_pc_buffer);
    g_pc_running = 0;
    return SUCCESS;
}

typedef struct {
    size_t size;
    void *pPriv;
    void *ctx;
    void *pcSamplingData;
} PcGetData;

CUptiResult cuptiPCSamplingGetData(PcGetData *p) {
    FAIL_IF_ASKED();
    if (!p || !g_pc_enabled || !p->pcSamplingData) return INVALID_OPERATION;
    /* CUPTI's decode threads write into the configured buffer while sampling is enabled (its PC sampling tutorial:
       a GetData buffer separate from it): a read into that buffer races them, refused here. */
    if (p->pcSamplingData == (void *)g_pc_buffer) return INVALID_PARAMETER;
    if (g_pc_running && !g_pc_serialized) g_pc_reads_while_decoding++;
    struct sampling_data *d = p->pcSamplingData;
    /* What a Stop left in the configured buffer comes first, moved (its count zeroed). */
    if (g_pc_buffer && g_pc_buffer->total_pcs > 0) {
        size_t n = g_pc_buffer->total_pcs < d->collect_pcs ? g_pc_buffer->total_pcs : d->collect_pcs;
        for (size_t i = 0; i < n; i++) {
            struct pc_data *to = &d->pcs[i], *from = &g_pc_buffer->pcs[i];
            to->cubin_crc = from->cubin_crc;
            to->pc_offset = from->pc_offset;
            to->function_index = from->function_index;
            to->function_name = from->function_name;
            to->stall_count = 1;
            to->stalls[0] = from->stalls[0];
        }
        size_t left = g_pc_buffer->total_pcs - n;
        for (size_t i = 0; i < left; i++) {
            struct pc_data *to = &g_pc_buffer->pcs[i], *from = &g_pc_buffer->pcs[n + i];
            to->cubin_crc = from->cubin_crc;
            to->pc_offset = from->pc_offset;
            to->function_index = from->function_index;
            to->function_name = from->function_name;
            to->stalls[0] = from->stalls[0];
        }
        g_pc_buffer->total_pcs = left;
        d->total_pcs = n;
        d->remaining_pcs = left + g_pcs_len;
        d->total_samples = 0;
        d->dropped_samples = 0;
        for (size_t i = 0; i < n; i++) d->total_samples += d->pcs[i].stalls[0].samples;
        return SUCCESS;
    }
    fill(d);
    return SUCCESS;
}

typedef struct {
    size_t size;
    void *pPriv;
    void *ctx;
    size_t *numStallReasons;
} PcNumReasons;

CUptiResult cuptiPCSamplingGetNumStallReasons(PcNumReasons *p) {
    if (!p || !g_pc_enabled || !p->numStallReasons) return INVALID_OPERATION;
    *p->numStallReasons = 3;
    return SUCCESS;
}

typedef struct {
    size_t size;
    void *pPriv;
    void *ctx;
    size_t numStallReasons;
    uint32_t *stallReasonIndex;
    char **stallReasons;
} PcReasons;

CUptiResult cuptiPCSamplingGetStallReasons(PcReasons *p) {
    if (!p || !g_pc_enabled || p->numStallReasons != 3) return INVALID_PARAMETER;
    for (int i = 0; i < 3; i++) {
        p->stallReasonIndex[i] = REASON_INDEX[i];
        snprintf(p->stallReasons[i], 128, "%s", REASONS[i]);
    }
    return SUCCESS;
}

struct config_info {
    int type;
    CUptiResult status;
    union {
        uint64_t data[3];
        uint32_t period;
        uint32_t sleep_span;
        void *buffer;
    } u;
};

typedef struct {
    size_t size;
    void *pPriv;
    void *ctx;
    size_t numAttributes;
    struct config_info *info;
} PcConfig;

CUptiResult cuptiPCSamplingSetConfigurationAttribute(PcConfig *p) {
    if (!p || !g_pc_enabled || !p->info) return INVALID_OPERATION;
    CUptiResult r = SUCCESS;
    g_pc_sleep_span = 0;
    g_pc_period = 0;
    for (size_t i = 0; i < p->numAttributes; i++) {
        struct config_info *a = &p->info[i];
        a->status = SUCCESS;
        if (a->type == 1 && (a->u.period < 5 || a->u.period > 31)) a->status = r = INVALID_PARAMETER;
        if (a->type == 1) g_pc_period = a->u.period;
        if (a->type == 5) g_pc_serialized = a->u.period == 2;
        if (a->type == 6) g_pc_start_stop = a->u.period != 0;
        if (a->type == 8) g_pc_buffer = a->u.buffer;
        if (a->type == 9) g_pc_sleep_span = a->u.sleep_span;
    }
    /* Sampling runs from the configuration unless start-stop control waits for a Start. */
    if (r == SUCCESS) g_pc_running = !g_pc_start_stop;
    return r;
}
