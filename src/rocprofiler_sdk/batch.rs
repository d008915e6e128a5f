//! A buffer's records as the SDK hands them over: an array of record headers, each naming its category and kind
//! and pointing at its payload. Every record is checked before it is read: a null payload, or a payload whose own
//! `size` field says it is smaller than the layout of the bindings, is an error for that record only; a category
//! or kind newer than the bindings is [`Record::Unknown`].

use std::marker::PhantomData;

use super::record::{
    ApiCall, CorrelationRetired, CounterValue, DispatchCounters, KernelDispatch, MarkerRange,
    MemoryAllocation, MemoryCopy, Record, ScratchMemory,
};
use crate::sys::rocprofiler_sdk as sys;

/// Bytes of a record header.
pub(crate) const HEADER_SIZE: usize = size_of::<sys::rocprofiler_record_header_t>();
/// The largest record the crate decodes (a kernel dispatch).
pub(crate) const LARGEST_RECORD: usize =
    size_of::<sys::rocprofiler_buffer_tracing_kernel_dispatch_record_t>();

// The layouts the decoder reads (rocprofiler-sdk 1.0, x86-64): a binding regenerated from another ABI fails here
// rather than misreading.
const _: () = {
    use std::mem::offset_of;
    assert!(HEADER_SIZE == 16);
    assert!(offset_of!(sys::rocprofiler_record_header_t, payload) == 8);
    assert!(size_of::<sys::rocprofiler_kernel_dispatch_info_t>() == 128);
    assert!(LARGEST_RECORD == 184);
    assert!(
        offset_of!(
            sys::rocprofiler_buffer_tracing_kernel_dispatch_record_t,
            dispatch_info
        ) == 56
    );
    assert!(size_of::<sys::rocprofiler_buffer_tracing_hip_api_record_t>() == 64);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_hsa_api_record_t>() == 64);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_marker_api_record_t>() == 64);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_rccl_api_record_t>() == 64);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_rocjpeg_api_record_t>() == 64);
    assert!(
        offset_of!(
            sys::rocprofiler_buffer_tracing_hip_api_record_t,
            start_timestamp
        ) == 40
    );
    assert!(size_of::<sys::rocprofiler_buffer_tracing_memory_copy_record_t>() == 96);
    assert!(offset_of!(sys::rocprofiler_buffer_tracing_memory_copy_record_t, bytes) == 72);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_memory_allocation_record_t>() == 88);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_scratch_memory_record_t>() == 88);
    assert!(size_of::<sys::rocprofiler_buffer_tracing_correlation_id_retirement_record_t>() == 32);
    assert!(size_of::<sys::rocprofiler_dispatch_counting_service_record_t>() == 176);
    assert!(size_of::<sys::rocprofiler_counter_record_t>() == 40);
    assert!(size_of::<sys::rocprofiler_callback_tracing_record_t>() == 64);
    assert!(size_of::<sys::rocprofiler_callback_tracing_code_object_load_data_t>() == 88);
    assert!(size_of::<sys::rocprofiler_agent_v0_t>() == 304);
    assert!(size_of::<sys::rocprofiler_counter_info_v0_t>() == 48);
    assert!(size_of::<sys::rocprofiler_tool_configure_result_t>() == 32);
    assert!(size_of::<sys::rocprofiler_client_id_t>() == 24);
    // Enum values the decoder matches on.
    assert!(sys::ROCPROFILER_BUFFER_CATEGORY_TRACING == 1);
    assert!(sys::ROCPROFILER_BUFFER_CATEGORY_PC_SAMPLING == 2);
    assert!(sys::ROCPROFILER_BUFFER_CATEGORY_COUNTERS == 3);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API == 5);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_MEMORY_COPY == 10);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH == 11);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION == 16);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API == 32);
    assert!(sys::ROCPROFILER_CALLBACK_TRACING_MARKER_CORE_RANGE_API == 21);
    assert!(sys::ROCPROFILER_BUFFER_TRACING_LAST == 33);
    assert!(sys::ROCPROFILER_CALLBACK_TRACING_CODE_OBJECT == 10);
    assert!(sys::ROCPROFILER_COUNTER_RECORD_VALUE == 2);
};

/// A record the decoder could not read; the walk goes on with the next record.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The header's payload pointer is null.
    #[error("record {index} (category {category}, kind {kind}) has no payload")]
    NullPayload {
        /// Position in the batch.
        index: usize,
        /// The header's category.
        category: u32,
        /// The header's kind.
        kind: u32,
    },
    /// The payload's `size` field is below the layout of the bindings (a library older than the bindings).
    #[error(
        "record {index} (category {category}, kind {kind}) is {size} bytes; its layout needs {need}"
    )]
    TooSmall {
        /// Position in the batch.
        index: usize,
        /// The header's category.
        category: u32,
        /// The header's kind.
        kind: u32,
        /// The payload's own size field.
        size: u64,
        /// The size of the layout the crate reads.
        need: usize,
    },
    /// The header pointer itself is null.
    #[error("record {index} has a null header")]
    NullHeader {
        /// Position in the batch.
        index: usize,
    },
}

