//! Why threads could not be stopped. Every error is returned after the threads stopped so far run again.

use std::time::Duration;

/// Why the threads of a process could not be stopped ([`StoppedThreads::stop`](super::StoppedThreads::stop)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum QuiesceError {
    /// No such process (or it has already ended, or the id names a thread of another process).
    #[error("no process {0}")]
    NoSuchProcess(u32),
    /// A process cannot stop its own threads with ptrace: the kernel refuses to trace the caller's own thread
    /// group. Stop them from another process.
    #[error("cannot stop the threads of this process itself (pid {0}); do it from another process")]
    OwnProcess(u32),
    /// A thread of the process is traced already (a debugger, strace, or another stop that is still held).
    #[error(
        "thread {tid} of process {pid} is already traced by process {tracer}; detach that tracer first"
    )]
    AlreadyTraced {
        /// The process.
        pid: u32,
        /// The thread found traced.
        tid: u32,
        /// Its tracer (the process the tracing thread belongs to).
        tracer: u32,
    },
    /// The system refused to let this process trace the thread.
    #[error("not permitted to trace thread {tid} of process {pid}: {detail}")]
    PermissionDenied {
        /// The process.
        pid: u32,
        /// The thread.
        tid: u32,
        /// What was refused, why it may have been, and the fix.
        detail: String,
    },
    /// Threads did not stop in time: blocked where no stop request reaches them (an uninterruptible wait in the
    /// kernel, a `vfork` waiting for its child).
    #[error("process {pid}: threads {threads:?} did not stop within {waited:?}")]
    Timeout {
        /// The process.
        pid: u32,
        /// How long it was given.
        waited: Duration,
        /// The threads that had not stopped.
        threads: Vec<u32>,
    },
    /// The process ended while its threads were being stopped.
    #[error("process {pid} ended while its threads were being stopped")]
    Ended {
        /// The process.
        pid: u32,
    },
    /// A ptrace request, a wait or a read of `/proc` failed in a way the other variants do not name.
    #[error("stopping the threads of process {pid}: {detail}")]
    Trace {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
}
