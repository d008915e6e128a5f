/* A plain C program for the injection tests: it allocates, frees and sleeps in a loop (so that a thread may be
 * stopped inside malloc), runs a second thread, and prints a checksum at the end, which must not change when a
 * library is loaded into it meanwhile. argv[1]: iterations of about a millisecond each. With TARGET_LIBC_AS_DATA
 * set, it first maps its C library's file whole, read-only, below where the loader put it, as a symbolizer
 * printing a backtrace does. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static volatile unsigned long worker_sum;

static void *worker(void *arg) {
    (void)arg;
    for (unsigned long i = 0; i < 2000; i++) {
        char *p = malloc(64 + (i % 512));
        memset(p, (int)i, 64);
        worker_sum += (unsigned char)p[7];
        free(p);
        usleep(500);
    }
    return NULL;
}

/* Maps the file of the C library whole, read-only, below its loaded image. Returns 0, or -1. */
static int map_libc_as_data(void) {
    Dl_info info;
    if (!dladdr((void *)printf, &info) || !info.dli_fname) return -1;
    int fd = open(info.dli_fname, O_RDONLY);
    if (fd < 0) return -1;
    struct stat st;
    if (fstat(fd, &st) != 0) return -1;
    for (unsigned long below = 1ul << 28; below < (1ul << 40); below <<= 1) {
        unsigned long at = ((unsigned long)info.dli_fbase - below) & ~0xffffful;
        void *p = mmap((void *)at, (size_t)st.st_size, PROT_READ, MAP_PRIVATE | MAP_FIXED_NOREPLACE, fd, 0);
        if (p == (void *)at) return 0;
        if (p != MAP_FAILED) munmap(p, (size_t)st.st_size);
    }
    return -1;
}

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
    if (getenv("TARGET_LIBC_AS_DATA") && map_libc_as_data() != 0) {
        printf("could not map libc as data\n");
        return 2;
    }
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    printf("ready %d\n", (int)getpid());
    fflush(stdout);
    unsigned long sum = 0;
    for (long i = 0; i < iterations; i++) {
        char *p = malloc(16 + (size_t)(i % 4096));
        p[0] = (char)i;
        sum += (unsigned char)p[0];
        free(p);
        usleep(1000);
    }
    pthread_join(t, NULL);
    printf("sum %lu\n", sum);
    return 0;
}
