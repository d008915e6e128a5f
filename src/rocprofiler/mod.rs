//! AMD rocprofiler v2: profiling sessions, filters, record buffers, device counters, code-object capture.
//!
//! **Which ROCm has it.** `librocprofiler64.so.2` ships with ROCm 6.x and 7.0–7.2; AMD deprecated it from 6.3.3 and
//! ends its support in 2026 Q2, and ROCm 7.9 and later (TheRock) do not build it. On ROCm 7.0 and later use
//! [`rocprofiler_sdk`](crate::rocprofiler_sdk) (`librocprofiler-sdk.so.1`), which both layers' concepts map to:
//! a [`ProfilingSession`] with filters becomes a context with services, [`DeviceProfilingSession`] the device
//! counting service, [`CodeObjectCapture`] the code-object callbacks.
//!
//! # Order of use
//!
//! 1. [`RocprofilerLibrary::load`] maps `librocprofiler64.so.2`. The library is itself an HSA tool, so it must be
//!    mapped **before the HSA runtime starts**, that is before the first HIP call of the process (or named in
//!    `HSA_TOOLS_LIB`). Loading is safe on any machine.
//! 2. [`Rocprofiler::initialize`] checks that an AMD GPU driver is present (the vendor's `rocprofiler_initialize`
//!    aborts the process without one) and returns a guard that finalises on drop.
//! 3. A [`ProfilingSession`] gets [`Filter`]s, each feeding a [`Buffer`] whose callback receives a borrowed
//!    [`Batch`] of decoded [`Record`]s; [`DeviceProfilingSession`] polls counters of a whole GPU;
//!    [`CodeObjectCapture`] records loaded code objects.
//!
//! ```no_run
//! use gpu_tools::rocprofiler::{Filter, ProfilingSession, Record, Rocprofiler, RocprofilerLibrary};
//! # fn main() -> gpu_tools::Result<()> {
//! let lib = RocprofilerLibrary::load()?; // before the first HIP call
//! let rocprofiler = Rocprofiler::initialize(lib)?;
//! let session = ProfilingSession::new(&rocprofiler)?;
//! let buffer = session.create_buffer(1 << 20, |batch| {
//!     for record in batch.records() {
//!         if let Ok(Record::Profiler(dispatch)) = record {
//!             println!("kernel {} took {} ns", dispatch.kernel_id(), dispatch.timestamps().duration());
//!         }
//!     }
//! })?;
//! session.add_filter(Filter::dispatch_timestamps(), &buffer)?;
//! session.start()?;
//! // ... run kernels ...
//! session.terminate()?;
//! # Ok(()) }
//! ```
//!
//! # Rules
//!
//! - **Load before HIP**: `librocprofiler64.so.2` is an HSA tool, so it must be mapped before the HSA runtime
//!   starts. Call [`RocprofilerLibrary::load`] first thing in `main`, or start the program with
//!   `HSA_TOOLS_LIB=/opt/rocm/lib/librocprofiler64.so.2`.
//! - **The driver is checked first**: [`Rocprofiler::initialize`] looks for `/dev/kfd` and a GPU node in the KFD
//!   topology ([`amd_gpus`]) and returns [`NoAmdDriver`] instead of calling the vendor's `rocprofiler_initialize`,
//!   which aborts the process on a machine without one.
//! - **Records live only during the callback**: a [`Batch`] and its [`Record`]s borrow the buffer half the vendor
//!   hands over, so they cannot be kept; copy what is needed. Every read of a record is bounds-checked, and a record
//!   that does not fit is a [`RecordError`].
//! - **One active session per process**: a second [`start`](ProfilingSession::start) is
//!   [`ProfilerError::SessionAlreadyActive`]. [`ProfilingSession::terminate`] returns once every record has reached
//!   its callback.

mod batch;
mod buffer;
mod codeobj;
mod device;
mod error;
mod filter;
mod kfd;
mod library;
mod record;
mod runtime;
mod session;

