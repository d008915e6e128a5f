/* The process the quiesce tests stop. Threads: "spinner" spins inside libquiesce_busy.so, "blocker" waits in a
 * read() made from it, "worker" counts in this program's own code, and the main thread waits for a line on stdin.
 * libquiesce_idle.so (argv[1]) is loaded by a short-lived thread after the others started, so no live stack saw
 * the loader at work on it.
 *
 * Prints "ready MAIN SPINNER BLOCKER WORKER &progress &busy_spins &handled" once every thread is in place; after a
 * line on stdin, releases the threads, joins them and prints "done". Each SIGRTMIN+1 received adds one to
 * `handled` (real-time signals queue: none is merged with another, so a lost one shows).
 *
 * With argv[2] "vfork", a fifth thread "vforker" waits in vfork() for a child that sleeps argv[3] milliseconds:
 * a thread no stop request reaches meanwhile. With argv[2] "libthread", a fifth thread starts in
 * libquiesce_busy.so (`busy_thread`), and its id ends the ready line. With argv[2] "fork", a fifth thread "forker"
 * calls fork() and is held inside it, in a prepare handler registered with pthread_atfork (as a library's handler
 * holds its locks there), until the threads are released; its id ends the ready line. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern volatile unsigned long busy_spins;
void busy_spin(volatile int *release, volatile int *entered);
void busy_block(int fd, volatile int *entered);
void *busy_thread(void *release);
extern volatile long busy_thread_tid;

static volatile int release_all, spin_entered, block_entered, work_started, vfork_started, fork_entered;
static volatile long spinner_tid, blocker_tid, worker_tid, vforker_tid, forker_tid;
static volatile unsigned long progress;
static volatile unsigned long handled;
static int block_pipe[2];
static const char *idle_path;
static long vfork_ms;

static long tid(void) { return syscall(SYS_gettid); }

static void on_signal(int signal) {
    (void)signal;
    handled++;
}

static void *worker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "worker");
    worker_tid = tid();
    work_started = 1;
    while (!release_all)
        progress++;
    return NULL;
}

static void *spinner(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "spinner");
    spinner_tid = tid();
    busy_spin(&release_all, &spin_entered);
    return NULL;
}

static void *blocker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "blocker");
    blocker_tid = tid();
    busy_block(block_pipe[0], &block_entered);
    return NULL;
}

static void *vforker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "vforker");
    vforker_tid = tid();
    vfork_started = 1;
    pid_t child = vfork();
    if (child == 0) {
        struct timespec t = {vfork_ms / 1000, (vfork_ms % 1000) * 1000000L};
        nanosleep(&t, NULL);
        _exit(0);
    }
    while (!release_all)
        usleep(1000);
    return NULL;
}

/* Holds the forking thread inside fork() until the threads are released. */
static void hold_in_fork(void) {
    fork_entered = 1;
    while (!release_all)
        usleep(1000);
}

static void *forker(void *arg) {
    (void)arg;
    pthread_setname_np(pthread_self(), "forker");
    forker_tid = tid();
    pthread_atfork(hold_in_fork, NULL, NULL);
    pid_t child = fork();
    if (child == 0)
        _exit(0);
    if (child > 0)
        waitpid(child, NULL, 0);
    return NULL;
}

static void *loader(void *arg) {
    (void)arg;
    return dlopen(idle_path, RTLD_NOW);
}

/* The state letter of one of this process's threads. */
static char state_of(long t) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", t);
    FILE *f = fopen(path, "r");
    if (!f)
        return '?';
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close = strrchr(buf, ')');
    return close && close[1] && close[2] ? close[2] : '?';
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s LIBIDLE [vfork MS]\n", argv[0]);
        return 2;
    }
    idle_path = argv[1];
    int with_vfork = argc >= 4 && strcmp(argv[2], "vfork") == 0;
    int with_libthread = argc >= 3 && strcmp(argv[2], "libthread") == 0;
    int with_fork = argc >= 3 && strcmp(argv[2], "fork") == 0;
    if (with_vfork)
        vfork_ms = atol(argv[3]);
    if (pipe(block_pipe) != 0)
        return 3;
    struct sigaction action;
    memset(&action, 0, sizeof action);
    action.sa_handler = on_signal;
    action.sa_flags = SA_RESTART;
    sigaction(SIGRTMIN + 1, &action, NULL);
    pthread_t w, s, b, v, l, lt, f;
    pthread_create(&w, NULL, worker, NULL);
    pthread_create(&s, NULL, spinner, NULL);
    pthread_create(&b, NULL, blocker, NULL);
    if (with_vfork)
        pthread_create(&v, NULL, vforker, NULL);
    if (with_libthread)
        pthread_create(&lt, NULL, busy_thread, (void *)&release_all);
    if (with_fork)
        pthread_create(&f, NULL, forker, NULL);
    /* In place: the blocker asleep in its read(), the vforker asleep in vfork(). */
    while (!(work_started && spin_entered && block_entered && state_of(blocker_tid) == 'S' &&
             (!with_vfork || (vfork_started && state_of(vforker_tid) == 'D')) &&
             (!with_libthread || busy_thread_tid != 0) && (!with_fork || fork_entered)))
        usleep(1000);
    void *handle = NULL;
    pthread_create(&l, NULL, loader, NULL);
    pthread_join(l, &handle);
    if (!handle) {
        fprintf(stderr, "dlopen %s: %s\n", idle_path, dlerror());
        return 4;
    }
    printf("ready %d %ld %ld %ld %lx %lx %lx", getpid(), spinner_tid, blocker_tid, worker_tid,
           (unsigned long)&progress, (unsigned long)&busy_spins, (unsigned long)&handled);
    if (with_libthread)
        printf(" %ld", busy_thread_tid);
    if (with_fork)
        printf(" %ld", forker_tid);
    printf("\n");
    fflush(stdout);
    char line[16];
    if (!fgets(line, sizeof line, stdin))
        return 5;
    release_all = 1;
    if (write(block_pipe[1], "x", 1) != 1)
        return 6;
    pthread_join(w, NULL);
    pthread_join(s, NULL);
    pthread_join(b, NULL);
    if (with_vfork)
        pthread_join(v, NULL);
    if (with_libthread)
        pthread_join(lt, NULL);
    if (with_fork)
        pthread_join(f, NULL);
    printf("done\n");
    return 0;
}
