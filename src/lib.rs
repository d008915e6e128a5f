//! Safe, fast access to vendor GPU tool APIs, for Rust profilers, tracers, debuggers and replay tools. Nothing
//! is linked: each vendor library is opened at run time the first time it is needed, so the crate builds
//! anywhere, GPU or not, and a missing library is a [`LoadError`] that lists every place searched.
//!
//! | API | feature | start with | what it does |
//! |---|---|---|---|
//! | CUPTI Checkpoint | `cupti` | [`cupti::Checkpoint`] | saves a CUDA context's device memory and restores it before each replay |
//! | CUPTI activity tracing | `cupti` | [`cupti::activity::ActivityTracer`] | kernels, copies, sets, API calls and synchronisations of this process, as typed records, with drops reported |
//! | CUPTI callbacks | `cupti` | [`cupti::callback::Subscriber`] | a closure on entry to and exit from each CUDA API call, and on resource events |
//! | CUDA Debugger API | `cudbg` | [`cudbg::DebugSession`] | runs a CUDA program under the debugger API, or attaches to a running one: typed events, device state, memory, breakpoints |
//! | CUDA core dumps | `coredump` (in `cudbg`) | [`coredump::CoreDump`] | reads the dump a faulting kernel leaves: devices, grids, warps, lanes, registers, memory; no driver needed |
//! | rocprofiler v2 | `rocprofiler` | [`rocprofiler::ProfilingSession`] | AMD kernel dispatch timestamps, API traces, counters, code objects (ROCm ≤ 7.2) |
//! | rocprofiler-sdk | `rocprofiler-sdk` | [`rocprofiler_sdk::Tool`] | AMD tools of ROCm 7.0+: kernel, copy and API traces, code objects, dispatch and device counters |
//! | Process checkpoint | `cupti` or `cudbg` | [`cuda::process::ProcessCheckpoint`] | moves another CUDA process's GPU memory to the host and back (`cuCheckpointProcess*`) |
//! | CUDA driver | `cupti` or `cudbg` | [`cuda::Context`] | the driver, devices, contexts, memory and kernels those APIs need |
//! | trace records | always | [`trace`] | what tracers keep of those records, owned, and the binary stream and file format for them, with reports and exports (the vendor-neutral `gpu-tools-trace` crate) |
//! | device counters | always | [`counters`] | the vendor-neutral face of counters sampled over time |
//! | CUPTI counters | `cupti` | [`cupti::profiler`], [`cupti::pm_sampling::PmSampler`], [`cupti::range_profiler::RangeProfiler`], [`cupti::pc_sampling::PcSampler`] | the metric catalogue (no GPU needed), device-wide counters over time, counters per kernel or range, stall reasons per PC |
//! | `/proc` | always | [`linux::procfs`] | what Linux says about a process: state, threads, command line, memory map |
//! | Injection | `inject` | [`linux::inject::Injection`] | loads a library into a running process and calls its entry point, then leaves the process as it was |
//! | per-kernel profiles | always | [`profile`] | the reports of a program profiled per kernel (running it is `gpu-tools-injection`'s) |
//! | loading | always | [`loader`] | the search order for vendor libraries, and what was tried |
//!
//! Four things here are called "profile": [`profile`] holds the tables of per-kernel metrics collected from a
//! program run under the injection library (`gpu_tools_injection::profile` runs it); [`cupti::profiler`] is CUPTI's counter host (metric catalogue, configurations, counter-data
//! images); [`cupti::range_profiler`] is CUPTI's range profiler (counters per kernel or range of one context);
//! [`rocprofiler`] is AMD's rocprofiler v2.
//!
//! Every error is an [`Error`]; its `Display` text is meant for the user. The library logs what it does (the path
//! of each library loaded, the negotiated debugger API version, each failed vendor call) through the
//! [`log`](https://docs.rs/log) facade at debug level, and never prints: `RUST_LOG=gpu_tools=debug` with
//! `env_logger` shows it.
//!
//! # CUPTI Checkpoint (`cupti`)
//!
//! Save once, then restore before each run, so every run starts from the same device memory:
//!
//! ```rust,no_run
//! use gpu_tools::{cuda::Context, cupti::Checkpoint};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let ctx = Context::primary(0)?; // checks the driver and the device first
//!     let mut checkpoint = Checkpoint::new(&ctx)?;
//!     checkpoint.save()?;
//!     for _ in 0..10 {
//!         checkpoint.restore()?;
//!         // launch the kernel under test
//!     }
//!     checkpoint.free() // or drop it
//! }
//! ```
//!
//! # CUDA Debugger API (`cudbg`)
//!
//! Start a CUDA program under the debugger API and read its events as they come:
//!
//! ```rust,no_run
//! use gpu_tools::cudbg::{DebugSession, Event};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let mut session = DebugSession::start(std::process::Command::new("./my_cuda_app"))?;
//!     while let Some(batch) = session.next_batch(None)? {
//!         for (_queue, event) in &batch {
//!             if let Event::KernelReady(k) = event {
//!                 println!("kernel at {:#x}, grid {}", k.function_entry, k.grid_dim);
//!             }
//!         }
//!     } // the program goes on once its batch is dropped
//!     Ok(())
//! }
//! ```
//!
//! # rocprofiler v2 (`rocprofiler`)
//!
//! Time every kernel dispatch of this process (load the library before the first HIP call):
//!
//! ```rust,no_run
//! use gpu_tools::rocprofiler::{Filter, ProfilingSession, Record, Rocprofiler, RocprofilerLibrary};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     let rocprofiler = Rocprofiler::initialize(RocprofilerLibrary::load()?)?;
//!     let session = ProfilingSession::new(&rocprofiler)?;
//!     let buffer = session.create_buffer(1 << 20, |batch| {
//!         for record in batch.records().flatten() {
//!             if let Record::Profiler(d) = record {
//!                 println!("kernel {:#x}: {} ns", d.kernel_id(), d.timestamps().duration());
//!             }
//!         }
//!     })?;
//!     session.add_filter(Filter::dispatch_timestamps(), &buffer)?;
//!     session.start()?;
//!     // ... HIP work ...
//!     session.terminate() // every record has reached the callback
//! }
//! ```
//!
//! # Loading
//!
//! Any library can be asked for directly; the error says where it was looked for:
//!
//! ```rust
//! match gpu_tools::cupti::CuptiLibrary::load() {
//!     Ok(cupti) => println!("CUPTI {:?} at {:?}", cupti.api_version(), cupti.path()),
//!     Err(e) => eprintln!("{e}"), // every candidate, and why it was rejected
//! }
//! ```
//!
//! Each module's documentation has its API in depth; the raw bindings are in `gpu_tools::sys`, hidden
//! from these docs and outside the crate's semver promise (see that module). The repository's `docs/`
//! has measured costs, what was seen on real hardware, and the CUDA and ROCm versions the crate was tried with.
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod bytes;
pub mod counters;
#[cfg(any(
    feature = "cupti",
    feature = "rocprofiler",
    feature = "rocprofiler-sdk"
))]
mod delivery;
pub mod linux;
pub mod loader;
#[cfg(any(
    feature = "cupti",
    feature = "cudbg",
    feature = "coredump",
    feature = "rocprofiler",
    feature = "rocprofiler-sdk"
))]
mod status;
/// Raw bindgen output for the vendor headers (about 27,000 lines): the [`gpu-tools-sys`](gpu_tools_sys) crate,
/// versioned with this one. **Unstable**: not part of the crate's API and not covered by semver. Regenerating it
/// for a new header release may rename, add or remove any item in a patch release. It is public so that tests,
/// benches and the workspace's own tools can reach raw types and constants; other code should use the safe
/// modules, or depend on `gpu-tools-sys` at the exact version.
#[doc(hidden)]
pub use gpu_tools_sys as sys;
/// The trace records, their stream and file format, reports and exports: the [`gpu-tools-trace`](gpu_tools_trace)
/// crate, which depends on no vendor code (use it alone to read and analyse traces).
#[doc(inline)]
pub use gpu_tools_trace as trace;
/// The per-kernel profile of a program: what it sent ([`profile::ProfileRun`]) and its kernel and stall tables
/// (`gpu_tools_trace::profile`). The request and running a program with it are `gpu_tools_injection::profile`'s.
pub use gpu_tools_trace::profile;

