// Does CUPTI's PC sampling see the kernels of a CUDA graph, and does it matter when the graph was instantiated?
// One process per variant: a kernel that spins for about SPIN_US microseconds is launched REPLAYS times, plainly or
// as the one node of a graph; PC sampling (continuous mode, parsed data, every stall reason) is enabled on the
// primary context before or after the graph is instantiated, as an attach to a running program would find it.
// Variants:
//   eager            plain launches after the enable
//   graph-after      the graph instantiated after the enable, then replayed
//   graph-before     the graph instantiated (and launched once) before the enable, then replayed: an attach's case
//   graph-before-upload  as graph-before, then cudaGraphUpload again after the enable
//   graph-before-serial  as graph-before, in kernel-serialised collection mode
//   eager-then-graph-before  graph instantiated before the enable, eager launches and replays interleaved
//   graph-node-before, graph-node-after  as graph-before and graph-after, the graph built node by node
//                    (cudaGraphAddKernelNode) instead of captured from a stream: how XLA builds its command buffers
//                    (a JAX job sampled first counted every sample outside the program's kernels, where captured
//                    graphs of torch and CuPy gave stall records)
//   graph-node-only-before  as graph-node-before, with a kernel that is never launched outside the graph (launched
//                    once in it, before the enable), as an XLA fusion that runs only in a command buffer
//   graph-node-update-before  as graph-node-before, the instantiated graph's kernel node given its parameters again
//                    (cudaGraphExecKernelNodeSetParams) before each replay, as XLA updates a command buffer's
//                    buffer addresses before it runs it
//   module-ptx-before, module-ptx-after  eager launches (cuLaunchKernel) of a kernel whose module was loaded from
//                    PTX in memory (cuModuleLoadData: the driver compiles it), before the enable (and launched once)
//                    or after it: how JAX, CuPy and Triton load their kernels, where torch's eager kernels come from
//                    the fatbins registered at start-up (whether a module loaded from memory before the sampling's
//                    start is what CUPTI counts as non-user)
//   activity-first   eager, after an activity session (concurrent kernels recorded, flushed, disabled) that ran
//                    before PC sampling was ever used in the process: the order of an attach whose first use of
//                    CUPTI was a trace (pc_order_probe.sh: every sample then fell outside the program's kernels)
//   subscribe-first  eager, after a callback subscriber on launches (the flight recorder's use of CUPTI) alone
//   prime-query-activity-first  as activity-first, with cuptiPCSamplingGetNumStallReasons asked before the activity
//   prime-pc-activity-first     as activity-first, with PC sampling enabled and disabled before the activity (the
//                    order in which PC sampling worked after a trace)
//   register-first   only cuptiActivityRegisterCallbacks before PC sampling
//   enable-first     buffer callbacks registered, kernel records enabled and disabled, no launch in between
//   activity-finalize-first  as activity-first, then cuptiFinalize before PC sampling
//   ts-first         a timestamp callback (CLOCK_MONOTONIC) registered and left in place, as a trace leaves one
//   ts-realtime-first  CLOCK_MONOTONIC registered, then a CLOCK_REALTIME callback (as a trace's end leaves CUPTI)
//   period-first     buffer callbacks and a 200 ms flush period, nothing enabled
//   gtrace-first the activity with graph-level records (GRAPH_TRACE) enabled beside kernel records
//   thread-first     the activity of activity-first, made from a second thread that has no current context
//   tracer-first     what a trace's first attach does, from a second thread: a CLOCK_MONOTONIC timestamp callback,
//                    the drop count read, buffer callbacks, a 200 ms flush period, kernel, graph, runtime and driver
//                    records over launches, a forced flush, every kind disabled, a CLOCK_REALTIME callback
//   concurrent-first as tracer-first, while a second thread launches short kernels on a stream of its own without
//                    pause (as an attach finds a running program), stopped before PC sampling starts
//   concurrent-quiet-first  the same, the launching thread parked outside CUDA while the kinds are enabled and
//                    disabled (-quiet-enable-first, -quiet-disable-first: at one of the two only)
//   concurrent-quiet-busy-first  as concurrent-quiet-first, the launching thread parked with a 20 ms kernel of its
//                    own queued and running (an attach's hold: threads stopped outside the driver, their work in flight)
//   concurrent-kernel-first, concurrent-api-first, concurrent-driver-first, concurrent-runtime-first: concurrent-first
//                    with kernel records alone, runtime and driver records, driver records, runtime records
//   inject-first     eager, after a trace by the repository's injection library itself, in this process: the probe
//                    loads PROBE_INJECT (libgpu_tools_inject.so), calls its attach entry with a socket of its own
//                    (and PROBE_INJECT_ARG's `NAME=value` lines, `;`-separated), reads the stream for 1 s of
//                    launches, stops it: whether the injection's CUPTI sequence, without ptrace, leaves PC
//                    sampling blind (inject-concurrent-first: with the launching thread of concurrent-first)
//   serve            no CUPTI: prints `ready PID`, then launches the spin kernel REPLAYS times (a job to attach to)
//   serve-pc         as serve, launching until /tmp/pc_graph_probe.PID.go exists; then samples PCs itself over REPLAYS
//                    launches, as eager: whether an attached trace leaves the process's own PC sampling blind
//   ...-late-fn      (suffix) the sampled loop launches a second kernel too, first launched after the enable (lazy
//                    loading loads it then): whether a function loaded after PC sampling began is attributed where
//                    the ones loaded before are not
// Prints `fn NAME STALLS` for each function with samples (the sum over its PCs of every stall reason's count, which
// came to more than the run's samples on an H200: not a count of samples), then
// `result VARIANT samples S pcs P nonuser N dropped D full F launches L ms T`.
//
//   nvcc -O2 -arch=sm_90 -I$CUPTI_INC -o pc_graph_probe pc_graph_probe.cu -L$CUPTI_LIB -lcupti -lcuda
//   ./pc_graph_probe VARIANT [REPLAYS] [SPIN_US]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <cupti_pcsampling.h>
#include "pc_probe.h"
#include <atomic>
#include <chrono>
#include <thread>
#include <time.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <map>
#include <vector>