/// The records the SDK handed to a buffer callback, borrowed for the duration of the call.
///
/// The SDK reuses the memory once the callback returns, so a batch and everything decoded from it carry the
/// callback's lifetime and cannot be kept:
///
/// ```compile_fail
/// # use gpu_tools::rocprofiler_sdk::{Batch, Record};
/// # use std::ffi::CStr;
/// let mut kept: Vec<Record<'static>> = Vec::new();
/// let mut callback = move |batch: &Batch<'_>| {
///     kept.extend(batch.records().flatten()); // error: the records borrow the batch
/// };
/// ```
///
/// Nor can a batch be sent to another thread:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<gpu_tools::rocprofiler_sdk::Batch<'static>>();
/// ```
pub struct Batch<'a> {
    headers: *const *mut sys::rocprofiler_record_header_t,
    len: usize,
    dropped: u64,
    _records: PhantomData<&'a sys::rocprofiler_record_header_t>,
}

impl<'a> Batch<'a> {
    /// # Safety
    /// `headers` must point at `len` header pointers, each null or pointing at a header whose payload is null or
    /// points at a record of the header's category and kind (its first 8 bytes its size, for tracing records),
    /// all readable and unchanged for `'a`.
    pub(crate) unsafe fn new(
        headers: *mut *mut sys::rocprofiler_record_header_t,
        len: usize,
        dropped: u64,
    ) -> Self {
        Batch {
            headers,
            len: if headers.is_null() { 0 } else { len },
            dropped,
            _records: PhantomData,
        }
    }

    /// Records in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no record.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Records the SDK dropped since the previous batch of this buffer (a full buffer under
    /// [`BufferPolicy::Discard`](super::BufferPolicy::Discard)).
    pub fn dropped_records(&self) -> u64 {
        self.dropped
    }

    /// The records, decoded in order.
    pub fn records(&self) -> Records<'a> {
        Records {
            headers: self.headers,
            len: self.len,
            next: 0,
            _records: PhantomData,
        }
    }

    /// The raw header of record `index` (category, kind, payload pointer), for kinds the crate does not decode.
    pub fn header(&self, index: usize) -> Option<&'a sys::rocprofiler_record_header_t> {
        if index >= self.len {
            return None;
        }
        // SAFETY: `index < len` header pointers are readable for 'a (the constructor's contract); a non-null one
        // points at a header readable for 'a.
        unsafe { (*self.headers.add(index)).cast_const().as_ref() }
    }
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("len", &self.len)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

/// Iterator over the records of a [`Batch`].
pub struct Records<'a> {
    headers: *const *mut sys::rocprofiler_record_header_t,
    len: usize,
    next: usize,
    _records: PhantomData<&'a sys::rocprofiler_record_header_t>,
}

impl std::fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("next", &self.next)
            .field("len", &self.len)
            .finish()
    }
}

/// The payload of a tracing or counting record, as `T`, after checking its `size` field (`super::sized`, with this
/// record's place in the error).
///
/// # Safety
/// `payload` must point at a record readable for 'a whose first 8 bytes are its size, at least 8 bytes long.
unsafe fn sized<'a, T>(
    payload: *const u8,
    index: usize,
    category: u32,
    kind: u32,
) -> Result<&'a T, RecordError> {
    let too_small = |size: u64| RecordError::TooSmall {
        index,
        category,
        kind,
        size,
        need: size_of::<T>(),
    };
    // SAFETY: the caller's contract; the SDK allocates payloads with their struct's alignment, and T is a plain C
    // struct valid for any bits.
    match unsafe { super::sized::sized::<T>(payload.cast()) } {
        Ok(Some(t)) => Ok(t),
        // A record's payload is never null; were it, nothing of it could be read.
        Ok(None) => Err(too_small(0)),
        Err((size, _)) => Err(too_small(size)),
    }
}

