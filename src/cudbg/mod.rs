//! NVIDIA CUDA Debugger API: drive a CUDA program as a debugger does.

mod error;
mod library;

pub use error::CudbgError;
pub(crate) use error::check;
pub use library::{ApiVersion, DebuggerLibrary, GetApiFn, GetApiVersionFn};

/// A debug session could not do what was asked (reported by the crate, not the driver).
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {}
