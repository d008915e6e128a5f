//! NVIDIA CUPTI Checkpoint: save a CUDA context's device memory, run kernels, restore it.

mod error;
mod library;

pub use error::CuptiError;
pub(crate) use error::check;
pub use library::{CheckpointFn, CheckpointLibrary, CuptiLibrary};

/// Misuse of a [`Checkpoint`](crate::cupti) that the crate reports before calling the vendor.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {}
