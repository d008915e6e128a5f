//! The records a tracer keeps. Timestamps are nanoseconds on the clock named by the stream's
//! [`TimestampClock`](super::TimestampClock); ids (device, context, stream, correlation) are the vendor's.

use std::sync::Arc;

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

/// A kernel execution.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KernelRecord {
    /// Start on the device, ns.
    pub start: u64,
    /// End on the device, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id: the [`ApiRecord`] of the launch call carries the same.
    pub correlation: u32,
    /// The device's grid id of this launch.
    pub grid_id: u64,
    /// Grid dimensions (blocks).
    pub grid: [u32; 3],
    /// Block dimensions (threads).
    pub block: [u32; 3],
    /// Static shared memory per block, bytes.
    pub static_shared: u32,
    /// Dynamic shared memory per block, bytes.
    pub dynamic_shared: u32,
    /// Registers per thread.
    pub registers: u16,
    /// Graph id when launched from a graph, else 0.
    pub graph_id: u32,
    /// Graph node id when launched from a graph, else 0 (carried since the graph tracing modes; 0 in streams
    /// written before).
    pub graph_node_id: u64,
    /// The kernel's name as the vendor reports it (mangled for C++ kernels).
    pub name: Arc<str>,
}

impl KernelRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Direction of a memory copy.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum CopyKind {
    /// Not known.
    Unknown,
    /// Host to device.
    HtoD,
    /// Device to host.
    DtoH,
    /// Host to array.
    HtoA,
    /// Array to host.
    AtoH,
    /// Array to array.
    AtoA,
    /// Array to device.
    AtoD,
    /// Device to array.
    DtoA,
    /// Device to device (one device).
    DtoD,
    /// Host to host.
    HtoH,
    /// Peer to peer (device to another device).
    PtoP,
    /// A code newer than this crate.
    Other(u8),
}

impl CopyKind {
    /// The vendor's code (CUPTI's `CUpti_ActivityMemcpyKind`).
    pub fn code(self) -> u8 {
        match self {
            CopyKind::Unknown => 0,
            CopyKind::HtoD => 1,
            CopyKind::DtoH => 2,
            CopyKind::HtoA => 3,
            CopyKind::AtoH => 4,
            CopyKind::AtoA => 5,
            CopyKind::AtoD => 6,
            CopyKind::DtoA => 7,
            CopyKind::DtoD => 8,
            CopyKind::HtoH => 9,
            CopyKind::PtoP => 10,
            CopyKind::Other(c) => c,
        }
    }

    /// From the vendor's code; codes this crate does not know are kept.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => CopyKind::Unknown,
            1 => CopyKind::HtoD,
            2 => CopyKind::DtoH,
            3 => CopyKind::HtoA,
            4 => CopyKind::AtoH,
            5 => CopyKind::AtoA,
            6 => CopyKind::AtoD,
            7 => CopyKind::DtoA,
            8 => CopyKind::DtoD,
            9 => CopyKind::HtoH,
            10 => CopyKind::PtoP,
            c => CopyKind::Other(c),
        }
    }

    /// Short name as profilers print it: `HtoD`, `DtoH`, ...
    pub fn name(self) -> &'static str {
        match self {
            CopyKind::Unknown => "unknown",
            CopyKind::HtoD => "HtoD",
            CopyKind::DtoH => "DtoH",
            CopyKind::HtoA => "HtoA",
            CopyKind::AtoH => "AtoH",
            CopyKind::AtoA => "AtoA",
            CopyKind::AtoD => "AtoD",
            CopyKind::DtoA => "DtoA",
            CopyKind::DtoD => "DtoD",
            CopyKind::HtoH => "HtoH",
            CopyKind::PtoP => "PtoP",
            CopyKind::Other(_) => "other",
        }
    }
}

/// Kind of memory at one end of a copy or set.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum MemoryKind {
    /// Not known.
    Unknown,
    /// Pageable host memory.
    Pageable,
    /// Page-locked host memory.
    Pinned,
    /// Device memory.
    Device,
    /// A CUDA array.
    Array,
    /// Managed (unified) memory.
    Managed,
    /// Static device memory.
    DeviceStatic,
    /// Static managed memory.
    ManagedStatic,
    /// A code newer than this crate.
    Other(u8),
}

