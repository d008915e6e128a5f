/* The CUDA driver double (cuda_driver.c) plus the process-checkpoint calls of CUDA 12.8 and later drivers, on a
 * table of simulated processes, and cuDeviceGetUuid_v2. cuda_driver.c itself lacks both, as an older driver does.
 *
 * Tests register a pid (of a real child process, so that /proc agrees) with dbl_proc_add. The answers follow
 * what driver 580 was seen to give: an unknown pid is CUDA_ERROR_OPERATING_SYSTEM, a process without CUDA
 * CUDA_ERROR_NOT_INITIALIZED, a call in the wrong state CUDA_ERROR_ILLEGAL_STATE, and restore needs cuInit in
 * the caller (the header: unless persistence mode is on). A lock of a "busy" process times out with
 * CUDA_ERROR_NOT_READY, as the header documents. */
#define cuGetErrorName base_cuGetErrorName
#define cuGetErrorString base_cuGetErrorString
#include "cuda_driver.c"
#undef cuGetErrorName
#undef cuGetErrorString

#include <stdio.h>
#include <time.h>

enum {
    OPERATING_SYSTEM = 304,
    ILLEGAL_STATE = 401,
    NOT_READY = 600,
};

enum { RUNNING = 0, LOCKED = 1, CHECKPOINTED = 2, FAILED = 3 };

/* How a simulated process behaves. */
enum {
    PROC_CUDA = 0,
    PROC_NOT_CUDA = 1,
    PROC_BUSY = 2,          /* every lock times out */
    PROC_FAILS_CHECKPOINT = 3, /* checkpoint fails and leaves the process FAILED */
    PROC_FAILS_RESTORE_ONCE = 4, /* the first restore fails with out-of-memory, the process stays CHECKPOINTED */
    PROC_RAN_CUPTI = 5,     /* CUPTI has run in it: every lock is CUDA_ERROR_NOT_SUPPORTED (driver 580 on an H200) */
};

struct dbl_proc_info {
    unsigned state;
    unsigned last_timeout_ms;
    unsigned last_pairs;
    unsigned restores;
    size_t device_bytes;
    size_t host_bytes;
};

struct dbl_proc {
    int pid;
    int kind;
    struct dbl_proc_info info;
};

#define DBL_MAX_PROCS 64
static struct dbl_proc g_procs[DBL_MAX_PROCS];
static pthread_mutex_t g_plock = PTHREAD_MUTEX_INITIALIZER;
static unsigned long g_ckpt_calls;
static const unsigned char g_uuid[16] = {0x6e, 0x76, 0x2d, 0x64, 0x62, 0x6c, 0x00, 0x01,
                                         0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09};

static const char *extra_name(CUresult r) {
    switch (r) {
    case OPERATING_SYSTEM: return "CUDA_ERROR_OPERATING_SYSTEM";
    case ILLEGAL_STATE: return "CUDA_ERROR_ILLEGAL_STATE";
    case NOT_READY: return "CUDA_ERROR_NOT_READY";
    default: return NULL;
    }
}

CUresult cuGetErrorName(CUresult r, const char **s) {
    if (s && extra_name(r)) {
        *s = extra_name(r);
        return OK;
    }
    return base_cuGetErrorName(r, s);
}

CUresult cuGetErrorString(CUresult r, const char **s) {
    if (s && extra_name(r)) {
        *s = "test double error";
        return OK;
    }
    return base_cuGetErrorString(r, s);
}

CUresult cuDeviceGetUuid_v2(unsigned char *uuid, CUdevice d) {
    NEED_INIT();
    if (!uuid) return INVALID_VALUE;
    if (d != 0) return INVALID_DEVICE;
    memcpy(uuid, g_uuid, 16);
    return OK;
}

/* Test hooks. */
int dbl_proc_add(int pid, int kind, size_t bytes) {
    pthread_mutex_lock(&g_plock);
    int r = -1;
    for (int i = 0; i < DBL_MAX_PROCS; i++) {
        if (g_procs[i].pid == 0) {
            memset(&g_procs[i], 0, sizeof g_procs[i]);
            g_procs[i].pid = pid;
            g_procs[i].kind = kind;
            g_procs[i].info.device_bytes = bytes;
            r = 0;
            break;
        }
    }
    pthread_mutex_unlock(&g_plock);
    return r;
}

