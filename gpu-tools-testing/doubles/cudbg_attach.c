/*
 * Test double of the driver's attach side of the CUDA debugger API, for tests/cudbg_attach_double.rs.
 *
 * The same library plays both processes, as libcuda.so.1 does: in the debuggee it holds the driver's variables
 * and the attach entry points (cudbgApiAttach, cudbgApiDetach); in the debugger it hands out a table whose few
 * filled slots (the test installs them by offset) report ATTACH_COMPLETE once the debuggee's cudbgApiAttach has
 * run for this debugger, and DETACH_COMPLETE once cleanup was requested (the debuggee's cudbgApiDetach, when
 * called, leaves a marker of its own). The two sides meet through marker files in $DBL_CUDBG_DIR named after the client pid the debuggee was given.
 *
 * With DBL_CUDBG_FD_ATTACH set in the debuggee, it also offers the attach procedure of drivers from CUDA 13.1: a
 * pipe whose read end is published in cudbgInitiateDebuggerAttachProcedureFd, read by a thread that, for each
 * byte, does what cudbgApiAttach does and then calls cudbgReportAttachProcedureFinished. The value `late`
 * publishes the descriptor only after 1 s (until then -1: "driver not initialised yet"), `never` never does.
 * Without it the variable stays -1.
 *
 * The debugger side also offers the device slots a session's device calls use (dbl_cudbg_install_devices), with a
 * device count the test sets (dbl_cudbg_set_devices, 1 by default) and a count of the calls that reached them, for
 * tests/cudbg/cudbg_devices_double.rs.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The driver's variables (cudadebugger.h: uint32_t, one uint64_t). */
uint32_t cudbgIpcFlag, cudbgRpcEnabled, cudbgApiClientPid, cudbgDebuggerInitialized, cudbgApiClientRevision,
    cudbgSessionId, cudbgAttachHandlerAvailable, cudbgEnableLaunchBlocking, cudbgEnablePreemptionDebugging,
    cudbgResumeForAttachDetach, cudbgReportDriverApiErrorFlags, cudbgDebuggerCapabilities,
    cudbgDetachSuspendedDevicesMask, cudbgEnableIntegratedMemcheck;
uint64_t cudbgReportedDriverInternalErrorCode;
int32_t cudbgInitiateDebuggerAttachProcedureFd = -1;

/* Where the marker file `what` for client `client` lives. */
static void marker(char *path, size_t size, const char *what, uint32_t client) {
    const char *dir = getenv("DBL_CUDBG_DIR");
    snprintf(path, size, "%s/%s.%u", dir ? dir : "/tmp", what, client);
}

/* --- the debuggee side --- */

/* What the driver does when asked to attach, by either route (`via` says which). */
static void attach_back_end(const char *via) {
    const char *refuse = getenv("DBL_CUDBG_REFUSE");
    if (refuse) {
        cudbgReportedDriverInternalErrorCode = strtoull(refuse, NULL, 0);
        return;
    }
    cudbgDebuggerInitialized = 1;
    cudbgResumeForAttachDetach = 1;
    char path[512];
    marker(path, sizeof path, "attached", cudbgApiClientPid);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "pid %d session %u revision %u capabilities %u rpc %u via %s\n", (int)getpid(), cudbgSessionId,
                cudbgApiClientRevision, cudbgDebuggerCapabilities, cudbgRpcEnabled, via);
        fclose(f);
    }
}

void cudbgApiAttach(void) { attach_back_end("call"); }

/* Where a debugger holds the process once the attach procedure has finished; must not be inlined or elided. */
__attribute__((noinline, used)) void cudbgReportAttachProcedureFinished(void) { __asm__ volatile("nop"); }

static void *attach_listener(void *arg) {
    const char *mode = (const char *)arg;
    if (strcmp(mode, "never") == 0)
        return NULL;
    if (strcmp(mode, "late") == 0)
        usleep(1000 * 1000);
    int fds[2];
    if (pipe(fds) != 0)
        return NULL;
    cudbgInitiateDebuggerAttachProcedureFd = fds[0];
    char byte;
    while (read(fds[0], &byte, 1) == 1) {
        attach_back_end("fd");
        cudbgReportAttachProcedureFinished();
    }
    return NULL;
}