__global__ void spin(unsigned long long cycles, unsigned long long *out) {
    unsigned long long start = clock64(), x = threadIdx.x;
    while (clock64() - start < cycles) x = x * 6364136223846793005ull + 1442695040888963407ull;
    if (x == 42) *out = x;
}

__global__ void spin_node(unsigned long long cycles, unsigned long long *out) {
    unsigned long long start = clock64(), x = threadIdx.x + 2;
    while (clock64() - start < cycles) x = x * 3935559000370003845ull + 2691343689449507681ull;
    if (x == 42) *out = x;
}

__global__ void spin_late(unsigned long long cycles, unsigned long long *out) {
    unsigned long long start = clock64(), x = threadIdx.x + 1;
    while (clock64() - start < cycles) x = x * 2862933555777941757ull + 3037000493ull;
    if (x == 42) *out = x;
}

// The spin kernel in PTX, for the module-ptx variants (loaded with cuModuleLoadData, compiled by the driver).
static const char SPIN_PTX[] = R"(
.version 8.0
.target sm_90
.address_size 64
.visible .entry spin_ptx(.param .u64 cycles, .param .u64 out)
{
    .reg .pred %p<3>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<10>;
    ld.param.u64 %rd1, [cycles];
    ld.param.u64 %rd2, [out];
    mov.u64 %rd3, %clock64;
    mov.u32 %r1, %tid.x;
    cvt.u64.u32 %rd4, %r1;
LOOP:
    mov.u64 %rd5, %clock64;
    sub.u64 %rd6, %rd5, %rd3;
    setp.ge.u64 %p1, %rd6, %rd1;
    @%p1 bra DONE;
    mul.lo.u64 %rd4, %rd4, 6364136223846793005;
    add.u64 %rd4, %rd4, 1442695040888963407;
    bra LOOP;
DONE:
    setp.ne.u64 %p2, %rd4, 42;
    @%p2 bra END;
    cvta.to.global.u64 %rd7, %rd2;
    st.global.u64 [%rd7], %rd4;
END:
    ret;
}
)";

