//! AMD rocprofiler-sdk: the profiling stack of ROCm 7.0 and later (`librocprofiler-sdk.so.1`).
//!
//! A *tool* registers with the SDK and, in its one initialisation, configures *contexts* and their *services*:
//! buffer tracing (kernel dispatches, memory copies, HIP/HSA/marker API calls, ...), callback tracing (code objects
//! and kernel symbols), the dispatch counting service and the device counting service. Buffers hand their records
//! to a closure as a borrowed [`Batch`], exactly as [`rocprofiler::Buffer`](crate::rocprofiler::Buffer) and the
//! CUPTI activity tracer hand over theirs (the same delivery code: serialised, panics caught and reported, drops
//! counted).
//!
//! # Registering
//!
//! From a cdylib loaded through `ROCP_TOOL_LIBRARIES` (or preloaded), with
//! [`rocprofiler_sdk_tool!`](crate::rocprofiler_sdk_tool), which exports `rocprofiler_configure`; or from inside a
//! program, before its first HIP call, with [`force_configure`]. Registering twice, or after the SDK initialised,
//! is a typed error ([`SdkError::AlreadyRegistered`], [`SdkError::TooLate`]).
//!
//! ```no_run
//! use std::sync::atomic::{AtomicU64, Ordering};
//! use gpu_tools::rocprofiler_sdk::{
//!     Buffer, BufferOptions, Context, Record, Setup, SdkLibrary, Tool, TraceKind, force_configure,
//! };
//!
//! static KERNELS: AtomicU64 = AtomicU64::new(0);
//!
//! struct KernelTimer {
//!     context: Context,
//!     buffer: Buffer,
//! }
//!
//! impl Tool for KernelTimer {
//!     const NAME: &'static str = "kernel-timer";
//!
//!     fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
//!         let context = setup.create_context()?;
//!         let buffer = setup.create_buffer(&context, BufferOptions::new(1 << 20), |batch| {
//!             for record in batch.records().flatten() {
//!                 if let Record::KernelDispatch(k) = record {
//!                     KERNELS.fetch_add(1, Ordering::Relaxed);
//!                     println!("kernel {} ran {} ns", k.kernel_id(), k.time().duration_ns());
//!                 }
//!             }
//!         })?;
//!         setup.trace(&context, &[TraceKind::KernelDispatch], &buffer)?;
//!         context.start()?;
//!         Ok(KernelTimer { context, buffer })
//!     }
//!
//!     fn finalize(&mut self) {
//!         println!("{} kernels", KERNELS.load(Ordering::Relaxed));
//!     }
//! }
//!
//! // In a cdylib: gpu_tools::rocprofiler_sdk_tool!(KernelTimer);
//! // Inside the program, before the first HIP call:
//! fn main() -> gpu_tools::Result<()> {
//!     force_configure::<KernelTimer>(SdkLibrary::load()?)?;
//!     // ... HIP work ...
//!     gpu_tools::rocprofiler_sdk::finalize() // or let the SDK finalise at exit
//! }
//! ```
//!
//! Kernel names arrive with the code-object callbacks ([`Setup::trace_code_objects`], [`KernelSymbol`]) as the
//! code object has them: mangled for C++ kernels. The library does not demangle; tools do.
//!
//! ROCTx ranges come as records of their own ([`TraceKind::MarkerRanges`], [`MarkerRange`]), their names with the
//! callbacks of the calls that open them ([`MarkerArgs`]); see [ROCTx](self#roctx).
//!
//! # Versions
//!
//! The bindings come from rocprofiler-sdk 1.0.0 (ROCm 7.0); the loader accepts major version 1 only and names a
//! `.so.0` (SDK 0.x of ROCm 6.2–6.4) it found in [`SdkError::UnsupportedVersion`]. Record layouts are asserted at
//! compile time, and each record's own `size` field is checked before it is read, so an SDK that grows a record
//! still decodes; a category or kind newer than the bindings is [`Record::Unknown`]. A tracing kind the library
//! does not have (`MARKER_CORE_RANGE_API` in an SDK that predates it) is [`SdkError::UnknownKind`] before the
//! library is asked ([`SdkLibrary::knows_buffer_kind`]).
//!
//! # ROCTx
//!
//! rocprofiler-sdk 1.0 traces ROCTx calls twice, each way with correlation ids of its own: each call on its own
//! (`MARKER_CORE_API`, [`TraceKind::MarkerApi`], [`ApiCall::marker_call`]), and each range as one record from its
//! start to its end, written when it ends, or a mark (`MARKER_CORE_RANGE_API`, [`TraceKind::MarkerRanges`]).
//! Neither record holds the message: a tool reads it in the callback of the call that opens the range
//! ([`Payload::Marker`] at [`Phase::Enter`], [`MarkerArgs::message`]), which carries the range record's
//! correlation id. A range never closed gives no record.

