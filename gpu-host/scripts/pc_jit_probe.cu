// Does CUDA code loaded or unloaded while PC sampling runs make CUPTI's cuptiPCSamplingGetData or
// cuptiPCSamplingDisable crash (SIGSEGV in its strdup of a function name), or hand out wrong names? Two jobs of the
// attach matrix died there (torch.compile reduce-overhead, CuPy graphs: both compile and load kernels at run time).
// One process per run: PC sampling (continuous, parsed, every stall reason) on the primary context, WINDOWS windows
// of enable, work, reads until CUPTI holds nothing more, disable. Every function name CUPTI hands out is checked
// against the names this probe loaded (the spin kernel's, or jit_S_J); any other is counted as wrong.
// Variants (the work inside each window; MODULES modules of FUNCTIONS functions each, compiled by the driver from
// PTX, every function launched once):
//   steady       spin launches only
//   load         spin launches; fresh modules loaded and launched, left loaded
//   load-unload  as load, each module unloaded once its launches finished
//   unload-old   modules loaded and launched before the window's enable, unloaded inside it, then fresh ones loaded
//                and launched (the freed code's addresses taken again)
//   churn-first  before the first window, modules loaded, launched and unloaded (MODULES x WINDOWS of them); the
//                windows then as steady: code that came and went before PC sampling was first enabled, as a job's
//                first attach finds it (the first trace's primer enables PC sampling then)
//   after-trace  steady windows after a trace of this process (kernel, runtime and driver records enabled over
//                launches, flushed, disabled), as an attach's PC sampling after a trace; after-trace-each: a trace
//                before every window. A failed cuptiPCSamplingDisable (seen as CUPTI_ERROR_INVALID_PARAMETER in such
//                windows, leaving sampling and the GPU's counters held) is printed, then retried: a read and a second
//                disable, then a third after 100 ms
//   drain-jit    one window over the whole run: a second thread loads, launches and unloads modules without pause
//                while this one reads every DRAIN_US microseconds (default 2000): a reader beside run-time
//                compilation, as a continuous profiler drains
//   drain-steady as drain-jit, the second thread launching the spin kernel only
// Environment: SPINS, the spin launches in each half of a window (default 10, about 2 ms); TRACE_FIRST=1, a trace
// before the first window whatever the variant; PC_SLEEP_MS, the workers' sleep between rounds (pc_probe.h).
// Prints `window I pcs P wrong W` for a window with wrong names (and the first few of them), then
// `result VARIANT windows W samples S pcs P wrong X modules M ms T`.
//
//   nvcc -O2 -std=c++17 -arch=sm_90 -I$CUPTI_INC -o pc_jit_probe pc_jit_probe.cu -L$CUPTI_LIB -lcupti -lcuda
//   ./pc_jit_probe VARIANT [WINDOWS] [MODULES] [FUNCTIONS]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include "pc_probe.h"
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

__global__ void spin(unsigned long long cycles, unsigned long long *out) {
    unsigned long long start = clock64(), x = threadIdx.x;
    while (clock64() - start < cycles) x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (x == 42) *out = x;
}

