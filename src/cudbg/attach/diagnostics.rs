//! What an attach reports: why it was refused or failed ([`AttachError`], [`NoCudaReason`]) and each step it took
//! ([`AttachStep`]). The same types serve both protocols ([`AttachProtocol`](super::AttachProtocol)).

use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use super::{ATTACH_FD, ATTACH_FINISHED, RETRY_DELAY};
use crate::cudbg::event::Event;

/// Why a session could not attach to a running process. Every refusal before the first change leaves the process
/// exactly as it was; a failure later puts back what was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// No such process (or it has already ended).
    #[error("no process {0}")]
    NoSuchProcess(u32),
    /// The process is stopped (`SIGSTOP`, a job-control stop): it would not answer the attach until continued.
    #[error(
        "process {0} is stopped (state T): continue it with SIGCONT first (kill -CONT {0}), or attach when it runs"
    )]
    Stopped(u32),
    /// A session cannot debug the process it runs in.
    #[error("a session cannot attach to its own process")]
    OwnProcess,
    /// The process is a child of this one: while attached, this process's own waits for the child would take the
    /// ptrace stops meant for the session. Start it under the session instead ([`DebugSession::builder`](crate::cudbg::DebugSession::builder)).
    #[error(
        "process {0} is a child of this process; start it with DebugSession::builder instead of attaching to it"
    )]
    OwnChild(u32),
    /// The process does not run CUDA (yet).
    #[error("process {pid} does not use CUDA: {why}")]
    NoCuda {
        /// The process.
        pid: u32,
        /// What is missing.
        why: NoCudaReason,
    },
    /// Another process traces it (a debugger, strace, or another session).
    #[error("process {pid} is already traced by process {tracer}")]
    AlreadyTraced {
        /// The process.
        pid: u32,
        /// Its tracer.
        tracer: u32,
    },
    /// Its CUDA driver already serves a debugger client (a program started under cuda-gdb or under a session).
    #[error("process {pid} already has a CUDA debugger client (process {client})")]
    AlreadyDebugged {
        /// The process.
        pid: u32,
        /// The client's process id, as the process's driver records it.
        client: u32,
    },
    /// The system refused to let this process trace or read it: another user's process, or
    /// `kernel.yama.ptrace_scope` limits tracing to descendants.
    #[error("not permitted to debug process {pid}: {detail}")]
    PermissionDenied {
        /// The process.
        pid: u32,
        /// What was refused, and why it may have been.
        detail: String,
    },
    /// The process ended while the session attached.
    #[error("process {pid} ended during the attach ({})", describe_end(.status))]
    Exited {
        /// The process.
        pid: u32,
        /// How it ended, when known.
        status: Option<ExitStatus>,
    },
    /// The process's driver refused: the code it left in `cudbgReportedDriverInternalErrorCode`.
    #[error(
        "the CUDA driver in process {pid} refused the attach (cudbgReportedDriverInternalErrorCode {code:#x}: {})",
        crate::cudbg::CudbgError::from_code(*code as u32)
    )]
    DriverRefused {
        /// The process.
        pid: u32,
        /// The driver's code (a `CUDBGResult`).
        code: u64,
    },
    /// The driver kept answering `CUDBG_ERROR_ATTACH_NOT_POSSIBLE` (software preemption on, or the MPS server
    /// running, according to cuda-gdb).
    #[error(
        "attaching to process {pid} is not possible: its driver refused {attempts} times in {waited:?} \
         (CUDBG_ERROR_ATTACH_NOT_POSSIBLE; software preemption on, or nvidia-cuda-mps-server running?)"
    )]
    NotPossible {
        /// The process.
        pid: u32,
        /// Tries made.
        attempts: u32,
        /// Over how long.
        waited: Duration,
    },
    /// A step did not finish in time.
    #[error("attaching to process {pid}: {what} did not finish within {waited:?}")]
    Timeout {
        /// The process.
        pid: u32,
        /// The step.
        what: &'static str,
        /// How long it was given.
        waited: Duration,
    },
    /// This driver or platform cannot attach (a missing libcuda symbol, or a CPU other than x86-64).
    #[error("attaching is not supported here: {0}")]
    Unsupported(String),
    /// Tracing the process failed in a way the other variants do not name.
    #[error("tracing process {pid}: {detail}")]
    Trace {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
}

