//! [`ProcessCheckpointError`], [`Failed`] (an error that gives the handle back), and the diagnosis that turns a
//! driver code into the error that says what went wrong.

use std::fmt;
use std::time::Duration;

use super::ProcessState;
use super::target::ProcStatus;
use crate::LoadError;
use crate::cuda::CudaError;
use crate::sys::cuda_driver as sys;

/// A process checkpoint could not do what was asked. Errors found before any driver call say so; the others name
/// the driver call and keep its [`CudaError`] (code, name, message).
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ProcessCheckpointError {
    /// The CUDA driver could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The loaded driver lacks a process-checkpoint call (they came with CUDA 12.8, driver r570). No driver call
    /// was made.
    #[error(
        "the CUDA driver has no {call}: process checkpoint needs a CUDA 12.8 (r570) or later driver"
    )]
    Unsupported {
        /// The missing symbol.
        call: &'static str,
    },
    /// Not a process id the kernel can hand out (0, or above `i32::MAX`). No driver call was made.
    #[error("{pid} is not a process id")]
    InvalidPid {
        /// The pid given.
        pid: u32,
    },
    /// The pid of the calling process: locking it would block its own CUDA calls, the checkpoint's among them. No
    /// driver call was made.
    #[error("process {pid} is this process; a process cannot lock or checkpoint itself")]
    OwnProcess {
        /// This process's pid.
        pid: u32,
    },
    /// Another handle of this process already holds the pid. No driver call was made.
    #[error("process {pid} is already held by another ProcessCheckpoint of this process")]
    AlreadyHeld {
        /// The pid.
        pid: u32,
    },
    /// A lock timeout the driver cannot express (it takes whole milliseconds in 32 bits). No driver call was made.
    #[error(
        "lock timeout {timeout:?} is beyond the driver's limit of {} ms",
        u32::MAX
    )]
    InvalidTimeout {
        /// The timeout given.
        timeout: Duration,
    },
    /// More GPU pairs for a remapping restore than the driver's 32-bit count holds. No driver call was made.
    #[error(
        "{count} GPU pairs given for a restore; the driver takes at most {}",
        u32::MAX
    )]
    TooManyGpuPairs {
        /// The number given.
        count: usize,
    },
    /// There is no process with this pid.
    #[error("no process {pid}{}", driver_said(*call, error.as_ref()))]
    NoSuchProcess {
        /// The pid.
        pid: u32,
        /// The driver call that failed, if one was made.
        call: Option<&'static str>,
        /// What it answered.
        error: Option<CudaError>,
    },
    /// The process belongs to another user and this one is not root.
    #[error(
        "process {pid} belongs to user {owner}, not to this user ({user}): {call} answered {error}"
    )]
    NotPermitted {
        /// The pid.
        pid: u32,
        /// The uid owning it.
        owner: u32,
        /// This process's effective uid.
        user: u32,
        /// The driver call that failed.
        call: &'static str,
        /// What it answered.
        error: CudaError,
    },
    /// The process exists but has not initialised CUDA (the driver answers `CUDA_ERROR_NOT_INITIALIZED`, seen with
    /// driver 580).
    #[error("process {pid} is not a CUDA process: {call} answered {error}")]
    NotCuda {
        /// The pid.
        pid: u32,
        /// The driver call that failed.
        call: &'static str,
        /// What it answered.
        error: CudaError,
    },
    /// The lock did not succeed within its timeout; the driver leaves the process running.
    #[error(
        "lock of process {pid} timed out after {timeout:?}: {error}; the process keeps running"
    )]
    LockTimedOut {
        /// The pid.
        pid: u32,
        /// The timeout given.
        timeout: Duration,
        /// What `cuCheckpointProcessLock` answered.
        error: CudaError,
    },
    /// The driver refused the call in the process's present state (`CUDA_ERROR_ILLEGAL_STATE`): something other
    /// than this handle changed it, or an earlier step failed.
    #[error("{call} refused for process {pid} ({}): {error}", state_text(*state))]
    IllegalState {
        /// The driver call.
        call: &'static str,
        /// The pid.
        pid: u32,
        /// The state the driver reported right after the refusal, if it could tell.
        state: Option<ProcessState>,
        /// What the call answered.
        error: CudaError,
    },
    /// A process to be held was not in the state asked for. No state-changing call was made.
    #[error("process {pid} is {state}, not {expected}")]
    WrongState {
        /// The pid.
        pid: u32,
        /// The state it was expected in.
        expected: ProcessState,
        /// The state the driver reported.
        state: ProcessState,
    },
    /// The held process exited (or its pid now names another process): there is nothing left to restore.
    #[error("process {pid} exited while held{}", driver_said(*call, error.as_ref()))]
    Exited {
        /// The pid.
        pid: u32,
        /// The driver call that failed, if one was made.
        call: Option<&'static str>,
        /// What it answered.
        error: Option<CudaError>,
    },
    /// The driver reports the process in `CU_PROCESS_STATE_FAILED`: a checkpoint or restore broke it, and the
    /// driver has no call that brings it back.
    #[error("process {pid} is in the driver's failed state; it cannot be brought back to running")]
    ProcessFailed {
        /// The pid.
        pid: u32,
    },
    /// Any other driver failure.
    #[error("{call} failed for process {pid}: {error}")]
    Driver {
        /// The driver call.
        call: &'static str,
        /// The pid.
        pid: u32,
        /// What it answered.
        error: CudaError,
    },
}