impl MemoryKind {
    /// The vendor's code (CUPTI's `CUpti_ActivityMemoryKind`).
    pub fn code(self) -> u8 {
        match self {
            MemoryKind::Unknown => 0,
            MemoryKind::Pageable => 1,
            MemoryKind::Pinned => 2,
            MemoryKind::Device => 3,
            MemoryKind::Array => 4,
            MemoryKind::Managed => 5,
            MemoryKind::DeviceStatic => 6,
            MemoryKind::ManagedStatic => 7,
            MemoryKind::Other(c) => c,
        }
    }

    /// From the vendor's code; codes this crate does not know are kept.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => MemoryKind::Unknown,
            1 => MemoryKind::Pageable,
            2 => MemoryKind::Pinned,
            3 => MemoryKind::Device,
            4 => MemoryKind::Array,
            5 => MemoryKind::Managed,
            6 => MemoryKind::DeviceStatic,
            7 => MemoryKind::ManagedStatic,
            c => MemoryKind::Other(c),
        }
    }

    /// Lower-case name: `pageable`, `pinned`, `device`, ...
    pub fn name(self) -> &'static str {
        match self {
            MemoryKind::Unknown => "unknown",
            MemoryKind::Pageable => "pageable",
            MemoryKind::Pinned => "pinned",
            MemoryKind::Device => "device",
            MemoryKind::Array => "array",
            MemoryKind::Managed => "managed",
            MemoryKind::DeviceStatic => "device static",
            MemoryKind::ManagedStatic => "managed static",
            MemoryKind::Other(_) => "other",
        }
    }
}

/// A memory copy.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemcpyRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the API call that issued it.
    pub correlation: u32,
    /// Bytes copied.
    pub bytes: u64,
    /// Direction.
    pub kind: CopyKind,
    /// Source memory.
    pub src: MemoryKind,
    /// Destination memory.
    pub dst: MemoryKind,
    /// Issued by an asynchronous call.
    pub is_async: bool,
}

impl MemcpyRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A memory set.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemsetRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// Device ordinal.
    pub device: u32,
    /// Context id.
    pub context: u32,
    /// Stream id.
    pub stream: u32,
    /// Correlation id of the API call that issued it.
    pub correlation: u32,
    /// Bytes set.
    pub bytes: u64,
    /// The value written (the element value of the set call).
    pub value: u32,
    /// Memory that was set.
    pub memory: MemoryKind,
    /// Issued by an asynchronous call.
    pub is_async: bool,
}

impl MemsetRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// Which host API a call belongs to.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ApiDomain {
    /// The CUDA driver API (`cu*`).
    Driver,
    /// The CUDA runtime API (`cuda*`).
    Runtime,
    /// The HIP runtime API (`hip*`).
    Hip,
    /// The HSA runtime API (`hsa_*`).
    Hsa,
    /// Markers and ranges (ROCTx).
    Marker,
    /// A code newer than this crate.
    Other(u8),
}

impl ApiDomain {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            ApiDomain::Driver => 1,
            ApiDomain::Runtime => 2,
            ApiDomain::Hip => 3,
            ApiDomain::Hsa => 4,
            ApiDomain::Marker => 5,
            ApiDomain::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => ApiDomain::Driver,
            2 => ApiDomain::Runtime,
            3 => ApiDomain::Hip,
            4 => ApiDomain::Hsa,
            5 => ApiDomain::Marker,
            c => ApiDomain::Other(c),
        }
    }

    /// `driver`, `runtime`, `hip`, `hsa`, `marker` or `other`.
    pub fn name(self) -> &'static str {
        match self {
            ApiDomain::Driver => "driver",
            ApiDomain::Runtime => "runtime",
            ApiDomain::Hip => "hip",
            ApiDomain::Hsa => "hsa",
            ApiDomain::Marker => "marker",
            ApiDomain::Other(_) => "other",
        }
    }
}

