//! Whole-process GPU checkpoint through the CUDA driver: [`ProcessCheckpoint`] locks another process's CUDA
//! calls, moves all of its device memory to host memory and releases its GPUs, then brings them back. It is what
//! CRIU-based migration and the suspension of GPU jobs build on; `cupti::Checkpoint`, by contrast, saves one
//! context inside the process that owns it.
//!
//! ```no_run
//! use std::time::Duration;
//! use gpu_tools::cuda::process::{ProcessCheckpoint, ProcessState};
//!
//! # fn main() -> Result<(), gpu_tools::cuda::process::ProcessCheckpointError> {
//! let pid = 4242;
//! assert_eq!(ProcessCheckpoint::state(pid)?, ProcessState::Running);
//! let frozen = ProcessCheckpoint::attach(pid)?
//!     .lock(Duration::from_secs(10))?
//!     .checkpoint()?; // the GPUs are free now
//! // ... CRIU dump, or let another job use the GPU ...
//! frozen.restore()?.unlock()?;
//! # Ok(()) }
//! ```

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