#define DRV(call)                                                                                                \
    do {                                                                                                         \
        CUresult r_ = (call);                                                                                    \
        if (r_ != CUDA_SUCCESS) {                                                                                \
            printf("error %s -> %d\n", #call, (int)r_);                                                          \
            exit(4);                                                                                             \
        }                                                                                                        \
    } while (0)

static CUcontext g_ctx;
static size_t g_reasons;
static std::vector<uint32_t> g_index;
static unsigned long long *g_out;
static unsigned long long g_samples, g_pcs, g_wrong, g_modules;
static int g_serial;

struct PcBuffer {
    std::vector<CUpti_PCSamplingPCData> pcs;
    std::vector<CUpti_PCSamplingStallReason> stalls;
    CUpti_PCSamplingData data;
    void prepare(size_t n) {
        pcs.assign(n, CUpti_PCSamplingPCData{});
        stalls.assign(n * g_reasons, CUpti_PCSamplingStallReason{});
        for (size_t i = 0; i < n; i++) {
            pcs[i].size = sizeof(CUpti_PCSamplingPCData);
            pcs[i].stallReason = &stalls[i * g_reasons];
        }
        memset(&data, 0, sizeof data);
        data.size = sizeof(CUpti_PCSamplingData);
        data.collectNumPcs = n;
        data.pPcData = pcs.data();
    }
};
static PcBuffer g_config, g_read;

static bool known(const char *name) {
    return name && (strstr(name, "spin") || strncmp(name, "jit_", 4) == 0);
}

// Counts what `b` holds; returns the wrong names seen.
static unsigned long long account(const PcBuffer &b) {
    unsigned long long wrong = 0;
    g_samples += b.data.totalSamples;
    size_t n = b.data.totalNumPcs < b.pcs.size() ? b.data.totalNumPcs : b.pcs.size();
    g_pcs += n;
    for (size_t i = 0; i < n; i++) {
        const char *name = b.pcs[i].functionName;
        if (known(name)) continue;
        if (wrong++ < 3) printf("wrong name %.60s (crc %llx)\n", name ? name : "(null)", (unsigned long long)b.pcs[i].cubinCrc);
    }
    g_wrong += wrong;
    return wrong;
}

unsigned long long read_all() {
    unsigned long long wrong = 0;
    for (int i = 0; i < 1000; i++) {
        g_read.prepare(g_read.pcs.size());
        CUptiResult r = pc_get_data(g_ctx, &g_read.data);
        if (r != CUPTI_SUCCESS && r != CUPTI_ERROR_OUT_OF_MEMORY) { printf("error GetData -> %d\n", (int)r); return wrong; }
        wrong += account(g_read);
        if (g_read.data.remainingNumPcs == 0 || g_read.data.totalNumPcs == 0) break;
    }
    return wrong;
}

static void enable() {
    pc_enable(g_ctx);
    if (g_index.empty()) {
        g_reasons = pc_stall_reasons(g_ctx, g_index);
        g_read.prepare(4096);
    }
    g_config.prepare(16384);
    pc_configure(g_ctx, g_index, &g_config.data, false);
}

static unsigned long long g_disable_failed, g_retry_ok;

static CUptiResult disable_once() {
    CUpti_PCSamplingDisableParams d = {};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = g_ctx;
    return cuptiPCSamplingDisable(&d);
}

unsigned long long read_all();

// Disables; a failure is printed and retried (a read and a disable, then another after 100 ms).
static unsigned long long disable() {
    CUptiResult r = disable_once();
    if (r != CUPTI_SUCCESS) {
        g_disable_failed++;
        read_all();
        CUptiResult r2 = disable_once();
        CUptiResult r3 = r2;
        if (r2 != CUPTI_SUCCESS) {
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
            r3 = disable_once();
        }
        if (r3 == CUPTI_SUCCESS) g_retry_ok++;
        printf("disable failed %d; read and retry %d; after 100 ms %d\n", (int)r, (int)r2, (int)r3);
        if (r3 != CUPTI_SUCCESS) {
            printf("result-left-on\n");
            exit(6);
        }
    }
    return account(g_config);
}

static void spins(int n, cudaStream_t s);

// A trace of this process: kernel, runtime and driver records over launches, flushed, disabled.
static void trace(cudaStream_t s) {
    static bool registered;
    if (!registered) CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    registered = true;
    CUpti_ActivityKind kinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_RUNTIME,
                                  CUPTI_ACTIVITY_KIND_DRIVER};
    for (auto k : kinds) CU(cuptiActivityEnable(k));
    spins(20, s);
    CU(cuptiActivityFlushAll(1));
    for (auto k : kinds) CU(cuptiActivityDisable(k));
}

// A module of `functions` spin kernels named jit_SERIAL_J, compiled by the driver from PTX.
static std::string module_ptx(int serial, int functions) {
    std::string p = ".version 8.0\n.target sm_90\n.address_size 64\n";
    char buf[1024];
    for (int j = 0; j < functions; j++) {
        snprintf(buf, sizeof buf,
                 ".visible .entry jit_%d_%d(.param .u64 cycles, .param .u64 out)\n{\n"
                 ".reg .pred %%p<3>;\n.reg .b64 %%rd<10>;\n"
                 "ld.param.u64 %%rd1, [cycles];\nld.param.u64 %%rd2, [out];\nmov.u64 %%rd3, %%clock64;\n"
                 "mov.u64 %%rd4, %d;\nL:\nmov.u64 %%rd5, %%clock64;\nsub.u64 %%rd6, %%rd5, %%rd3;\n"
                 "setp.ge.u64 %%p1, %%rd6, %%rd1;\n@%%p1 bra D;\nmul.lo.u64 %%rd4, %%rd4, 6364136223846793005;\n"
                 "add.u64 %%rd4, %%rd4, %d;\nbra L;\nD:\nsetp.ne.u64 %%p2, %%rd4, 42;\n@%%p2 bra E;\n"
                 "cvta.to.global.u64 %%rd7, %%rd2;\nst.global.u64 [%%rd7], %%rd4;\nE:\nret;\n}\n",
                 serial, j, serial * 131 + j, serial + 2 * j + 1);
        p += buf;
    }
    return p;
}