/// A host API call.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiRecord {
    /// Entry, ns.
    pub start: u64,
    /// Exit, ns.
    pub end: u64,
    /// Driver or runtime.
    pub domain: ApiDomain,
    /// The vendor's callback id of the function within its domain.
    pub cbid: u32,
    /// The function's name (`cuLaunchKernel`, `cudaMemcpyAsync`); empty where the id is unknown.
    pub name: Arc<str>,
    /// Correlation id: device records issued by this call carry the same.
    pub correlation: u32,
    /// Process id.
    pub process: u32,
    /// Thread id.
    pub thread: u32,
    /// The call's return code.
    pub return_value: u32,
}

/// Kind of a synchronization.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum SyncKind {
    /// Not known.
    Unknown,
    /// `cuEventSynchronize` / `cudaEventSynchronize`.
    EventSynchronize,
    /// `cuStreamWaitEvent` / `cudaStreamWaitEvent`.
    StreamWaitEvent,
    /// `cuStreamSynchronize` / `cudaStreamSynchronize`.
    StreamSynchronize,
    /// `cuCtxSynchronize` / `cudaDeviceSynchronize`.
    ContextSynchronize,
    /// A code newer than this crate.
    Other(u8),
}

impl SyncKind {
    /// The vendor's code (CUPTI's `CUpti_ActivitySynchronizationType`).
    pub fn code(self) -> u8 {
        match self {
            SyncKind::Unknown => 0,
            SyncKind::EventSynchronize => 1,
            SyncKind::StreamWaitEvent => 2,
            SyncKind::StreamSynchronize => 3,
            SyncKind::ContextSynchronize => 4,
            SyncKind::Other(c) => c,
        }
    }

    /// From the vendor's code.
    pub fn from_code(code: u8) -> Self {
        match code {
            0 => SyncKind::Unknown,
            1 => SyncKind::EventSynchronize,
            2 => SyncKind::StreamWaitEvent,
            3 => SyncKind::StreamSynchronize,
            4 => SyncKind::ContextSynchronize,
            c => SyncKind::Other(c),
        }
    }

    /// Name as profilers print it.
    pub fn name(self) -> &'static str {
        match self {
            SyncKind::Unknown => "synchronize",
            SyncKind::EventSynchronize => "event synchronize",
            SyncKind::StreamWaitEvent => "stream wait event",
            SyncKind::StreamSynchronize => "stream synchronize",
            SyncKind::ContextSynchronize => "context synchronize",
            SyncKind::Other(_) => "synchronize (other)",
        }
    }
}

/// A synchronization.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// What waited.
    pub kind: SyncKind,
    /// Context id.
    pub context: u32,
    /// Stream id (the vendor's invalid id, `u32::MAX`, for a context synchronization).
    pub stream: u32,
    /// Event id for event kinds.
    pub event: u32,
    /// Correlation id of the API call.
    pub correlation: u32,
}

/// Time the vendor's tool layer spent.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverheadRecord {
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
    /// The vendor's overhead kind code.
    pub kind: u32,
    /// The vendor's object kind code (process, thread, device, context, stream).
    pub object_kind: u32,
    /// The object's id (a thread id, device ordinal, ...).
    pub object_id: u64,
}

/// Records the vendor dropped.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DroppedRecords {
    /// Context id (`u32::MAX` when not tied to one).
    pub context: u32,
    /// Stream id (`u32::MAX` when not tied to one).
    pub stream: u32,
    /// How many.
    pub count: u64,
}

/// Severity of a [`Notice`].
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum NoticeLevel {
    /// Tracing failed or lost data.
    Error,
    /// Something the user should know.
    Warning,
    /// Informational.
    Info,
    /// A code newer than this crate.
    Other(u8),
}

impl NoticeLevel {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            NoticeLevel::Error => 1,
            NoticeLevel::Warning => 2,
            NoticeLevel::Info => 3,
            NoticeLevel::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => NoticeLevel::Error,
            2 => NoticeLevel::Warning,
            3 => NoticeLevel::Info,
            c => NoticeLevel::Other(c),
        }
    }
}

