//! Route 1 of the driver: attaching to a CUDA process that already runs, as cuda-gdb does.
//!
//! The steps, in the order cuda-gdb 13 takes them (`gdb/cuda/cuda-linux-nat.c`, `cuda_nat_attach`, and
//! `gdb/cuda/cuda-tdep.c`, `cuda_initialize_target`): stop every thread under ptrace; write this client into the
//! process's libcuda (`cudbgApiClientPid`, `cudbgApiClientRevision`, `cudbgSessionId`,
//! `cudbgEnableLaunchBlocking`, `cudbgDebuggerCapabilities`, which must include
//! [`ATTACH_CAPABILITIES`](crate::cudbg::ATTACH_CAPABILITIES); cuda-gdb also sets `cudbgRpcEnabled`, which this crate
//! leaves at 0: see `prepare_and_call`); call `cudbgApiAttach()` inside the process; read
//! `cudbgReportedDriverInternalErrorCode` (`CUDBG_ERROR_ATTACH_NOT_POSSIBLE` there means "busy, let it run and
//! try again", for up to 5 s); then, if `cudbgResumeForAttachDetach` is set, let the process run until the
//! driver reports `ATTACH_COMPLETE` (its replay of contexts and modules comes first), otherwise set
//! `cudbgIpcFlag`. Drivers from CUDA 13.1 on offer a safer start of their debugger back end than the call: a file
//! descriptor in `cudbgInitiateDebuggerAttachProcedureFd` to write one byte to, after which the driver starts the
//! back end itself and calls `cudbgReportAttachProcedureFinished()`, where the session holds the process again
//! ([`AttachProtocol`]). Detaching (`cuda_do_detach`): call `cudbgApiDetach()` inside the process, ask the driver to
//! clean up with `cudbgResumeForAttachDetach`, clear `cudbgDebuggerCapabilities` and `cudbgDebuggerInitialized`,
//! let the process run until `DETACH_COMPLETE`, clear `cudbgIpcFlag`. By default the call of `cudbgApiDetach()` is
//! left out ([`DetachProcedure`]): with it, driver 580 crashes processes that destroy their last context before
//! exiting.
//!
//! Everything that can refuse the attach is checked from `/proc` and with reads of the process's memory before
//! anything in it changes; a failure after the first change puts the variables back and lets the process go.
//!
//! The route is [`PtraceHandshake`] (`route`: options, checks, connect and disconnect); `start` makes the attach,
//! `variables` reads and writes the driver's variables in the process, `target` reads what `/proc` shows about it,
//! and `diagnostics` holds what both protocols report ([`AttachError`], [`AttachStep`]).

mod diagnostics;
mod protocol;
mod route;
mod start;
mod target;
mod variables;

use std::time::Duration;

pub use diagnostics::{AttachError, AttachStep, NoCudaReason};
pub use protocol::{AttachProtocol, DetachProcedure};
pub use route::PtraceHandshake;

/// `CUDBG_ERROR_ATTACH_NOT_POSSIBLE`: reported in `cudbgReportedDriverInternalErrorCode` when the driver's critical
/// section is taken (attaching then would deadlock); cuda-gdb lets the process run 100 ms and tries again.
const ATTACH_NOT_POSSIBLE: u64 = 0x28;
/// How long retries after `ATTACH_NOT_POSSIBLE` go on (cuda-gdb's `app_init_timeout`).
const RETRY_FOR: Duration = Duration::from_secs(5);
/// How long the process runs between two tries.
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// The process's file descriptor that starts the driver's attach procedure (-1 until the driver is initialised).
const ATTACH_FD: &str = "cudbgInitiateDebuggerAttachProcedureFd";
/// The function the driver calls when the attach procedure has finished.
const ATTACH_FINISHED: &str = "cudbgReportAttachProcedureFinished";

/// Variables read for the report, in this order.
const REPORTED: &[&str] = &[
    "cudbgAttachHandlerAvailable",
    "cudbgDebuggerInitialized",
    "cudbgIpcFlag",
    "cudbgRpcEnabled",
    "cudbgApiClientPid",
    "cudbgApiClientRevision",
    "cudbgSessionId",
    "cudbgDebuggerCapabilities",
    "cudbgEnableLaunchBlocking",
    "cudbgResumeForAttachDetach",
    "cudbgReportedDriverInternalErrorCode",
    ATTACH_FD,
];

/// The one 64-bit variable among those the crate touches.
const WIDE: &str = "cudbgReportedDriverInternalErrorCode";
