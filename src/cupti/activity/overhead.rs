//! Overhead records (`CUpti_ActivityOverhead3`): time CUPTI and the driver spent on their own work.

use std::fmt;

use super::record::{ActivityObject, TimeRange, open_enum};
use crate::sys::cupti as sys;

open_enum! {
    /// What the overhead was (`CUpti_ActivityOverheadKind`).
    pub enum OverheadKind: u32 {
        /// The driver compiling PTX.
        DriverCompiler = CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER,
        /// CUPTI flushing a buffer.
        CuptiBufferFlush = CUPTI_ACTIVITY_OVERHEAD_CUPTI_BUFFER_FLUSH,
        /// CUPTI instrumenting code.
        CuptiInstrumentation = CUPTI_ACTIVITY_OVERHEAD_CUPTI_INSTRUMENTATION,
        /// CUPTI allocating resources.
        CuptiResource = CUPTI_ACTIVITY_OVERHEAD_CUPTI_RESOURCE,
        /// Modules loaded lazily by the runtime.
        RuntimeTriggeredModuleLoading = CUPTI_ACTIVITY_OVERHEAD_RUNTIME_TRIGGERED_MODULE_LOADING,
        /// Functions loaded lazily.
        LazyFunctionLoading = CUPTI_ACTIVITY_OVERHEAD_LAZY_FUNCTION_LOADING,
        /// Waiting for space in a full command buffer.
        CommandBufferFull = CUPTI_ACTIVITY_OVERHEAD_COMMAND_BUFFER_FULL,
        /// Waiting for the client to hand CUPTI an activity buffer.
        ActivityBufferRequest = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST,
        /// Initialising unified-memory activity.
        UvmActivityInit = CUPTI_ACTIVITY_OVERHEAD_UVM_ACTIVITY_INIT,
    }
}

/// Work of CUPTI or the driver itself (`OVERHEAD`).
#[derive(Clone, Copy)]
pub struct Overhead<'a> {
    raw: &'a sys::CUpti_ActivityOverhead3,
}

// SAFETY: a read-only view of a record unchanged for 'a; its `overheadData` pointer is never followed.
unsafe impl Send for Overhead<'_> {}
// SAFETY: as above.
unsafe impl Sync for Overhead<'_> {}

impl<'a> Overhead<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityOverhead3` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        Overhead {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityOverhead3 {
        self.raw
    }

    /// What the overhead was.
    #[inline]
    pub fn overhead_kind(&self) -> OverheadKind {
        OverheadKind::from_raw(self.raw.overheadKind)
    }

    /// The process, thread, device, context or stream that bore it.
    #[inline]
    pub fn object(&self) -> ActivityObject {
        ActivityObject::new(self.raw.objectKind, self.raw.objectId)
    }

    /// Start and end.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The correlation id of the API call it happened in (0 if none).
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }
}

impl fmt::Debug for Overhead<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Overhead")
            .field("overhead_kind", &self.overhead_kind())
            .field("object", &self.object())
            .field("time", &self.time())
            .field("correlation_id", &self.correlation_id())
            .finish()
    }
}