/// A message from the tracing side.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Severity.
    pub level: NoticeLevel,
    /// The message.
    pub text: String,
}

/// A notice that a program acts on: what it means, as a code and values defined by the protocol of whoever sent it
/// (the injection libraries' messages are `gpu_tools_injection::message`'s), beside the text a person reads,
/// rendered by the sender from the same. A reader that does not know the code shows the text, as for a [`Notice`];
/// one that acts on it reads the code and values, never the text.
///
/// A record kind of its own rather than more fields of [`Notice`]: a notice's frame ends with its text, so a reader
/// of an earlier release would have taken any field after it for text, where it skips a frame of a tag it does not
/// know; and files written before hold plain notices, which read as they did.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CodedNotice {
    /// Severity.
    pub level: NoticeLevel,
    /// What the notice says, in the sender's protocol.
    pub code: u16,
    /// Its numbers (counts, ids, flags), in the order the code defines; at most 255 are sent.
    pub values: Vec<u64>,
    /// Its words, where the code has some (a reason, a name); empty otherwise. At most 4 KiB are sent.
    pub detail: String,
    /// The text a person reads.
    pub text: String,
}

/// First record of a stream.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessStart {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub parent_pid: u32,
    /// When tracing began, ns.
    pub time: u64,
    /// The command line, arguments separated by spaces (cut at 4 KiB).
    pub command: String,
}

/// Why a stream ended.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EndReason {
    /// The process exited normally (the exit handler ran).
    Exit,
    /// Tracing was stopped before the process ended.
    Stopped,
    /// A fatal signal (its number) was about to end the process: the records were flushed in its handler.
    Signal(u8),
    /// A code newer than this crate.
    Other(u8),
}

impl EndReason {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            EndReason::Exit => 1,
            EndReason::Stopped => 2,
            EndReason::Signal(n) => 0x80 | (n & 0x7f),
            EndReason::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => EndReason::Exit,
            2 => EndReason::Stopped,
            c if c & 0x80 != 0 => EndReason::Signal(c & 0x7f),
            c => EndReason::Other(c),
        }
    }
}

/// Last record of a stream: what the sending side counted, so the receiver can check it got everything.
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessEnd {
    /// When the stream ended, ns.
    pub time: u64,
    /// Why.
    pub reason: EndReason,
    /// Records sent before this one, every kind counted (a receiver that got them all has this many plus one).
    pub records: u64,
    /// Records the vendor reported as dropped.
    pub dropped: u64,
    /// Vendor records that could not be decoded, or were of a kind this format does not carry.
    pub skipped: u64,
    /// Calls of the record callback that panicked (their batch was lost).
    pub callback_panics: u64,
}

/// A CUDA graph launch, traced as one event (CUPTI's `GRAPH_TRACE` records): the kernels, copies and sets of the
/// graph are not traced one by one in this mode.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GraphLaunchRecord {
    /// Start of the graph's first node on the device, ns.
    pub start: u64,
    /// End of its last node, ns.
    pub end: u64,
    /// Device the graph started on.
    pub device: u32,
    /// Context id it started in.
    pub context: u32,
    /// Stream id it was launched into.
    pub stream: u32,
    /// Correlation id: the [`ApiRecord`] of the launch call carries the same.
    pub correlation: u32,
    /// The graph's id (as kernel records of node mode carry it).
    pub graph_id: u32,
    /// Device the graph ended on (multi-device graphs).
    pub end_device: u32,
    /// Context id it ended in.
    pub end_context: u32,
}

impl GraphLaunchRecord {
    /// `end - start`, 0 when the vendor reported an end before the start.
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A CUDA graph was instantiated into an executable graph.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GraphInfo {
    /// When, ns.
    pub time: u64,
    /// The id of the graph it was instantiated from (0 where unknown).
    pub graph_id: u32,
    /// The id of the executable graph (0 where unknown).
    pub exec_id: u32,
    /// Nodes in the graph (`u32::MAX` where unknown).
    pub node_count: u32,
}

/// What an NVTX marker record marks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum MarkerKind {
    /// An instantaneous mark (`nvtxMark`).
    Instant,
    /// A range starts (`nvtxRangePush`, `nvtxRangeStart`).
    Start,
    /// A range ends (`nvtxRangePop`, `nvtxRangeEnd`); its name is empty.
    End,
    /// A code newer than this crate.
    Other(u8),
}

