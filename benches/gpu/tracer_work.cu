// The C workloads of benches/gpu/tracers.sh: a plain CUDA program (no CUPTI of its own), so that every tracer,
// raw CUPTI floor included, is loaded into the same process from outside. Each timed region is the loop alone
// (process start-up, CUDA's initialisation and a warm-up launch are outside it).
//
//   tracer_work sync N       N launches of a one-block kernel, each followed by a stream synchronize
//                            -> `work c_sync ms T launches N`
//   tracer_work flood N      N launches back to back, one synchronize at the end -> `work c_flood ms T launches N`
//   tracer_work steady S     an attach target: floods of 1000 launches and a synchronize for S seconds; prints
//                            `ready PID`, then `progress UNITS SECONDS` (units done, CLOCK_MONOTONIC seconds) every
//                            0.1 s (the clock of the injection library's log lines, which say when an attached
//                            window opened and closed)
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <unistd.h>

__global__ void one(int *v) { v[threadIdx.x] += 1; }

static double now_s() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int check(cudaError_t e, const char *what) {
    if (e != cudaSuccess) {
        fprintf(stderr, "tracer_work: %s: %s\n", what, cudaGetErrorString(e));
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: tracer_work sync|flood N | steady SECONDS\n");
        return 2;
    }
    const char *mode = argv[1];
    double arg = atof(argv[2]);
    int *v = nullptr;
    if (check(cudaMalloc(&v, 32 * sizeof(int)), "cudaMalloc") || check(cudaMemset(v, 0, 32 * sizeof(int)), "cudaMemset"))
        return 1;
    one<<<1, 32>>>(v);
    if (check(cudaDeviceSynchronize(), "warm-up")) return 1;
    if (strcmp(mode, "steady") == 0) {
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        double t0 = now_s(), last = 0;
        long units = 0;
        while (now_s() - t0 < arg) {
            for (int i = 0; i < 1000; i++) one<<<1, 32>>>(v);
            if (check(cudaStreamSynchronize(0), "synchronize")) return 1;
            units++;
            double t = now_s();
            if (t - last >= 0.1) {
                printf("progress %ld %.6f\n", units, t);
                fflush(stdout);
                last = t;
            }
        }
        return 0;
    }
    long n = (long)arg;
    bool sync = strcmp(mode, "sync") == 0;
    if (!sync && strcmp(mode, "flood") != 0) {
        fprintf(stderr, "tracer_work: unknown mode %s\n", mode);
        return 2;
    }
    double t0 = now_s();
    for (long i = 0; i < n; i++) {
        one<<<1, 32>>>(v);
        if (sync) cudaStreamSynchronize(0);
    }
    if (check(cudaDeviceSynchronize(), "synchronize")) return 1;
    double t1 = now_s();
    if (check(cudaGetLastError(), "launch")) return 1;
    printf("work c_%s ms %.3f launches %ld\n", mode, (t1 - t0) * 1e3, n);
    return 0;
}