static struct dbl_proc *find(int pid) {
    for (int i = 0; i < DBL_MAX_PROCS; i++)
        if (pid > 0 && g_procs[i].pid == pid) return &g_procs[i];
    return NULL;
}

/* Forgets a process, as the driver does once it exited. */
int dbl_proc_remove(int pid) {
    pthread_mutex_lock(&g_plock);
    struct dbl_proc *p = find(pid);
    if (p) p->pid = 0;
    pthread_mutex_unlock(&g_plock);
    return p ? 0 : -1;
}

/* Another actor changes the state (as a second tool on the same process would). */
int dbl_proc_set_state(int pid, unsigned state) {
    pthread_mutex_lock(&g_plock);
    struct dbl_proc *p = find(pid);
    if (p) p->info.state = state;
    pthread_mutex_unlock(&g_plock);
    return p ? 0 : -1;
}

int dbl_proc_set_kind(int pid, int kind) {
    pthread_mutex_lock(&g_plock);
    struct dbl_proc *p = find(pid);
    if (p) p->kind = kind;
    pthread_mutex_unlock(&g_plock);
    return p ? 0 : -1;
}

int dbl_proc_info(int pid, struct dbl_proc_info *out) {
    pthread_mutex_lock(&g_plock);
    struct dbl_proc *p = find(pid);
    if (p && out) *out = p->info;
    pthread_mutex_unlock(&g_plock);
    return p ? 0 : -1;
}

/* Number of cuCheckpointProcess* calls so far (unsigned long: 64 bits on the x86-64 Linux the tests run on). */
unsigned long dbl_proc_calls(void) {
    pthread_mutex_lock(&g_plock);
    unsigned long n = g_ckpt_calls;
    pthread_mutex_unlock(&g_plock);
    return n;
}

static int all_zero(const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        if (b[i]) return 0;
    return 1;
}

/* Processes named in GPU_TOOLS_DBL_PROCS ("pid:kind:bytes,..."), registered at the first call: a program that
 * loads the double (an example run by a test) sees the same table as the test. Called with g_plock held. */
static void register_from_env(void) {
    static int done;
    if (done) return;
    done = 1;
    const char *spec = getenv("GPU_TOOLS_DBL_PROCS");
    while (spec && *spec) {
        int pid = 0, kind = 0;
        unsigned long long bytes = 0;
        int used = 0;
        if (sscanf(spec, "%d:%d:%llu%n", &pid, &kind, &bytes, &used) != 3) break;
        for (int i = 0; i < DBL_MAX_PROCS; i++) {
            if (g_procs[i].pid == 0) {
                g_procs[i].pid = pid;
                g_procs[i].kind = kind;
                g_procs[i].info.device_bytes = (size_t)bytes;
                break;
            }
        }
        spec += used;
        if (*spec == ',') spec++;
    }
}

/* Looks the process up under the lock and counts the call; returns its status code. */
static CUresult enter(int pid, struct dbl_proc **out) {
    pthread_mutex_lock(&g_plock);
    register_from_env();
    g_ckpt_calls++;
    struct dbl_proc *p = find(pid);
    if (!p) return OPERATING_SYSTEM;
    if (p->kind == PROC_NOT_CUDA) return NOT_INITIALIZED;
    *out = p;
    return OK;
}

#define ENTER(pid, p) \
    struct dbl_proc *p = NULL; \
    CUresult r_ = enter(pid, &p); \
    if (r_ != OK) { \
        pthread_mutex_unlock(&g_plock); \
        return r_; \
    }
#define LEAVE(r) \
    do { \
        pthread_mutex_unlock(&g_plock); \
        return (r); \
    } while (0)

struct lock_args { unsigned timeoutMs; unsigned reserved0; unsigned long long reserved1[7]; };
struct plain_args { unsigned long long reserved[8]; };
struct gpu_pair { unsigned char old_uuid[16]; unsigned char new_uuid[16]; };
struct restore_args { struct gpu_pair *pairs; unsigned count; char reserved[52 - sizeof(void *)]; unsigned long long reserved1; };