impl<'a> Records<'a> {
    fn decode(&self, index: usize) -> Result<Record<'a>, RecordError> {
        // SAFETY: `index < len` (checked by `next`), so the pointer is readable (the batch's contract).
        let header = unsafe { *self.headers.add(index) };
        if header.is_null() {
            return Err(RecordError::NullHeader { index });
        }
        // SAFETY: a non-null header pointer of the batch, readable for 'a.
        let header = unsafe { &*header };
        // SAFETY: the header is plain data: the category/kind struct and the hash are the same 8 bytes.
        let (category, kind) = unsafe {
            (
                header.__bindgen_anon_1.__bindgen_anon_1.category,
                header.__bindgen_anon_1.__bindgen_anon_1.kind,
            )
        };
        let payload = header.payload.cast_const().cast::<u8>();
        let known = decoded(category, kind);
        if !known {
            return Ok(Record::Unknown { category, kind });
        }
        if payload.is_null() {
            return Err(RecordError::NullPayload {
                index,
                category,
                kind,
            });
        }
        macro_rules! sized {
            ($t:ty) => {
                // SAFETY: a known category and kind: the payload is that record, size field first.
                unsafe { sized::<$t>(payload, index, category, kind)? }
            };
        }
        Ok(match (category, kind) {
            (sys::ROCPROFILER_BUFFER_CATEGORY_TRACING, k) => match k {
                sys::ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH => {
                    Record::KernelDispatch(KernelDispatch {
                        raw: sized!(sys::rocprofiler_buffer_tracing_kernel_dispatch_record_t),
                    })
                }
                sys::ROCPROFILER_BUFFER_TRACING_MEMORY_COPY => Record::MemoryCopy(MemoryCopy {
                    raw: sized!(sys::rocprofiler_buffer_tracing_memory_copy_record_t),
                }),
                sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION => {
                    Record::MemoryAllocation(MemoryAllocation {
                        raw: sized!(sys::rocprofiler_buffer_tracing_memory_allocation_record_t),
                    })
                }
                sys::ROCPROFILER_BUFFER_TRACING_SCRATCH_MEMORY => {
                    Record::ScratchMemory(ScratchMemory {
                        raw: sized!(sys::rocprofiler_buffer_tracing_scratch_memory_record_t),
                    })
                }
                sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API => {
                    Record::MarkerRange(MarkerRange {
                        raw: sized!(sys::rocprofiler_buffer_tracing_marker_api_record_t),
                    })
                }
                sys::ROCPROFILER_BUFFER_TRACING_CORRELATION_ID_RETIREMENT => {
                    Record::CorrelationRetired(CorrelationRetired {
                        raw: sized!(
                            sys::rocprofiler_buffer_tracing_correlation_id_retirement_record_t
                        ),
                    })
                }
                // Every API kind shares one layout (the HIP one); rocDecode's only names its operation with an
                // enum of the same 4 bytes.
                _ => Record::Api(ApiCall {
                    raw: sized!(sys::rocprofiler_buffer_tracing_hip_api_record_t),
                }),
            },
            (_, sys::ROCPROFILER_COUNTER_RECORD_PROFILE_COUNTING_DISPATCH_HEADER) => {
                Record::DispatchCounters(DispatchCounters {
                    raw: sized!(sys::rocprofiler_dispatch_counting_service_record_t),
                })
            }
            _ => Record::CounterValue(CounterValue {
                // SAFETY: a counter value record (category COUNTERS, kind VALUE) is a plain 40-byte struct with no
                // size field, readable for 'a.
                raw: unsafe { &*payload.cast::<sys::rocprofiler_counter_record_t>() },
            }),
        })
    }
}

/// Whether the crate decodes records of this category and kind.
fn decoded(category: u32, kind: u32) -> bool {
    match category {
        sys::ROCPROFILER_BUFFER_CATEGORY_TRACING => matches!(
            kind,
            sys::ROCPROFILER_BUFFER_TRACING_HSA_CORE_API
                | sys::ROCPROFILER_BUFFER_TRACING_HSA_AMD_EXT_API
                | sys::ROCPROFILER_BUFFER_TRACING_HSA_IMAGE_EXT_API
                | sys::ROCPROFILER_BUFFER_TRACING_HSA_FINALIZE_EXT_API
                | sys::ROCPROFILER_BUFFER_TRACING_HIP_RUNTIME_API
                | sys::ROCPROFILER_BUFFER_TRACING_HIP_COMPILER_API
                | sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_API
                | sys::ROCPROFILER_BUFFER_TRACING_MARKER_CONTROL_API
                | sys::ROCPROFILER_BUFFER_TRACING_MARKER_NAME_API
                | sys::ROCPROFILER_BUFFER_TRACING_MARKER_CORE_RANGE_API
                | sys::ROCPROFILER_BUFFER_TRACING_RCCL_API
                | sys::ROCPROFILER_BUFFER_TRACING_ROCDECODE_API
                | sys::ROCPROFILER_BUFFER_TRACING_ROCJPEG_API
                | sys::ROCPROFILER_BUFFER_TRACING_MEMORY_COPY
                | sys::ROCPROFILER_BUFFER_TRACING_KERNEL_DISPATCH
                | sys::ROCPROFILER_BUFFER_TRACING_SCRATCH_MEMORY
                | sys::ROCPROFILER_BUFFER_TRACING_CORRELATION_ID_RETIREMENT
                | sys::ROCPROFILER_BUFFER_TRACING_MEMORY_ALLOCATION
        ),
        sys::ROCPROFILER_BUFFER_CATEGORY_COUNTERS => matches!(
            kind,
            sys::ROCPROFILER_COUNTER_RECORD_PROFILE_COUNTING_DISPATCH_HEADER
                | sys::ROCPROFILER_COUNTER_RECORD_VALUE
        ),
        _ => false,
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, RecordError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.next >= self.len {
            return None;
        }
        let index = self.next;
        self.next += 1;
        Some(self.decode(index))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.len - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Records<'_> {}
impl std::iter::FusedIterator for Records<'_> {}
