/* CI's check of the raw CUPTI floor (cupti_floor.c) without a GPU: the CUPTI double of gpu-tools-testing stands in
 * for CUPTI, the floor starts as CUDA would start it (InitializeInjection), the double writes RECORDS kernel
 * records into the buffers the floor lends, and the program exits: the floor's exit handler flushes and reports
 * (CUPTI_FLOOR_REPORT), which .ci/run checks. Run under valgrind there. With CUPTI_FLOOR_ZEROED=1 it also fails
 * when the double took a buffer that was not zeroed (the floor promised zeroed buffers then).
 *
 *   cupti_floor_check CUPTI_DOUBLE FLOOR_LIBRARY RECORDS */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef int (*init_fn)(void);
typedef int (*kernel_fn)(uint32_t kind, uint64_t start, uint64_t end, uint32_t device, uint32_t context,
                         uint32_t stream, uint32_t correlation, const char *name, int32_t grid_x, int32_t grid_y,
                         int32_t grid_z, int32_t block_x, int32_t block_y, int32_t block_z);

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: cupti_floor_check CUPTI_DOUBLE FLOOR_LIBRARY RECORDS\n");
        return 2;
    }
    void *cupti = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    void *floor = cupti ? dlopen(argv[2], RTLD_NOW) : NULL;
    if (!floor) {
        fprintf(stderr, "cupti_floor_check: %s\n", dlerror());
        return 1;
    }
    init_fn init = (init_fn)dlsym(floor, "InitializeInjection");
    kernel_fn kernel = (kernel_fn)dlsym(cupti, "cd_kernel");
    if (!init || !kernel || init() != 1) {
        fprintf(stderr, "cupti_floor_check: the floor did not start\n");
        return 1;
    }
    long n = atol(argv[3]);
    for (long i = 0; i < n; i++)
        /* 1: written; 0: dropped for want of a buffer; -1: the kind is not enabled. */
        if (kernel(10, 1000 + (uint64_t)i, 1500 + (uint64_t)i, 0, 1, 7, (uint32_t)i, "step", 1, 1, 1, 32, 1, 1) != 1) {
            fprintf(stderr, "cupti_floor_check: record %ld not written\n", i);
            return 1;
        }
    if (getenv("CUPTI_FLOOR_ZEROED")) {
        typedef uint64_t (*count_fn)(void);
        count_fn unzeroed = (count_fn)dlsym(cupti, "cd_unzeroed_buffers");
        uint64_t n = unzeroed ? unzeroed() : 1;
        if (n != 0) {
            fprintf(stderr, "cupti_floor_check: %llu buffers lent after the zeroed-buffer promise were not zeroed\n",
                    (unsigned long long)n);
            return 1;
        }
    }
    return 0;
}
