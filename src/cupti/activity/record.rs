//! The decoded form of one activity record: [`Activity`], and the small types the record views share.

use std::ffi::{CStr, c_char};

use super::{
    ApiCall, ContextRecord, DeviceRecord, ExternalCorrelation, GraphTrace, Kernel, Marker,
    MarkerData, Memcpy, MemoryRecord, Memset, NameRecord, Overhead, PeerCopy, StreamRecord,
    Synchronization,
};
use crate::cupti::activity_kind::ActivityKind;
use crate::sys::cupti as sys;

/// One activity record, borrowed from the buffer it was decoded from.
///
/// Timestamps are nanoseconds on the tracer's [`Clock`](super::Clock). Every variant is a view of the vendor's
/// record: reading a field reads the buffer, nothing is copied ahead.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Activity<'a> {
    /// A kernel (`KERNEL` or `CONCURRENT_KERNEL`).
    Kernel(Kernel<'a>),
    /// A memory copy (`MEMCPY`).
    Memcpy(Memcpy<'a>),
    /// A peer-to-peer memory copy (`MEMCPY2`).
    PeerCopy(PeerCopy<'a>),
    /// A memory set (`MEMSET`).
    Memset(Memset<'a>),
    /// A driver or runtime API call (`DRIVER`, `RUNTIME`, `INTERNAL_LAUNCH_API`).
    Api(ApiCall<'a>),
    /// A wait on an event, a stream or a context (`SYNCHRONIZATION`).
    Synchronization(Synchronization<'a>),
    /// Work of CUPTI or the driver itself (`OVERHEAD`).
    Overhead(Overhead<'a>),
    /// A context (`CONTEXT`).
    Context(ContextRecord<'a>),
    /// A stream (`STREAM`).
    Stream(StreamRecord<'a>),
    /// A device (`DEVICE`).
    Device(DeviceRecord<'a>),
    /// A name given to an object (`NAME`).
    Name(NameRecord<'a>),
    /// An NVTX marker or range end point (`MARKER`).
    Marker(Marker<'a>),
    /// An external correlation id (`EXTERNAL_CORRELATION`).
    ExternalCorrelation(ExternalCorrelation<'a>),
    /// A device memory allocation or release (`MEMORY2`).
    Memory(MemoryRecord<'a>),
    /// A CUDA graph launch as a whole (`GRAPH_TRACE`).
    GraphTrace(GraphTrace<'a>),
    /// The colour, category and payload of an NVTX marker (`MARKER_DATA`).
    MarkerData(MarkerData<'a>),
    /// A record of a kind the crate does not decode, with its bytes (from its `kind` field on).
    Unknown {
        /// The record's kind.
        kind: ActivityKind,
        /// The record's bytes: exactly the record where its size is known (from the layout or the vendor's
        /// walk), otherwise the rest of the buffer, which then ends the walk.
        bytes: &'a [u8],
    },
}

impl Activity<'_> {
    /// The record's kind.
    #[inline]
    pub fn kind(&self) -> ActivityKind {
        match self {
            Activity::Kernel(r) => r.kind(),
            Activity::Memcpy(_) => ActivityKind::MEMCPY,
            Activity::PeerCopy(_) => ActivityKind::MEMCPY2,
            Activity::Memset(_) => ActivityKind::MEMSET,
            Activity::Api(r) => r.kind(),
            Activity::Synchronization(_) => ActivityKind::SYNCHRONIZATION,
            Activity::Overhead(_) => ActivityKind::OVERHEAD,
            Activity::Context(_) => ActivityKind::CONTEXT,
            Activity::Stream(_) => ActivityKind::STREAM,
            Activity::Device(_) => ActivityKind::DEVICE,
            Activity::Name(_) => ActivityKind::NAME,
            Activity::Marker(_) => ActivityKind::MARKER,
            Activity::ExternalCorrelation(_) => ActivityKind::EXTERNAL_CORRELATION,
            Activity::Memory(_) => ActivityKind::MEMORY2,
            Activity::GraphTrace(_) => ActivityKind::GRAPH_TRACE,
            Activity::MarkerData(_) => ActivityKind::MARKER_DATA,
            Activity::Unknown { kind, .. } => *kind,
        }
    }

    /// The correlation id tying the record to the API call that caused it, where the record has one (0 in a
    /// record means "none" to CUPTI and is returned as is).
    #[inline]
    pub fn correlation_id(&self) -> Option<u32> {
        Some(match self {
            Activity::Kernel(r) => r.correlation_id(),
            Activity::Memcpy(r) => r.correlation_id(),
            Activity::PeerCopy(r) => r.correlation_id(),
            Activity::Memset(r) => r.correlation_id(),
            Activity::Api(r) => r.correlation_id(),
            Activity::Synchronization(r) => r.correlation_id(),
            Activity::Overhead(r) => r.correlation_id(),
            Activity::Stream(r) => r.correlation_id(),
            Activity::ExternalCorrelation(r) => r.correlation_id(),
            Activity::Memory(r) => r.correlation_id(),
            Activity::GraphTrace(r) => r.correlation_id(),
            _ => return None,
        })
    }

    /// Start and end, for records that span time.
    #[inline]
    pub fn time(&self) -> Option<TimeRange> {
        Some(match self {
            Activity::Kernel(r) => r.time(),
            Activity::Memcpy(r) => r.time(),
            Activity::PeerCopy(r) => r.time(),
            Activity::Memset(r) => r.time(),
            Activity::Api(r) => r.time(),
            Activity::Synchronization(r) => r.time(),
            Activity::Overhead(r) => r.time(),
            Activity::GraphTrace(r) => r.time(),
            _ => return None,
        })
    }
}

/// A start and an end in nanoseconds on the tracer's [`Clock`](super::Clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct TimeRange {
    /// Start.
    pub start: u64,
    /// End. CUPTI writes 0 for a record whose end it could not measure (for example a kernel still running at
    /// a forced flush).
    pub end: u64,
}

impl TimeRange {
    /// `end - start`, 0 where the end is missing or before the start.
    #[inline]
    pub fn duration_ns(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }

    /// Whether both ends were measured and the end is not before the start.
    #[inline]
    pub fn is_complete(&self) -> bool {
        self.start != 0 && self.end >= self.start
    }
}

/// Grid, block or cluster dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Dim3 {
    /// x.
    pub x: u32,
    /// y.
    pub y: u32,
    /// z.
    pub z: u32,
}

impl Dim3 {
    /// `x * y * z`, saturating at `u64::MAX` (three `u32` can overflow a `u64`; records from a buffer are not
    /// trusted to stay within real grid limits).
    #[inline]
    pub fn count(&self) -> u64 {
        (u64::from(self.x) * u64::from(self.y)).saturating_mul(u64::from(self.z))
    }

    /// From the signed fields some records use; negative values (never written by CUPTI) become 0.
    #[inline]
    pub(crate) fn from_signed(x: i32, y: i32, z: i32) -> Self {
        // Branch-free: a negative value becomes 0.
        let u = |v: i32| v.max(0) as u32;
        Dim3 {
            x: u(x),
            y: u(y),
            z: u(z),
        }
    }
}

/// The object a record is about (`CUpti_ActivityObjectKind` with its id union).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ActivityObject {
    /// A process.
    Process {
        /// Process id.
        pid: u32,
    },
    /// A thread.
    Thread {
        /// Process id.
        pid: u32,
        /// Thread id (of the kind set with `cuptiSetThreadIdType`).
        tid: u32,
    },
    /// A device.
    Device {
        /// Device id.
        device: u32,
    },
    /// A context.
    Context {
        /// Device id.
        device: u32,
        /// Context id.
        context: u32,
    },
    /// A stream.
    Stream {
        /// Device id.
        device: u32,
        /// Context id.
        context: u32,
        /// Stream id.
        stream: u32,
    },
    /// An object kind the crate does not know, or `UNKNOWN`.
    Unknown(u32),
}

impl ActivityObject {
    #[inline]
    pub(crate) fn new(
        kind: sys::CUpti_ActivityObjectKind,
        id: sys::CUpti_ActivityObjectKindId,
    ) -> Self {
        // SAFETY: both union members are plain u32 triples/pairs; any bits are valid for either.
        let (pt, dcs) = unsafe { (id.pt, id.dcs) };
        match kind {
            sys::CUPTI_ACTIVITY_OBJECT_PROCESS => ActivityObject::Process { pid: pt.processId },
            sys::CUPTI_ACTIVITY_OBJECT_THREAD => ActivityObject::Thread {
                pid: pt.processId,
                tid: pt.threadId,
            },
            sys::CUPTI_ACTIVITY_OBJECT_DEVICE => ActivityObject::Device {
                device: dcs.deviceId,
            },
            sys::CUPTI_ACTIVITY_OBJECT_CONTEXT => ActivityObject::Context {
                device: dcs.deviceId,
                context: dcs.contextId,
            },
            sys::CUPTI_ACTIVITY_OBJECT_STREAM => ActivityObject::Stream {
                device: dcs.deviceId,
                context: dcs.contextId,
                stream: dcs.streamId,
            },
            other => ActivityObject::Unknown(other),
        }
    }
}

/// Declares a vendor enum as a Rust enum that keeps unknown values.
macro_rules! open_enum {
    (
        $(#[$meta:meta])* $vis:vis enum $Name:ident: $repr:ty {
            $( $(#[$vmeta:meta])* $Variant:ident = $code:ident, )*
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        $vis enum $Name {
            $( $(#[$vmeta])* #[doc = concat!("`", stringify!($code), "`.")] $Variant, )*
            /// A value the crate does not know.
            Unknown($repr),
        }

        impl $Name {
            /// The enum value of a vendor code.
            #[inline]
            pub fn from_raw(code: $repr) -> Self {
                match u32::from(code) {
                    $( c if c == crate::sys::cupti::$code => $Name::$Variant, )*
                    _ => $Name::Unknown(code),
                }
            }
        }
    };
}
pub(crate) use open_enum;

open_enum! {
    /// The direction of a memory copy (`CUpti_ActivityMemcpyKind`).
    pub enum CopyKind: u8 {
        /// Host to device.
        HtoD = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD,
        /// Device to host.
        DtoH = CUPTI_ACTIVITY_MEMCPY_KIND_DTOH,
        /// Host to array.
        HtoA = CUPTI_ACTIVITY_MEMCPY_KIND_HTOA,
        /// Array to host.
        AtoH = CUPTI_ACTIVITY_MEMCPY_KIND_ATOH,
        /// Array to array.
        AtoA = CUPTI_ACTIVITY_MEMCPY_KIND_ATOA,
        /// Array to device.
        AtoD = CUPTI_ACTIVITY_MEMCPY_KIND_ATOD,
        /// Device to array.
        DtoA = CUPTI_ACTIVITY_MEMCPY_KIND_DTOA,
        /// Device to device.
        DtoD = CUPTI_ACTIVITY_MEMCPY_KIND_DTOD,
        /// Host to host.
        HtoH = CUPTI_ACTIVITY_MEMCPY_KIND_HTOH,
        /// Peer to peer (between devices).
        PtoP = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP,
    }
}

open_enum! {
    /// The kind of memory on one side of a copy or set (`CUpti_ActivityMemoryKind`).
    pub enum MemoryKind: u16 {
        /// Pageable host memory.
        Pageable = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
        /// Pinned host memory.
        Pinned = CUPTI_ACTIVITY_MEMORY_KIND_PINNED,
        /// Device memory.
        Device = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
        /// A CUDA array.
        Array = CUPTI_ACTIVITY_MEMORY_KIND_ARRAY,
        /// Managed (unified) memory.
        Managed = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED,
        /// Static device memory.
        DeviceStatic = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE_STATIC,
        /// Static managed memory.
        ManagedStatic = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED_STATIC,
    }
}

/// A NUL-terminated string a record points at.
///
/// # Safety
/// When `follow` is true, `p` must be null or point at a NUL-terminated string valid for `'a` (the contract of
/// the batch the record came from).
pub(crate) unsafe fn record_str<'a>(p: *const c_char, follow: bool) -> Option<&'a CStr> {
    if !follow || p.is_null() {
        return None;
    }
    // SAFETY: the caller's contract.
    Some(unsafe { CStr::from_ptr(p) })
}