__attribute__((constructor)) static void offer_the_attach_procedure(void) {
    const char *mode = getenv("DBL_CUDBG_FD_ATTACH");
    pthread_t thread;
    if (mode && pthread_create(&thread, NULL, attach_listener, (void *)mode) == 0)
        pthread_detach(thread);
}

void cudbgApiDetach(void) {
    char path[512];
    marker(path, sizeof path, "detached", cudbgApiClientPid);
    FILE *f = fopen(path, "w");
    if (f) {
        fprintf(f, "pid %d\n", (int)getpid());
        fclose(f);
    }
}

/* --- the debugger side --- */

typedef void (*callback_t)(void *);
static void *table[512];
static callback_t callback;
static int attach_reported, detach_reported, cleanup_requested, acknowledged;

static int exists(const char *what) {
    char path[512];
    marker(path, sizeof path, what, (uint32_t)getpid());
    return access(path, F_OK) == 0;
}

static int attach_state_cleared;
/* Each session starts afresh. */
static int initialize(void) {
    attach_reported = detach_reported = cleanup_requested = 0;
    return 0;
}
static int clear_attach_state(void) {
    attach_state_cleared++;
    return 0;
}
static int finalize(void) { return 0; }
/* The kernel launch notification mode last set (-1: never). */
static int launch_mode = -1;
static int set_launch_mode(uint32_t mode) {
    launch_mode = (int)mode;
    return 0;
}
static int set_callback(callback_t f, void *data) {
    (void)data;
    callback = f;
    return 0;
}
/* Acknowledgements still to refuse (CUDBG_ERROR_COMMUNICATION_FAILURE); a refused one is not counted. */
static int acks_to_fail;
static int acknowledge(void) {
    if (acks_to_fail > 0) {
        acks_to_fail--;
        return 0x1c;
    }
    acknowledged++;
    return 0;
}
/* A synchronous event of this kind to report once (0: none). */
static uint32_t queued_kind;
static int request_cleanup(uint32_t resume) {
    cleanup_requested = resume != 0;
    return 0;
}
/* The devices the debugger side reports (dbl_cudbg_set_devices), and every call of a device slot made so far. */
static uint32_t device_count = 1;
static int device_calls;
static int num_devices(uint32_t *n) {
    device_calls++;
    *n = device_count;
    return 0;
}
/* CUDBGEvent: packed, kind (u32) first, 92 bytes. */
static int next_event(uint32_t queue, void *event) {
    uint32_t kind = 0;
    if (queue == 0 && !attach_reported && exists("attached")) {
        attach_reported = 1;
        kind = 0xa; /* CUDBG_EVENT_ATTACH_COMPLETE */
    } else if (queue == 0 && cleanup_requested && !detach_reported) {
        detach_reported = 1;
        kind = 0xb; /* CUDBG_EVENT_DETACH_COMPLETE */
    } else if (queue == 0 && queued_kind) {
        kind = queued_kind;
        queued_kind = 0;
    } else {
        return 0x16; /* CUDBG_ERROR_NO_EVENT_AVAILABLE */
    }
    memset(event, 0, 92);
    memcpy(event, &kind, sizeof kind);
    return 0;
}

/* Slot indices (offset / 8) of: initialize, finalize, setNotifyNewEventCallback, getNextEvent,
   acknowledgeSyncEvents, requestCleanupOnDetach, getNumDevices, clearAttachState,
   setKernelLaunchNotificationMode. */
void dbl_cudbg_install(const uint64_t *slots) {
    void *fns[9] = {(void *)initialize,  (void *)finalize,        (void *)set_callback, (void *)next_event,
                    (void *)acknowledge, (void *)request_cleanup, (void *)num_devices,  (void *)clear_attach_state,
                    (void *)set_launch_mode};
    for (int i = 0; i < 9; i++)
        if (slots[i] < 512)
            table[slots[i]] = fns[i];
}

