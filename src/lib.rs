//! Safe, fast access to three vendor GPU tool APIs, loaded at run time:
//!
//! - [`cupti`]: NVIDIA CUPTI Checkpoint (save and restore a CUDA context's device memory);
//! - [`cudbg`]: the NVIDIA CUDA Debugger API (`cudadebugger.h`);
//! - [`rocprofiler`]: AMD rocprofiler v2.
//!
//! [`trace`] holds what tracers keep of those APIs' records, owned, and the crate's binary stream format for them.
//!
//! Nothing is linked from a vendor: each library is opened with `libloading` the first time it is needed
//! ([`loader`] describes the search order), and a missing library is a [`LoadError`] that lists every candidate.
//! The raw bindings are in [`sys`].
#![deny(unsafe_op_in_unsafe_fn, missing_docs)]

#[cfg(any(feature = "cupti", feature = "rocprofiler"))]
mod delivery;
pub mod loader;
#[cfg(any(feature = "cupti", feature = "cudbg", feature = "rocprofiler"))]
mod status;
pub mod sys;
pub mod trace;

#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub mod cuda;
#[cfg(feature = "cudbg")]
pub mod cudbg;
#[cfg(feature = "cupti")]
pub mod cupti;
#[cfg(feature = "rocprofiler")]
pub mod rocprofiler;

pub use loader::LoadError;

/// Any error of the crate.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A vendor library could not be loaded.
    #[error(transparent)]
    Load(#[from] LoadError),
    /// A CUDA driver call failed.
    #[cfg(any(feature = "cupti", feature = "cudbg"))]
    #[error(transparent)]
    Cuda(#[from] cuda::CudaError),
    /// A CUPTI call failed.
    #[cfg(feature = "cupti")]
    #[error(transparent)]
    Cupti(#[from] cupti::CuptiError),
    /// A debugger API call failed.
    #[cfg(feature = "cudbg")]
    #[error(transparent)]
    Cudbg(#[from] cudbg::CudbgError),
    /// A rocprofiler call failed.
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    Rocprofiler(#[from] rocprofiler::RocprofilerError),
    /// A checkpoint was misused (reported before any vendor call).
    #[cfg(feature = "cupti")]
    #[error(transparent)]
    Checkpoint(#[from] cupti::CheckpointError),
    /// The CUPTI Activity or Callback layer could not do what was asked.
    #[cfg(feature = "cupti")]
    #[error(transparent)]
    Tracing(#[from] cupti::TracingError),
    /// A debug session could not do what was asked.
    #[cfg(feature = "cudbg")]
    #[error(transparent)]
    Session(#[from] cudbg::SessionError),
    /// rocprofiler was misused (reported before any vendor call).
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    Profiler(#[from] rocprofiler::ProfilerError),
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The README's Rust examples, compiled (not run) by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