fn driver_said(call: Option<&'static str>, error: Option<&CudaError>) -> String {
    match (call, error) {
        (Some(call), Some(e)) => format!(": {call} answered {e}"),
        _ => String::new(),
    }
}

fn state_text(state: Option<ProcessState>) -> String {
    state.map_or_else(
        || "state unknown".to_string(),
        |s| format!("the process is {s}"),
    )
}

impl ProcessCheckpointError {
    /// The driver's answer, where a driver call failed.
    pub fn cuda_error(&self) -> Option<&CudaError> {
        match self {
            Self::NoSuchProcess { error, .. } | Self::Exited { error, .. } => error.as_ref(),
            Self::NotPermitted { error, .. }
            | Self::NotCuda { error, .. }
            | Self::LockTimedOut { error, .. }
            | Self::IllegalState { error, .. }
            | Self::Driver { error, .. } => Some(error),
            _ => None,
        }
    }

    /// The driver call that failed, where one did.
    pub fn call(&self) -> Option<&'static str> {
        match self {
            Self::NoSuchProcess { call, .. } | Self::Exited { call, .. } => *call,
            Self::NotPermitted { call, .. }
            | Self::NotCuda { call, .. }
            | Self::IllegalState { call, .. }
            | Self::Driver { call, .. } => Some(call),
            Self::LockTimedOut { .. } => Some(LOCK),
            _ => None,
        }
    }
}

pub(super) const GET_STATE: &str = "cuCheckpointProcessGetState";
pub(super) const LOCK: &str = "cuCheckpointProcessLock";
pub(super) const CHECKPOINT: &str = "cuCheckpointProcessCheckpoint";
pub(super) const RESTORE: &str = "cuCheckpointProcessRestore";
pub(super) const UNLOCK: &str = "cuCheckpointProcessUnlock";
pub(super) const RESTORE_THREAD: &str = "cuCheckpointProcessGetRestoreThreadId";

/// What is known around a failed driver call, for [`diagnose`].
pub(super) struct Refusal {
    pub call: &'static str,
    pub pid: u32,
    pub error: CudaError,
    /// A handle held the process (so its disappearance is an exit, not a bad pid).
    pub held: bool,
    /// The lock's timeout, for a failed lock.
    pub lock_timeout: Option<Duration>,
    pub proc: ProcStatus,
    pub own_uid: Option<u32>,
}