/* --- the debugger side's device slots (tests/cudbg/cudbg_devices_double.rs) --- */

/* Which devices are suspended (the first 128; the double does not check the index, as a driver that reports
   more devices than the API can name would not be trusted to either). */
static unsigned char suspended[128];
static int device_text(uint32_t dev, char *buf, uint32_t size, const char *text) {
    (void)dev;
    device_calls++;
    if (size > 0)
        snprintf(buf, size, "%s", text);
    return 0;
}
static int device_name(uint32_t dev, char *buf, uint32_t size) { return device_text(dev, buf, size, "Double"); }
static int device_type(uint32_t dev, char *buf, uint32_t size) { return device_text(dev, buf, size, "gh100"); }
static int sm_type(uint32_t dev, char *buf, uint32_t size) { return device_text(dev, buf, size, "sm_90"); }
static int device_number(uint32_t *n, uint32_t value) {
    device_calls++;
    *n = value;
    return 0;
}
static int num_sms(uint32_t dev, uint32_t *n) { return (void)dev, device_number(n, 4); }
static int num_warps(uint32_t dev, uint32_t *n) { return (void)dev, device_number(n, 64); }
static int num_lanes(uint32_t dev, uint32_t *n) { return (void)dev, device_number(n, 32); }
static int num_registers(uint32_t dev, uint32_t *n) { return (void)dev, device_number(n, 255); }
static int suspend_device(uint32_t dev) {
    device_calls++;
    if (dev < sizeof suspended)
        suspended[dev] = 1;
    return 0;
}
static int resume_device(uint32_t dev) {
    device_calls++;
    if (dev < sizeof suspended)
        suspended[dev] = 0;
    return 0;
}

/* Slot indices (offset / 8) of: getDeviceName, getDeviceType, getSmType, getNumSMs, getNumWarps, getNumLanes,
   getNumRegisters, suspendDevice, resumeDevice. */
void dbl_cudbg_install_devices(const uint64_t *slots) {
    void *fns[9] = {(void *)device_name, (void *)device_type,   (void *)sm_type,
                    (void *)num_sms,     (void *)num_warps,     (void *)num_lanes,
                    (void *)num_registers, (void *)suspend_device, (void *)resume_device};
    for (int i = 0; i < 9; i++)
        if (slots[i] < 512)
            table[slots[i]] = fns[i];
}

/* Makes getNumDevices report `n` devices. */
void dbl_cudbg_set_devices(uint32_t n) { device_count = n; }

/* Calls of getNumDevices and of the device slots so far. */
int dbl_cudbg_device_calls(void) { return device_calls; }

/* Whether device `dev` is suspended (0 for one past the first 128). */
int dbl_cudbg_suspended(uint32_t dev) { return dev < sizeof suspended ? suspended[dev] : 0; }

int dbl_cudbg_acknowledged(void) { return acknowledged; }

/* Reports one synchronous event of `kind` at the next getNextEvent. */
void dbl_cudbg_queue_event(uint32_t kind) { queued_kind = kind; }

/* Makes the next `n` acknowledgeSyncEvents calls fail. */
void dbl_cudbg_fail_acks(int n) { acks_to_fail = n; }

/* The kernel launch notification mode last set (-1: never). */
int dbl_cudbg_launch_mode(void) { return launch_mode; }

/* How often the debugger side was told that a detach begins. */
int dbl_cudbg_attach_state_cleared(void) { return attach_state_cleared; }

int cudbgGetAPIVersion(uint32_t *major, uint32_t *minor, uint32_t *revision) {
    *major = 13;
    *minor = 0;
    *revision = 163;
    return 0;
}

int cudbgGetAPI(uint32_t major, uint32_t minor, uint32_t revision, void **api) {
    (void)major;
    (void)minor;
    (void)revision;
    *api = table;
    return 0;
}