impl MarkerKind {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            MarkerKind::Instant => 1,
            MarkerKind::Start => 2,
            MarkerKind::End => 3,
            MarkerKind::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => MarkerKind::Instant,
            2 => MarkerKind::Start,
            3 => MarkerKind::End,
            c => MarkerKind::Other(c),
        }
    }
}

/// An NVTX mark, or one end of an NVTX range, on a host thread. A range's start and end share `id`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MarkerRecord {
    /// When, ns.
    pub time: u64,
    /// Mark, start or end.
    pub kind: MarkerKind,
    /// The marker id: a range's start and end carry the same; the [`MarkerData`] of the marker too.
    pub id: u32,
    /// Process id.
    pub process: u32,
    /// Thread id (0 where the vendor tied the marker to the process only).
    pub thread: u32,
    /// The NVTX domain (empty for the default domain).
    #[cfg_attr(feature = "serde", serde(serialize_with = "ser_arc"))]
    pub domain: Arc<str>,
    /// The message (empty for a range's end).
    pub name: String,
}

/// The payload of an NVTX marker.
#[derive(Debug, Clone, Copy, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub enum MarkerPayload {
    /// No payload.
    None,
    /// An unsigned integer.
    Unsigned(u64),
    /// A signed integer.
    Signed(i64),
    /// A floating-point number.
    Float(f64),
    /// A kind this crate does not know, with its code and raw 64 bits.
    Other(u8, u64),
}

impl Eq for MarkerPayload {}

impl MarkerPayload {
    /// Wire code and 64 bits.
    pub fn to_wire(self) -> (u8, u64) {
        match self {
            MarkerPayload::None => (0, 0),
            MarkerPayload::Unsigned(v) => (1, v),
            MarkerPayload::Signed(v) => (2, v as u64),
            MarkerPayload::Float(v) => (3, v.to_bits()),
            MarkerPayload::Other(c, v) => (c, v),
        }
    }

    /// From the wire code and 64 bits.
    pub fn from_wire(code: u8, bits: u64) -> Self {
        match code {
            0 => MarkerPayload::None,
            1 => MarkerPayload::Unsigned(bits),
            2 => MarkerPayload::Signed(bits as i64),
            3 => MarkerPayload::Float(f64::from_bits(bits)),
            c => MarkerPayload::Other(c, bits),
        }
    }
}

impl std::fmt::Display for MarkerPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MarkerPayload::None => Ok(()),
            MarkerPayload::Unsigned(v) => write!(f, "{v}"),
            MarkerPayload::Signed(v) => write!(f, "{v}"),
            MarkerPayload::Float(v) => write!(f, "{v}"),
            MarkerPayload::Other(c, v) => write!(f, "kind {c}: {v:#x}"),
        }
    }
}

/// The colour, category and payload given to an NVTX marker (`nvtxEventAttributes_t`).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct MarkerData {
    /// The marker's id ([`MarkerRecord::id`]).
    pub id: u32,
    /// ARGB colour, `None` where none was given.
    pub color: Option<u32>,
    /// Category (0: none).
    pub category: u32,
    /// Payload.
    pub payload: MarkerPayload,
}

/// The stream's clock and the wall clock read together, so that streams of several hosts can be put on one
/// timeline. `monotonic` is on the stream's clock; `realtime` is `CLOCK_REALTIME` nanoseconds since the Unix epoch,
/// read between two readings of the stream's clock that lie `uncertainty` ns apart (`monotonic` is their midpoint).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ClockAnchor {
    /// The stream's clock, ns.
    pub monotonic: u64,
    /// `CLOCK_REALTIME`, ns since the epoch.
    pub realtime: u64,
    /// Distance between the two readings of the stream's clock around the wall-clock reading, ns.
    pub uncertainty: u32,
}