/// Names what went wrong: the process's existence first (the driver answers `CUDA_ERROR_OPERATING_SYSTEM` for a
/// pid that does not exist, seen with driver 580), then the codes the driver documents for these calls.
/// `state_after` is asked only for `CUDA_ERROR_ILLEGAL_STATE`.
pub(super) fn diagnose(
    r: Refusal,
    state_after: impl FnOnce() -> Option<ProcessState>,
) -> ProcessCheckpointError {
    let Refusal {
        call,
        pid,
        error,
        held,
        lock_timeout,
        proc,
        own_uid,
    } = r;
    match proc {
        ProcStatus::Absent | ProcStatus::Exited if held => {
            return ProcessCheckpointError::Exited {
                pid,
                call: Some(call),
                error: Some(error),
            };
        }
        // A zombie that no handle held: "exited while held" would name a hold that never was.
        ProcStatus::Absent | ProcStatus::Exited => {
            return ProcessCheckpointError::NoSuchProcess {
                pid,
                call: Some(call),
                error: Some(error),
            };
        }
        ProcStatus::Alive { .. } | ProcStatus::Unknown => {}
    }
    if let (Some(timeout), sys::CUDA_ERROR_NOT_READY | sys::CUDA_ERROR_TIMEOUT) =
        (lock_timeout, error.code)
    {
        return ProcessCheckpointError::LockTimedOut {
            pid,
            timeout,
            error,
        };
    }
    if error.code == sys::CUDA_ERROR_ILLEGAL_STATE {
        return ProcessCheckpointError::IllegalState {
            call,
            pid,
            state: state_after(),
            error,
        };
    }
    if let (ProcStatus::Alive { owner }, Some(user)) = (proc, own_uid) {
        if user != 0 && owner != user {
            return ProcessCheckpointError::NotPermitted {
                pid,
                owner,
                user,
                call,
                error,
            };
        }
    }
    if error.code == sys::CUDA_ERROR_NOT_INITIALIZED {
        return ProcessCheckpointError::NotCuda { pid, call, error };
    }
    ProcessCheckpointError::Driver { call, pid, error }
}

/// A step of a [`ProcessCheckpoint`](super::ProcessCheckpoint) that failed, with the handle it was called on, so
/// the caller can retry, take another way, or drop it (which brings the process back to running where it can).
///
/// `?` turns it into [`ProcessCheckpointError`] or [`crate::Error`], dropping the handle. Boxed: a step's `Result`
/// stays one pointer wide on the error side.
pub struct Failed<H>(Box<(H, ProcessCheckpointError)>);

impl<H> Failed<H> {
    pub(super) fn new(handle: H, error: ProcessCheckpointError) -> Self {
        Failed(Box::new((handle, error)))
    }

    /// What went wrong.
    pub fn error(&self) -> &ProcessCheckpointError {
        &self.0.1
    }

    /// The handle the step was called on.
    pub fn handle(&self) -> &H {
        &self.0.0
    }

    /// The handle, for another try; the error is discarded.
    pub fn into_handle(self) -> H {
        self.0.0
    }

    /// The handle and the error.
    pub fn into_parts(self) -> (H, ProcessCheckpointError) {
        *self.0
    }

    /// The error; the handle is dropped (see [`ProcessCheckpoint`](super::ProcessCheckpoint)'s `Drop`).
    pub fn into_error(self) -> ProcessCheckpointError {
        let (handle, error) = *self.0;
        drop(handle);
        error
    }
}

impl<H: fmt::Debug> fmt::Debug for Failed<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Failed")
            .field("error", self.error())
            .field("handle", self.handle())
            .finish()
    }
}

impl<H> fmt::Display for Failed<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self.error(), f)
    }
}

