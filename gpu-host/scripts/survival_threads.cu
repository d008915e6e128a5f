// A multi-threaded CUDA C++ job for the attach survival matrix: four host threads, each launching on a stream of
// its own for argv[1] seconds at most (sooner once the file STOP_FILE names exists) (thread 0 replays a CUDA graph it captured at the start instead of launching kernels
// one by one). Prints `ready PID` once every thread ran its first iteration (or failed to set up), then
// `result ok|WRONG`: every buffer is checked on the host against the count of its thread's launches.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>
#include <unistd.h>
#include <vector>

__global__ void add(unsigned *v, int n, unsigned by) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] += by;
}

static const int N = 1 << 15;
static std::atomic<int> started{0};

static bool check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    return e == cudaSuccess;
}

static void worker(int id, double seconds, unsigned *out, bool *ok) {
    cudaStream_t s;
    unsigned *d;
    *ok = check(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking), "stream") &&
          check(cudaMalloc(&d, N * sizeof(unsigned)), "malloc") &&
          check(cudaMemsetAsync(d, 0, N * sizeof(unsigned), s), "memset");
    if (!*ok) {
        started++;
        return;
    }
    cudaGraphExec_t exec = nullptr;
    if (id == 0) {
        // Three kernels in one graph: each replay adds 1 + 2 + 3.
        cudaGraph_t g;
        check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "capture");
        for (unsigned by = 1; by <= 3; by++) add<<<N / 256, 256, 0, s>>>(d, N, by);
        check(cudaStreamEndCapture(s, &g), "end capture");
        *ok = check(cudaGraphInstantiate(&exec, g, 0), "instantiate");
        cudaGraphDestroy(g);
        if (!*ok) {
            started++;
            return;
        }
    }
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    long iterations = 0, failed = 0;
    cudaError_t first_error = cudaSuccess;
    for (;;) {
        cudaError_t e;
        if (exec) {
            e = cudaGraphLaunch(exec, s);
        } else {
            add<<<N / 256, 256, 0, s>>>(d, N, 1);
            e = cudaGetLastError();
        }
        // A launch the runtime refused: counted apart (work lost that way is not a wrong value).
        if (e != cudaSuccess) {
            if (failed++ == 0) first_error = e;
        } else if (++iterations == 1) {
            started++;
        }
        if ((iterations + failed) % 64 == 0) {
            cudaStreamSynchronize(s);
            if (std::chrono::steady_clock::now() >= end) break;
            const char *stop = getenv("STOP_FILE");
            if ((iterations + failed) % 4096 == 0 && stop && *stop && access(stop, F_OK) == 0) break;
        }
    }
    cudaStreamSynchronize(s);
    if (failed)
        fprintf(stderr, "thread %d: %ld launches refused, the first with %s\n", id, failed,
                cudaGetErrorString(first_error));
    std::vector<unsigned> h(N);
    *ok = check(cudaMemcpy(h.data(), d, N * sizeof(unsigned), cudaMemcpyDeviceToHost), "copy");
    unsigned want = (unsigned)(iterations * (exec ? 6 : 1));
    int wrong = 0, first = -1;
    for (int i = 0; i < N; i++)
        if (h[i] != want) {
            wrong++;
            if (first < 0) first = i;
        }
    // Which thread, and how far off: short by whole launches (work lost), over (work run twice), or scattered.
    if (wrong)
        fprintf(stderr, "thread %d (%s): %d of %d values wrong, first [%d] = %u where %u (%ld launches)\n", id,
                exec ? "graph" : "kernels", wrong, N, first, h[first], want, iterations);
    *ok = *ok && wrong == 0 && failed == 0;
    *out = h[0];
    if (exec) cudaGraphExecDestroy(exec);
    cudaFree(d);
    cudaStreamDestroy(s);
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 30.0;
    const int threads = 4;
    cudaFree(nullptr);
    std::vector<std::thread> pool;
    unsigned out[threads] = {};
    bool ok[threads] = {};
    for (int t = 0; t < threads; t++) pool.emplace_back(worker, t, seconds, &out[t], &ok[t]);
    while (started.load() < threads) usleep(1000);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    for (auto &t : pool) t.join();
    bool all = true;
    for (int t = 0; t < threads; t++) all = all && ok[t] && out[t] > 0;
    printf("result %s\n", all ? "ok" : "WRONG");
    return all ? 0 : 1;
}
