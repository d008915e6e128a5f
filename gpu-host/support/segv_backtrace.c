/* A diagnostic for the GPU host: preloaded into a job (LD_PRELOAD), it prints the native stack of the thread that
 * takes a fatal signal (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT) to stderr, with the thread's id and name and the
 * faulting address, then lets the signal kill the process as before.
 *
 *   gcc -shared -fPIC -O1 -o segv_backtrace.so gpu-host/support/segv_backtrace.c     (-ldl before glibc 2.34)
 *   LD_PRELOAD=$PWD/segv_backtrace.so python3 -X faulthandler job.py
 *
 * A handler the program installs later for one of these signals (Python's faulthandler does) does not replace this
 * one: `sigaction` is interposed, the program's handler is kept and called after this one has printed, and the
 * program is told its handler is installed. So the first fault itself is seen here, with its address. (Without
 * that, faulthandler took the fault first and raised it again with tgkill, and this handler saw a signal sent, not
 * a fault: si_code <= 0, si_addr holding the sender's pid. The "addresses" 0x1fd, 0x24a, 0x235 and 0x24b of four
 * crashes were the jobs' pids.) A signal sent, not faulted, is printed as "sent by pid N".
 *
 * It uses backtrace(3), which is not async-signal-safe in principle (its first call may load libgcc_s): the
 * constructor calls it once so that nothing is loaded inside the handler. A diagnostic, not for production jobs: a
 * program that recovers from these signals in its own handler (a JVM) is ended by the first one all the same.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

static const int fatal[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
static int installed;
/* The program's own handlers for the fatal signals, called after this one's print. */
static struct sigaction theirs[NSIG];
static int have_theirs[NSIG];

static int is_fatal(int sig) {
    for (unsigned i = 0; i < sizeof fatal / sizeof fatal[0]; i++)
        if (fatal[i] == sig) return 1;
    return 0;
}

static int (*real_sigaction(void))(int, const struct sigaction *, struct sigaction *) {
    static int (*real)(int, const struct sigaction *, struct sigaction *);
    if (!real) real = (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(RTLD_NEXT, "sigaction");
    return real;
}

static void say(const char *s) { (void)!write(2, s, strlen(s)); }

static void on_fatal(int sig, siginfo_t *info, void *uctx) {
    char line[256], where[64];
    char name[17] = {0};
    prctl(PR_GET_NAME, name, 0, 0, 0);
    if (info && info->si_code <= 0) /* SI_USER, SI_QUEUE, SI_TKILL: raised, not faulted */
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
    /* The disposition is the default again (SA_RESETHAND): a handler of the program's that raises the signal again,
     * as faulthandler does once it has printed, ends the process with it. */
    if (sig > 0 && sig < NSIG && have_theirs[sig]) {
        struct sigaction t = theirs[sig];
        if (t.sa_flags & SA_SIGINFO) {
            if (t.sa_sigaction) t.sa_sigaction(sig, info, uctx);
        } else if (t.sa_handler != SIG_DFL && t.sa_handler != SIG_IGN) {
            t.sa_handler(sig);
        }
    }
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Keeps this handler in place for the fatal signals: the program's is kept to be called after it, and the program
 * is answered as if its handler were installed (the old action it is given is its own last one, or this). */
int sigaction(int sig, const struct sigaction *act, struct sigaction *old) {
    int (*real)(int, const struct sigaction *, struct sigaction *) = real_sigaction();
    if (!real) return -1;
    if (!installed || sig <= 0 || sig >= NSIG || !is_fatal(sig)) return real(sig, act, old);
    struct sigaction current;
    if (real(sig, NULL, &current) != 0) return -1;
    int ours = (current.sa_flags & SA_SIGINFO) && current.sa_sigaction == on_fatal;
    if (!ours) return real(sig, act, old); /* this handler already ran (reset) or was replaced otherwise */
    if (old) *old = have_theirs[sig] ? theirs[sig] : current;
    if (act) {
        if ((act->sa_flags & SA_SIGINFO) && act->sa_sigaction == on_fatal) {
            have_theirs[sig] = 0; /* the program puts back what it was given: this handler alone */
        } else {
            theirs[sig] = *act;
            have_theirs[sig] = 1;
        }
    }
    return 0;
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
    int (*real)(int, const struct sigaction *, struct sigaction *) = real_sigaction();
    if (!real) return;
    for (unsigned i = 0; i < sizeof fatal / sizeof fatal[0]; i++) real(fatal[i], &sa, NULL);
    installed = 1;
}