mod agent;
mod batch;
mod buffer;
mod callback;
mod context;
mod counting;
mod error;
mod library;
mod marker;
mod record;
mod registration;
mod sized;
mod tracked;

pub use agent::{Agent, AgentKind, agents};
pub use batch::{Batch, RecordError, Records};
pub use buffer::{Buffer, BufferOptions, BufferPolicy, BufferStats, MIN_BUFFER_SIZE};
pub use callback::{CallbackEvent, CodeObjectLoad, KernelSymbol, Payload, Phase};
pub use context::Context;
pub use counting::{Counter, CounterConfig, DeviceSampler, counters};
pub use error::{SdkError, SdkStatus};
pub use library::{ENV_VAR, SUPPORTED_MAJOR, SdkLibrary};
pub use marker::{MarkerArgs, MarkerCall, RangeOperation};
pub use record::{
    ApiCall, ApiKind, CopyDirection, CorrelationRetired, CounterValue, DispatchCounters,
    KernelDispatch, MarkerRange, MemoryAllocation, MemoryCopy, Record, ScratchMemory, TimeRange,
};
pub use registration::{
    Setup, Tool, TraceKind, configure, finalize, force_configure, is_registered,
};

use library::sym;
use std::ffi::{CStr, c_char};

/// Checks a status, logging a failure with the function's name.
pub(crate) fn check(call: &'static str, status: u32) -> Result<(), SdkStatus> {
    SdkStatus::check_call(call, status)
}

/// A configuration call the SDK refused because its configuration is locked, as the typed misuse; other statuses
/// as they are.
pub(crate) fn locked_or(e: SdkStatus) -> crate::Error {
    match e {
        SdkStatus::ConfigurationLocked => SdkError::ConfigurationLocked.into(),
        other => other.into(),
    }
}

impl SdkLibrary {
    /// The name of an operation of a buffer tracing kind (`hipLaunchKernel` for a HIP runtime call), from the
    /// library (`rocprofiler_query_buffer_tracing_kind_operation_name`).
    pub fn operation_name(&self, kind: u32, operation: i32) -> Option<String> {
        let f = sym(
            &self.t.rocprofiler_query_buffer_tracing_kind_operation_name,
            "rocprofiler_query_buffer_tracing_kind_operation_name",
        )
        .ok()?;
        name_query(|name, len| {
            // SAFETY: valid out-pointers for the call.
            unsafe { f(kind, operation, name, len) }
        })
    }

    /// The name of a buffer tracing kind (`HIP_RUNTIME_API`), from the library.
    pub fn buffer_kind_name(&self, kind: u32) -> Option<String> {
        let f = sym(
            &self.t.rocprofiler_query_buffer_tracing_kind_name,
            "rocprofiler_query_buffer_tracing_kind_name",
        )
        .ok()?;
        name_query(|name, len| {
            // SAFETY: valid out-pointers for the call.
            unsafe { f(kind, name, len) }
        })
    }