pub use batch::{Batch, RecordError, Records};
pub use buffer::{Buffer, BufferOptions, BufferStats};
pub use codeobj::{CaptureMode, CapturedCodeObjects, CodeObject, CodeObjectCapture};
pub use device::{CounterReading, CounterSample, DeviceProfilingSession};
pub use error::RocprofilerError;
#[allow(unused_imports)]
pub use filter::{Filter, FilterProperty, TraceDomain};
pub use kfd::{AmdGpu, NoAmdDriver, amd_gpus};
pub use library::RocprofilerLibrary;
pub use record::{
    AttRecord, CounterValue, Counters, CountersIter, CountersSamplerRecord, KernelProperties,
    PcSampleRecord, Phase, ProfilerRecord, Record, SampledCounter, SampledCounters, SpmRecord,
    Timestamps, TracerRecord,
};
pub use runtime::{CounterInfo, Rocprofiler};
pub use session::ProfilingSession;

/// Misuse of rocprofiler that the crate reports before calling the vendor, or a fault it detected itself.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProfilerError {
    /// No AMD GPU driver was found; `rocprofiler_initialize` would abort the process.
    #[error("no AMD GPU driver: {0}")]
    NoAmdDriver(String),
    /// A [`Rocprofiler`] guard already exists in this process.
    #[error("rocprofiler is already initialised in this process")]
    AlreadyInitialized,
    /// The loaded library lacks a function (cannot happen for a library accepted at load time).
    #[error("rocprofiler function `{0}` is missing")]
    MissingSymbol(&'static str),
    /// Another profiling session is active; rocprofiler allows one per process.
    #[error(
        "profiling session {active} is already active; rocprofiler allows one active session per process"
    )]
    SessionAlreadyActive {
        /// The active session's id.
        active: u64,
    },
    /// The session is not active.
    #[error("the profiling session is not active")]
    SessionNotActive,
    /// The session was started before: filters can no longer be added.
    #[error("the profiling session was already started")]
    SessionStarted,
    /// The session has no filter to start with.
    #[error("the profiling session has no filter")]
    NoFilter,
    /// A buffer smaller than the largest record would be overrun by the vendor.
    #[error("buffer size {size} is smaller than the largest record ({min} bytes)")]
    BufferTooSmall {
        /// The size asked for.
        size: usize,
        /// The smallest size the crate accepts.
        min: usize,
    },
    /// The buffer was created by another session.
    #[error("the buffer belongs to another profiling session")]
    ForeignBuffer,
    /// A session takes one filter of each kind.
    #[error("the session already has a {0} filter")]
    DuplicateFilter(&'static str),
    /// A filter takes at most one property.
    #[error("a filter takes at most one property")]
    TooManyProperties,
    /// The property does not apply to the filter's kind.
    #[error("property {property} does not apply to a {filter} filter")]
    PropertyMismatch {
        /// The property's kind.
        property: &'static str,
        /// The filter's kind.
        filter: &'static str,
    },
    /// A list that must not be empty was empty.
    #[error("the list of {0} is empty")]
    EmptyList(&'static str),
    /// A name holds a NUL byte.
    #[error("name {0:?} contains a NUL byte")]
    NulInName(String),
    /// A counter name does not fit the vendor's 64-byte field (it would be copied with `strcpy`).
    #[error("counter name {name:?} is {len} bytes; at most 63 fit")]
    CounterNameTooLong {
        /// The name.
        name: String,
        /// Its length in bytes.
        len: usize,
    },
    /// A range is reversed.
    #[error("range {start}..{end} is reversed")]
    InvalidRange {
        /// Start.
        start: u64,
        /// End.
        end: u64,
    },
    /// The buffer callback panicked; the panic was caught and not unwound into the vendor.
    #[error("the buffer callback panicked: {0}")]
    CallbackPanicked(String),
    /// The call would deadlock: it was made from inside a buffer callback.
    #[error(
        "this call is not allowed inside a buffer callback (it would wait for the callback itself)"
    )]
    InsideCallback,
    /// The device session or capture was not started.
    #[error("not started")]
    NotStarted,
    /// The device session or capture is already started.
    #[error("already started")]
    AlreadyStarted,
    /// A flush interval of zero would flush without pause.
    #[error("the flush interval must be above zero")]
    ZeroFlushInterval,
    /// A thread of the crate could not be started.
    #[error("cannot start a thread: {0}")]
    ThreadSpawn(String),
    /// A trace domain this crate does not know cannot be traced.
    #[error("unknown trace domain {0}")]
    UnknownDomain(u32),
    /// A GPU index does not fit the vendor's `int`.
    #[error("GPU index {0} is out of range")]
    InvalidIndex(u32),
}
