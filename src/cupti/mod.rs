//! NVIDIA CUPTI: Checkpoint (save a CUDA context's device memory, run kernels, restore it), the Activity API
//! ([`activity`]: what the GPU and the CUDA APIs did, in buffers of records) and the Callback API ([`callback`]:
//! a closure called on entry to and exit from CUDA API functions and on resource events), and the counter APIs:
//! [`profiler`] (the metric catalogue, no GPU needed), [`pm_sampling`] (device-wide counters over time),
//! [`range_profiler`] (counters per kernel or per range of one context) and [`pc_sampling`] (where warps stall).

pub mod activity;
pub mod callback;
mod cbid;
mod checkpoint;
mod error;
mod library;
pub mod pc_sampling;
pub mod pm_sampling;
pub mod profiler;
pub mod range_profiler;
pub mod top;
mod trace_records;
mod tracing_error;

pub use checkpoint::{Checkpoint, CheckpointBuilder, CheckpointOptions, Optimizations, Reserve};

pub use cbid::{ApiCbid, ApiDomain, DriverCbid, RuntimeCbid};
pub use error::CuptiError;
pub use library::{CheckpointFn, CheckpointLibrary, CuptiLibrary, CuptiVersion, TracingSymbols};
pub use profiler::ProfilingError;
pub use trace_records::TraceConverter;
pub use tracing_error::TracingError;

/// Misuse of a [`Checkpoint`] that the crate reports before calling the vendor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// `restore` before a successful `save` (or after an overwriting save failed).
    #[error("checkpoint restored before a successful save")]
    NotSaved,
    /// A second `save` on a checkpoint built without `allow_overwrite`.
    #[error("checkpoint already saved and overwrite is not allowed")]
    AlreadySaved,
    /// Both device and host memory set to [`Reserve::Everything`]: the vendor rejects that combination with
    /// `CUPTI_ERROR_INVALID_PARAMETER` (seen with CUPTI 13.0 on an H200).
    #[error("a checkpoint needs device or host memory; both are reserved entirely")]
    NoMemoryAllowed,
}
