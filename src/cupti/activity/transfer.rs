//! Memory copies and sets: `CUpti_ActivityMemcpy6`, `CUpti_ActivityMemcpyPtoP4`, `CUpti_ActivityMemset4`.

use std::fmt;

use super::layout::RecordLayout;
use super::record::{CopyKind, MemoryKind, TimeRange};
use crate::sys::cupti as sys;

/// A memory copy (`MEMCPY`).
#[derive(Clone, Copy)]
pub struct Memcpy<'a> {
    raw: &'a sys::CUpti_ActivityMemcpy6,
    layout: RecordLayout,
}

// SAFETY: a read-only view of a record that stays unchanged for 'a; its only pointer field is reserved and never
// followed.
unsafe impl Send for Memcpy<'_> {}
// SAFETY: as above.
unsafe impl Sync for Memcpy<'_> {}

impl<'a> Memcpy<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityMemcpy6` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, layout: RecordLayout) -> Self {
        Memcpy {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            layout,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMemcpy6 {
        self.raw
    }

    /// Bytes copied.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.raw.bytes
    }

    /// Direction.
    #[inline]
    pub fn copy_kind(&self) -> CopyKind {
        CopyKind::from_raw(self.raw.copyKind)
    }

    /// Memory kind of the source.
    #[inline]
    pub fn src_kind(&self) -> MemoryKind {
        MemoryKind::from_raw(u16::from(self.raw.srcKind))
    }

    /// Memory kind of the destination.
    #[inline]
    pub fn dst_kind(&self) -> MemoryKind {
        MemoryKind::from_raw(u16::from(self.raw.dstKind))
    }

    /// Whether the copy was asynchronous (`CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC`).
    #[inline]
    pub fn is_async(&self) -> bool {
        u32::from(self.raw.flags) & sys::CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC != 0
    }

    /// Start and end on the GPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The device id.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context id.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream id.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// The correlation id of the API call that issued it.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The runtime call's correlation id where the copy came through the runtime (0 otherwise).
    #[inline]
    pub fn runtime_correlation_id(&self) -> u32 {
        self.raw.runtimeCorrelationId
    }

    /// The graph it ran in (0 when not from a graph).
    #[inline]
    pub fn graph_id(&self) -> u32 {
        self.raw.graphId
    }

    /// The graph node (0 when not from a graph).
    #[inline]
    pub fn graph_node_id(&self) -> u64 {
        self.raw.graphNodeId
    }

    /// How many copies a batched copy record stands for (1 for a single copy).
    #[inline]
    pub fn copy_count(&self) -> u64 {
        self.raw.copyCount
    }

    /// Whether the copy was issued from the device (CUPTI 13.0 records only; in 12.9 that byte is padding).
    #[inline]
    pub fn is_device_launched(&self) -> Option<bool> {
        (self.layout == RecordLayout::Cupti13_0).then_some(self.raw.isDeviceLaunched != 0)
    }
}

impl fmt::Debug for Memcpy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memcpy")
            .field("bytes", &self.bytes())
            .field("copy_kind", &self.copy_kind())
            .field("time", &self.time())
            .field("device_id", &self.device_id())
            .field("context_id", &self.context_id())
            .field("stream_id", &self.stream_id())
            .field("correlation_id", &self.correlation_id())
            .field("async", &self.is_async())
            .finish_non_exhaustive()
    }
}

/// A peer-to-peer copy between devices (`MEMCPY2`).
#[derive(Clone, Copy)]
pub struct PeerCopy<'a> {
    raw: &'a sys::CUpti_ActivityMemcpyPtoP4,
}

// SAFETY: as for `Memcpy`.
unsafe impl Send for PeerCopy<'_> {}
// SAFETY: as for `Memcpy`.
unsafe impl Sync for PeerCopy<'_> {}

impl<'a> PeerCopy<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityMemcpyPtoP4` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        PeerCopy {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMemcpyPtoP4 {
        self.raw
    }

    /// Bytes copied.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.raw.bytes
    }

    /// Direction (`PtoP`, or device to device within a device).
    #[inline]
    pub fn copy_kind(&self) -> CopyKind {
        CopyKind::from_raw(self.raw.copyKind)
    }

    /// Whether the copy was asynchronous.
    #[inline]
    pub fn is_async(&self) -> bool {
        u32::from(self.raw.flags) & sys::CUPTI_ACTIVITY_FLAG_MEMCPY_ASYNC != 0
    }

    /// Start and end on the GPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The device that ran the copy.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context that ran the copy.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream id.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// Source device and context ids.
    #[inline]
    pub fn src(&self) -> (u32, u32) {
        (self.raw.srcDeviceId, self.raw.srcContextId)
    }

    /// Destination device and context ids.
    #[inline]
    pub fn dst(&self) -> (u32, u32) {
        (self.raw.dstDeviceId, self.raw.dstContextId)
    }

    /// The correlation id of the API call that issued it.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }
}

impl fmt::Debug for PeerCopy<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PeerCopy")
            .field("bytes", &self.bytes())
            .field("src", &self.src())
            .field("dst", &self.dst())
            .field("time", &self.time())
            .field("correlation_id", &self.correlation_id())
            .finish_non_exhaustive()
    }
}

/// A memory set (`MEMSET`).
#[derive(Clone, Copy)]
pub struct Memset<'a> {
    raw: &'a sys::CUpti_ActivityMemset4,
    layout: RecordLayout,
}

// SAFETY: as for `Memcpy`.
unsafe impl Send for Memset<'_> {}
// SAFETY: as for `Memcpy`.
unsafe impl Sync for Memset<'_> {}

impl<'a> Memset<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityMemset4` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, layout: RecordLayout) -> Self {
        Memset {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            layout,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMemset4 {
        self.raw
    }

    /// Bytes set.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.raw.bytes
    }

    /// The value written.
    #[inline]
    pub fn value(&self) -> u32 {
        self.raw.value
    }

    /// The kind of memory set.
    #[inline]
    pub fn memory_kind(&self) -> MemoryKind {
        MemoryKind::from_raw(self.raw.memoryKind)
    }

    /// Whether the set was asynchronous (`CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC`).
    #[inline]
    pub fn is_async(&self) -> bool {
        u32::from(self.raw.flags) & sys::CUPTI_ACTIVITY_FLAG_MEMSET_ASYNC != 0
    }

    /// Start and end on the GPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The device id.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context id.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream id.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// The correlation id of the API call that issued it.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The graph it ran in (0 when not from a graph).
    #[inline]
    pub fn graph_id(&self) -> u32 {
        self.raw.graphId
    }

    /// Whether the set was issued from the device (CUPTI 13.0 records only).
    #[inline]
    pub fn is_device_launched(&self) -> Option<bool> {
        (self.layout == RecordLayout::Cupti13_0).then_some(self.raw.isDeviceLaunched != 0)
    }
}

impl fmt::Debug for Memset<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Memset")
            .field("bytes", &self.bytes())
            .field("value", &self.value())
            .field("time", &self.time())
            .field("device_id", &self.device_id())
            .field("context_id", &self.context_id())
            .field("stream_id", &self.stream_id())
            .field("correlation_id", &self.correlation_id())
            .finish_non_exhaustive()
    }
}
