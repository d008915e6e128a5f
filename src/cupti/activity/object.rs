//! Records about objects rather than work: contexts, streams, devices, names, markers, external correlation
//! ids, memory allocations.

use std::ffi::CStr;
use std::fmt;

use super::record::{ActivityObject, MemoryKind, open_enum, record_str};
use crate::sys::cupti as sys;

/// A context (`CONTEXT`, `CUpti_ActivityContext3`).
#[derive(Clone, Copy)]
pub struct ContextRecord<'a> {
    raw: &'a sys::CUpti_ActivityContext3,
}

impl<'a> ContextRecord<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityContext3` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        ContextRecord {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityContext3 {
        self.raw
    }

    /// The context id other records carry.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The device id.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The id of the context's NULL stream.
    #[inline]
    pub fn null_stream_id(&self) -> u16 {
        self.raw.nullStreamId
    }

    /// Whether it is a green context.
    #[inline]
    pub fn is_green_context(&self) -> bool {
        self.raw.isGreenContext != 0
    }

    /// For a green context, the context it was made from.
    #[inline]
    pub fn parent_context_id(&self) -> u32 {
        self.raw.parentContextId
    }

    /// Multiprocessors the context may use.
    #[inline]
    pub fn multiprocessors(&self) -> u16 {
        self.raw.numMultiprocessors
    }
}

impl fmt::Debug for ContextRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ContextRecord")
            .field("context_id", &self.context_id())
            .field("device_id", &self.device_id())
            .field("null_stream_id", &self.null_stream_id())
            .finish_non_exhaustive()
    }
}

open_enum! {
    /// How a stream was created (`CUpti_ActivityStreamFlag`).
    pub enum StreamFlag: u32 {
        /// A blocking stream.
        Default = CUPTI_ACTIVITY_STREAM_CREATE_FLAG_DEFAULT,
        /// A stream that does not synchronise with the NULL stream.
        NonBlocking = CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NON_BLOCKING,
        /// The NULL stream.
        Null = CUPTI_ACTIVITY_STREAM_CREATE_FLAG_NULL,
    }
}

/// A stream (`STREAM`, `CUpti_ActivityStream`).
#[derive(Clone, Copy)]
pub struct StreamRecord<'a> {
    raw: &'a sys::CUpti_ActivityStream,
}

impl<'a> StreamRecord<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityStream` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        StreamRecord {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityStream {
        self.raw
    }

    /// The context id.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream id other records carry.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// The stream's priority.
    #[inline]
    pub fn priority(&self) -> u32 {
        self.raw.priority
    }

    /// How it was created.
    #[inline]
    pub fn flag(&self) -> StreamFlag {
        StreamFlag::from_raw(self.raw.flag)
    }

    /// The correlation id of the call that created it.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }
}

impl fmt::Debug for StreamRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamRecord")
            .field("context_id", &self.context_id())
            .field("stream_id", &self.stream_id())
            .field("priority", &self.priority())
            .field("flag", &self.flag())
            .finish()
    }
}

/// A device (`DEVICE`, `CUpti_ActivityDevice5`).
#[derive(Clone, Copy)]
pub struct DeviceRecord<'a> {
    raw: &'a sys::CUpti_ActivityDevice5,
    follow: bool,
}

// SAFETY: a read-only view of a record unchanged for 'a; its name points at vendor memory valid for 'a.
unsafe impl Send for DeviceRecord<'_> {}
// SAFETY: as above.
unsafe impl Sync for DeviceRecord<'_> {}