#define RT(call)                                                                     \
    do {                                                                             \
        cudaError_t e_ = (call);                                                     \
        if (e_ != cudaSuccess) {                                                     \
            printf("error %s -> %s\n", #call, cudaGetErrorString(e_));               \
            exit(4);                                                                 \
        }                                                                            \
    } while (0)

static CUcontext g_ctx;
static size_t g_reasons;
// Two buffers, as CUPTI's PC sampling tutorial asks: the configured one (SAMPLING_DATA_BUFFER) is written by CUPTI's
// decode threads while sampling runs and read here only after the disable; every GetData fills the other. (This
// probe once used one buffer for both, as the library's sampler did when two jobs died inside CUPTI's strdup.)
struct PcBuffer {
    std::vector<CUpti_PCSamplingPCData> pcs;
    std::vector<std::vector<CUpti_PCSamplingStallReason>> stalls;
    CUpti_PCSamplingData data;

    void prepare(size_t n) {
        pcs.assign(n, CUpti_PCSamplingPCData{});
        stalls.assign(n, std::vector<CUpti_PCSamplingStallReason>(g_reasons));
        for (size_t i = 0; i < n; i++) {
            pcs[i].size = sizeof(CUpti_PCSamplingPCData);
            pcs[i].stallReason = stalls[i].data();
        }
        memset(&data, 0, sizeof data);
        data.size = sizeof(CUpti_PCSamplingData);
        data.collectNumPcs = n;
        data.pPcData = pcs.data();
    }
};
static PcBuffer g_config, g_read;
static unsigned long long g_samples, g_pcs_total, g_nonuser, g_dropped, g_full;
static std::map<std::string, unsigned long long> g_by_function;

static void prepare_buffers(size_t n) {
    g_config.prepare(n);
    g_read.prepare(n);
}

static void account(const PcBuffer &b) {
    const CUpti_PCSamplingData &d = b.data;
    g_samples += d.totalSamples;
    g_pcs_total += d.totalNumPcs;
    g_nonuser += d.nonUsrKernelsTotalSamples;
    g_dropped += d.droppedSamples;
    g_full += d.hardwareBufferFull;
    for (size_t i = 0; i < d.totalNumPcs && i < b.pcs.size(); i++) {
        unsigned long long n = 0;
        for (size_t k = 0; k < b.pcs[i].stallReasonCount; k++) n += b.pcs[i].stallReason[k].samples;
        g_by_function[b.pcs[i].functionName ? b.pcs[i].functionName : "?"] += n;
    }
}

static void read_data() {
    for (int i = 0; i < 1000; i++) {
        g_read.prepare(g_read.pcs.size());
        CUptiResult r = pc_get_data(g_ctx, &g_read.data);
        if (r == CUPTI_ERROR_OUT_OF_MEMORY) g_full++;
        else if (r != CUPTI_SUCCESS) { printf("error cuptiPCSamplingGetData -> %d\n", (int)r); return; }
        account(g_read);
        if (g_read.data.remainingNumPcs == 0 || g_read.data.totalNumPcs == 0) return;
    }
}

static void enable(bool serial) {
    pc_enable(g_ctx);
    std::vector<uint32_t> index;
    g_reasons = pc_stall_reasons(g_ctx, index);
    prepare_buffers(4096);
    pc_configure(g_ctx, index, &g_config.data, serial);
}

static uint64_t CUPTIAPI monotonic_ns() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static uint64_t CUPTIAPI realtime_ns() {
    timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + t.tv_nsec;
}

static void CUPTIAPI on_callback(void *, CUpti_CallbackDomain, CUpti_CallbackId, const void *) {}

// A trace by the injection library, in this process, over 1 s of launches (inject-first).
static void inject_first(const char *v, unsigned long long cycles, unsigned long long *out, cudaStream_t s) {
    const char *lib = getenv("PROBE_INJECT");
    if (!lib) { printf("error PROBE_INJECT unset\n"); exit(5); }
    std::string path = "/tmp/pc_graph_probe." + std::to_string(getpid()) + ".sock";
    unlink(path.c_str());
    int listener = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un addr = {};
    addr.sun_family = AF_UNIX;
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
    if (bind(listener, (sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 1) != 0) { printf("error bind\n"); exit(5); }
    void *h = dlopen(lib, RTLD_NOW);
    if (!h) { printf("error dlopen %s\n", dlerror()); exit(5); }
    auto attach = (int (*)(const char *))dlsym(h, "gpu_tools_inject_attach");
    if (!attach) { printf("error no attach entry\n"); exit(5); }
    std::string arg = "GPU_TOOLS_TRACE_SOCKET=" + path + "\n";
    if (const char *extra = getenv("PROBE_INJECT_ARG")) {
        for (const char *c = extra; *c; c++) arg += *c == ';' ? '\n' : *c;
        arg += "\n";
    }
    std::atomic<bool> launching{strstr(v, "concurrent") != nullptr};
    std::thread launcher([&]() {
        if (!launching.load()) return;
        cudaStream_t own;
        RT(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
        while (launching.load()) {
            for (int i = 0; i < 16; i++) spin<<<1, 32, 0, own>>>(1000, out);
            RT(cudaStreamSynchronize(own));
        }
    });
    int status = attach(arg.c_str());
    int conn = accept(listener, nullptr, nullptr);
    if (conn < 0) { printf("error accept (attach status %d)\n", status); exit(5); }
    std::atomic<unsigned long long> bytes{0};
    std::thread reader([&]() {
        char buf[1 << 16];
        for (ssize_t n; (n = read(conn, buf, sizeof buf)) > 0;) bytes += n;
    });
    auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(1)) {
        for (int i = 0; i < 10; i++) spin<<<132, 128, 0, s>>>(cycles, out);
        RT(cudaStreamSynchronize(s));
    }
    char stop = 'S';
    if (write(conn, &stop, 1) != 1) printf("error stop byte\n");
    reader.join();
    launching.store(false);
    launcher.join();
    close(conn);
    close(listener);
    unlink(path.c_str());
    printf("inject status %d stream bytes %llu\n", status, bytes.load());
}

// CUPTI used before PC sampling, as a first attach that traced used it: an activity session, or a subscriber alone.
static void use_cupti_first(const char *v, unsigned long long cycles, unsigned long long *out, cudaStream_t s) {
    if (strstr(v, "inject-")) {
        inject_first(v, cycles, out, s);
        return;
    }
    if (strstr(v, "subscribe-first")) {
        CUpti_SubscriberHandle sub;
        CU(cuptiSubscribe(&sub, on_callback, nullptr));
        CU(cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        for (int i = 0; i < 10; i++) spin<<<132, 128, 0, s>>>(cycles, out);
        RT(cudaStreamSynchronize(s));
        CU(cuptiEnableCallback(0, sub, CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel));
        return;
    }
    if (strstr(v, "ts-")) {
        CU(cuptiActivityRegisterTimestampCallback(monotonic_ns));
        if (strstr(v, "ts-realtime")) CU(cuptiActivityRegisterTimestampCallback(realtime_ns));
        return;
    }
    if (strstr(v, "period-first")) {
        CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
        CU(cuptiActivityFlushPeriod(200));
        return;
    }
    if (strstr(v, "thread-first") || strstr(v, "tracer-first") || strstr(v, "concurrent")) {
        bool tracer = strstr(v, "tracer-first") != nullptr || strstr(v, "concurrent") != nullptr;
        // The program's own launching thread, busy while the trace starts and stops (concurrent-...). With
        // "quiet" it is parked, outside CUDA, while the kinds are enabled (quiet-enable), disabled
        // (quiet-disable), or both (quiet).
        std::atomic<bool> launching{strstr(v, "concurrent") != nullptr};
        std::atomic<bool> pause{false}, parked{false};
        bool quiet_enable = strstr(v, "quiet-first") || strstr(v, "quiet-enable");
        bool quiet_disable = strstr(v, "quiet-first") || strstr(v, "quiet-disable") || strstr(v, "quiet-busy");
        bool busy = strstr(v, "-busy-") != nullptr;
        if (busy) quiet_enable = true;
        std::thread launcher([&]() {
            if (!launching.load()) return;
            cudaStream_t own;
            RT(cudaStreamCreateWithFlags(&own, cudaStreamNonBlocking));
            while (launching.load()) {
                if (pause.load()) {
                    // -busy-: parked with a 20 ms kernel of its own queued and running, not synchronised.
                    if (busy) spin<<<1, 32, 0, own>>>(1980ull * 20000, out);
                    parked.store(true);
                    while (pause.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
                    parked.store(false);
                    continue;
                }
                for (int i = 0; i < 16; i++) spin<<<1, 32, 0, own>>>(1000, out);
                RT(cudaStreamSynchronize(own));
            }
        });
        auto park = [&](bool on) {
            if (!on || !launching.load()) return;
            pause.store(true);
            while (!parked.load()) std::this_thread::sleep_for(std::chrono::microseconds(50));
        };
        auto unpark = [&]() { pause.store(false); };
        // The kinds: kernel, graph, runtime and driver records; kernel records alone (-kernel-); API records alone
        // (-api-).
        std::vector<CUpti_ActivityKind> kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_GRAPH_TRACE,
                                                 CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
        if (strstr(v, "-kernel-")) kinds = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL};
        if (strstr(v, "-api-")) kinds = {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER};
        if (strstr(v, "-driver-")) kinds = {CUPTI_ACTIVITY_KIND_DRIVER};
        if (strstr(v, "-runtime-")) kinds = {CUPTI_ACTIVITY_KIND_RUNTIME};
        if (!tracer) kinds.resize(1);
        // Let the launcher get going first.
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        park(quiet_enable);
        std::thread t([&]() {
            if (tracer) {
                CU(cuptiActivityRegisterTimestampCallback(monotonic_ns));
                size_t dropped = 0;
                cuptiActivityGetNumDroppedRecords(nullptr, 0, &dropped);
            }
            CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
            if (tracer) CU(cuptiActivityFlushPeriod(200));
            for (auto k : kinds) CU(cuptiActivityEnable(k));
        });
        t.join();
        unpark();
        for (int i = 0; i < 10; i++) spin<<<132, 128, 0, s>>>(cycles, out);
        RT(cudaStreamSynchronize(s));
        park(quiet_disable);
        std::thread u([&]() {
            CU(cuptiActivityFlushAll(1));
            for (auto k : kinds) CU(cuptiActivityDisable(k));
            if (tracer) CU(cuptiActivityRegisterTimestampCallback(realtime_ns));
        });
        u.join();
        unpark();
        launching.store(false);
        launcher.join();
        return;
    }
    bool activity = strstr(v, "activity-") != nullptr || strstr(v, "gtrace-first") != nullptr;
    if (!activity && !strstr(v, "register-first") && !strstr(v, "enable-first")) return;
    CU(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed));
    if (strstr(v, "register-first")) return;
    CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    bool graph_kind = strstr(v, "gtrace") != nullptr;
    if (graph_kind) CU(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
    if (activity) {
        for (int i = 0; i < 10; i++) spin<<<132, 128, 0, s>>>(cycles, out);
        RT(cudaStreamSynchronize(s));
        CU(cuptiActivityFlushAll(1));
    }
    CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (graph_kind) CU(cuptiActivityDisable(CUPTI_ACTIVITY_KIND_GRAPH_TRACE));
    if (strstr(v, "finalize")) CU(cuptiFinalize());
}

static void disable() {
    read_data();
    CUpti_PCSamplingDisableParams d = {};
    d.size = CUpti_PCSamplingDisableParamsSize;
    d.ctx = g_ctx;
    CU(cuptiPCSamplingDisable(&d));
    account(g_config);
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s VARIANT [REPLAYS] [SPIN_US]\n", argv[0]); return 2; }
    const char *v = argv[1];
    int replays = argc > 2 ? atoi(argv[2]) : 400;
    int spin_us = argc > 3 ? atoi(argv[3]) : 200;
    unsigned long long *out;
    RT(cudaMalloc((void **)&out, 8));
    RT(cudaFree(0));
    cuCtxGetCurrent(&g_ctx);
    // About 1.98 GHz under load (H200): the spin's length need not be exact.
    unsigned long long cycles = 1980ull * spin_us;
    cudaStream_t s;
    RT(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    bool graph = strstr(v, "graph") != nullptr, before = strstr(v, "before") != nullptr;
    cudaGraphExec_t exec = nullptr;
    cudaGraphNode_t exec_node = nullptr;
    cudaKernelNodeParams exec_params = {};
    void *exec_args[] = {&cycles, &out};
    auto instantiate = [&]() {
        cudaGraph_t g;
        if (strstr(v, "node")) {
            // Node by node, as XLA's command buffers: the kernel's launch never goes through a stream.
            RT(cudaGraphCreate(&g, 0));
            void *args[] = {&cycles, &out};
            cudaKernelNodeParams p = {};
            p.func = strstr(v, "node-only") ? (void *)spin_node : (void *)spin;
            p.gridDim = dim3(132);
            p.blockDim = dim3(128);
            p.kernelParams = args;
            cudaGraphNode_t node;
            RT(cudaGraphAddKernelNode(&node, g, nullptr, 0, &p));
            exec_node = node;
            exec_params = p;
            exec_params.kernelParams = exec_args;
        } else {
            RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
            spin<<<132, 128, 0, s>>>(cycles, out);
            RT(cudaStreamEndCapture(s, &g));
        }
        RT(cudaGraphInstantiate(&exec, g, 0));
        RT(cudaGraphLaunch(exec, s));
        RT(cudaStreamSynchronize(s));
    };
    spin<<<132, 128, 0, s>>>(cycles, out);  // the module is loaded and a kernel ran before the enable
    RT(cudaStreamSynchronize(s));
    if (graph && before) instantiate();
    // module-ptx: the kernel of a module loaded from PTX in memory, before the enable (launched once) or after it.
    bool ptx = strstr(v, "module-ptx") != nullptr;
    CUfunction ptx_fn = nullptr;
    void *ptx_args[] = {&cycles, &out};
    auto load_ptx = [&]() {
        CUmodule m;
        CUresult r = cuModuleLoadData(&m, SPIN_PTX);
        if (r == CUDA_SUCCESS) r = cuModuleGetFunction(&ptx_fn, m, "spin_ptx");
        if (r != CUDA_SUCCESS) { printf("error cuModuleLoadData/cuModuleGetFunction -> %d\n", (int)r); exit(5); }
    };
    auto launch_ptx = [&]() {
        CUresult r = cuLaunchKernel(ptx_fn, 132, 1, 1, 128, 1, 1, 0, (CUstream)s, ptx_args, nullptr);
        if (r != CUDA_SUCCESS) { printf("error cuLaunchKernel -> %d\n", (int)r); exit(5); }
    };
    if (ptx && before) {
        load_ptx();
        launch_ptx();
        RT(cudaStreamSynchronize(s));
    }
    if (strcmp(v, "serve") == 0 || strcmp(v, "serve-pc") == 0) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        // serve-pc: launches until /tmp/pc_graph_probe.PID.go exists, then samples PCs itself (below), as eager.
        bool then_pc = strcmp(v, "serve-pc") == 0;
        char go[64];
        snprintf(go, sizeof go, "/tmp/pc_graph_probe.%d.go", (int)getpid());
        for (int i = 0; then_pc || i < replays; i++) {
            spin<<<132, 128, 0, s>>>(cycles, out);
            if (i % 50 == 49) {
                RT(cudaStreamSynchronize(s));
                if (then_pc && access(go, F_OK) == 0) break;
            }
        }
        RT(cudaStreamSynchronize(s));
        if (!then_pc) {
            printf("result serve launches %d\n", replays);
            return 0;
        }
        unlink(go);
    }
    if (strstr(v, "prime-query")) {
        CUpti_PCSamplingGetNumStallReasonsParams n = {};
        n.size = CUpti_PCSamplingGetNumStallReasonsParamsSize;
        n.ctx = g_ctx;
        n.numStallReasons = &g_reasons;
        CU(cuptiPCSamplingGetNumStallReasons(&n));
    }
    if (strstr(v, "prime-pc")) {
        enable(false);
        disable();
        g_samples = g_pcs_total = g_nonuser = g_dropped = g_full = 0;
        g_by_function.clear();
    }
    use_cupti_first(v, cycles, out, s);
    enable(strstr(v, "serial") != nullptr);
    if (graph && !before) instantiate();
    if (ptx && !before) load_ptx();
    if (strstr(v, "upload")) RT(cudaGraphUpload(exec, s));
    bool late_fn = strstr(v, "late-fn") != nullptr;
    auto t0 = std::chrono::steady_clock::now();
    int launches = 0;
    for (int i = 0; i < replays; i++) {
        bool eager = !graph || (strstr(v, "eager-then") && i % 2 == 0);
        if (ptx) launch_ptx();
        else if (eager) spin<<<132, 128, 0, s>>>(cycles, out);
        else {
            if (strstr(v, "update")) RT(cudaGraphExecKernelNodeSetParams(exec, exec_node, &exec_params));
            RT(cudaGraphLaunch(exec, s));
        }
        if (late_fn && i % 2 == 1) spin_late<<<132, 128, 0, s>>>(cycles, out);
        launches++;
        if (i % 50 == 49) { RT(cudaStreamSynchronize(s)); read_data(); }
    }
    RT(cudaStreamSynchronize(s));
    double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    disable();
    for (auto &f : g_by_function) printf("fn %s %llu\n", f.first.c_str(), f.second);
    printf("result %s samples %llu pcs %llu nonuser %llu dropped %llu full %llu launches %d ms %.1f\n", v, g_samples,
           g_pcs_total, g_nonuser, g_dropped, g_full, launches, ms);
    return 0;
}
