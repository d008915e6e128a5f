// A launch flood's rate before, during and after an in-process CUPTI kernel-record window, and after
// cuptiFinalize: whether CUPTI itself leaves a job slower once a trace window has ended (docs/measurements.md, "The
// recorder's cost, and a job slower after any window"). Built and run by gpu-host/scripts/after_window.sh.
//
//   after_window_probe [KINDS]   KINDS: kernel (default), or kernel,runtime,driver; FINALIZE=1 finalizes CUPTI
//                                after the "after" phase
//
// Phases, in seconds from the start: 0-2 native; 2-2.5 kernel records on (buffers from the heap, freed unread);
// then disabled and a forced flush; 2.5-6 after; at 6 cuptiFinalize (FINALIZE=1); 6-9 after finalizing. Prints
// "rate PHASE FLOODS_PER_SECOND" at each phase's end (a flood: 1000 one-block launches and a synchronize), and
// each CUPTI call's result that is not CUPTI_SUCCESS.
#include <cupti.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <time.h>

__global__ void one(int *v) {
    if (threadIdx.x == 0) v[0]++;
}

static double now_s() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *buffer = (uint8_t *)aligned_alloc(8, 4 << 20);
    *size = *buffer ? 4 << 20 : 0;
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext, uint32_t, uint8_t *buffer, size_t, size_t) { free(buffer); }

static void said(const char *what, CUptiResult r) {
    if (r != CUPTI_SUCCESS) printf("%s: CUPTI error %d\n", what, (int)r);
}

static void kinds_on(const char *kinds, int on) {
    CUptiResult (*set)(CUpti_ActivityKind) = on ? cuptiActivityEnable : cuptiActivityDisable;
    said("kernel", set(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
    if (strstr(kinds, "runtime")) said("runtime", set(CUPTI_ACTIVITY_KIND_RUNTIME));
    if (strstr(kinds, "driver")) said("driver", set(CUPTI_ACTIVITY_KIND_DRIVER));
}

int main(int argc, char **argv) {
    const char *kinds = argc > 1 ? argv[1] : "kernel";
    const char *finalize = getenv("FINALIZE");
    int *v = nullptr;
    if (cudaMalloc(&v, 128) != cudaSuccess) return 1;
    one<<<1, 32>>>(v);
    cudaDeviceSynchronize();
    const char *names[] = {"native", "window", "after", "after-finalize"};
    const double ends[] = {2, 2.5, 6, 9};
    double t0 = now_s(), phase_start = t0;
    long units = 0, phase_units = 0;
    for (int phase = 0; phase < 4;) {
        for (int i = 0; i < 1000; i++) one<<<1, 32>>>(v);
        if (cudaStreamSynchronize(0) != cudaSuccess) return 1;
        units++;
        double t = now_s();
        if (t - t0 < ends[phase]) continue;
        printf("rate %s %.1f\n", names[phase], (units - phase_units) / (t - phase_start));
        fflush(stdout);
        if (phase == 0) {
            said("cuptiActivityRegisterCallbacks", cuptiActivityRegisterCallbacks(requested, completed));
            kinds_on(kinds, 1);
        } else if (phase == 1) {
            kinds_on(kinds, 0);
            said("cuptiActivityFlushAll", cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
        } else if (phase == 2 && finalize && strcmp(finalize, "1") == 0) {
            said("cuptiFinalize", cuptiFinalize());
        }
        phase_units = units;
        phase_start = now_s();
        phase++;
    }
    return 0;
}