impl<'a> DeviceRecord<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityDevice5` readable for `'a`; with `follow`, its name pointer
    /// must be null or valid for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, follow: bool) -> Self {
        DeviceRecord {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            follow,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityDevice5 {
        self.raw
    }

    /// The device id other records carry.
    #[inline]
    pub fn id(&self) -> u32 {
        self.raw.id
    }

    /// The device's name (for example `NVIDIA H100 80GB HBM3`); `None` where the batch does not follow
    /// pointers.
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: `follow` only for batches whose pointers are valid for 'a (`new`'s contract).
        unsafe { record_str(self.raw.name, self.follow) }
    }

    /// Compute capability, major and minor.
    #[inline]
    pub fn compute_capability(&self) -> (u32, u32) {
        (
            self.raw.computeCapabilityMajor,
            self.raw.computeCapabilityMinor,
        )
    }

    /// Global memory, bytes.
    #[inline]
    pub fn global_memory_size(&self) -> u64 {
        self.raw.globalMemorySize
    }

    /// Multiprocessors.
    #[inline]
    pub fn multiprocessors(&self) -> u32 {
        self.raw.numMultiprocessors
    }

    /// The device's UUID.
    #[inline]
    pub fn uuid(&self) -> [u8; 16] {
        self.raw.uuid.bytes.map(|b| b as u8)
    }
}

impl fmt::Debug for DeviceRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceRecord")
            .field("id", &self.id())
            .field("name", &self.name())
            .field("compute_capability", &self.compute_capability())
            .finish_non_exhaustive()
    }
}

/// A name given to a thread, device, context or stream (`NAME`, `CUpti_ActivityName`).
#[derive(Clone, Copy)]
pub struct NameRecord<'a> {
    raw: &'a sys::CUpti_ActivityName,
    follow: bool,
}

// SAFETY: as for `DeviceRecord`.
unsafe impl Send for NameRecord<'_> {}
// SAFETY: as for `DeviceRecord`.
unsafe impl Sync for NameRecord<'_> {}

impl<'a> NameRecord<'a> {
    /// # Safety
    /// As for [`DeviceRecord::new`], for a `CUpti_ActivityName`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, follow: bool) -> Self {
        NameRecord {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            follow,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityName {
        self.raw
    }

    /// The named object.
    #[inline]
    pub fn object(&self) -> ActivityObject {
        ActivityObject::new(self.raw.objectKind, self.raw.objectId)
    }

    /// The name; `None` where the batch does not follow pointers.
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: `follow` only for batches whose pointers are valid for 'a (`new`'s contract).
        unsafe { record_str(self.raw.name, self.follow) }
    }
}

impl fmt::Debug for NameRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NameRecord")
            .field("object", &self.object())
            .field("name", &self.name())
            .finish()
    }
}

/// An NVTX marker, or a start or end of a range (`MARKER`, `CUpti_ActivityMarker2`).
#[derive(Clone, Copy)]
pub struct Marker<'a> {
    raw: &'a sys::CUpti_ActivityMarker2,
    follow: bool,
}

// SAFETY: as for `DeviceRecord`.
unsafe impl Send for Marker<'_> {}
// SAFETY: as for `DeviceRecord`.
unsafe impl Sync for Marker<'_> {}

impl<'a> Marker<'a> {
    /// # Safety
    /// As for [`DeviceRecord::new`], for a `CUpti_ActivityMarker2` (name and domain pointers).
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, follow: bool) -> Self {
        Marker {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            follow,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMarker2 {
        self.raw
    }

    /// When.
    #[inline]
    pub fn timestamp(&self) -> u64 {
        self.raw.timestamp
    }

    /// The marker id; a range's start and end share it.
    #[inline]
    pub fn id(&self) -> u32 {
        self.raw.id
    }

    /// Whether this is an instantaneous marker.
    #[inline]
    pub fn is_instantaneous(&self) -> bool {
        self.raw.flags & sys::CUPTI_ACTIVITY_FLAG_MARKER_INSTANTANEOUS != 0
    }

    /// Whether this starts a range.
    #[inline]
    pub fn is_start(&self) -> bool {
        self.raw.flags & sys::CUPTI_ACTIVITY_FLAG_MARKER_START != 0
    }

    /// Whether this ends a range.
    #[inline]
    pub fn is_end(&self) -> bool {
        self.raw.flags & sys::CUPTI_ACTIVITY_FLAG_MARKER_END != 0
    }

    /// The thread or other object it was recorded on.
    #[inline]
    pub fn object(&self) -> ActivityObject {
        ActivityObject::new(self.raw.objectKind, self.raw.objectId)
    }

    /// The marker's name (none for a range's end, or where the batch does not follow pointers).
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: `follow` only for batches whose pointers are valid for 'a (`new`'s contract).
        unsafe { record_str(self.raw.name, self.follow) }
    }

    /// The NVTX domain (none for the default domain).
    #[inline]
    pub fn domain(&self) -> Option<&'a CStr> {
        // SAFETY: as for `name`.
        unsafe { record_str(self.raw.domain, self.follow) }
    }
}

impl fmt::Debug for Marker<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Marker")
            .field("id", &self.id())
            .field("timestamp", &self.timestamp())
            .field("name", &self.name())
            .field("domain", &self.domain())
            .finish_non_exhaustive()
    }
}

/// An external correlation id the program pushed (`EXTERNAL_CORRELATION`, `CUpti_ActivityExternalCorrelation`).
#[derive(Clone, Copy)]
pub struct ExternalCorrelation<'a> {
    raw: &'a sys::CUpti_ActivityExternalCorrelation,
}

impl<'a> ExternalCorrelation<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityExternalCorrelation` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        ExternalCorrelation {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityExternalCorrelation {
        self.raw
    }

