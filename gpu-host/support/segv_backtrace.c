/* A diagnostic for the GPU host: preloaded into a job (LD_PRELOAD), it prints the native stack of the thread that
 * takes a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) to stderr, with the thread's id and name and the
 * faulting address, then lets the signal kill the process as before. Python's faulthandler, where enabled after it,
 * prints the Python stacks first and then hands the signal on to this handler: it raises it again (tgkill), so the
 * handler gets a signal sent, not a fault (si_code <= 0), whose si_addr holds the sender's pid, not an address. That
 * case is printed as "sent by pid N", and the fault's address is lost (the stack still shows where it was); a job
 * without faulthandler gets the fault itself.
 *
 *   gcc -shared -fPIC -O1 -o segv_backtrace.so gpu-host/support/segv_backtrace.c
 *   LD_PRELOAD=$PWD/segv_backtrace.so python3 -X faulthandler job.py
 *
 * It uses backtrace(3), which is not async-signal-safe in principle (its first call may load libgcc_s): the
 * constructor calls it once so that nothing is loaded inside the handler. A diagnostic, not for production jobs.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static void say(const char *s) { (void)!write(2, s, strlen(s)); }

static void on_fatal(int sig, siginfo_t *info, void *uctx) {
    (void)uctx;
    char line[256];
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    char where[64];
    if (info && info->si_code <= 0)  /* SI_USER, SI_QUEUE, SI_TKILL: raised, not faulted */
        snprintf(where, sizeof where, "sent by pid %d", (int)info->si_pid);
    else
        snprintf(where, sizeof where, "at address %p", info ? info->si_addr : NULL);
    snprintf(line, sizeof line, "\n=== segv_backtrace: signal %d (code %d) %s in thread %ld (%s) of pid %d\n", sig,
             info ? info->si_code : 0, where, (long)syscall(SYS_gettid), name, (int)getpid());
    say(line);
    void *frames[64];
    int n = backtrace(frames, 64);
    backtrace_symbols_fd(frames, n, 2);
    say("=== segv_backtrace: end\n");
    signal(sig, SIG_DFL);
    raise(sig);
}

__attribute__((constructor)) static void install(void) {
    void *warm[2];
    backtrace(warm, 2);
    static char stack[1 << 16];
    stack_t ss = {.ss_sp = stack, .ss_size = sizeof stack, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESETHAND;
    sigemptyset(&sa.sa_mask);
    int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
    for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}
