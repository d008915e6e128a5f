// Does CUPTI deliver a kernel record for every launch when kernel records are turned on and off again and again in
// a running program, as successive attached traces do? The main thread launches two small kernels in a loop
// (synchronising every 20 launches); a second thread runs CYCLES windows: register the buffer callbacks, enable
// kernel and runtime-API records, wait 1 s, then end the window as ORDER says, and wait 0.3 s. Per window it
// prints the cudaLaunchKernel runtime records and the kernel records CUPTI delivered: equal means no kernel record
// lost (a launch at the window's edges may have one without the other).
// ORDER: disable-flush (disable the kinds, then a forced flush: what the tracer did), flush-disable-flush (a forced
// flush first, then disable, then a forced flush), clock-switch (as disable-flush, with a CLOCK_MONOTONIC timestamp
// callback registered before each window and a CLOCK_REALTIME one after it, as an attached trace that gives the
// program its clock back does), clock-once (the CLOCK_MONOTONIC callback registered once, before the first window),
// periodic-flush (as disable-flush, with a third thread calling cuptiActivityFlushAll(0) every 2 ms during each
// window, as the tracer's periodic flush does), subscribe (as disable-flush, with a callback subscriber holding the
// resource domain during each window, as the tracer's context-flush subscriber does), api-runtime, api-driver,
// api-both (kernel records with runtime, driver or both API records; no launch records are counted for api-driver:
// compare with `launched`, the launches the main thread made in the window), api-both-quiet (as api-both, with the
// launching thread paused between two launches, outside every CUDA call, while the kinds are enabled and disabled).
//
//   nvcc -O2 -o reenable_probe reenable_probe.cu -ldl && ./reenable_probe ORDER CYCLES [CUPTI_LIBRARY]
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <thread>
#include <time.h>

__global__ void add_one(float *x) { x[threadIdx.x] += 1.0f; }
__global__ void scale(float *x) { x[threadIdx.x] *= 0.5f; }

typedef int (*RegisterFn)(void (*)(uint8_t **, size_t *, size_t *),
                          void (*)(void *, uint32_t, uint8_t *, size_t, size_t));
typedef int (*KindFn)(int);
typedef int (*FlushFn)(uint32_t);
typedef int (*NextFn)(uint8_t *, size_t, void **);
typedef int (*DroppedFn)(void *, uint32_t, size_t *);
typedef void (*Callback)(void *, int, uint32_t, const void *);
typedef int (*SubscribeFn)(void **, Callback, void *);
typedef int (*UnsubscribeFn)(void *);
typedef int (*EnableDomainFn)(uint32_t, void *, int);
static void on_callback(void *, int, uint32_t, const void *) {}
typedef uint64_t (*TimestampFn)(void);
typedef int (*RegisterTimestampFn)(TimestampFn);

static uint64_t clock_ns(clockid_t id) {
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}
static uint64_t monotonic_source(void) { return clock_ns(CLOCK_MONOTONIC); }
static uint64_t realtime_source(void) { return clock_ns(CLOCK_REALTIME); }

