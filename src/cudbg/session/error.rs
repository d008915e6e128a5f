//! What a debug session itself refuses or reports, before or besides the driver's own status codes.

use crate::cudbg::AttachError;

/// A debug session could not do what was asked (reported by the crate, not the driver).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// Another [`DebugSession`](crate::cudbg::DebugSession) is alive in this process; the driver serves one debugger client per process.
    #[error("a debug session is already active in this process")]
    AlreadyActive,
    /// The negotiated API revision does not have this table slot.
    #[error(
        "debugger API slot `{slot}` needs revision {needs}, the driver's API is revision {have}"
    )]
    Unsupported {
        /// Slot name in `CUDBGAPI_st`.
        slot: &'static str,
        /// First revision that has it.
        needs: u32,
        /// The negotiated revision.
        have: u32,
    },
    /// The driver's table has no function in this slot.
    #[error("debugger API slot `{0}` is empty in the driver's table")]
    MissingSlot(&'static str),
    /// The driver library lacks a variable the debugger side must set before `initialize`.
    #[error("libcuda.so.1 does not export `{0}`")]
    MissingClientVariable(&'static str),
    /// The debuggee could not be started.
    #[error("cannot start `{program}`: {source}")]
    Spawn {
        /// The program as given.
        program: String,
        /// Why.
        source: std::io::Error,
    },
    /// The debuggee exited before the driver opened a session for it: it never initialised CUDA.
    #[error("the debuggee exited ({status}) without starting CUDA")]
    NoCuda {
        /// How it exited.
        status: std::process::ExitStatus,
    },
    /// The driver did not open a session for the debuggee in time; the debuggee was killed and reaped.
    #[error("no CUDA debug session opened within {waited:?}; the debuggee (pid {pid}) was killed")]
    HandshakeTimeout {
        /// How long the session waited.
        waited: std::time::Duration,
        /// The debuggee's process id (killed and reaped).
        pid: u32,
    },
    /// Nothing happened within the time the caller allowed.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// A device, SM, warp or lane index outside what the device has.
    #[error("{what} {index} is out of range (the device has {limit})")]
    OutOfRange {
        /// `"device"`, `"sm"`, `"warp"` or `"lane"`.
        what: &'static str,
        /// The index given.
        index: u32,
        /// How many there are.
        limit: u32,
    },
    /// A device index the CUDA debugger API cannot name (`CUDBG_MAX_DEVICES`, 64 in `cudadebugger.h`), even where
    /// the driver reports more devices; refused before any driver call.
    #[error(
        "device {dev} is past the {max} devices the CUDA debugger API can name (CUDBG_MAX_DEVICES)"
    )]
    DeviceBeyondApi {
        /// The index given.
        dev: u32,
        /// `CUDBG_MAX_DEVICES`.
        max: u32,
    },
    /// The device is already suspended through another guard.
    #[error("device {0} is already suspended")]
    AlreadySuspended(u32),
    /// No breakpoint of this session is set at that address.
    #[error("no breakpoint is set at {addr:#x} on device {dev}")]
    NoSuchBreakpoint {
        /// Device index.
        dev: u32,
        /// Code address.
        addr: u64,
    },
    /// A buffer longer than one driver call can take (4 GiB).
    #[error("a transfer of {0} bytes is larger than the driver accepts in one call")]
    TooLarge(usize),
    /// A driver variable in the debuggee could not be written (the debuggee is gone, or this process may not
    /// write into it).
    #[error("cannot set `{name}` in the debuggee: {source}")]
    DebuggeeVariable {
        /// The libcuda variable.
        name: &'static str,
        /// Why.
        source: std::io::Error,
    },
    /// The debuggee died from a signal (killed, or crashed) while attached. The driver's debugger side (driver
    /// 580) crashes the debugger process when called after that, so the session makes no further driver call.
    #[error(
        "the debuggee died from signal {signal}; the driver's debugger side cannot be called any more"
    )]
    DebuggeeKilled {
        /// The signal that ended it.
        signal: i32,
    },
    /// An earlier session's debuggee died from a signal while attached; that session could not finalise the
    /// driver's debugger side, which therefore cannot serve another session in this process.
    #[error(
        "an earlier debuggee died from a signal while attached; the driver's debugger side cannot serve another \
         session in this process"
    )]
    DebuggerUnusable,
    /// Waiting for or signalling the debuggee failed.
    #[error("debuggee process: {0}")]
    Process(#[source] std::io::Error),
    /// Attaching to a running process failed or was refused.
    #[error(transparent)]
    Attach(#[from] AttachError),
    /// The chosen connection route cannot do what was asked (a launch route given a running process, or the
    /// reverse).
    #[error("the {route} route cannot {what}")]
    WrongRoute {
        /// The route, as its `Debug` names it.
        route: String,
        /// What it was asked to do.
        what: &'static str,
    },
}

impl From<AttachError> for crate::Error {
    fn from(e: AttachError) -> Self {
        crate::Error::Session(SessionError::Attach(e))
    }
}