impl ClockAnchor {
    /// Reads both clocks now (`CLOCK_MONOTONIC` and `CLOCK_REALTIME`), taking the tightest of a few tries.
    pub fn now() -> ClockAnchor {
        let mut best: Option<ClockAnchor> = None;
        for _ in 0..5 {
            let a = monotonic_ns();
            let r = realtime_ns();
            let b = monotonic_ns();
            let anchor = ClockAnchor {
                monotonic: a + (b.saturating_sub(a)) / 2,
                realtime: r,
                uncertainty: u32::try_from(b.saturating_sub(a)).unwrap_or(u32::MAX),
            };
            if best.is_none_or(|x| anchor.uncertainty < x.uncertainty) {
                best = Some(anchor);
            }
        }
        best.unwrap_or(ClockAnchor {
            monotonic: 0,
            realtime: 0,
            uncertainty: u32::MAX,
        })
    }

    /// `realtime - monotonic`: what to add to a stream timestamp to put it on the wall clock.
    pub fn offset(&self) -> i128 {
        i128::from(self.realtime) - i128::from(self.monotonic)
    }
}

fn read_clock(id: libc_clock::ClockId) -> u64 {
    libc_clock::now_ns(id)
}

fn monotonic_ns() -> u64 {
    read_clock(libc_clock::ClockId::Monotonic)
}

fn realtime_ns() -> u64 {
    read_clock(libc_clock::ClockId::Realtime)
}

/// The two clocks without a dependency: `Instant` is `CLOCK_MONOTONIC` on Linux, but its value is opaque, so the
/// vDSO `clock_gettime` is called directly.
mod libc_clock {
    #[repr(C)]
    struct Timespec {
        tv_sec: i64,
        tv_nsec: i64,
    }

    unsafe extern "C" {
        fn clock_gettime(clock: i32, ts: *mut Timespec) -> i32;
    }

    #[derive(Clone, Copy)]
    pub(super) enum ClockId {
        Realtime = 0,
        Monotonic = 1,
    }

    pub(super) fn now_ns(id: ClockId) -> u64 {
        let mut ts = Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid out-pointer; CLOCK_REALTIME (0) and CLOCK_MONOTONIC (1) exist on every Linux.
        if unsafe { clock_gettime(id as i32, &mut ts) } != 0 {
            return 0;
        }
        (ts.tv_sec.max(0) as u64)
            .saturating_mul(1_000_000_000)
            .saturating_add(ts.tv_nsec.max(0) as u64)
    }
}

/// The job labels of a process: its host and the rank variables set for it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct ProcessInfo {
    /// Host name.
    pub host: String,
    /// The host's boot id (`/proc/sys/kernel/random/boot_id`): processes with the same host and boot id share one
    /// `CLOCK_MONOTONIC`. Empty where unknown.
    pub boot_id: String,
    /// Rank variables as `(name, value)`: `RANK`, `LOCAL_RANK`, `WORLD_SIZE`, `OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
    /// ..., those set, in [`RANK_VARIABLES`] order.
    pub labels: Vec<(String, String)>,
}

/// The environment variables launchers set to number the processes of a job, read into [`ProcessInfo::labels`].
pub const RANK_VARIABLES: [&str; 11] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "PMI_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "SLURM_NTASKS",
];

