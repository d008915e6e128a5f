//! AMD rocprofiler v2: profiling sessions, filters, record buffers, device counters, code-object capture.

mod error;
mod kfd;
mod library;

pub use error::RocprofilerError;
#[allow(unused_imports)]
pub(crate) use error::check;
pub use kfd::{AmdGpu, NoAmdDriver, amd_gpus};
pub use library::RocprofilerLibrary;

/// Misuse of rocprofiler that the crate reports before calling the vendor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {}
