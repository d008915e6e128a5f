//! ROCTx (AMD's NVTX) as the SDK reports it: ranges and marks (`MARKER_CORE_RANGE_API`), the marker calls
//! (`MARKER_CORE_API`), and the arguments of both, which only callback tracing carries.
//!
//! rocprofiler-sdk 1.0 (ROCm 7.0) traces ROCTx two ways at once, each with its own correlation id per call:
//!
//! - `MARKER_CORE_API` (buffer kind 7, callback kind 7): every call on its own: `roctxRangePushA` and
//!   `roctxRangePop` are two records, paired by nothing but the thread's order;
//! - `MARKER_CORE_RANGE_API` (buffer kind 32, callback kind 21): one record per range, written when the range ends,
//!   from the start (just before the push or start) to the end (just after the pop or stop), with the thread that
//!   opened it and the correlation id of the opening call; one per mark. A range never closed gives no record.
//!
//! Neither buffer record holds the message: the range's name is an argument of the call, which only the callback
//! (its `Enter` phase, on the calling thread, with the same correlation id) can read ([`MarkerArgs`]). Older SDKs
//! lack kind 32 and callback kind 21 ([`SdkLibrary::knows_buffer_kind`](super::SdkLibrary::knows_buffer_kind)).
//!
//! The operation ids and argument unions are not in the bindings (they change between SDK releases); the values
//! here are those of `rocprofiler-sdk/marker/api_id.h` and `api_args.h` of SDK 1.0.0.

use std::ffi::{CStr, c_char};

use crate::sys::rocprofiler_sdk as sys;

/// `rocprofiler_marker_core_api_id_t` (SDK 1.0.0), the operations of `MARKER_CORE_API`.
mod core_op {
    pub const MARK_A: i32 = 0;
    pub const RANGE_PUSH_A: i32 = 1;
    pub const RANGE_POP: i32 = 2;
    pub const RANGE_START_A: i32 = 3;
    pub const RANGE_STOP: i32 = 4;
}

/// `rocprofiler_marker_core_range_api_id_t` (SDK 1.0.0), the operations of `MARKER_CORE_RANGE_API`.
mod range_op {
    pub const MARK_A: i32 = 0;
    pub const THREAD_RANGE_A: i32 = 1;
    pub const PROCESS_RANGE_A: i32 = 2;
}

/// What a `MARKER_CORE_RANGE_API` record (or callback) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RangeOperation {
    /// `roctxMarkA`: a mark, its time that of the call.
    Mark,
    /// `roctxRangePushA` to the matching `roctxRangePop` on the same thread.
    ThreadRange,
    /// `roctxRangeStartA` to the `roctxRangeStop` of the id it returned, possibly on another thread.
    ProcessRange,
    /// Another operation (`roctxGetThreadId`, or one newer than this crate).
    Other(i32),
}

impl RangeOperation {
    /// The operation of a raw `rocprofiler_marker_core_range_api_id_t`.
    pub fn from_raw(operation: i32) -> RangeOperation {
        match operation {
            range_op::MARK_A => RangeOperation::Mark,
            range_op::THREAD_RANGE_A => RangeOperation::ThreadRange,
            range_op::PROCESS_RANGE_A => RangeOperation::ProcessRange,
            other => RangeOperation::Other(other),
        }
    }
}

/// Which ROCTx call a `MARKER_CORE_API` record (or callback) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MarkerCall {
    /// `roctxMarkA`.
    Mark,
    /// `roctxRangePushA`.
    RangePush,
    /// `roctxRangePop`.
    RangePop,
    /// `roctxRangeStartA`.
    RangeStart,
    /// `roctxRangeStop`.
    RangeStop,
    /// Another call (`roctxGetThreadId`, or one newer than this crate).
    Other(i32),
}

impl MarkerCall {
    /// The call of a raw `rocprofiler_marker_core_api_id_t`.
    pub fn from_raw(operation: i32) -> MarkerCall {
        match operation {
            core_op::MARK_A => MarkerCall::Mark,
            core_op::RANGE_PUSH_A => MarkerCall::RangePush,
            core_op::RANGE_POP => MarkerCall::RangePop,
            core_op::RANGE_START_A => MarkerCall::RangeStart,
            core_op::RANGE_STOP => MarkerCall::RangeStop,
            other => MarkerCall::Other(other),
        }
    }
}

