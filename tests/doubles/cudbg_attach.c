/*
 * Test double of the driver's attach side of the CUDA debugger API, for tests/cudbg_attach_double.rs.
 *
 * The same library plays both processes, as libcuda.so.1 does: in the debuggee it holds the driver's variables
 * and the attach entry points (cudbgApiAttach, cudbgApiDetach); in the debugger it hands out a table whose few
 * filled slots (the test installs them by offset) report ATTACH_COMPLETE once the debuggee's cudbgApiAttach has
 * run for this debugger, and DETACH_COMPLETE once its cudbgApiDetach has run and cleanup was requested. The two
 * sides meet through marker files in $DBL_CUDBG_DIR named after the client pid the debuggee was given.
 */
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

/* Where the marker file `what` for client `client` lives. */
static void marker(char *path, size_t size, const char *what, uint32_t client) {
    const char *dir = getenv("DBL_CUDBG_DIR");
    snprintf(path, size, "%s/%s.%u", dir ? dir : "/tmp", what, client);
}

/* --- the debuggee side --- */

void cudbgApiAttach(void) {
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
        fprintf(f, "pid %d session %u revision %u capabilities %u rpc %u\n", (int)getpid(), cudbgSessionId,
                cudbgApiClientRevision, cudbgDebuggerCapabilities, cudbgRpcEnabled);
        fclose(f);
    }
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
static int initialize(void) { return 0; }
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
static int acknowledge(void) {
    acknowledged++;
    return 0;
}
static int request_cleanup(uint32_t resume) {
    cleanup_requested = resume != 0;
    return 0;
}
static int num_devices(uint32_t *n) {
    *n = 1;
    return 0;
}
/* CUDBGEvent: packed, kind (u32) first, 92 bytes. */
static int next_event(uint32_t queue, void *event) {
    uint32_t kind = 0;
    if (queue == 0 && !attach_reported && exists("attached")) {
        attach_reported = 1;
        kind = 0xa; /* CUDBG_EVENT_ATTACH_COMPLETE */
    } else if (queue == 0 && cleanup_requested && !detach_reported && exists("detached")) {
        detach_reported = 1;
        kind = 0xb; /* CUDBG_EVENT_DETACH_COMPLETE */
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

int dbl_cudbg_acknowledged(void) { return acknowledged; }

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
