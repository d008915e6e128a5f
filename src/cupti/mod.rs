//! NVIDIA CUPTI: Checkpoint (save a CUDA context's device memory, run kernels, restore it), the Activity API
//! ([`activity`]: what the GPU and the CUDA APIs did, in buffers of records) and the Callback API ([`callback`]:
//! a closure called on entry to and exit from CUDA API functions and on resource events), and the counter APIs:
//! [`profiler`] (the metric catalogue, no GPU needed), [`pm_sampling`] (device-wide counters over time),
//! [`range_profiler`] (counters per kernel or per range of one context) and [`pc_sampling`] (where warps stall).
//!
//! The libraries are loaded at run time: [`CheckpointLibrary`] (`libcheckpoint.so`) and [`CuptiLibrary`]
//! (`libcupti.so.13` or `.12`), found as [`crate::loader`] describes.
//!
//! # Checkpoint
//!
//! [`Checkpoint`] saves the device memory of one CUDA context and restores it: the building block of kernel replay,
//! autotuning and fault injection.
//!
//! ```no_run
//! use gpu_tools::cuda::Context;
//! use gpu_tools::cupti::{Checkpoint, Optimizations, Reserve};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     // Or Context::create(0), Context::from_cudarc(&c) (feature `cudarc`), unsafe Context::from_raw(raw).
//!     let ctx = Context::primary(0)?;
//!     let mut cp = Checkpoint::builder(&ctx)
//!         .reserve_device(Reserve::MiB(1024)) // keep 1 GiB of device memory free
//!         .reserve_host(Reserve::Nothing)
//!         .allow_overwrite(true)
//!         .optimizations(Optimizations::TRANSFER) // restore only changed blocks: restore at the same point each time
//!         .build()?;
//!     cp.save()?;
//!     for _ in 0..10 {
//!         cp.restore()?;
//!         // run the kernel under test
//!     }
//!     cp.free()?; // or drop it: drop frees too, but cannot report an error
//!     Ok(())
//! }
//! ```
//!
//! - **Preconditions are checked first.** Before every vendor call the crate makes sure the driver is loaded and
//!   initialised, checks the context with the driver, pushes it current and passes it explicitly (the vendor's
//!   `libcheckpoint.so` crashes the process without a driver and misbehaves with a null context). No driver:
//!   [`Error::Load`](crate::Error::Load); a destroyed context: [`Error::Cuda`](crate::Error::Cuda) with
//!   [`is_invalid_context`](crate::cuda::CudaError::is_invalid_context).
//! - **Misuse is typed**, before the vendor is called: restore before save ([`CheckpointError::NotSaved`]), a
//!   second save without [`allow_overwrite`](CheckpointBuilder::allow_overwrite)
//!   ([`CheckpointError::AlreadySaved`]), both levels [`Reserve::Everything`]
//!   ([`CheckpointError::NoMemoryAllowed`]). [`free`](Checkpoint::free) consumes the checkpoint, and the checkpoint
//!   borrows its context, so use after free and dropping the context first do not compile. Vendor failures are
//!   [`Error::Cupti`](crate::Error::Cupti) ([`CuptiError::OutOfMemory`], ...).
//! - **Threads**: [`Checkpoint`] is `Send + Sync`; the methods that call the vendor take `&mut self`, and the
//!   crate serialises checkpoint calls process-wide (the vendor does not document their thread safety).
//! - **Several GPUs**: a checkpoint works on its own context, so with a context on each of two devices each
//!   checkpoint saves and restores its own device, also from two threads at once.
//! - With CUPTI 13.0, [`Reserve::Everything`] (the vendor's `(size_t)-1`) on either level makes save fail with
//!   `CUPTI_ERROR_INVALID_PARAMETER`, and reserving all device and host memory makes the checkpoint fall back to a
//!   file under `/tmp` (slow, but correct).
//!
//! # Tracing
//!
//! [`activity::ActivityTracer`] collects activity records (kernels, copies, sets, API calls, synchronisations,
//! overhead) and hands each filled buffer to a closure; [`callback::Subscriber`] calls a closure on CUDA API calls
//! and resource events. The [`activity`] module shows both at work.

pub mod activity;
// Below both `activity` and `tracing_error` (whose errors name a kind): no circle between them.
mod activity_kind;
pub mod callback;
mod cbid;
mod checkpoint;
mod error;
mod library;
pub mod profiler;
pub mod top;
mod tracing_error;

pub use checkpoint::{Checkpoint, CheckpointBuilder, CheckpointOptions, Optimizations, Reserve};

pub use cbid::{ApiCbid, ApiDomain, DriverCbid, RuntimeCbid};
pub use error::CuptiError;
pub use library::{CheckpointFn, CheckpointLibrary, CuptiLibrary, CuptiVersion, TracingSymbols};
// The samplers live beside the counter APIs' shared ground; their paths here stay.
pub use profiler::ProfilingError;
pub use profiler::{pc_sampling, pm_sampling, range_profiler};
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