/// Each launcher's rank variable and the size of the world it numbers: a rank from `SLURM_PROCID` counts among
/// `SLURM_NTASKS` (under torchrun in a one-task-per-node step, `SLURM_NTASKS` is the nodes, `WORLD_SIZE` the
/// ranks).
const RANK_AND_SIZE: [(&str, &str); 4] = [
    ("RANK", "WORLD_SIZE"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
];

impl ProcessInfo {
    /// This process's host name and the rank variables of its environment.
    pub fn current() -> ProcessInfo {
        let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id")
            .map(|s| s.trim().to_string())
            .unwrap_or_default();
        ProcessInfo::from_lookup(host_name(), boot_id, |k| std::env::var(k).ok())
    }

    /// From a host name, a boot id and a variable lookup (for tests).
    pub fn from_lookup(
        host: String,
        boot_id: String,
        get: impl Fn(&str) -> Option<String>,
    ) -> ProcessInfo {
        let labels = RANK_VARIABLES
            .iter()
            .filter_map(|k| get(k).map(|v| (k.to_string(), v)))
            .collect();
        ProcessInfo {
            host,
            boot_id,
            labels,
        }
    }

    /// The process's rank as its launcher numbered it: `RANK`, else `OMPI_COMM_WORLD_RANK`, `PMI_RANK`,
    /// `SLURM_PROCID`.
    pub fn rank(&self) -> Option<u32> {
        RANK_AND_SIZE
            .iter()
            .find_map(|(k, _)| self.label(k))
            .and_then(|v| v.trim().parse().ok())
    }

    /// The number of ranks of the job, as the launcher that gave [`rank`](Self::rank) says: `WORLD_SIZE` beside
    /// `RANK`, `OMPI_COMM_WORLD_SIZE`, `PMI_SIZE`, `SLURM_NTASKS` beside the others; `None` where that variable
    /// was not recorded (a trace written before it was) or is not a number.
    pub fn world_size(&self) -> Option<u32> {
        self.world_size_variable().map(|(_, n)| n)
    }

    /// [`world_size`](Self::world_size) with the variable that gave it.
    pub fn world_size_variable(&self) -> Option<(&'static str, u32)> {
        let (_, size) = RANK_AND_SIZE
            .iter()
            .find(|(k, _)| self.label(k).is_some())?;
        Some((size, self.label(size)?.trim().parse().ok()?))
    }

    /// The value of one label.
    pub fn label(&self, name: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// `rank 3 (local 1)`-style text, empty where no rank variable is set.
    pub fn rank_label(&self) -> String {
        let local = ["LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID"]
            .iter()
            .find_map(|k| self.label(k));
        match (self.rank(), local) {
            (Some(r), Some(l)) => format!("rank {r} (local {l})"),
            (Some(r), None) => format!("rank {r}"),
            (None, Some(l)) => format!("local rank {l}"),
            (None, None) => String::new(),
        }
    }
}

/// This host's name (`/proc/sys/kernel/hostname`, else `$HOSTNAME`, else `localhost`).
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
        .or_else(|| std::env::var("HOSTNAME").ok())
        .unwrap_or_else(|| "localhost".to_string())
}

#[cfg(feature = "serde")]
pub(crate) fn ser_arc<S: serde::Serializer>(v: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(vars: &[(&str, &str)]) -> ProcessInfo {
        ProcessInfo::from_lookup("h".into(), String::new(), |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        })
    }

    #[test]
    fn the_world_size_is_the_one_of_the_rank_variable_used() {
        // torchrun in a one-task-per-node srun step: RANK counts among WORLD_SIZE, not SLURM_NTASKS (the nodes).
        let torchrun = info(&[
            ("RANK", "5"),
            ("WORLD_SIZE", "16"),
            ("SLURM_PROCID", "1"),
            ("SLURM_NTASKS", "2"),
        ]);
        assert_eq!(torchrun.rank(), Some(5));
        assert_eq!(torchrun.world_size_variable(), Some(("WORLD_SIZE", 16)));
        // srun with a task per rank.
        let srun = info(&[("SLURM_PROCID", "3"), ("SLURM_NTASKS", "4")]);
        assert_eq!(srun.rank(), Some(3));
        assert_eq!(srun.world_size(), Some(4));
        let mpi = info(&[("OMPI_COMM_WORLD_RANK", "0"), ("OMPI_COMM_WORLD_SIZE", "8")]);
        assert_eq!(mpi.world_size_variable(), Some(("OMPI_COMM_WORLD_SIZE", 8)));
        // A rank without its size (a trace written before the size was recorded) has none.
        assert_eq!(
            info(&[("RANK", "1"), ("SLURM_NTASKS", "2")]).world_size(),
            None
        );
    }
}