impl<H: fmt::Debug> std::error::Error for Failed<H> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        std::error::Error::source(self.error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cuda(code: u32) -> CudaError {
        CudaError {
            code,
            name: format!("CODE_{code}"),
            message: String::new(),
        }
    }

    fn refusal(call: &'static str, code: u32, proc: ProcStatus) -> Refusal {
        Refusal {
            call,
            pid: 42,
            error: cuda(code),
            held: false,
            lock_timeout: None,
            proc,
            own_uid: Some(1000),
        }
    }

    const ALIVE_MINE: ProcStatus = ProcStatus::Alive { owner: 1000 };

    #[test]
    fn a_missing_process_is_named_before_the_code() {
        let e = diagnose(refusal(GET_STATE, 304, ProcStatus::Absent), || None);
        assert!(
            matches!(
                e,
                ProcessCheckpointError::NoSuchProcess {
                    pid: 42,
                    call: Some(GET_STATE),
                    ..
                }
            ),
            "{e:?}"
        );
        assert_eq!(e.cuda_error().map(|e| e.code), Some(304));
        let held = Refusal {
            held: true,
            ..refusal(UNLOCK, 304, ProcStatus::Absent)
        };
        assert!(matches!(
            diagnose(held, || None),
            ProcessCheckpointError::Exited { .. }
        ));
        let zombie = Refusal {
            held: true,
            ..refusal(UNLOCK, 999, ProcStatus::Exited)
        };
        let zombie = diagnose(zombie, || None);
        assert!(
            matches!(zombie, ProcessCheckpointError::Exited { .. }),
            "{zombie:?}"
        );
    }

    #[test]
    fn an_exited_process_that_was_never_held_is_no_such_process_not_an_exit_while_held() {
        let e = diagnose(refusal(GET_STATE, 304, ProcStatus::Exited), || None);
        assert!(
            matches!(
                e,
                ProcessCheckpointError::NoSuchProcess {
                    pid: 42,
                    call: Some(GET_STATE),
                    ..
                }
            ),
            "{e:?}"
        );
        assert!(!e.to_string().contains("while held"), "{e}");
    }

    #[test]
    fn lock_timeouts_need_a_timeout_and_a_timeout_code() {
        for code in [sys::CUDA_ERROR_NOT_READY, sys::CUDA_ERROR_TIMEOUT] {
            let r = Refusal {
                lock_timeout: Some(Duration::from_millis(500)),
                ..refusal(LOCK, code, ALIVE_MINE)
            };
            let e = diagnose(r, || None);
            assert!(
                matches!(e, ProcessCheckpointError::LockTimedOut { .. }),
                "{e:?}"
            );
            assert_eq!(e.call(), Some(LOCK));
        }
        let e = diagnose(refusal(LOCK, sys::CUDA_ERROR_NOT_READY, ALIVE_MINE), || {
            None
        });
        assert!(matches!(e, ProcessCheckpointError::Driver { .. }), "{e:?}");
    }

    #[test]
    fn illegal_state_reports_the_state_seen_after() {
        let e = diagnose(
            refusal(CHECKPOINT, sys::CUDA_ERROR_ILLEGAL_STATE, ALIVE_MINE),
            || Some(ProcessState::Checkpointed),
        );
        assert!(matches!(
            e,
            ProcessCheckpointError::IllegalState {
                call: CHECKPOINT,
                state: Some(ProcessState::Checkpointed),
                ..
            }
        ));
        assert!(e.to_string().contains("the process is checkpointed"), "{e}");
        let mut asked = false;
        let _ = diagnose(
            refusal(LOCK, sys::CUDA_ERROR_NOT_INITIALIZED, ALIVE_MINE),
            || {
                asked = true;
                None
            },
        );
        assert!(
            !asked,
            "the state is read only after an illegal-state refusal"
        );
    }

    #[test]
    fn another_users_process_unless_root() {
        let other = ProcStatus::Alive { owner: 0 };
        let e = diagnose(refusal(GET_STATE, 304, other), || None);
        assert!(
            matches!(
                e,
                ProcessCheckpointError::NotPermitted {
                    owner: 0,
                    user: 1000,
                    ..
                }
            ),
            "{e:?}"
        );
        let root = Refusal {
            own_uid: Some(0),
            ..refusal(GET_STATE, 304, ProcStatus::Alive { owner: 1000 })
        };
        assert!(matches!(
            diagnose(root, || None),
            ProcessCheckpointError::Driver { .. }
        ));
    }

    #[test]
    fn not_initialized_means_not_a_cuda_process() {
        let e = diagnose(
            refusal(GET_STATE, sys::CUDA_ERROR_NOT_INITIALIZED, ALIVE_MINE),
            || None,
        );
        assert!(matches!(e, ProcessCheckpointError::NotCuda { .. }), "{e:?}");
        assert!(e.to_string().contains("not a CUDA process"), "{e}");
        let unknown = diagnose(refusal(GET_STATE, 3, ProcStatus::Unknown), || None);
        assert!(matches!(unknown, ProcessCheckpointError::NotCuda { .. }));
    }
}