    /// The kind of external id (`CUpti_ExternalCorrelationKind`).
    #[inline]
    pub fn external_kind(&self) -> u32 {
        self.raw.externalKind
    }

    /// The external id.
    #[inline]
    pub fn external_id(&self) -> u64 {
        self.raw.externalId
    }

    /// The CUPTI correlation id it maps to.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }
}

impl fmt::Debug for ExternalCorrelation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ExternalCorrelation")
            .field("external_kind", &self.external_kind())
            .field("external_id", &self.external_id())
            .field("correlation_id", &self.correlation_id())
            .finish()
    }
}

open_enum! {
    /// An allocation or a release (`CUpti_ActivityMemoryOperationType`).
    pub enum MemoryOperation: u32 {
        /// Memory allocated.
        Allocation = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
        /// Memory released.
        Release = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE,
    }
}

/// `CUPTI_INVALID_CONTEXT_ID`, a header macro bindgen does not carry.
const INVALID_CONTEXT_ID: u32 = 0xFFFF_FFFF;
/// `CUPTI_INVALID_STREAM_ID`, likewise.
const INVALID_STREAM_ID: u32 = 0xFFFF_FFFF;

/// A device memory allocation or release (`MEMORY2`, `CUpti_ActivityMemory4`).
#[derive(Clone, Copy)]
pub struct MemoryRecord<'a> {
    raw: &'a sys::CUpti_ActivityMemory4,
    follow: bool,
}

// SAFETY: as for `DeviceRecord`.
unsafe impl Send for MemoryRecord<'_> {}
// SAFETY: as for `DeviceRecord`.
unsafe impl Sync for MemoryRecord<'_> {}

