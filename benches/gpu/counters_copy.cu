// A copy kernel of known DRAM traffic, for `benches/gpu/counters_accuracy.sh copy`: each launch reads a source of
// MIB mebibytes PASSES times and writes a destination of the same size PASSES times (both far larger than L2, so
// every pass goes to DRAM). Lasting tens of milliseconds on an H100, a launch spans many PM-sampling periods.
//
//   nvcc -O2 -gencode arch=compute_90,code=sm_90 -o /tmp/counters_copy benches/gpu/counters_copy.cu
//   /tmp/counters_copy [MIB] [PASSES] [LAUNCHES]        (defaults 1024 40 5)
//
// Prints `counters_copy launches L bytes_read R bytes_written W ms_per_launch T` (R and W per launch).
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <cuda_runtime.h>

#define CHECK(x)                                                                                  \
    do {                                                                                          \
        cudaError_t e = (x);                                                                      \
        if (e != cudaSuccess) {                                                                   \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e));                               \
            return 1;                                                                             \
        }                                                                                         \
    } while (0)

// Not counted: module load and clocks, under another name than the measured kernel's.
__global__ void warm_up(const float4 *src, float4 *dst, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}

// Pass p writes src + p: the compiler cannot fold passes together, and every pass reads and writes every element.
__global__ void copy_passes(const float4 *src, float4 *dst, size_t n, int passes) {
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (int p = 0; p < passes; p++) {
        for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
            float4 v = src[i];
            v.x += (float)p;
            dst[i] = v;
        }
    }
}

int main(int argc, char **argv) {
    size_t mib = argc > 1 ? strtoull(argv[1], nullptr, 10) : 1024;
    int passes = argc > 2 ? atoi(argv[2]) : 40;
    int launches = argc > 3 ? atoi(argv[3]) : 5;
    size_t bytes = mib << 20;
    size_t n = bytes / sizeof(float4);
    float4 *src, *dst;
    CHECK(cudaMalloc(&src, bytes));
    CHECK(cudaMalloc(&dst, bytes));
    CHECK(cudaMemset(src, 0, bytes));
    CHECK(cudaMemset(dst, 0, bytes));
    int sms = 0;
    CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    warm_up<<<sms * 8, 256>>>(src, dst, n);
    CHECK(cudaDeviceSynchronize());
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    float total_ms = 0;
    for (int l = 0; l < launches; l++) {
        CHECK(cudaEventRecord(a));
        copy_passes<<<sms * 8, 256>>>(src, dst, n, passes);
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        total_ms += ms;
        // An idle stretch between launches, so that each launch's samples are its own.
        struct timespec pause = {0, 20 * 1000 * 1000};
        nanosleep(&pause, nullptr);
    }
    printf("counters_copy launches %d bytes_read %zu bytes_written %zu ms_per_launch %.3f\n", launches,
           bytes * (size_t)passes, bytes * (size_t)passes, total_ms / launches);
    CHECK(cudaFree(src));
    CHECK(cudaFree(dst));
    return 0;
}