fn describe_end(status: &Option<ExitStatus>) -> String {
    match status {
        Some(s) => s.to_string(),
        None => "how is not known".into(),
    }
}

/// What shows that a process does not run CUDA.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoCudaReason {
    /// It does not map `libcuda.so.1`.
    LibcudaNotMapped,
    /// It maps another `libcuda.so.1` file than this process (another driver install, or a container's copy),
    /// so the driver's variables cannot be found in it.
    OtherLibcuda(PathBuf),
    /// Its driver is loaded but not initialised (`cuInit` not called: neither `/dev/nvidiactl` nor, under WSL,
    /// `/dev/dxg` is open).
    DriverNotInitialised,
}

impl std::fmt::Display for NoCudaReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoCudaReason::LibcudaNotMapped => write!(f, "it does not load libcuda.so.1"),
            NoCudaReason::OtherLibcuda(p) => write!(
                f,
                "it loads {}, another libcuda.so.1 file than this process does",
                p.display()
            ),
            NoCudaReason::DriverNotInitialised => {
                write!(
                    f,
                    "its CUDA driver is loaded but not initialised (no cuInit)"
                )
            }
        }
    }
}

/// One step of an attach or detach, as [`PtraceHandshake::progress`](super::PtraceHandshake::progress) reports it (and the `log` facade at debug
/// level).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttachStep {
    /// The process found, before anything was changed.
    Target {
        /// Its id.
        pid: u32,
        /// Its command line.
        command: String,
        /// The `libcuda.so.1` it maps.
        libcuda: PathBuf,
    },
    /// The driver's variables in the process, as read (name, value).
    Variables(Vec<(&'static str, u64)>),
    /// Every thread of the process is stopped.
    Stopped {
        /// How many threads it has.
        threads: usize,
    },
    /// A driver variable in the process was written.
    Wrote {
        /// The variable.
        name: &'static str,
        /// Its value before.
        old: u64,
        /// The value written.
        new: u64,
    },
    /// `cudbgApiAttach()` ran in the process; `cudbgReportedDriverInternalErrorCode` after it.
    AttachCalled {
        /// The try (from 1).
        attempt: u32,
        /// The driver's code (0: none).
        internal_error: u64,
    },
    /// The driver's critical section was busy: the process runs for a moment before the next try.
    Retrying {
        /// The try that was refused.
        attempt: u32,
    },
    /// The driver's attach procedure was asked for through its file descriptor ([`AttachProtocol::Descriptor`](super::AttachProtocol::Descriptor)).
    AttachRequested {
        /// The descriptor, in the process.
        fd: i32,
    },
    /// The driver called `cudbgReportAttachProcedureFinished()`: its debugger back end runs.
    AttachProcedureFinished {
        /// The thread that called it.
        thread: u32,
        /// How long after the request.
        waited: Duration,
        /// `cudbgReportedDriverInternalErrorCode` then (0: none).
        internal_error: u64,
    },
    /// The driver's debugger back end was already started in the process: nothing to ask for.
    BackEndRunning,
    /// `cudbgResumeForAttachDetach` after the attach call: set when the driver reports its state first.
    ResumeFlag(u64),
    /// The process runs again.
    Resumed,
    /// Events the driver reported while the attach completed.
    Events(Vec<Event>),
    /// Attached.
    Attached {
        /// Time from the first check to here.
        elapsed: Duration,
    },
    /// `cudbgApiDetach()` ran in the process.
    DetachCalled {
        /// `cudbgReportedDriverInternalErrorCode` after it.
        internal_error: u64,
        /// `cudbgResumeForAttachDetach` after it.
        resume_flag: u64,
    },
    /// The detach left out the call of `cudbgApiDetach()` ([`DetachProcedure::WithoutInProcessCall`]).
    ///
    /// [`DetachProcedure::WithoutInProcessCall`]: super::DetachProcedure::WithoutInProcessCall
    DetachCallLeftOut {
        /// `cudbgResumeForAttachDetach`, which the clean-up request takes.
        resume_flag: u64,
    },
    /// Detached: the process runs on without a debugger.
    Detached,
    /// A failed attach put the variables it had written back.
    Undone {
        /// How many.
        variables: usize,
    },
}

impl std::fmt::Display for AttachStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachStep::Target {
                pid,
                command,
                libcuda,
            } => write!(f, "process {pid} ({command}) maps {}", libcuda.display()),
            AttachStep::Variables(vars) => {
                write!(f, "read")?;
                for (name, value) in vars {
                    write!(f, " {name}={value:#x}")?;
                }
                Ok(())
            }
            AttachStep::Stopped { threads } => write!(f, "stopped {threads} threads"),
            AttachStep::Wrote { name, old, new } => write!(f, "wrote {name}: {old:#x} -> {new:#x}"),
            AttachStep::AttachCalled {
                attempt,
                internal_error,
            } => write!(
                f,
                "called cudbgApiAttach() (try {attempt}): cudbgReportedDriverInternalErrorCode={internal_error:#x}"
            ),
            AttachStep::Retrying { attempt } => write!(
                f,
                "try {attempt}: CUDBG_ERROR_ATTACH_NOT_POSSIBLE, running the process {RETRY_DELAY:?} before the next"
            ),
            AttachStep::AttachRequested { fd } => {
                write!(
                    f,
                    "wrote a byte to {ATTACH_FD} (fd {fd}) to start the attach procedure"
                )
            }
            AttachStep::AttachProcedureFinished {
                thread,
                waited,
                internal_error,
            } => write!(
                f,
                "thread {thread} reached {ATTACH_FINISHED}() after {waited:?}: \
                 cudbgReportedDriverInternalErrorCode={internal_error:#x}"
            ),
            AttachStep::BackEndRunning => {
                write!(
                    f,
                    "the driver's debugger back end already runs (cudbgDebuggerInitialized)"
                )
            }
            AttachStep::ResumeFlag(v) => write!(f, "cudbgResumeForAttachDetach={v:#x}"),
            AttachStep::Resumed => write!(f, "resumed every thread"),
            AttachStep::Events(events) => {
                write!(f, "{} events during the attach:", events.len())?;
                for e in events {
                    write!(f, " {}", e.name())?;
                }
                Ok(())
            }
            AttachStep::Attached { elapsed } => write!(f, "attached in {elapsed:?}"),
            AttachStep::DetachCalled {
                internal_error,
                resume_flag,
            } => write!(
                f,
                "called cudbgApiDetach(): cudbgReportedDriverInternalErrorCode={internal_error:#x} \
                 cudbgResumeForAttachDetach={resume_flag:#x}"
            ),
            AttachStep::DetachCallLeftOut { resume_flag } => write!(
                f,
                "left out the call of cudbgApiDetach() (driver 580 crashes processes at exit after it): \
                 cudbgResumeForAttachDetach={resume_flag:#x}"
            ),
            AttachStep::Detached => write!(f, "detached; the process runs on"),
            AttachStep::Undone { variables } => {
                write!(f, "attach failed: put {variables} variables back")
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_errors_read_well() {
        let s = AttachStep::Wrote {
            name: "cudbgIpcFlag",
            old: 0,
            new: 1,
        };
        assert_eq!(s.to_string(), "wrote cudbgIpcFlag: 0x0 -> 0x1");
        let e = AttachError::DriverRefused { pid: 7, code: 0x28 };
        assert!(e.to_string().contains("0x28"), "{e}");
        assert!(e.to_string().contains("ATTACH_NOT_POSSIBLE"), "{e}");
        let e = AttachError::NoCuda {
            pid: 7,
            why: NoCudaReason::DriverNotInitialised,
        };
        assert_eq!(
            e.to_string(),
            "process 7 does not use CUDA: its CUDA driver is loaded but not initialised (no cuInit)"
        );
    }
}
