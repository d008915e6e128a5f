// The hung-kernel job of the attach survival matrix: steps of small kernels on a stream of its own; while the file
// HANG_FILE exists at a step's start, the step launches a kernel that spins on a host-mapped flag and waits for it
// in cudaStreamSynchronize (the main thread inside the driver, as a job hung in a collective or a bad kernel). A
// thread of the job releases the flag once RELEASE_FILE exists (or after HANG_LIMIT seconds), and removes both
// files. The result depends on the step count alone (the spinning kernel writes nothing the result reads).
//
// With --seconds it ends at that time at the latest, sooner once the file STOP_FILE names exists.
// Prints `ready PID`, `progress STEP`, `hung STEP` when a hang begins and `released STEP MS` when it ends, then
// `result COUNTER steps N hangs H`.
//
//   nvcc -O2 -o hung_job hung_job.cu -lpthread
//   HANG_FILE=/tmp/h RELEASE_FILE=/tmp/r ./hung_job --seconds S     (or --steps N)
#include <cuda_runtime.h>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <unistd.h>

__global__ void wait_flag(volatile int *flag) {
    while (*flag == 0) {}
}
__global__ void step_kernel(unsigned long long *counter, int step) { atomicAdd(counter, (unsigned long long)(step % 7 + 1)); }

static bool exists(const char *p) { return p && *p && access(p, F_OK) == 0; }

int main(int argc, char **argv) {
    long steps = 0;
    double seconds = 0;
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--steps")) steps = atol(argv[i + 1]);
        if (!strcmp(argv[i], "--seconds")) seconds = atof(argv[i + 1]);
    }
    if (!steps && seconds <= 0) { fprintf(stderr, "usage: %s --seconds S | --steps N\n", argv[0]); return 2; }
    const char *hang_file = getenv("HANG_FILE"), *release_file = getenv("RELEASE_FILE");
    double limit = getenv("HANG_LIMIT") ? atof(getenv("HANG_LIMIT")) : 60.0;
    int *flag, *dflag;
    unsigned long long *counter;
    if (cudaHostAlloc((void **)&flag, sizeof(int), cudaHostAllocMapped) != cudaSuccess) return 3;
    cudaHostGetDevicePointer((void **)&dflag, flag, 0);
    cudaMalloc((void **)&counter, 8);
    cudaMemset(counter, 0, 8);
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    step_kernel<<<1, 32, 0, s>>>(counter, 0);
    cudaStreamSynchronize(s);
    printf("ready %d\n", getpid());
    fflush(stdout);
    auto t0 = std::chrono::steady_clock::now(), last = t0;
    long i = 0;
    int hangs = 0;
    for (;; i++) {
        if (steps && i >= steps) break;
        auto now = std::chrono::steady_clock::now();
        if (!steps && i % 50 == 0 &&
            (std::chrono::duration<double>(now - t0).count() >= seconds || exists(getenv("STOP_FILE"))))
            break;
        if (std::chrono::duration<double>(now - last).count() >= 0.5) {
            printf("progress %ld\n", i);
            fflush(stdout);
            last = now;
        }
        if (exists(hang_file)) {
            *(volatile int *)flag = 0;
            std::atomic<bool> done{false};
            auto began = std::chrono::steady_clock::now();
            std::thread releaser([&] {
                while (!done) {
                    double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
                    if (exists(release_file) || waited > limit) {
                        *(volatile int *)flag = 1;
                        return;
                    }
                    usleep(20000);
                }
            });
            printf("hung %ld\n", i);
            fflush(stdout);
            wait_flag<<<1, 1, 0, s>>>(dflag);
            cudaError_t e = cudaStreamSynchronize(s);
            done = true;
            releaser.join();
            unlink(hang_file);
            if (release_file) unlink(release_file);
            hangs++;
            printf("released %ld %.0f %s\n", i,
                   std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - began).count(),
                   e == cudaSuccess ? "ok" : cudaGetErrorString(e));
            fflush(stdout);
        }
        for (int k = 0; k < 8; k++) step_kernel<<<1, 32, 0, s>>>(counter, (int)(i + k));
        if (i % 16 == 15) cudaStreamSynchronize(s);
    }
    cudaStreamSynchronize(s);
    unsigned long long h = 0;
    cudaMemcpy(&h, counter, 8, cudaMemcpyDeviceToHost);
    cudaError_t e = cudaGetLastError();
    printf("result %llu steps %ld\n", h, i);
    fprintf(stderr, "hangs %d last error %s\n", hangs, cudaGetErrorString(e));
    return e == cudaSuccess ? 0 : 1;
}
