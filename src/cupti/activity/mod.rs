//! The CUPTI Activity API: CUPTI records what the GPU and the CUDA APIs did into buffers the client lends it, and
//! hands each filled buffer back; the crate decodes it into typed [`Activity`] records.
//!
//! [`ActivityTracer`] is the process's one consumer of those buffers: it enables a typed set of kinds
//! ([`ActivityKinds`]), lends CUPTI 8-byte-aligned buffers from a crate-owned pool that reuses them, and hands each
//! completed buffer to a closure as an [`ActivityBatch`] borrowed for the call, decoded in Rust, in place, into
//! [`Activity`] records ([`Kernel`], [`Memcpy`], [`Memset`], [`ApiCall`], [`Synchronization`], [`Overhead`], ...
//! and [`Activity::Unknown`] for anything else). The Callback API ([`crate::cupti::callback`]) goes with it: a
//! closure called on entry to and exit from each CUDA API function, and on resource events.
//!
//! ```no_run
//! use gpu_tools::cupti::activity::{Activity, ActivityKinds, ActivityTracer, Clock, FlushMode};
//! use gpu_tools::cupti::callback::{ApiSite, CallbackDomain, CallbackEvent, ResourceKind, Subscriber};
//!
//! fn main() -> gpu_tools::Result<()> {
//!     // Before the program's first cuInit. Needs the CUDA driver library, not a GPU context.
//!     let tracer = ActivityTracer::builder()
//!         .kinds(ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMCPY | ActivityKinds::DRIVER)
//!         .buffer_size(8 << 20) // bytes per CUPTI buffer
//!         .max_buffers(64) // pool cap: past it CUPTI drops records, and the tracer reports the drops
//!         .clock(Clock::Monotonic) // every timestamp is CLOCK_MONOTONIC ns, the clock of std::time::Instant
//!         .start(|batch| {
//!             for record in batch.records() {
//!                 match record {
//!                     Ok(Activity::Kernel(k)) => println!(
//!                         "{:?} on stream {}: {} ns (launch {})",
//!                         k.name(),
//!                         k.stream_id(),
//!                         k.time().duration_ns(),
//!                         k.correlation_id()
//!                     ),
//!                     Ok(Activity::Api(call)) => println!("{} {}", call.cbid(), call.correlation_id()),
//!                     Ok(_) => {}
//!                     Err(e) => eprintln!("{e}"),
//!                 }
//!             }
//!             if batch.dropped_records() > 0 {
//!                 eprintln!("CUPTI dropped {} records", batch.dropped_records());
//!             }
//!         })?;
//!     // One subscriber per process; the closure is Fn + Send + Sync (API calls come from every thread at once).
//!     let subscriber = Subscriber::new(|event| match event {
//!         CallbackEvent::Api(call) if call.site() == ApiSite::Enter => {
//!             // The correlation id ties this call to its kernels' and copies' activity records.
//!             let _ = (call.cbid().function_name(), call.correlation_id());
//!         }
//!         CallbackEvent::Resource(r) if r.kind() == ResourceKind::ContextDestroyStarting => {
//!             // The moment to flush what the context produced.
//!         }
//!         _ => {}
//!     })?;
//!     subscriber.enable_domain(CallbackDomain::DriverApi)?;
//!     subscriber.enable_domain(CallbackDomain::Resource)?;
//!     // ... the CUDA work ...
//!     tracer.flush_all(FlushMode::Forced)?;
//!     subscriber.unsubscribe()?;
//!     let report = tracer.stop()?; // disables the kinds and forces a flush: every record reaches the closure once
//!     println!("{} records, {} dropped", report.stats.records, report.stats.dropped_records);
//!     Ok(())
//! }
//! ```
//!
//! # Checked before any CUPTI call
//!
//! One tracer and one subscriber exist per process ([`TracingError::TracerActive`](crate::cupti::TracingError::TracerActive),
//! [`TracingError::AlreadySubscribed`](crate::cupti::TracingError::AlreadySubscribed); CUPTI's own `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`, when another
//! tool holds the subscription, is the same error and names the holder where CUPTI 13 says who it is). The CUDA
//! driver library must be present and load ([`Driver::load`](crate::cuda::Driver::load), which does not call
//! `cuInit`, so a tracer can start inside an injection library's `InitializeInjection`, which CUDA calls from
//! within `cuInit`); without it both are a [`LoadError`](crate::LoadError) naming every place searched. `libcupti`
//! must load and export the Activity or Callback entry points
//! ([`CuptiLibrary::tracing_symbols`](crate::cupti::CuptiLibrary::tracing_symbols)); newer ones
//! (`cuptiSubscribe_v2`, the timestamp callback) are optional. Options are checked too: buffers hold the largest
//! record and are multiples of 8 bytes, the pool has at least one buffer. Flushing, stopping or starting a tracer
//! inside its own closure, and unsubscribing inside the subscriber's closure, would wait for themselves: they are
//! [`TracingError::InsideCallback`](crate::cupti::TracingError::InsideCallback).
//!
//! # Clock
//!
//! CUPTI reads `CLOCK_REALTIME` by default on Linux and maps GPU timestamps onto that clock. The tracer registers a
//! timestamp callback before it enables any kind, so CPU timestamps and, through CUPTI's interpolation, GPU ones
//! are `CLOCK_MONOTONIC` nanoseconds ([`Clock::Monotonic`], the default), comparable with [`Clock::now_ns`] and
//! `std::time::Instant`; [`Clock::Realtime`] keeps CUPTI's wall clock.
//!
//! # Drops
//!
//! When the pool is exhausted, CUPTI's buffer request is refused and it drops records. After every buffer the
//! tracer reads `cuptiActivityGetNumDroppedRecords` for the context and stream CUPTI names and reports it three
//! ways: [`ActivityBatch::dropped_records`] of that batch, [`ActivityTracer::dropped`] per context and stream, and
//! [`TracerStats::dropped_records`]. A last read after the final flush catches drops after the last buffer.
//!
//! # Records
//!
//! CUPTI writes each kind in the newest record version of its release, so the decoder picks layouts from the loaded
//! library's `cuptiGetVersion` ([`RecordLayout`]): 13.0 (API 130000, 130001: `CUpti_ActivityKernel10`, `Memcpy6`,
//! `Memset4`, `API`, `Synchronization2`, `Overhead3`, ...) and 12.9 (API 27, 28: `CUpti_ActivityKernel9`). For a
//! release the crate does not know exactly, it steps with the vendor's `cuptiActivityGetNextRecord` and reports a
//! record whose size differs from the layout's as a [`RecordError`] instead of misreading it. Every read is
//! bounds-checked: a record cut off by the buffer's end is [`RecordError::Truncated`], never a read past the valid
//! bytes; [`ActivityBatch::from_bytes`] decodes bytes from anywhere (a file, a socket) without following the
//! pointers in them. Callback ids are named from the headers ([`DriverCbid`](crate::cupti::DriverCbid),
//! [`RuntimeCbid`](crate::cupti::RuntimeCbid)).
//!
//! # Panics
//!
//! A panic in either closure is caught, counted ([`TracerStats::callback_panics`],
//! [`SubscriberStats::panics`](crate::cupti::callback::SubscriberStats::panics)), never unwound into CUPTI, and
//! reported by the next [`ActivityTracer::flush_all`] or [`ActivityTracer::stop`]
//! ([`TracingError::CallbackPanicked`](crate::cupti::TracingError::CallbackPanicked), or [`TracerReport::panic`]) and by
//! [`Subscriber::unsubscribe`](crate::cupti::callback::Subscriber::unsubscribe); the buffer still goes back to the
//! pool.

