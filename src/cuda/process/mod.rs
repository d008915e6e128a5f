//! Whole-process GPU checkpoint through the CUDA driver: [`ProcessCheckpoint`] locks *another* process's CUDA
//! calls, moves all of its device memory to host memory and releases its GPUs, then brings them back at the same
//! device addresses (the driver's `cuCheckpointProcess*` calls: CUDA 12.8 / driver r570 and later, Linux). It is
//! what CRIU-based migration and the suspension of GPU jobs build on; `cupti::Checkpoint`, by contrast, saves one
//! context inside the process that owns it.
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessState};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let pid = 4242;
//!     assert_eq!(ProcessCheckpoint::state(pid)?, ProcessState::Running); // reads, changes nothing
//!     let locked = ProcessCheckpoint::attach(pid)?.lock(Duration::from_secs(10))?;
//!     let frozen = locked.checkpoint()?; // the process's GPUs are free now
//!     println!("restore thread {}", frozen.restore_thread_id()?);
//!     // ... CRIU dump, or let another job use the GPU ...
//!     let running = frozen.restore()?.unlock()?;
//!     running.finish()?; // nothing left to undo: no driver call
//!     Ok(())
//! }
//! ```
//!
//! # Stages
//!
//! The handle's type follows the driver's states, and each step consumes it and returns the next one, so only the
//! transitions the driver allows can be written (a restore of a running process, or a second checkpoint, does not
//! compile; [`restore_onto`](ProcessCheckpoint::restore_onto) restores onto other GPUs):
//!
//! ```text
//! Running --lock(timeout)--> Locked --checkpoint()--> Checkpointed
//!    ^                         | ^                         |
//!    +-------- unlock() -------+ +------- restore() -------+
//! ```
//!
//! - A failed step returns [`Failed`]: the error and the handle in its old stage, to retry
//!   ([`Failed::into_handle`]) or to drop. `?` converts it into [`ProcessCheckpointError`] or
//!   [`gpu_tools::Error`](crate::Error), dropping the handle.
//! - **Drop** of a locked or checkpointed handle (or of one whose last step failed) reads the driver's state and
//!   brings the process back to running: restore if checkpointed, then unlock. Where that is impossible (the process
//!   exited, or the driver put it in `FAILED`), [`finish`](ProcessCheckpoint::finish) says so in its error; drop can
//!   only log it. [`ProcessCheckpoint::adopt`] takes a process in whatever state it was left.
//! - **Checked before any driver call**: a pid of 0 or above `i32::MAX`
//!   ([`InvalidPid`](ProcessCheckpointError::InvalidPid)), this process's own pid
//!   ([`OwnProcess`](ProcessCheckpointError::OwnProcess): it would lock its own CUDA calls), a pid another handle of
//!   this process holds ([`AlreadyHeld`](ProcessCheckpointError::AlreadyHeld)), a timeout beyond the driver's 32-bit
//!   milliseconds ([`InvalidTimeout`](ProcessCheckpointError::InvalidTimeout)), and a driver without the calls
//!   ([`Unsupported`](ProcessCheckpointError::Unsupported), naming the missing symbol; the driver still loads). The
//!   timeout is rounded up to whole milliseconds and is at least 1 ms: the driver reads 0 as "wait for ever".
//! - **Driver refusals** are diagnosed with `/proc` and keep the driver's [`CudaError`](crate::cuda::CudaError)
//!   ([`ProcessCheckpointError::cuda_error`], [`ProcessCheckpointError::call`]):
//!   [`NoSuchProcess`](ProcessCheckpointError::NoSuchProcess) (driver 580 answers `CUDA_ERROR_OPERATING_SYSTEM`),
//!   [`NotPermitted`](ProcessCheckpointError::NotPermitted) (another user's process, for a caller that is not root),
//!   [`NotCuda`](ProcessCheckpointError::NotCuda) (`CUDA_ERROR_NOT_INITIALIZED`),
//!   [`LockTimedOut`](ProcessCheckpointError::LockTimedOut) (the process keeps running),
//!   [`IllegalState`](ProcessCheckpointError::IllegalState) with the state seen right after (another tool changed
//!   it), [`Exited`](ProcessCheckpointError::Exited) (the held process exited, or its pid now names another process:
//!   the start time in `/proc` is compared), [`ProcessFailed`](ProcessCheckpointError::ProcessFailed), and
//!   [`Driver`](ProcessCheckpointError::Driver) for anything else.
//! - `restore` calls `cuInit` in the calling process first: the driver requires it unless persistence mode is on.
//! - Handles are `Send + Sync`; each step consumes the handle, so no two steps of one handle run at once.
//! - Transitions are logged at debug level (`RUST_LOG=gpu_tools=debug`).
//!
//! # Several GPUs
//!
//! A checkpoint of a process that uses several devices frees the memory on each and restores each.
//! [`restore_onto`](ProcessCheckpoint::restore_onto) with [`GpuPair`]s (`checkpointed`, `restore_on`) remaps GPUs by
//! UUID ([`Driver::device_uuid`](crate::cuda::Driver::device_uuid)); the driver needs a pair for every GPU the
//! process used, each onto a GPU of the same chip with enough memory.
//!
//! With the `serde` feature, [`ProcessState`] and [`GpuPair`] serialise (UUIDs as `nvidia-smi` writes them).

mod error;
mod handle;
mod state;
mod target;

pub use error::{Failed, ProcessCheckpointError};
pub use handle::{Adopted, Checkpointed, GpuPair, Locked, ProcessCheckpoint, Running, Stage};
pub use state::ProcessState;

impl<S: Stage> From<Failed<ProcessCheckpoint<S>>> for ProcessCheckpointError {
    fn from(f: Failed<ProcessCheckpoint<S>>) -> Self {
        f.into_error()
    }
}

impl<S: Stage> From<Failed<ProcessCheckpoint<S>>> for crate::Error {
    fn from(f: Failed<ProcessCheckpoint<S>>) -> Self {
        f.into_error().into()
    }
}
