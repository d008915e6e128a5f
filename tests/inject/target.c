/* A plain C program for the injection tests: it allocates, frees and sleeps in a loop (so that a thread may be
 * stopped inside malloc), runs a second thread, and prints a checksum at the end, which must not change when a
 * library is loaded into it meanwhile. argv[1]: iterations of about a millisecond each. */
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

int main(int argc, char **argv) {
    long iterations = argc > 1 ? atol(argv[1]) : 1000;
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