mod api;
mod batch;
mod clock;
mod complete_first;
mod completing;
mod graph;
mod keeping_lent;
mod kernel;
mod layout;
mod object;
mod overhead;
mod pool;
mod record;
mod thread_id;
mod tracer;
mod transfer;

pub use super::activity_kind::{ActivityKind, ActivityKinds};
pub use api::{ApiCall, SyncType, Synchronization};
pub use batch::{ActivityBatch, RawRecord, RawRecords, RecordError, Records};
pub use clock::{Clock, count_timestamp_calls, timestamp_calls};
pub use complete_first::{
    COMPLETE_WAIT, COMPLETE_WAITS, CompleteFirst, LATE_FLUSHES, LATE_WAIT, flush_complete_first,
    flush_forced_until, flush_until_complete,
};
pub use completing::{CompletionUnderWay, completions_elsewhere};
pub use graph::{GraphTrace, MarkerData, MarkerPayloadValue};
pub use keeping_lent::{KeepingMark, held_for_keeping, keeping_mark};
pub use kernel::{Kernel, LaunchType};
pub use layout::{LayoutMatch, RecordLayout};
pub use object::{
    ContextRecord, DeviceRecord, ExternalCorrelation, Marker, MemoryOperation, MemoryRecord,
    NameRecord, StreamFlag, StreamRecord,
};
pub use overhead::{Overhead, OverheadKind};
pub use record::{Activity, ActivityObject, CopyKind, Dim3, MemoryKind, TimeRange};
pub use thread_id::{ThreadIdKind, set_thread_id_kind, thread_id_kind};
pub use tracer::{
    ActivityTracer, ActivityTracerBuilder, DroppedRecords, FlushMode, RequestBufferFn,
    TracerReport, TracerStats, UnlentBufferFn, set_keeping_lender, set_unlent_buffer_handler,
};
pub use transfer::{Memcpy, Memset, PeerCopy};
