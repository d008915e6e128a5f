//! API call records (`CUpti_ActivityAPI`) and waits (`CUpti_ActivitySynchronization2`).

use std::fmt;

use super::record::{TimeRange, open_enum};
use crate::cupti::activity_kind::ActivityKind;
use crate::cupti::cbid::{ApiCbid, ApiDomain, DriverCbid, RuntimeCbid};
use crate::sys::cupti as sys;

/// A driver or runtime API call (`DRIVER`, `RUNTIME`, `INTERNAL_LAUNCH_API`).
#[derive(Clone, Copy)]
pub struct ApiCall<'a> {
    raw: &'a sys::CUpti_ActivityAPI,
}

impl<'a> ApiCall<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivityAPI` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        ApiCall {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivityAPI {
        self.raw
    }

    /// `DRIVER`, `RUNTIME` or `INTERNAL_LAUNCH_API`.
    #[inline]
    pub fn kind(&self) -> ActivityKind {
        ActivityKind(self.raw.kind)
    }

    /// The API: runtime for `RUNTIME` records, driver for `DRIVER` and `INTERNAL_LAUNCH_API` ones.
    #[inline]
    pub fn domain(&self) -> ApiDomain {
        if self.raw.kind == sys::CUPTI_ACTIVITY_KIND_RUNTIME {
            ApiDomain::Runtime
        } else {
            ApiDomain::Driver
        }
    }

    /// The callback id of the function, in the record's API.
    #[inline]
    pub fn cbid(&self) -> ApiCbid {
        match self.domain() {
            ApiDomain::Runtime => ApiCbid::Runtime(RuntimeCbid::new(self.raw.cbid)),
            ApiDomain::Driver => ApiCbid::Driver(DriverCbid::new(self.raw.cbid)),
        }
    }

    /// The function's name (`cuLaunchKernel`, `cudaLaunchKernel`), where the crate's header names the id.
    #[inline]
    pub fn function_name(&self) -> Option<&'static str> {
        self.cbid().function_name()
    }

    /// Entry and exit, on the CPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The calling process.
    #[inline]
    pub fn process_id(&self) -> u32 {
        self.raw.processId
    }

    /// The calling thread (of the kind set with `cuptiSetThreadIdType`; by default the POSIX thread id cut to
    /// 32 bits).
    #[inline]
    pub fn thread_id(&self) -> u32 {
        self.raw.threadId
    }

    /// The correlation id the GPU records of this call carry.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// What the function returned (`CUresult` or `cudaError_t`).
    #[inline]
    pub fn return_value(&self) -> u32 {
        self.raw.returnValue
    }
}

impl fmt::Debug for ApiCall<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ApiCall")
            .field("cbid", &self.cbid())
            .field("time", &self.time())
            .field("thread_id", &self.thread_id())
            .field("correlation_id", &self.correlation_id())
            .field("return_value", &self.return_value())
            .finish()
    }
}

open_enum! {
    /// What a synchronization record waited on (`CUpti_ActivitySynchronizationType`).
    pub enum SyncType: u32 {
        /// `cuEventSynchronize` / `cudaEventSynchronize`.
        EventSynchronize = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_EVENT_SYNCHRONIZE,
        /// `cuStreamWaitEvent` / `cudaStreamWaitEvent`.
        StreamWaitEvent = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_WAIT_EVENT,
        /// `cuStreamSynchronize` / `cudaStreamSynchronize`.
        StreamSynchronize = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE,
        /// `cuCtxSynchronize` / `cudaDeviceSynchronize`.
        ContextSynchronize = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE,
    }
}

/// `CUPTI_SYNCHRONIZATION_INVALID_VALUE`: a field that does not apply to the record.
const INVALID: u32 = 0xFFFF_FFFF;

/// A wait on an event, a stream or a context (`SYNCHRONIZATION`).
#[derive(Clone, Copy)]
pub struct Synchronization<'a> {
    raw: &'a sys::CUpti_ActivitySynchronization2,
}

impl<'a> Synchronization<'a> {
    /// # Safety
    /// `at` must be 8-aligned with a `CUpti_ActivitySynchronization2` readable for `'a`.
    #[inline]
    pub(crate) unsafe fn new(at: *const u8) -> Self {
        Synchronization {
            // SAFETY: the caller's contract; any bits are valid for the plain C struct.
            raw: unsafe { &*at.cast() },
        }
    }

    /// The record as the header declares it.
    #[inline]
    pub fn raw(&self) -> &'a sys::CUpti_ActivitySynchronization2 {
        self.raw
    }

    /// What was waited on.
    #[inline]
    pub fn sync_type(&self) -> SyncType {
        SyncType::from_raw(self.raw.type_)
    }

    /// Start and end of the wait, on the CPU.
    #[inline]
    pub fn time(&self) -> TimeRange {
        TimeRange {
            start: self.raw.start,
            end: self.raw.end,
        }
    }

    /// The correlation id of the API call that waited.
    #[inline]
    pub fn correlation_id(&self) -> u32 {
        self.raw.correlationId
    }

    /// The context id.
    #[inline]
    pub fn context_id(&self) -> u32 {
        self.raw.contextId
    }

    /// The stream waited on; `None` where not applicable (context and event synchronisation, for which CUPTI
    /// writes `CUPTI_SYNCHRONIZATION_INVALID_VALUE`).
    #[inline]
    pub fn stream_id(&self) -> Option<u32> {
        (self.raw.streamId != INVALID).then_some(self.raw.streamId)
    }

    /// The event waited on; `None` where not applicable (context and stream synchronisation).
    #[inline]
    pub fn cuda_event_id(&self) -> Option<u32> {
        (self.raw.cudaEventId != INVALID).then_some(self.raw.cudaEventId)
    }

    /// The id tying an event wait to the latest record of that event (`cudaEventSyncId`); `None` where not
    /// applicable.
    #[inline]
    pub fn cuda_event_sync_id(&self) -> Option<u64> {
        (self.raw.cudaEventSyncId != u64::from(INVALID)).then_some(self.raw.cudaEventSyncId)
    }

    /// What the waiting call returned.
    #[inline]
    pub fn return_value(&self) -> u32 {
        self.raw.returnValue
    }
}

impl fmt::Debug for Synchronization<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Synchronization")
            .field("sync_type", &self.sync_type())
            .field("time", &self.time())
            .field("context_id", &self.context_id())
            .field("stream_id", &self.stream_id())
            .field("cuda_event_id", &self.cuda_event_id())
            .field("correlation_id", &self.correlation_id())
            .finish_non_exhaustive()
    }
}