_Static_assert(sizeof(struct lock_args) == 64, "CUcheckpointLockArgs");
_Static_assert(sizeof(struct plain_args) == 64, "CUcheckpoint{Checkpoint,Unlock}Args");
_Static_assert(sizeof(struct restore_args) == 64, "CUcheckpointRestoreArgs");

CUresult cuCheckpointProcessGetState(int pid, unsigned *state) {
    if (!state) return INVALID_VALUE;
    ENTER(pid, p);
    *state = p->info.state;
    LEAVE(OK);
}

CUresult cuCheckpointProcessGetRestoreThreadId(int pid, int *tid) {
    if (!tid) return INVALID_VALUE;
    ENTER(pid, p);
    *tid = pid + 2;
    LEAVE(OK);
}

CUresult cuCheckpointProcessLock(int pid, struct lock_args *args) {
    if (args && (args->reserved0 || !all_zero(args->reserved1, sizeof args->reserved1))) return INVALID_VALUE;
    ENTER(pid, p);
    if (p->info.state != RUNNING) LEAVE(ILLEGAL_STATE);
    unsigned timeout = args ? args->timeoutMs : 0;
    p->info.last_timeout_ms = timeout;
    if (p->kind == PROC_RAN_CUPTI) LEAVE(NOT_SUPPORTED);
    if (p->kind == PROC_BUSY) {
        pthread_mutex_unlock(&g_plock);
        struct timespec ts = {0, (long)(timeout < 20 ? timeout : 20) * 1000000L};
        nanosleep(&ts, NULL);
        return NOT_READY;
    }
    p->info.state = LOCKED;
    LEAVE(OK);
}

CUresult cuCheckpointProcessCheckpoint(int pid, struct plain_args *args) {
    if (args && !all_zero(args, sizeof *args)) return INVALID_VALUE;
    ENTER(pid, p);
    if (p->info.state != LOCKED) LEAVE(ILLEGAL_STATE);
    if (p->kind == PROC_FAILS_CHECKPOINT) {
        p->info.state = FAILED;
        LEAVE(OUT_OF_MEMORY);
    }
    p->info.host_bytes = p->info.device_bytes;
    p->info.device_bytes = 0;
    p->info.state = CHECKPOINTED;
    LEAVE(OK);
}

CUresult cuCheckpointProcessRestore(int pid, struct restore_args *args) {
    if (args && (!all_zero(args->reserved, sizeof args->reserved) || args->reserved1)) return INVALID_VALUE;
    if (args && args->count && !args->pairs) return INVALID_VALUE;
    ENTER(pid, p);
    if (!g_initialized) LEAVE(NOT_INITIALIZED);
    if (p->info.state != CHECKPOINTED) LEAVE(ILLEGAL_STATE);
    unsigned count = args ? args->count : 0;
    if (count) {
        /* Every checkpointed GPU (the double has one) must be named, and mapped onto a GPU that exists. */
        int named = 0;
        for (unsigned i = 0; i < count; i++) {
            if (memcmp(args->pairs[i].old_uuid, g_uuid, 16) == 0) named = 1;
            if (memcmp(args->pairs[i].new_uuid, g_uuid, 16) != 0) LEAVE(INVALID_VALUE);
        }
        if (!named) LEAVE(INVALID_VALUE);
    }
    p->info.last_pairs = count;
    if (p->kind == PROC_FAILS_RESTORE_ONCE) {
        p->kind = PROC_CUDA;
        LEAVE(OUT_OF_MEMORY);
    }
    p->info.restores++;
    p->info.device_bytes = p->info.host_bytes;
    p->info.host_bytes = 0;
    p->info.state = LOCKED;
    LEAVE(OK);
}

CUresult cuCheckpointProcessUnlock(int pid, struct plain_args *args) {
    if (args && !all_zero(args, sizeof *args)) return INVALID_VALUE;
    ENTER(pid, p);
    if (p->info.state != LOCKED) LEAVE(ILLEGAL_STATE);
    p->info.state = RUNNING;
    LEAVE(OK);
}
