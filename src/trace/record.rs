//! The records a tracer keeps. Timestamps are nanoseconds on the clock named by the stream's
//! [`TimestampClock`](super::TimestampClock); ids (device, context, stream, correlation) are the vendor's.

use std::sync::Arc;

/// One traced event.
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
    /// A traced process finished sending (last record of a stream), with its counts.
    ProcessEnd(ProcessEnd),
    /// Metric values of one kernel launch.
    KernelMetrics(super::KernelMetricsRecord),
    /// PC-sampling samples of one PC, per stall reason.
    Stall(super::StallRecord),
    /// Profiling data the traced process lost.
    ProfileLoss(super::ProfileLoss),
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
            _ => None,
        }
    }
}

/// A kernel execution.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ApiDomain {
    /// The CUDA driver API (`cu*`).
    Driver,
    /// The CUDA runtime API (`cuda*`).
    Runtime,
    /// A code newer than this crate.
    Other(u8),
}

impl ApiDomain {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            ApiDomain::Driver => 1,
            ApiDomain::Runtime => 2,
            ApiDomain::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => ApiDomain::Driver,
            2 => ApiDomain::Runtime,
            c => ApiDomain::Other(c),
        }
    }

    /// `driver`, `runtime` or `other`.
    pub fn name(self) -> &'static str {
        match self {
            ApiDomain::Driver => "driver",
            ApiDomain::Runtime => "runtime",
            ApiDomain::Other(_) => "other",
        }
    }
}

/// A host API call.
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
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// Severity.
    pub level: NoticeLevel,
    /// The message.
    pub text: String,
}

/// First record of a stream.
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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum EndReason {
    /// The process exited normally (the exit handler ran).
    Exit,
    /// Tracing was stopped before the process ended.
    Stopped,
    /// A code newer than this crate.
    Other(u8),
}

impl EndReason {
    /// Wire code.
    pub fn code(self) -> u8 {
        match self {
            EndReason::Exit => 1,
            EndReason::Stopped => 2,
            EndReason::Other(c) => c,
        }
    }

    /// From the wire code.
    pub fn from_code(code: u8) -> Self {
        match code {
            1 => EndReason::Exit,
            2 => EndReason::Stopped,
            c => EndReason::Other(c),
        }
    }
}

/// Last record of a stream: what the sending side counted, so the receiver can check it got everything.
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