/// `rocprofiler_callback_tracing_marker_api_data_t` of SDK 1.0.0: the size, the argument union (16 bytes: its
/// largest members are a name and a pointer), the return-value union (8 bytes). Every argument this crate reads is
/// the union's first 8 bytes.
#[repr(C)]
struct MarkerApiData {
    size: u64,
    first_arg: *const std::ffi::c_void,
    second_arg: u64,
    retval: u64,
}

const _: () = assert!(size_of::<MarkerApiData>() == 32);

/// The arguments of a ROCTx call, in a callback of `MARKER_CORE_API` or `MARKER_CORE_RANGE_API`.
///
/// A message is readable in the callback only, and for a range only at its `Enter` (the exit of a range comes at
/// its pop or stop, when the caller's string may be gone: [`message`](Self::message) gives `None` there).
#[derive(Clone, Copy)]
pub struct MarkerArgs<'a> {
    data: &'a MarkerApiData,
    kind: u32,
    operation: i32,
    enter: bool,
}

impl<'a> MarkerArgs<'a> {
    /// Decodes the payload of a marker callback; `None` for another kind or a payload too small for the arguments.
    ///
    /// # Safety
    /// `payload` must be null or the SDK's payload of callback `kind`, readable for 'a, its first 8 bytes its size.
    pub(crate) unsafe fn decode(
        kind: u32,
        operation: i32,
        enter: bool,
        payload: *const std::ffi::c_void,
    ) -> Result<Option<MarkerArgs<'a>>, (u64, usize)> {
        if kind != sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_API
            && kind != sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API
        {
            return Ok(None);
        }
        // SAFETY: the caller's contract.
        let Some(data) = (unsafe { super::sized::sized::<MarkerApiData>(payload) })? else {
            return Ok(None);
        };
        Ok(Some(MarkerArgs {
            data,
            kind,
            operation,
            enter,
        }))
    }

    fn is_range_kind(&self) -> bool {
        self.kind == sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API
    }

    /// The call, for a `MARKER_CORE_API` callback.
    pub fn call(&self) -> Option<MarkerCall> {
        (!self.is_range_kind()).then(|| MarkerCall::from_raw(self.operation))
    }

    /// The range operation, for a `MARKER_CORE_RANGE_API` callback.
    pub fn range_operation(&self) -> Option<RangeOperation> {
        self.is_range_kind()
            .then(|| RangeOperation::from_raw(self.operation))
    }

    /// The message of a mark, a push or a start (the range's name), at the callback's `Enter`.
    pub fn message(&self) -> Option<&'a CStr> {
        let has_message = matches!(
            self.call(),
            Some(MarkerCall::Mark | MarkerCall::RangePush | MarkerCall::RangeStart)
        ) || matches!(
            self.range_operation(),
            Some(RangeOperation::Mark | RangeOperation::ThreadRange | RangeOperation::ProcessRange)
        );
        if !has_message || !self.enter {
            return None;
        }
        let p = self.data.first_arg.cast::<c_char>();
        // SAFETY: for these operations the union's first member is the caller's `const char* message`, valid during
        // the Enter callback ('a) when not null.
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) })
    }

    /// The range id `roctxRangeStop` was given.
    pub fn stopped_range_id(&self) -> Option<u64> {
        // The union's first member is the `roctx_range_id_t id` (a u64) here: the same 8 bytes as the pointer.
        (self.call() == Some(MarkerCall::RangeStop)).then_some(self.data.first_arg.addr() as u64)
    }

    /// The range id `roctxRangeStartA` returned, at the callback's `Exit`. Only where the payload has the size
    /// of SDK 1.0.0's: the return value follows the argument union, which a later SDK may grow.
    pub fn started_range_id(&self) -> Option<u64> {
        let known_layout = self.data.size == size_of::<MarkerApiData>() as u64;
        (self.call() == Some(MarkerCall::RangeStart) && !self.enter && known_layout)
            .then_some(self.data.retval)
    }
}

impl std::fmt::Debug for MarkerArgs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MarkerArgs")
            .field("kind", &self.kind)
            .field("operation", &self.operation)
            .field("message", &self.message())
            .finish_non_exhaustive()
    }
}
