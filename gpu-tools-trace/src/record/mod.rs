//! The records a tracer keeps. Timestamps are nanoseconds on the clock named by the stream's
//! [`TimestampClock`](super::TimestampClock); ids (device, context, stream, correlation) are the vendor's.

mod api;
mod clock;
mod device;
mod graph;
mod marker;
mod notice;
mod process;

pub use api::{ApiDomain, ApiRecord, SyncKind, SyncRecord};
pub use clock::ClockAnchor;
pub use device::{CopyKind, KernelRecord, MemcpyRecord, MemoryKind, MemsetRecord};
pub use graph::{GraphInfo, GraphLaunchRecord};
pub use marker::{MarkerData, MarkerKind, MarkerPayload, MarkerRecord};
pub use notice::{CodedNotice, DroppedRecords, Notice, NoticeLevel, OverheadRecord};
pub use process::{EndReason, ProcessEnd, ProcessInfo, ProcessStart, RANK_VARIABLES, host_name};

/// One traced event.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(tag = "record", rename_all = "snake_case"))]
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Record {
    /// A traced process began sending (first record of a stream).
    ProcessStart(ProcessStart),
    /// A kernel ran on a device.
    Kernel(KernelRecord),
    /// A memory copy.
    Memcpy(MemcpyRecord),
    /// A memory set.
    Memset(MemsetRecord),
    /// A host API call (driver or runtime).
    Api(ApiRecord),
    /// A host thread waited for the device (event, stream or context synchronization).
    Synchronization(SyncRecord),
    /// Time the vendor's tool layer itself spent (buffer flushes, instrumentation).
    Overhead(OverheadRecord),
    /// The vendor dropped records: its buffers were full.
    Dropped(DroppedRecords),
    /// A message from the tracing side (for example why tracing could not start).
    Notice(Notice),
    /// A message from the tracing side that a program acts on: its meaning as a code and values, beside its text.
    CodedNotice(CodedNotice),
    /// A traced process finished sending (last record of a stream), with its counts.
    ProcessEnd(ProcessEnd),
    /// A CUDA graph launch traced as one event (graph-level tracing).
    GraphLaunch(GraphLaunchRecord),
    /// A CUDA graph was instantiated: its ids and node count.
    Graph(GraphInfo),
    /// An NVTX mark, or the start or end of an NVTX range.
    Marker(MarkerRecord),
    /// The colour, category and payload of an NVTX marker.
    MarkerData(MarkerData),
    /// A reading of the stream's clock and of the wall clock, taken together (aligns hosts).
    ClockAnchor(ClockAnchor),
    /// The host and the job labels (ranks) of the traced process.
    ProcessInfo(ProcessInfo),
    /// Metric values of one kernel launch.
    KernelMetrics(super::KernelMetricsRecord),
    /// PC-sampling samples of one PC, per stall reason.
    Stall(super::StallRecord),
    /// Profiling data the traced process lost.
    ProfileLoss(super::ProfileLoss),
    /// Device-wide counter values over one sampling interval (a counter stream's record).
    CounterSample(super::CounterSample),
    /// Counter samples of a device lost, or a span without samples (a counter stream's record).
    CounterGap(super::CounterGap),
}

impl Record {
    /// Start and end of the record's time span, for the kinds that have one.
    pub fn span(&self) -> Option<(u64, u64)> {
        match self {
            Record::Kernel(r) => Some((r.start, r.end)),
            Record::Memcpy(r) => Some((r.start, r.end)),
            Record::Memset(r) => Some((r.start, r.end)),
            Record::Api(r) => Some((r.start, r.end)),
            Record::Synchronization(r) => Some((r.start, r.end)),
            Record::Overhead(r) => Some((r.start, r.end)),
            Record::GraphLaunch(r) => Some((r.start, r.end)),
            Record::CounterSample(r) => Some((r.start, r.end)),
            Record::CounterGap(r) => Some((r.start, r.end)),
            _ => None,
        }
    }
}
