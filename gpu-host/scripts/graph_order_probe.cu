// Does a CUPTI call made while a program replays a CUDA graph break the graph's stream order? The graph holds one
// kernel that increments a counter without atomics, slowly (read, spin, write): two launches that overlap lose an
// increment, so the counter tells how many launches did not wait for the one before. The graph is instantiated and
// launched before CUPTI is loaded, as in a program a tool attaches to. Then, phase by phase, the main thread queues
// LAUNCHES launches without synchronising while a second thread makes one CUPTI call in the middle of them.
// Prints `phase NAME launches N counted C lost L` per phase.
//
//   nvcc -O2 -o graph_order_probe graph_order_probe.cu -ldl && ./graph_order_probe [CUPTI_LIBRARY]
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <thread>

__global__ void slow_increment(unsigned long long *counter) {
    unsigned long long v = *(volatile unsigned long long *)counter;
    long long start = clock64();
    while (clock64() - start < 20000) {
    }
    *(volatile unsigned long long *)counter = v + 1;
}

typedef int (*RegisterFn)(void (*)(uint8_t **, size_t *, size_t *),
                          void (*)(void *, uint32_t, uint8_t *, size_t, size_t));
typedef int (*KindFn)(int);
typedef int (*FlushFn)(uint32_t);

static void request(uint8_t **buffer, size_t *size, size_t *max) {
    *size = 8 << 20;
    *buffer = (uint8_t *)aligned_alloc(8, *size);
    *max = 0;
}
static std::atomic<long> records{0};
static void complete(void *, uint32_t, uint8_t *buffer, size_t, size_t valid) {
    records += (long)valid;
    free(buffer);
}

int main(int argc, char **argv) {
    const char *path = argc > 1 ? argv[1] : "libcupti.so.13";
    const int LAUNCHES = 4000;
    unsigned long long *counter;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    cudaMalloc(&counter, sizeof *counter);
    cudaMemset(counter, 0, sizeof *counter);
    cudaGraph_t g;
    cudaGraphExec_t exec;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    slow_increment<<<1, 1, 0, s>>>(counter);
    cudaStreamEndCapture(s, &g);
    if (cudaGraphInstantiate(&exec, g, 0) != cudaSuccess) return 1;
    for (int i = 0; i < 10; i++) cudaGraphLaunch(exec, s);
    cudaStreamSynchronize(s);

    void *cupti = nullptr;
    RegisterFn reg = nullptr;
    KindFn enable = nullptr, disable = nullptr;
    FlushFn flush = nullptr;
    const int KERNEL = 10, RUNTIME = 5, DRIVER = 6;
    struct Phase {
        const char *name;
        int op;  // 0 nothing, 1 load CUPTI, 2 register, 3 enable kernel, 4 flush forced, 5 disable kernel,
                 // 6 enable runtime+driver, 7 disable runtime+driver, 8 enable kernel again, 9 disable again
    } phases[] = {{"none", 0},          {"dlopen-cupti", 1},  {"register-callbacks", 2},
                  {"enable-kernel", 3}, {"flush-forced", 4},  {"disable-kernel", 5},
                  {"enable-api", 6},    {"disable-api", 7},   {"enable-kernel-2", 8},
                  {"flush-forced-2", 4}, {"disable-kernel-2", 9}, {"none-after", 0}};
    unsigned long long expected = 10;
    for (auto &p : phases) {
        std::atomic<bool> go{false};
        std::thread t([&] {
            while (!go.load()) std::this_thread::yield();
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
            switch (p.op) {
            case 1:
                cupti = dlopen(path, RTLD_NOW);
                if (!cupti) { fprintf(stderr, "dlopen: %s\n", dlerror()); exit(2); }
                reg = (RegisterFn)dlsym(cupti, "cuptiActivityRegisterCallbacks");
                enable = (KindFn)dlsym(cupti, "cuptiActivityEnable");
                disable = (KindFn)dlsym(cupti, "cuptiActivityDisable");
                flush = (FlushFn)dlsym(cupti, "cuptiActivityFlushAll");
                break;
            case 2: printf("  register %d\n", reg(request, complete)); break;
            case 3: case 8: printf("  enable %d\n", enable(KERNEL)); break;
            case 4: printf("  flush %d\n", flush(1)); break;
            case 5: case 9: printf("  disable %d\n", disable(KERNEL)); break;
            case 6: printf("  enable api %d %d\n", enable(RUNTIME), enable(DRIVER)); break;
            case 7: printf("  disable api %d %d\n", disable(RUNTIME), disable(DRIVER)); break;
            }
        });
        go = true;
        for (int i = 0; i < LAUNCHES; i++) cudaGraphLaunch(exec, s);
        t.join();
        cudaError_t e = cudaStreamSynchronize(s);
        expected += LAUNCHES;
        unsigned long long got = 0;
        cudaMemcpy(&got, counter, sizeof got, cudaMemcpyDeviceToHost);
        printf("phase %s launches %d counted %llu lost %lld (%s)\n", p.name, LAUNCHES, got,
               (long long)expected - (long long)got, cudaGetErrorString(e));
        fflush(stdout);
        expected = got;
    }
    if (flush) flush(1);
    printf("records bytes %ld\n", records.load());
    return 0;
}