#[cfg(feature = "coredump")]
pub mod coredump;
#[cfg(any(feature = "cupti", feature = "cudbg"))]
pub mod cuda;
#[cfg(feature = "cudbg")]
pub mod cudbg;
#[cfg(feature = "cupti")]
pub mod cupti;
#[cfg(feature = "rocprofiler")]
pub mod rocprofiler;
#[cfg(feature = "rocprofiler-sdk")]
pub mod rocprofiler_sdk;

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
    /// A debugger API call failed (or a core dump's device status, where a caller makes it an error).
    #[cfg(feature = "coredump")]
    #[error(transparent)]
    Cudbg(#[from] coredump::CudbgError),
    /// A rocprofiler call failed.
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    Rocprofiler(#[from] rocprofiler::RocprofilerError),
    /// A process checkpoint failed (`cuda::process`).
    #[cfg(any(feature = "cupti", feature = "cudbg"))]
    #[error(transparent)]
    ProcessCheckpoint(#[from] cuda::process::ProcessCheckpointError),
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
    /// A library could not be loaded into a running process ([`linux::inject`]).
    #[cfg(feature = "inject")]
    #[error(transparent)]
    Inject(#[from] linux::inject::InjectError),
    /// The threads of a running process could not be stopped ([`linux::quiesce`]).
    #[cfg(feature = "inject")]
    #[error(transparent)]
    Quiesce(#[from] linux::quiesce::QuiesceError),
    /// rocprofiler (v2) was misused (reported before any vendor call).
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    RocprofilerUsage(#[from] rocprofiler::ProfilerError),
    /// A file could not be read as a CUDA core dump.
    #[cfg(feature = "coredump")]
    #[error(transparent)]
    CoreDump(#[from] coredump::CoreDumpError),
    /// A trace stream could not be read.
    #[error(transparent)]
    Wire(#[from] trace::WireError),
    /// A CUPTI activity record could not be decoded.
    #[cfg(feature = "cupti")]
    #[error(transparent)]
    ActivityRecord(#[from] cupti::activity::RecordError),
    /// A rocprofiler record could not be decoded.
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    RocprofilerRecord(#[from] rocprofiler::RecordError),
    /// The machine has no usable AMD GPU driver.
    #[cfg(feature = "rocprofiler")]
    #[error(transparent)]
    NoAmdDriver(#[from] rocprofiler::NoAmdDriver),
    /// A rocprofiler-sdk call failed.
    #[cfg(feature = "rocprofiler-sdk")]
    #[error(transparent)]
    RocprofilerSdk(#[from] rocprofiler_sdk::SdkStatus),
    /// rocprofiler-sdk was misused (reported before any vendor call).
    #[cfg(feature = "rocprofiler-sdk")]
    #[error(transparent)]
    Sdk(#[from] rocprofiler_sdk::SdkError),
    /// A CUPTI counter API (metric catalogue, PM sampling, range profiler, PC sampling) could not do what was asked.
    #[cfg(feature = "cupti")]
    #[error(transparent)]
    CuptiCounters(#[from] cupti::ProfilingError),
}

/// `Result` with the crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The README's Rust examples, compiled (not run) by `cargo test --doc`.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeExamples;