static NextFn next_record;
static std::atomic<long> kernels{0}, launches{0}, others{0}, launched{0};
static std::atomic<bool> pause_request{false}, paused{false};
static void request(uint8_t **buffer, size_t *size, size_t *max) {
    *size = 8 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static void complete(void *, uint32_t, uint8_t *buffer, size_t, size_t valid) {
    void *record = nullptr;
    while (valid > 0 && next_record(buffer, valid, &record) == 0) {
        uint32_t kind = *(uint32_t *)record;
        if (kind == 10) kernels++;
        else if (kind == 5 && ((uint32_t *)record)[1] == 211) launches++;  // cudaLaunchKernel_v7000
        else others++;
    }
    free(buffer);
}

int main(int argc, char **argv) {
    if (argc < 3) { fprintf(stderr, "usage: %s ORDER CYCLES [CUPTI]\n", argv[0]); return 2; }
    const char *order = argv[1];
    int cycles = atoi(argv[2]);
    const char *path = argc > 3 ? argv[3] : "libcupti.so.13";
    float *x;
    cudaMalloc(&x, 256 * sizeof(float));
    cudaMemset(x, 0, 256 * sizeof(float));
    std::atomic<bool> stop{false};
    std::thread worker([&] {
        while (!stop.load()) {
            for (int i = 0; i < 10; i++) { add_one<<<1, 256>>>(x); scale<<<1, 256>>>(x); }
            launched += 20;
            cudaDeviceSynchronize();
            if (pause_request.load()) {
                paused = true;
                while (pause_request.load()) std::this_thread::yield();
                paused = false;
            }
        }
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    void *cupti = dlopen(path, RTLD_NOW);
    if (!cupti) { fprintf(stderr, "dlopen: %s\n", dlerror()); return 2; }
    auto reg = (RegisterFn)dlsym(cupti, "cuptiActivityRegisterCallbacks");
    auto enable = (KindFn)dlsym(cupti, "cuptiActivityEnable");
    auto disable = (KindFn)dlsym(cupti, "cuptiActivityDisable");
    auto flush = (FlushFn)dlsym(cupti, "cuptiActivityFlushAll");
    auto dropped = (DroppedFn)dlsym(cupti, "cuptiActivityGetNumDroppedRecords");
    next_record = (NextFn)dlsym(cupti, "cuptiActivityGetNextRecord");
    auto register_timestamp = (RegisterTimestampFn)dlsym(cupti, "cuptiActivityRegisterTimestampCallback");
    bool clock_switch = !strcmp(order, "clock-switch");
    bool periodic = !strcmp(order, "periodic-flush"), subscribe = !strcmp(order, "subscribe");
    auto subscribe_fn = (SubscribeFn)dlsym(cupti, "cuptiSubscribe");
    auto unsubscribe_fn = (UnsubscribeFn)dlsym(cupti, "cuptiUnsubscribe");
    auto enable_domain = (EnableDomainFn)dlsym(cupti, "cuptiEnableDomain");
    if (!strcmp(order, "clock-once")) register_timestamp(monotonic_source);
    const int KERNEL = 10, RUNTIME = 5, DRIVER = 6;
    bool api = !strncmp(order, "api-", 4), quiet = strstr(order, "-quiet") != nullptr;
    bool runtime = !api || !strncmp(order, "api-runtime", 11) || !strncmp(order, "api-both", 8);
    bool driver = !strncmp(order, "api-driver", 10) || !strncmp(order, "api-both", 8);
    auto pause = [&](bool on) {
        if (!quiet) return;
        pause_request = on;
        while (on && !paused.load()) std::this_thread::yield();
    };
    for (int c = 1; c <= cycles; c++) {
        kernels = 0; launches = 0; others = 0;
        if (clock_switch) register_timestamp(monotonic_source);
        reg(request, complete);
        pause(true);
        long launched_before = launched.load();
        enable(KERNEL);
        if (runtime) enable(RUNTIME);
        if (driver) enable(DRIVER);
        pause(false);
        void *subscriber = nullptr;
        if (subscribe && subscribe_fn(&subscriber, on_callback, nullptr) == 0)
            enable_domain(3, subscriber, 1);  // CUPTI_CB_DOMAIN_RESOURCE
        std::atomic<bool> window{true};
        std::thread flusher([&] {
            while (periodic && window.load()) {
                flush(0);
                std::this_thread::sleep_for(std::chrono::milliseconds(2));
            }
        });
        std::this_thread::sleep_for(std::chrono::seconds(1));
        window = false;
        flusher.join();
        if (subscriber) unsubscribe_fn(subscriber);
        if (!strcmp(order, "flush-disable-flush")) flush(1);
        pause(true);
        if (runtime) disable(RUNTIME);
        if (driver) disable(DRIVER);
        disable(KERNEL);
        long in_window = launched.load() - launched_before;
        pause(false);
        flush(1);
        if (clock_switch) register_timestamp(realtime_source);
        size_t lost = 0;
        dropped(nullptr, 0, &lost);
        long expected = runtime ? launches.load() : in_window;
        printf("window %d order %s launch-records %ld launched %ld kernel-records %ld other %ld dropped %zu %s\n", c,
               order, launches.load(), in_window, kernels.load(), others.load(), lost,
               expected - kernels.load() > 40 ? "KERNELS-MISSING" : "ok");
        fflush(stdout);
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    stop = true;
    worker.join();
    return 0;
}
