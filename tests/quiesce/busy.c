/* libquiesce_busy.so: code the quiesce tests find threads inside of. One function spins in this library, one
 * waits in a system call made from it (so only its stack shows it is here); both until released. `busy_thread`
 * is a thread's start routine, as a vendor library's worker threads have theirs in the library. */
#define _GNU_SOURCE
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Incremented by busy_spin: it stops growing while the spinning thread is stopped. */
volatile unsigned long busy_spins;

void busy_spin(volatile int *release, volatile int *entered) {
    *entered = 1;
    while (!*release)
        busy_spins++;
}

void busy_block(int fd, volatile int *entered) {
    char c;
    *entered = 1;
    while (read(fd, &c, 1) < 0) {
    }
}

/* The id of the thread `busy_thread` runs in, once it runs. */
volatile long busy_thread_tid;

/* A thread this library starts (`release`: an int that ends it when set); it sleeps in the C library meanwhile. */
void *busy_thread(void *release) {
    pthread_setname_np(pthread_self(), "libthread");
    busy_thread_tid = syscall(SYS_gettid);
    while (!*(volatile int *)release)
        usleep(1000);
    return NULL;
}