    /// The name of a callback tracing kind (`MARKER_CORE_RANGE_API`), from the library.
    pub fn callback_kind_name(&self, kind: u32) -> Option<String> {
        let f = sym(
            &self.t.rocprofiler_query_callback_tracing_kind_name,
            "rocprofiler_query_callback_tracing_kind_name",
        )
        .ok()?;
        name_query(|name, len| {
            // SAFETY: valid out-pointers for the call.
            unsafe { f(kind, name, len) }
        })
    }

    /// Whether this library has buffer tracing kind `kind` (it names every kind it has): `MARKER_CORE_RANGE_API`
    /// came with SDK 1.0, for one. [`Setup::trace`] refuses a kind it lacks before asking the library to configure
    /// it.
    pub fn knows_buffer_kind(&self, kind: u32) -> bool {
        self.buffer_kind_name(kind).is_some()
    }

    /// Whether this library has callback tracing kind `kind` (see [`knows_buffer_kind`](Self::knows_buffer_kind)).
    pub fn knows_callback_kind(&self, kind: u32) -> bool {
        self.callback_kind_name(kind).is_some()
    }

    /// The counter a counter instance (of a [`CounterValue`]) belongs to.
    pub fn counter_of_instance(&self, instance: u64) -> crate::Result<u64> {
        let f = sym(
            &self.t.rocprofiler_query_record_counter_id,
            "rocprofiler_query_record_counter_id",
        )?;
        let mut id = crate::sys::rocprofiler_sdk::rocprofiler_counter_id_t { handle: 0 };
        // SAFETY: any instance id is accepted; a valid out-pointer.
        check("rocprofiler_query_record_counter_id", unsafe {
            f(instance, &mut id)
        })?;
        Ok(id.handle)
    }
}

/// Runs one of the SDK's name queries (a static string and its length, written on success).
fn name_query(query: impl FnOnce(*mut *const c_char, *mut u64) -> u32) -> Option<String> {
    let mut name: *const c_char = std::ptr::null();
    let mut len = 0u64;
    if query(&mut name, &mut len) != crate::sys::rocprofiler_sdk::ROCPROFILER_STATUS_SUCCESS
        || name.is_null()
    {
        return None;
    }
    // SAFETY: on success the SDK hands out a static NUL-terminated string.
    Some(
        unsafe { CStr::from_ptr(name) }
            .to_string_lossy()
            .into_owned(),
    )
}

/// Exports `rocprofiler_configure` for the rocprofiler-sdk tool `$tool` (a type implementing
/// [`rocprofiler_sdk::Tool`](crate::rocprofiler_sdk::Tool)) from the crate it is written in, which must be built as
/// a `cdylib`. The SDK finds it when the library is named in `ROCP_TOOL_LIBRARIES` or preloaded.
///
/// ```no_run
/// # use gpu_tools::rocprofiler_sdk::{Setup, Tool};
/// struct Quiet;
/// impl Tool for Quiet {
///     const NAME: &'static str = "quiet";
///     fn initialize(_: &mut Setup<'_>) -> gpu_tools::Result<Self> { Ok(Quiet) }
/// }
/// gpu_tools::rocprofiler_sdk_tool!(Quiet);
/// ```
#[macro_export]
macro_rules! rocprofiler_sdk_tool {
    ($tool:ty) => {
        /// The rocprofiler-sdk tool entry point, exported for the SDK.
        ///
        /// # Safety
        /// Called by the SDK only, with its own arguments.
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn rocprofiler_configure(
            version: u32,
            runtime_version: *const ::std::ffi::c_char,
            priority: u32,
            client_id: *mut $crate::sys::rocprofiler_sdk::rocprofiler_client_id_t,
        ) -> *mut $crate::sys::rocprofiler_sdk::rocprofiler_tool_configure_result_t {
            // SAFETY: forwarded unchanged from the SDK, which is this function's only caller.
            unsafe {
                $crate::rocprofiler_sdk::configure::<$tool>(
                    version,
                    runtime_version,
                    priority,
                    client_id,
                )
            }
        }
    };
}