impl<'a> MemoryRecord<'a> {
    /// # Safety
    /// As for [`DeviceRecord::new`], for a `CUpti_ActivityMemory4` (name and source pointers).
    #[inline]
    pub(crate) unsafe fn new(at: *const u8, follow: bool) -> Self {
        MemoryRecord {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
            follow,
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMemory4 {
        self.raw
    }

    /// Allocation or release.
    #[inline]
    pub fn operation(&self) -> MemoryOperation {
        MemoryOperation::from_raw(self.raw.memoryOperationType)
    }

    /// The kind of memory.
    #[inline]
    pub fn memory_kind(&self) -> MemoryKind {
        MemoryKind::from_raw(u16::try_from(self.raw.memoryKind).unwrap_or(u16::MAX))
    }

    /// Device address.
    #[inline]
    pub fn address(&self) -> u64 {
        self.raw.address
    }

    /// Bytes.
    #[inline]
    pub fn bytes(&self) -> u64 {
        self.raw.bytes
    }

    /// When.
    #[inline]
    pub fn timestamp(&self) -> u64 {
        self.raw.timestamp
    }

    /// The program counter of the call (0 unless enabled with `cuptiActivityEnableAllocationSource`).
    #[inline]
    pub fn pc(&self) -> u64 {
        self.raw.PC
    }

    /// The process.
    #[inline]
    pub fn process_id(&self) -> u32 {
        self.raw.processId
    }

    /// The device id.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context id; `None` where the operation had no context (CUPTI writes `CUPTI_INVALID_CONTEXT_ID`).
    #[inline]
    pub fn context_id(&self) -> Option<u32> {
        (self.raw.contextId != INVALID_CONTEXT_ID).then_some(self.raw.contextId)
    }

    /// The stream id, for stream-ordered allocations; `None` for the others (CUPTI writes
    /// `CUPTI_INVALID_STREAM_ID`).
    #[inline]
    pub fn stream_id(&self) -> Option<u32> {
        (self.raw.streamId != INVALID_STREAM_ID).then_some(self.raw.streamId)
    }

    /// The correlation id of the API call.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// Whether it was a stream-ordered (asynchronous) operation.
    #[inline]
    pub fn is_async(&self) -> bool {
        self.raw.isAsync != 0
    }

    /// The variable's name, for static allocations; `None` otherwise or where the batch does not follow
    /// pointers.
    #[inline]
    pub fn name(&self) -> Option<&'a CStr> {
        // SAFETY: `follow` only for batches whose pointers are valid for 'a (`new`'s contract).
        unsafe { record_str(self.raw.name, self.follow) }
    }
}

impl fmt::Debug for MemoryRecord<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MemoryRecord")
            .field("operation", &self.operation())
            .field("address", &self.address())
            .field("bytes", &self.bytes())
            .field("timestamp", &self.timestamp())
            .field("correlation_id", &self.correlation_id())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::super::{Activity, ActivityBatch, RecordLayout};
    use crate::sys::cupti as sys;

    /// One `MEMORY2` record with these context and stream ids, in an 8-aligned buffer.
    fn memory_record(context: u32, stream: u32) -> [u64; 16] {
        let mut r = sys::CUpti_ActivityMemory4 {
            kind: sys::CUPTI_ACTIVITY_KIND_MEMORY2,
            memoryOperationType: sys::CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION,
            bytes: 4096,
            ..Default::default()
        };
        r.contextId = context;
        r.streamId = stream;
        let mut words = [0u64; 16];
        // SAFETY: the record is 128 plain bytes (asserted in `layout`), the array as many, both 8-aligned.
        unsafe { std::ptr::write(words.as_mut_ptr().cast::<sys::CUpti_ActivityMemory4>(), r) };
        words
    }

    fn ids(words: &[u64; 16]) -> (Option<u32>, Option<u32>) {
        // SAFETY: plain integers viewed as their bytes.
        let bytes = unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), 128) };
        let batch = ActivityBatch::from_bytes(bytes, RecordLayout::Cupti13_0);
        let Some(Ok(Activity::Memory(m))) = batch.records().next() else {
            panic!("not a memory record");
        };
        (m.context_id(), m.stream_id())
    }

    #[test]
    fn a_memory_record_without_a_context_or_stream_has_no_context_or_stream_id() {
        assert_eq!(ids(&memory_record(0xFFFF_FFFF, 0xFFFF_FFFF)), (None, None));
        assert_eq!(ids(&memory_record(3, 0xFFFF_FFFF)), (Some(3), None));
        assert_eq!(ids(&memory_record(3, 14)), (Some(3), Some(14)));
        assert_eq!(ids(&memory_record(0, 0)), (Some(0), Some(0)));
    }
}
