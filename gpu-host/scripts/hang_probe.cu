// What can a thread of a hung program's own (an injected library's) still ask while a kernel hangs and the main
// thread waits in cudaStreamSynchronize? The kernel spins on a host-mapped flag; after HANG_MS a second thread,
// as an injected library would, makes one call of VARIANT with a deadline, prints what it got and how long it
// took, then releases the kernel. Kernel and launch-API activity records are on from the start (CUPTI loaded as
// an attach loads it: after the context exists), as a flight recorder would keep them.
// Variants:
//   query        cuStreamQuery of the program's stream (its context made current on the asking thread)
//   flush        cuptiActivityFlushAll(0): completed buffers only
//   flush-forced cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED): the hung kernel's record without an end?
//   ctx-sync-other cuCtxSynchronize from the asking thread (expected to wait: the control)
// Prints `ask VARIANT rc R ms T`, each kernel record delivered (`kernel corr C start S end E name`), and
// `result VARIANT released ok` when the program ran on to its end.
//
//   nvcc -O2 -arch=sm_90 -I$CUPTI_INC -o hang_probe hang_probe.cu -L$CUPTI_LIB -lcupti -lcuda -lpthread
//   ./hang_probe VARIANT [HANG_MS]
#include <cuda.h>
#include <cuda_runtime.h>
#include <cupti.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

__global__ void wait_flag(volatile int *flag, unsigned long long *out) {
    while (*flag == 0) {}
    *out = 1;
}
__global__ void tick(unsigned long long *out) { atomicAdd(out, 1ull); }

static std::atomic<int> g_kernels{0}, g_api{0}, g_unfinished{0};
static void CUPTIAPI requested(uint8_t **b, size_t *size, size_t *max) {
    *size = 4 << 20;
    *b = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *b, size_t, size_t valid) {
    CUpti_Activity *r = nullptr;
    while (cuptiActivityGetNextRecord(b, valid, &r) == CUPTI_SUCCESS) {
        if (r->kind == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL) {
            auto *k = (CUpti_ActivityKernel10 *)r;
            g_kernels++;
            if (k->end == 0 || k->start == 0) {
                g_unfinished++;
                printf("kernel corr %u start %llu end %llu stream %u name %s\n", k->correlationId,
                       (unsigned long long)k->start, (unsigned long long)k->end, k->streamId, k->name);
            }
        } else if (r->kind == CUPTI_ACTIVITY_KIND_RUNTIME || r->kind == CUPTI_ACTIVITY_KIND_DRIVER) {
            g_api++;
        }
    }
    free(b);
}

static double now_ms() {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

int main(int argc, char **argv) {
    if (argc < 2) { fprintf(stderr, "usage: %s VARIANT [HANG_MS]\n", argv[0]); return 2; }
    const char *v = argv[1];
    int hang_ms = argc > 2 ? atoi(argv[2]) : 1500;
    int *flag;
    unsigned long long *out;
    cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped);
    *flag = 0;
    int *dflag;
    cudaHostGetDevicePointer((void **)&dflag, flag, 0);
    cudaMalloc((void **)&out, 8);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    for (int i = 0; i < 100; i++) tick<<<1, 32, 0, s>>>(out);
    cudaStreamSynchronize(s);
    CUcontext ctx;
    cuCtxGetCurrent(&ctx);
    // As an attach: CUPTI after the context and its first kernels.
    cuptiActivityRegisterCallbacks(requested, completed);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME);
    for (int i = 0; i < 100; i++) tick<<<1, 32, 0, s>>>(out);
    wait_flag<<<1, 1, 0, s>>>(dflag, out);
    std::thread asker([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(hang_ms));
        std::atomic<bool> done{false};
        std::thread watchdog([&] {
            for (int i = 0; i < 100 && !done; i++) std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (!done) { printf("ask %s did not return in 10 s: releasing the kernel\n", v); fflush(stdout); *(volatile int *)flag = 1; }
        });
        double t0 = now_ms();
        int rc = -1;
        if (!strcmp(v, "query")) {
            cuCtxSetCurrent(ctx);
            rc = cuStreamQuery((CUstream)s);
        } else if (!strcmp(v, "flush")) {
            rc = cuptiActivityFlushAll(0);
        } else if (!strcmp(v, "flush-forced")) {
            rc = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
        } else if (!strcmp(v, "ctx-sync-other")) {
            cuCtxSetCurrent(ctx);
            rc = cuCtxSynchronize();
        }
        done = true;
        printf("ask %s rc %d ms %.1f kernels %d unfinished %d api %d\n", v, rc, now_ms() - t0, g_kernels.load(),
               g_unfinished.load(), g_api.load());
        fflush(stdout);
        watchdog.join();
        *(volatile int *)flag = 1;
    });
    cudaError_t e = cudaStreamSynchronize(s);
    asker.join();
    for (int i = 0; i < 10; i++) tick<<<1, 32, 0, s>>>(out);
    cudaStreamSynchronize(s);
    cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
    unsigned long long h = 0;
    cudaMemcpy(&h, out, 8, cudaMemcpyDeviceToHost);
    printf("result %s released %s counter %llu kernels %d\n", v, e == cudaSuccess ? "ok" : cudaGetErrorString(e), h,
           g_kernels.load());
    return 0;
}
