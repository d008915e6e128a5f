//! Graph-level launch records (`CUpti_ActivityGraphTrace2`) and NVTX marker data (`CUpti_ActivityMarkerData` and
//! its 13.0 successor `CUpti_ActivityMarkerData2`, which only appends fields).

use std::fmt;

use super::record::TimeRange;
use crate::sys::cupti as sys;

/// One launch of a CUDA graph, traced as a whole (`GRAPH_TRACE`): from the start of its first node to the end of
/// its last. With this kind enabled CUPTI does not trace the graph's nodes one by one.
#[derive(Clone, Copy)]
pub struct GraphTrace<'a> {
    raw: &'a sys::CUpti_ActivityGraphTrace2,
}

// SAFETY: a read-only view of a plain record (its one pointer field is reserved and never followed).
unsafe impl Send for GraphTrace<'_> {}
// SAFETY: as above.
unsafe impl Sync for GraphTrace<'_> {}

impl<'a> GraphTrace<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityGraphTrace2` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        GraphTrace {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityGraphTrace2 {
        self.raw
    }

    /// Start of the first node and end of the last, on the device.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The correlation id of the launch call.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The launched graph's id.
    #[inline]
    pub fn graph_id(&self) -> u32 {
        self.raw.graphId
    }

    /// The device the graph started on.
    #[inline]
    pub fn device_id(&self) -> u32 {
        self.raw.deviceId
    }

    /// The context it started in.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream it was launched into.
    #[inline]
    pub fn stream_id(&self) -> u32 {
        self.raw.streamId
    }

    /// The device it ended on (a graph may span devices).
    #[inline]
    pub fn end_device_id(&self) -> u32 {
        self.raw.endDeviceId
    }

    /// The context it ended in.
    #[inline]
    pub fn end_context_id(&self) -> u32 {
        self.raw.endContextId
    }
}

impl fmt::Debug for GraphTrace<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GraphTrace")
            .field("graph_id", &self.graph_id())
            .field("time", &self.time())
            .field("stream_id", &self.stream_id())
            .field("correlation_id", &self.correlation_id())
            .finish_non_exhaustive()
    }
}

/// The payload of an NVTX marker as CUPTI reports it.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub enum MarkerPayloadValue {
    /// `CUPTI_METRIC_VALUE_KIND_UINT64`.
    Unsigned(u64),
    /// `CUPTI_METRIC_VALUE_KIND_INT64`.
    Signed(i64),
    /// `CUPTI_METRIC_VALUE_KIND_DOUBLE`.
    Double(f64),
    /// Another kind (an NVTX extended payload, or none), with its code and raw bits.
    Other(u32, u64),
}

/// The colour, category and payload of an NVTX marker (`MARKER_DATA`); its [`id`](Self::id) is that of the
/// [`Marker`](super::Marker) it belongs to.
#[derive(Clone, Copy)]
pub struct MarkerData<'a> {
    raw: &'a sys::CUpti_ActivityMarkerData,
}

impl<'a> MarkerData<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityMarkerData` (12.9) or `CUpti_ActivityMarkerData2` (13.0),
    /// whose first 32 bytes are the same, readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        MarkerData {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the 12.9 header declares it (the prefix of the 13.0 record).
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityMarkerData {
        self.raw
    }

    /// The marker's id.
    #[inline]
    pub fn id(&self) -> u32 {
        self.raw.id
    }

    /// The ARGB colour, where one was given (`CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB`).
    #[inline]
    pub fn color(&self) -> Option<u32> {
        (self.raw.flags & sys::CUPTI_ACTIVITY_FLAG_MARKER_COLOR_ARGB != 0).then_some(self.raw.color)
    }

    /// The category (0: none).
    #[inline]
    pub fn category(&self) -> u32 {
        self.raw.category
    }

    /// The payload.
    #[inline]
    pub fn payload(&self) -> MarkerPayloadValue {
        // SAFETY: every member of the union is 8 plain bytes; any bits are valid for each.
        let bits = unsafe { self.raw.payload.metricValueUint64 };
        match self.raw.payloadKind {
            sys::CUPTI_METRIC_VALUE_KIND_UINT64 => MarkerPayloadValue::Unsigned(bits),
            sys::CUPTI_METRIC_VALUE_KIND_INT64 => MarkerPayloadValue::Signed(bits as i64),
            sys::CUPTI_METRIC_VALUE_KIND_DOUBLE => MarkerPayloadValue::Double(f64::from_bits(bits)),
            k => MarkerPayloadValue::Other(k, bits),
        }
    }
}

impl fmt::Debug for MarkerData<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("MarkerData")
            .field("id", &self.id())
            .field("color", &self.color())
            .field("category", &self.category())
            .field("payload", &self.payload())
            .finish()
    }
}

const _: () = {
    use std::mem::size_of;
    assert!(size_of::<sys::CUpti_ActivityMarkerData>() == 32);
    assert!(size_of::<sys::CUpti_ActivityMarkerData2>() == 40);
    assert!(size_of::<sys::CUpti_ActivityGraphTrace2>() == 56);
};
