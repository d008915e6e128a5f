//! GPU traces without vendor code: the owned records a tracer keeps, the binary stream format they travel in, the
//! `.gputrace` files it is saved as, and the reports and exports made from them. It links no vendor library and
//! spawns no program, so a tool that only reads and analyses traces depends on this crate alone; the `gpu-tools`
//! library, which collects traces from CUPTI and rocprofiler, re-exports it as `gpu_tools::trace` (and the profile
//! tables as `gpu_tools::profile`).
//!
//! A tracer keeps what the vendor hands over only for the duration of a callback; [`Record`] is what it keeps:
//! kernels, copies, sets, API calls, synchronizations, overhead, dropped-record notices, the start and end of a
//! traced process, and counter records (per-kernel metrics, PC-sampling stalls) a profiler collects there.
//! [`Encoder`] writes them as a versioned, little-endian stream (the [`wire`] module describes the layout), for
//! example from a library injected into another process; [`Decoder`] reads such a stream back, checking every
//! length, since the bytes come from another process.
//!
//! | module | what it holds |
//! |---|---|
//! | [`wire`], [`Encoder`], [`Decoder`], [`StreamReader`] | the stream format |
//! | [`file`](mod@file) | `.gputrace` files: reading, merging, the process and clock each stream came from |
//! | [`analyze`] | what slows a traced job, ranked by the GPU time it costs, with evidence and what to try ([`analyze::Trace::diagnose`]) |
//! | [`diff`] | two traces side by side: step time, busy and idle, the kernels and API calls that changed most |
//! | [`report`] | the summary tables (`stats`), counters per kernel among them, as text, CSV or JSON; a multi-host job's ranks (`stragglers`) and its hosts aligned on their NCCL collectives ([`report::Job`]) |
//! | [`export`] | Chrome trace JSON and Perfetto timelines, with counter tracks per device |
//! | [`profile`] | what a profiled program sent, its per-kernel and stall tables |
//! | [`counters`] | device counters sampled beside the traced processes (`trace --counters`), and their attribution to kernels ([`counters::Attribution`]) |
//!
//! No injection here: the variables a tracer sets for the injection libraries, the socket they stream to and the
//! launching and attaching of traced programs are `gpu-tools-injection`'s.
//!
//! Vendor-neutral: the vendor layers of `gpu-tools` convert their borrowed activity records into these (they
//! depend on this crate, never the reverse).
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(unsafe_op_in_unsafe_fn, missing_docs)]
// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

pub mod analyze;
pub mod counters;
mod decode;
pub mod diff;
mod encode;
pub mod export;
pub mod file;
mod metrics;
mod names;
mod packed;
pub mod profile;
mod record;
pub mod report;
pub mod wire;

pub use decode::{Decoder, StreamReader, WireError};
pub use encode::Encoder;
pub use metrics::{
    CounterGap, CounterSample, KernelMetricsRecord, ProfileLoss, ProfileLossKind, StallRecord,
};
pub use names::NameTable;
pub use record::{
    ApiDomain, ApiRecord, ClockAnchor, CodedNotice, CopyKind, DroppedRecords, EndReason, GraphInfo,
    GraphLaunchRecord, KernelRecord, MarkerData, MarkerKind, MarkerPayload, MarkerRecord,
    MemcpyRecord, MemoryKind, MemsetRecord, Notice, NoticeLevel, OverheadRecord, ProcessEnd,
    ProcessInfo, ProcessStart, RANK_VARIABLES, Record, SyncKind, SyncRecord, host_name,
};
pub use wire::{StreamHeader, ThreadIds, TimestampClock};
