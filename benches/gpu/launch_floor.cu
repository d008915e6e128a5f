// The CUPTI floor of a launch loop: `steps` launches of a one-block kernel, each followed by a synchronize, timed
// natively or with CUPTI's activity API recording (raw, as any tool would: buffers handed out, records counted,
// buffers freed). Prints `loop_ms T records N dropped D` for the loop alone.
//
//   launch_floor MODE STEPS    MODE: native | kernel | kernel+runtime | kernel+runtime+driver
#include <cupti.h>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

__global__ void one(int *v) { v[threadIdx.x] += 1; }

static unsigned long long g_records, g_dropped;

static void CUPTIAPI requested(uint8_t **buffer, size_t *size, size_t *max_records) {
    *size = 8 << 20;
    *buffer = static_cast<uint8_t *>(aligned_alloc(8, *size));
    *max_records = 0;
}

static void CUPTIAPI completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid) {
    (void)size;
    CUpti_Activity *record = nullptr;
    while (cuptiActivityGetNextRecord(buffer, valid, &record) == CUPTI_SUCCESS) g_records++;
    size_t dropped = 0;
    cuptiActivityGetNumDroppedRecords(ctx, stream, &dropped);
    g_dropped += dropped;
    free(buffer);
}

static double now_ms() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec * 1e-6;
}

#define CHECK(call)                                                                        \
    do {                                                                                   \
        CUptiResult r_ = (call);                                                           \
        if (r_ != CUPTI_SUCCESS) {                                                         \
            fprintf(stderr, "%s failed: %d\n", #call, (int)r_);                            \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "native";
    int steps = argc > 2 ? atoi(argv[2]) : 10000;
    int *v = nullptr;
    cudaMalloc(&v, 32 * sizeof(int));
    cudaMemset(v, 0, 32 * sizeof(int));
    one<<<1, 32>>>(v);
    cudaDeviceSynchronize();
    bool cupti = strcmp(mode, "native") != 0;
    if (cupti) {
        CHECK(cuptiActivityRegisterCallbacks(requested, completed));
        CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL));
        if (strstr(mode, "runtime")) CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME));
        if (strstr(mode, "driver")) CHECK(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_DRIVER));
    }
    double t0 = now_ms();
    for (int i = 0; i < steps; i++) {
        one<<<1, 32>>>(v);
        cudaStreamSynchronize(0);
    }
    double t1 = now_ms();
    if (cupti) CHECK(cuptiActivityFlushAll(1));
    printf("loop_ms %.3f records %llu dropped %llu\n", t1 - t0, g_records, g_dropped);
    return 0;
}
