//! NVIDIA CUDA Debugger API: drive a CUDA program as a debugger does. A [`DebugSession`] starts a program, or
//! attaches to one that already runs, and reports what its GPUs do as typed [`Event`]s; the program's devices can
//! be suspended and their warps, lanes and memory read, breakpoints set, and the program let go.
//!
//! The API comes from the driver itself (`cudbgGetAPI` in `libcuda.so.1`, loaded at run time by
//! [`DebuggerLibrary`]); no NVIDIA tool is needed. Core dumps, which need no driver at all, are read by
//! [`crate::coredump`] (also reachable as `cudbg::coredump`).
//!
//! ```no_run
//! use gpu_tools::cudbg::{DebugSession, Event};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let mut session = DebugSession::start(std::process::Command::new("./my_cuda_app"))?;
//!     while let Some(batch) = session.next_batch(None)? {
//!         // None: until the program exits
//!         for (_queue, event) in &batch {
//!             if let Event::KernelReady(k) = event {
//!                 println!("grid {} at {:#x}: {} x {}", k.grid_id, k.function_entry, k.grid_dim, k.block_dim);
//!             }
//!         }
//!     } // dropping a batch acknowledges its synchronous events; the program stays blocked until then
//!     Ok(())
//! }
//! ```
//!
//! # The session
//!
//! - **API table**: the version is negotiated (the lesser of the driver's and the 13.0.163 header's); every slot is
//!   gated on the first revision that has it, so a slot the driver lacks is [`SessionError::Unsupported`], never a
//!   call into nothing.
//! - **Connection routes**: a program the session starts is connected through the driver's environment route
//!   ([`EnvHandshake`](handshake::EnvHandshake): environment variables, no ptrace); a process that already runs, through the attach route
//!   ([`PtraceHandshake`], see [Attaching](#attaching-to-a-running-process)). Both sit behind the [`Handshake`](handshake::Handshake)
//!   trait. A program that never starts CUDA gives [`SessionError::NoCuda`]; no session within
//!   [`SessionBuilder::handshake_timeout`] gives [`SessionError::HandshakeTimeout`] and the program is killed and
//!   reaped. One session per process ([`SessionError::AlreadyActive`]): the driver serves one debugger client per
//!   process.
//! - **Events**: the driver's callback only wakes the session; [`DebugSession::next_batch`] drains the
//!   synchronous and asynchronous queues into typed [`Event`]s (every `CUDBGEventKind` of 13.0, plus
//!   [`Event::Unknown`]) and hands them out as an [`EventBatch`]. The program threads that raised synchronous
//!   events stay blocked until the batch is acknowledged: when it is dropped, or earlier with
//!   [`EventBatch::release`], which keeps the events readable. [`EventBatch::timing`] tells when the callback
//!   fired, when the session woke and when the drain ended.
//! - **Waiting**: `next_batch` busy-polls for [`SessionBuilder::spin`] (default [`DEFAULT_SPIN`], one core busy
//!   meanwhile), then sleeps until the driver's callback wakes it; the program's exit is noticed within about
//!   20 ms.
//! - **Device state**: [`DebugSession::devices`], [`DebugSession::device`] (name, type, SM type, SM, warp, lane and
//!   register counts), [`DebugSession::suspend`] returns a [`Suspended`] guard (resumed on drop) through which
//!   warps, lanes, PCs, grid, block and thread indices, lane exceptions and global memory are read (and memory
//!   written); [`DebugSession::elf_image`] gives a module's image (its function symbols through
//!   [`elf::function_symbols`] or [`elf::SymbolTable`]); [`DebugSession::set_breakpoint`] and
//!   [`DebugSession::wait_for_stop`] stop a kernel at an address. Indices are checked against the device's counts
//!   before the driver sees them ([`SessionError::OutOfRange`]); a device index the API cannot name
//!   (`CUDBG_MAX_DEVICES`, 64) before any driver call ([`SessionError::DeviceBeyondApi`]).
//! - **Kernel ends**: driver 580 raises [`Event::KernelFinished`] only for blocking launches.
//!   [`SessionBuilder::blocking_launches`] and [`DebugSession::set_blocking_launches`] set the program's
//!   `cudbgEnableLaunchBlocking` (as cuda-gdb's `set cuda launch_blocking on` does); each launch then waits for its
//!   kernel and raises two synchronous events. [`DebugSession::set_launch_events`] turns launch events off.
//! - **Capabilities** ([`SessionBuilder::capabilities`], `CUDBGCapabilityFlags` bits): on the environment route the
//!   driver reads no variable for them, so they are written into the program's `cudbgDebuggerCapabilities`
//!   while it starts; `NO_CONTEXT_PUSH_POP_EVENTS` works this way.
//! - **Teardown**: dropping the session (or [`DebugSession::close`], which also returns the events still queued
//!   and the exit status) finalises the API, kills or detaches a program it started ([`OnDrop`]), reaps it and
//!   removes `/tmp/cuda-dbg/<pid>/` of the program and of this process. A program to be killed is stopped
//!   (SIGSTOP), the API finalised, and only then is it killed: killing it first made driver 580's debugger side
//!   crash the debugger process.
//! - **A program that dies from a signal** (it crashed, or something else killed it) leaves driver 580's debugger
//!   side broken: a later `getNextEvent` or `finalize` crashed the debugger process. So the session watches its
//!   program and, once it died that way, calls nothing more: `next_batch` hands out what it had and then `None`,
//!   calls that need the program return [`SessionError::DebuggeeKilled`], the API is not finalised, and later
//!   sessions in this process get [`SessionError::DebuggerUnusable`]. Events the driver still held are lost.
//! - **Threads**: a session is `Send` but not `Sync`: API calls of one session come from one thread at a time.
//!
//! # Attaching to a running process
//!
//! [`DebugSession::attach`] (or [`DebugSession::attach_builder`] for options) puts a CUDA process that already runs
//! under a session, a training job that hangs after hours for example, by the route cuda-gdb takes
//! ([`PtraceHandshake`]):
//!
//! 1. every thread of the process is stopped with ptrace (`PTRACE_SEIZE`, `PTRACE_INTERRUPT`);
//! 2. this client is written into the process's `libcuda.so.1` (`cudbgApiClientPid`, `cudbgApiClientRevision`,
//!    `cudbgSessionId`, `cudbgEnableLaunchBlocking`, `cudbgDebuggerCapabilities`, which always include
//!    [`ATTACH_CAPABILITIES`]: without them driver 580 refused the attach). `cudbgRpcEnabled`, which cuda-gdb sets,
//!    stays 0: with it set driver 580 accepted the attach but never reported its completion;
//! 3. the driver is asked to start its debugger back end in the process, one of two ways ([`AttachProtocol`],
//!    chosen with [`AttachBuilder::protocol`]; [`AttachProtocol::Auto`] takes the first the driver offers):
//!    - [`AttachProtocol::Descriptor`], on drivers that export `cudbgInitiateDebuggerAttachProcedureFd` (CUDA 13.1
//!      on): one byte is written to that file descriptor of the process, the process runs to a breakpoint at
//!      `cudbgReportAttachProcedureFinished` (whose trap never reaches it), and the driver starts the back end where
//!      it knows that to be safe;
//!    - [`AttachProtocol::InferiorCall`], on every driver that can be attached to: `cudbgApiAttach()` is called
//!      inside the process, on its main thread, while its other threads run; the thread is put back exactly where
//!      it was afterwards (every register, vector state included). While the driver answers
//!      `CUDBG_ERROR_ATTACH_NOT_POSSIBLE` (its critical section is busy) the process runs 100 ms and the call is
//!      tried again, for up to 5 s;
//! 4. the process runs again; the session waits for the driver's `ATTACH_COMPLETE`, after the driver has replayed
//!    the process's contexts and loaded modules as events (handed out by the first `next_batch`).
//!
//! After that the session is used as for a program it started. [`AttachBuilder::progress`] reports each step
//! ([`AttachStep`]: variables read and written with their old values, the calls and the driver's codes, the events
//! seen); the same lines go to the `log` facade at debug level. The process stays traced while the session lasts:
//! each signal it receives is handed back to it at once (a job-control stop stays a stop), threads it starts are
//! traced as they appear, other tracers are kept out, and its exit status, a death by a signal included, is seen
//! exactly.
//!
//! Refused, as [`SessionError::Attach`], before anything in the process changes:
//!
//! | case | [`AttachError`] |
//! |---|---|
//! | a pid that does not exist (or a zombie) | [`NoSuchProcess`](AttachError::NoSuchProcess) |
//! | this process | [`OwnProcess`](AttachError::OwnProcess) |
//! | a child of this process (its waits would take the ptrace stops; start it with [`DebugSession::builder`]) | [`OwnChild`](AttachError::OwnChild) |
//! | traced by another process | [`AlreadyTraced`](AttachError::AlreadyTraced) |
//! | stopped by a signal (state T: continue it first) | [`Stopped`](AttachError::Stopped) |
//! | no `libcuda.so.1` mapped, another `libcuda.so.1` file than this process's, or the driver loaded but never initialised | [`NoCuda`](AttachError::NoCuda) with a [`NoCudaReason`] |
//! | its driver already serves a debugger client that is alive | [`AlreadyDebugged`](AttachError::AlreadyDebugged) |
//! | ptrace or `/proc` refused (another user, `kernel.yama.ptrace_scope`) | [`PermissionDenied`](AttachError::PermissionDenied) |
//!
//! A process that ends during the attach gives [`AttachError::Exited`] with its status; the driver refusing gives
//! [`AttachError::DriverRefused`] or [`AttachError::NotPossible`]; a step that hangs, [`AttachError::Timeout`]. A
//! failure after the first change puts the variables back and lets the process go; one after the driver accepted
//! detaches it.
//!
//! **Detach** (`close`, or dropping the session; an attached process is never killed), in cuda-gdb's order less one
//! step: breakpoints are removed; launches stop raising events and the events already queued are fetched (kept for
//! the caller) and acknowledged, so that no launch holds the process inside the driver; the debugger side is told a
//! detach begins (`clearAttachState`); the process is stopped; while it is stopped the driver is asked to clean up
//! (`requestCleanupOnDetach` with the process's `cudbgResumeForAttachDetach`) and `cudbgDebuggerCapabilities` and
//! `cudbgDebuggerInitialized` are cleared; the process runs again and the session waits for `DETACH_COMPLETE`;
//! `cudbgIpcFlag` is cleared, the API finalised, and only then are the threads released from ptrace, each with the
//! signal it was about to receive. The documented procedure also calls `cudbgApiDetach()` inside the stopped
//! process; on driver 580 that call makes a process that destroys its last CUDA context before exiting die from
//! SIGSEGV at its exit (cuda-gdb's detach too), so it is left out unless [`AttachBuilder::detach_procedure`] asks
//! for [`DetachProcedure::Documented`].
//!
//! **Waiting for a breakpoint**: [`DebugSession::wait_for_stop`] hands events that come first to a closure and
//! acknowledges them: a synchronous event left pending holds the process, and a kernel launched behind it never
//! reaches its breakpoint. In an attached session driver 580 applied a breakpoint set at a held launch's
//! `KernelReady` from the next launch on; in a launched session it stops the held launch.
//!
//! Attaching needs an x86-64 process and permission to trace it (same user, or `CAP_SYS_PTRACE`; with
//! `kernel.yama.ptrace_scope` 1 only descendants).
//!
//! # Several GPUs
//!
//! [`DebugSession::devices`] lists every device the debugger API sees. Events carry their device
//! ([`KernelReady::dev`], [`ElfImage::dev`], ...); a suspended device's warps belong to that device, and
//! [`Suspended::grid`] reports a grid's device, context, module, entry and dimensions, also for grids launched
//! before an attach.

pub mod api;
mod attach;
mod device;
mod event;
pub mod handshake;
mod library;
mod notify;
mod session;

/// CUDA core dumps, read offline: [`crate::coredump`], under its older path.
#[doc(no_inline)]
pub use crate::coredump;
/// ELF images of CUDA modules and their function symbols: [`crate::coredump::elf`], under its older path.
#[doc(no_inline)]
pub use crate::coredump::elf;
#[doc(inline)]
pub use crate::coredump::{CudbgError, Dim3, Exception, KernelOrigin, KernelType};
pub use attach::{
    AttachError, AttachProtocol, AttachStep, DetachProcedure, NoCudaReason, PtraceHandshake,
};
pub use device::{DeviceProperties, GridInfo, StopWait, Suspended, WarpInfo};
pub use event::{ContextInfo, ElfImage, Event, KernelFinished, KernelReady, Queue, RAW_EVENT_SIZE};
pub use handshake::EndWatch;
pub use library::{ApiVersion, DebuggerLibrary, GetApiFn, GetApiVersionFn};
pub use session::{
    ATTACH_CAPABILITIES, AttachBuilder, BatchTiming, Closed, DEFAULT_SPIN, DebugSession,
    EventBatch, OnDrop, SessionBuilder, SessionError,
};
