//! Owned GPU trace records and the crate's binary stream format for them.
//!
//! A tracer keeps what the vendor hands over only for the duration of a callback; [`Record`] is what it keeps:
//! kernels, copies, sets, API calls, synchronizations, overhead, dropped-record notices, the start and end of a
//! traced process, and counter records (per-kernel metrics, PC-sampling stalls) a profiler collects there. [`Encoder`] writes them as a versioned, little-endian stream (the [`wire`] module describes
//! the layout), for example from a library injected into another process; [`Decoder`] reads such a stream back,
//! checking every length, since the bytes come from another process.
//!
//! Vendor-neutral: the CUPTI layer converts its borrowed activity records into these (`cupti` depends on this
//! module, never the reverse).

mod decode;
mod encode;
pub mod env;
pub mod export;
pub mod file;
mod metrics;
mod names;
mod packed;
mod record;
pub mod report;
pub mod wire;

pub use decode::{Decoder, StreamReader, WireError};
pub use encode::Encoder;
pub use metrics::{KernelMetricsRecord, ProfileLoss, ProfileLossKind, StallRecord};
pub use names::NameTable;
pub use record::{
    ApiDomain, ApiRecord, ClockAnchor, CopyKind, DroppedRecords, EndReason, GraphInfo,
    GraphLaunchRecord, KernelRecord, MarkerData, MarkerKind, MarkerPayload, MarkerRecord,
    MemcpyRecord, MemoryKind, MemsetRecord, Notice, NoticeLevel, OverheadRecord, ProcessEnd,
    ProcessInfo, ProcessStart, RANK_VARIABLES, Record, SyncKind, SyncRecord, host_name,
};
pub use wire::{StreamHeader, TimestampClock};
