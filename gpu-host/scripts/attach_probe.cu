// A CUDA C program with no CUPTI mapped, to attach to: it launches a small kernel and synchronises in a loop for
// argv[1] seconds, then checks the result on the host. Prints `ready PID`, then `launches N result ok|WRONG`.
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <unistd.h>

__global__ void add_one(unsigned *v, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) v[i] += 1;
}

static double now() {
    timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    double seconds = argc > 1 ? atof(argv[1]) : 10.0;
    const int n = 1 << 16;
    unsigned *d = nullptr;
    if (cudaMalloc(&d, n * sizeof(unsigned)) != cudaSuccess) return 1;
    cudaMemset(d, 0, n * sizeof(unsigned));
    add_one<<<n / 256, 256>>>(d, n);
    cudaDeviceSynchronize();
    unsigned long launches = 1;
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    double end = now() + seconds;
    while (now() < end) {
        add_one<<<n / 256, 256>>>(d, n);
        cudaStreamSynchronize(0);
        launches++;
    }
    unsigned *h = (unsigned *)malloc(n * sizeof(unsigned));
    cudaMemcpy(h, d, n * sizeof(unsigned), cudaMemcpyDeviceToHost);
    bool ok = true;
    for (int i = 0; i < n; i++) ok = ok && h[i] == (unsigned)launches;
    printf("launches %lu result %s\n", launches, ok ? "ok" : "WRONG");
    return ok ? 0 : 1;
}