// Loads a fresh module, launches each of its functions once on `s` (about 100 us each) and waits for them.
static CUmodule load_and_run(int functions, CUstream s) {
    CUmodule m;
    int serial = __atomic_fetch_add(&g_serial, 1, __ATOMIC_RELAXED);
    std::string ptx = module_ptx(serial, functions);
    DRV(cuModuleLoadData(&m, ptx.c_str()));
    __atomic_fetch_add(&g_modules, 1, __ATOMIC_RELAXED);
    unsigned long long cycles = 180000;
    void *args[] = {&cycles, &g_out};
    for (int j = 0; j < functions; j++) {
        CUfunction f;
        char name[64];
        snprintf(name, sizeof name, "jit_%d_%d", serial, j);
        if (cuModuleGetFunction(&f, m, name) != CUDA_SUCCESS) continue;
        DRV(cuLaunchKernel(f, 132, 128, 1, 1, 1, 1, 0, s, args, nullptr));
    }
    DRV(cuStreamSynchronize(s));
    return m;
}

static void spins(int n, cudaStream_t s) {
    for (int i = 0; i < n; i++) spin<<<132, 128, 0, s>>>(360000, g_out);
    cudaStreamSynchronize(s);
}

int main(int argc, char **argv) {
    const char *v = argc > 1 ? argv[1] : "steady";
    int windows = argc > 2 ? atoi(argv[2]) : 10, modules = argc > 3 ? atoi(argv[3]) : 4;
    int functions = argc > 4 ? atoi(argv[4]) : 8;
    long drain_us = getenv("DRAIN_US") ? atol(getenv("DRAIN_US")) : 2000;
    int half = getenv("SPINS") ? atoi(getenv("SPINS")) : 10;
    bool trace_first = getenv("TRACE_FIRST") && !strcmp(getenv("TRACE_FIRST"), "1");
    auto t0 = std::chrono::steady_clock::now();
    cudaFree(0);
    cudaMalloc(&g_out, 8);
    DRV(cuCtxGetCurrent(&g_ctx));
    cudaStream_t s;
    cudaStreamCreate(&s);
    spins(2, s);
    if (!strncmp(v, "drain-", 6)) {
        bool jit = !strcmp(v, "drain-jit");
        enable();
        std::atomic<bool> run{true};
        std::thread worker([&]() {
            DRV(cuCtxSetCurrent(g_ctx));
            cudaStream_t own;
            cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking);
            auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(100 * windows);
            while (std::chrono::steady_clock::now() < until) {
                if (jit) DRV(cuModuleUnload(load_and_run(functions, (CUstream)own)));
                else spins(8, own);
            }
            run = false;
        });
        unsigned long long reads = 0;
        while (run) {
            std::this_thread::sleep_for(std::chrono::microseconds(drain_us));
            read_all();
            reads++;
        }
        worker.join();
        read_all();
        disable();
        printf("reads %llu\n", reads);
    } else {
        std::vector<CUmodule> kept;
        if (trace_first || !strncmp(v, "after-trace", 11)) trace(s);
        if (!strcmp(v, "churn-first"))
            for (int i = 0; i < modules * windows; i++) DRV(cuModuleUnload(load_and_run(functions, (CUstream)s)));
        for (int w = 0; w < windows; w++) {
            std::vector<CUmodule> old;
            if (!strcmp(v, "unload-old"))
                for (int i = 0; i < modules; i++) old.push_back(load_and_run(functions, (CUstream)s));
            if (w > 0 && !strcmp(v, "after-trace-each")) trace(s);
            enable();
            spins(half, s);
            for (CUmodule m : old) DRV(cuModuleUnload(m));
            if (!strcmp(v, "load") || !strcmp(v, "load-unload") || !strcmp(v, "unload-old"))
                for (int i = 0; i < modules; i++) {
                    CUmodule m = load_and_run(functions, (CUstream)s);
                    if (!strcmp(v, "load")) kept.push_back(m);
                    else DRV(cuModuleUnload(m));
                }
            spins(half, s);
            unsigned long long pcs = g_pcs, wrong = read_all();
            wrong += disable();
            if (wrong) printf("window %d pcs %llu wrong %llu\n", w, g_pcs - pcs, wrong);
        }
    }
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    printf("result %s windows %d samples %llu pcs %llu wrong %llu modules %llu disable-failed %llu retried-ok %llu ms %.0f\n",
           v, windows, g_samples, g_pcs, g_wrong, g_modules, g_disable_failed, g_retry_ok, ms);
    return 0;
}
