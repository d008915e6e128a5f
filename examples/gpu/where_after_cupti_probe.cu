// Which CUPTI step leaves a running program's driver refusing the CUDA debugger's attach (`gpu-tools where`)?
// The program launches a small kernel in a loop; after its first launches it makes the CUPTI calls of one variant
// (as an attached trace would), then prints `ready PID` and goes on launching for SECONDS. The script
// `where_after_cupti.sh` runs `gpu-tools where` on it and reads whether the driver took the attach.
// Variants: none, dlopen (load CUPTI, read its version), subscribe (callback subscriber on, runtime API domain
// enabled, then unsubscribed), activity (buffer callbacks registered, kernel records on for 200 launches, off,
// forced flush), activity-finalize (activity, then cuptiFinalize), subscribe-finalize.
// Prints `result VARIANT launches N counted C` at the end (C == N: no launch lost).
//
//   nvcc -O2 -o where_after_cupti_probe where_after_cupti_probe.cu -ldl && ./where_after_cupti_probe VARIANT SECONDS
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <unistd.h>

__global__ void increment(unsigned long long *counter) { *counter += 1; }

typedef int (*RegisterFn)(void (*)(uint8_t **, size_t *, size_t *),
                          void (*)(void *, uint32_t, uint8_t *, size_t, size_t));
typedef int (*KindFn)(int);
typedef int (*FlushFn)(uint32_t);
typedef int (*VersionFn)(uint32_t *);
typedef void (*Callback)(void *, int, uint32_t, const void *);
typedef int (*SubscribeFn)(void **, Callback, void *);
typedef int (*UnsubscribeFn)(void *);
typedef int (*EnableDomainFn)(uint32_t, void *, int);
typedef int (*FinalizeFn)(void);

static void request(uint8_t **buffer, size_t *size, size_t *max) {
    *size = 8 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static std::atomic<long> bytes{0};
static void complete(void *, uint32_t, uint8_t *buffer, size_t, size_t valid) {
    bytes += (long)valid;
    free(buffer);
}
static std::atomic<long> callbacks{0};
static void on_api(void *, int, uint32_t, const void *) { callbacks++; }

static void *sym(void *lib, const char *name) {
    void *f = dlsym(lib, name);
    if (!f) { fprintf(stderr, "missing %s\n", name); exit(2); }
    return f;
}
static void check(const char *what, int rc) {
    printf("cupti %s -> %d\n", what, rc);
    if (rc != 0) exit(3);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s VARIANT SECONDS [CUPTI]\n", argv[0]); return 2; }
    const char *variant = argv[1];
    double seconds = atof(argv[2]);
    const char *path = argc > 3 ? argv[3] : "libcupti.so.13";
    unsigned long long *counter, launches = 0;
    cudaMalloc(&counter, sizeof *counter);
    cudaMemset(counter, 0, sizeof *counter);
    auto run = [&](int n) {
        for (int i = 0; i < n; i++) { increment<<<1, 1>>>(counter); launches++; }
        cudaDeviceSynchronize();
    };
    run(100);
    bool activity = !strncmp(variant, "activity", 8), subscribe = !strncmp(variant, "subscribe", 9);
    bool finalize = strstr(variant, "-finalize") != nullptr;
    if (strcmp(variant, "none") != 0) {
        void *cupti = dlopen(path, RTLD_NOW);
        if (!cupti) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
        uint32_t version = 0;
        check("GetVersion", ((VersionFn)sym(cupti, "cuptiGetVersion"))(&version));
        printf("cupti version %u\n", version);
        if (subscribe) {
            void *subscriber = nullptr;
            check("Subscribe", ((SubscribeFn)sym(cupti, "cuptiSubscribe"))(&subscriber, on_api, nullptr));
            check("EnableDomain(runtime)", ((EnableDomainFn)sym(cupti, "cuptiEnableDomain"))(1, subscriber, 1));
            run(200);
            check("Unsubscribe", ((UnsubscribeFn)sym(cupti, "cuptiUnsubscribe"))(subscriber));
            printf("callbacks %ld\n", callbacks.load());
        }
        if (activity) {
            const int KERNEL = 10;
            check("ActivityRegisterCallbacks",
                  ((RegisterFn)sym(cupti, "cuptiActivityRegisterCallbacks"))(request, complete));
            check("ActivityEnable(kernel)", ((KindFn)sym(cupti, "cuptiActivityEnable"))(KERNEL));
            run(200);
            check("ActivityDisable(kernel)", ((KindFn)sym(cupti, "cuptiActivityDisable"))(KERNEL));
            check("ActivityFlushAll(forced)", ((FlushFn)sym(cupti, "cuptiActivityFlushAll"))(1));
            printf("record bytes %ld\n", bytes.load());
        }
        if (finalize) check("Finalize", ((FinalizeFn)sym(cupti, "cuptiFinalize"))());
    }
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) run(100);
    unsigned long long counted = 0;
    cudaMemcpy(&counted, counter, sizeof counted, cudaMemcpyDeviceToHost);
    printf("result %s launches %llu counted %llu\n", variant, launches, counted);
    return counted == launches ? 0 : 1;
}
