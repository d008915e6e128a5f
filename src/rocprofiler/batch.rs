//! Walking a buffer half in Rust: one pass over the record headers, no vendor call per record.
//!
//! The vendor's layout (ROCm 6.1+): fixed-size records from the front of a half, variable data (counter arrays,
//! names) copied to its back with the record's pointer patched. Data too large for a half is not copied; the
//! record then points at the producer's memory and the vendor hands the half over at once, so such a record is
//! always the last of its batch. Every pointer is checked against those two cases before it is read.

use std::ffi::CStr;
use std::marker::PhantomData;

use super::record::{
    AttRecord, Counters, CountersSamplerRecord, PcSampleRecord, ProfilerRecord, RawArray, Record,
    SampledCounters, SpmRecord, TracerRecord,
};
use crate::sys::rocprofiler as sys;

const HEADER: usize = size_of::<sys::rocprofiler_record_header_t>();

// The sizes the walk steps by; a binding regenerated from another ABI fails here rather than misreading.
const _: () = {
    assert!(HEADER == 16);
    assert!(size_of::<sys::rocprofiler_record_profiler_t>() == 176);
    assert!(size_of::<sys::rocprofiler_record_tracer_t>() == 96);
    assert!(size_of::<sys::rocprofiler_record_att_tracer_t>() == 176);
    assert!(size_of::<sys::rocprofiler_record_pc_sample_t>() == 56);
    assert!(size_of::<sys::rocprofiler_record_spm_t>() == 288);
    assert!(size_of::<sys::rocprofiler_record_counters_sampler_t>() == 40);
    assert!(size_of::<sys::rocprofiler_record_counter_instance_t>() == 16);
    assert!(size_of::<sys::rocprofiler_counters_sampler_counter_output_t>() == 16);
};

/// The size of a record of `kind`, `None` for a kind this crate does not know.
pub(crate) fn record_size(kind: u32) -> Option<usize> {
    Some(match kind {
        sys::ROCPROFILER_PROFILER_RECORD => size_of::<sys::rocprofiler_record_profiler_t>(),
        sys::ROCPROFILER_TRACER_RECORD => size_of::<sys::rocprofiler_record_tracer_t>(),
        sys::ROCPROFILER_ATT_TRACER_RECORD => size_of::<sys::rocprofiler_record_att_tracer_t>(),
        sys::ROCPROFILER_PC_SAMPLING_RECORD => size_of::<sys::rocprofiler_record_pc_sample_t>(),
        sys::ROCPROFILER_SPM_RECORD => size_of::<sys::rocprofiler_record_spm_t>(),
        sys::ROCPROFILER_COUNTERS_SAMPLER_RECORD => {
            size_of::<sys::rocprofiler_record_counters_sampler_t>()
        }
        _ => return None,
    })
}

/// The largest record of any known kind: a buffer half smaller than this would be overrun by the vendor.
pub(crate) const LARGEST_RECORD: usize = size_of::<sys::rocprofiler_record_spm_t>();

/// A record the walk could not decode. Errors that leave the record's size known (a bad pointer) skip only that
/// record; the others end the walk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The batch ends inside a record (`kind` is `None` when not even the header fits).
    #[error("record at offset {offset} is cut off by the end of the batch (kind {kind:?})")]
    Truncated {
        /// Byte offset from the batch's start.
        offset: usize,
        /// The header's kind, if readable.
        kind: Option<u32>,
    },
    /// A record does not start on an 8-byte boundary.
    #[error("record at offset {offset} is misaligned")]
    Misaligned {
        /// Byte offset from the batch's start.
        offset: usize,
    },
    /// A pointer in the record points neither into the buffer half's data area nor at uncopied data.
    #[error("record {id} at offset {offset}: `{field}` points outside the buffer")]
    PointerOutOfBuffer {
        /// Byte offset from the batch's start.
        offset: usize,
        /// Record id.
        id: u64,
        /// The field.
        field: &'static str,
    },
    /// A name in the buffer has no terminating NUL before the half ends.
    #[error("record {id} at offset {offset}: name is not NUL-terminated")]
    UnterminatedName {
        /// Byte offset from the batch's start.
        offset: usize,
        /// Record id.
        id: u64,
    },
    /// The range the vendor handed over is not inside the buffer half.
    #[error("the batch's range is not inside its buffer half")]
    OutOfBounds,
}

/// The records the vendor handed to a buffer callback, borrowed for the duration of the call.
///
/// The vendor reuses the memory once the callback returns, so `Batch` and everything decoded from it carry the
/// callback's lifetime and cannot be kept:
///
/// ```compile_fail
/// # use gpu_tools::rocprofiler::{ProfilingSession, Record};
/// # use std::ffi::CStr;
/// # fn f(session: &ProfilingSession<'_>) {
/// let mut names: Vec<&'static CStr> = Vec::new();
/// let _ = session.create_buffer(4096, move |batch| {
///     for r in batch.records().flatten() {
///         if let Record::Tracer(t) = r {
///             names.extend(t.name()); // error: the name borrows the batch
///         }
///     }
/// });
/// # }
/// ```
///
/// Nor can a batch be sent to another thread:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<gpu_tools::rocprofiler::Batch<'static>>();
/// ```
pub struct Batch<'a> {
    begin: *const u8,
    end: *const u8,
    half_end: *const u8,
    /// Whether the vendor's range was inside the half; an inconsistent one is kept empty and reported once.
    consistent: bool,
    _half: PhantomData<&'a [u8]>,
}

impl<'a> Batch<'a> {
    /// # Safety
    /// `[begin, begin + half_len)` must be readable for `'a` and hold the vendor's half, records in
    /// `[begin, end)`; pointers in records must follow the vendor's layout (see the module documentation).
    #[inline]
    pub(crate) unsafe fn new(begin: *const u8, end: *const u8, half_len: usize) -> Self {
        let (b, e) = (begin as usize, end as usize);
        let valid = !begin.is_null() && e >= b && e - b <= half_len;
        if valid {
            Batch {
                begin,
                end,
                half_end: begin.wrapping_add(half_len),
                consistent: true,
                _half: PhantomData,
            }
        } else {
            // An inconsistent range: nothing in it is read, and `records` reports it.
            Batch {
                begin,
                end: begin,
                half_end: begin,
                consistent: false,
                _half: PhantomData,
            }
        }
    }

    /// Whether the range handed over was consistent (inside the half, not reversed).
    #[inline]
    pub fn is_consistent(&self) -> bool {
        self.consistent
    }

    /// The raw range the vendor handed over, for comparison with `rocprofiler_next_record` (reading through
    /// these pointers is only valid during the callback); empty when the range was inconsistent.
    #[inline]
    pub fn as_ptr_range(&self) -> std::ops::Range<*const u8> {
        self.begin..self.end
    }

    /// Bytes of fixed-size records in the batch.
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.end as usize - self.begin as usize
    }

    /// Whether the batch holds no record.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.begin == self.end
    }

    /// The records, decoded in order.
    #[inline]
    pub fn records(&self) -> Records<'a> {
        Records {
            begin: self.begin,
            cur: self.begin,
            end: self.end,
            half_end: self.half_end,
            done: !self.consistent,
            out_of_bounds: !self.consistent,
            _half: PhantomData,
        }
    }
}

impl std::fmt::Debug for Batch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Batch")
            .field("len_bytes", &self.len_bytes())
            .finish_non_exhaustive()
    }
}

/// Where a record sits: its address, size and id.
#[derive(Clone, Copy)]
struct Site {
    at: *const u8,
    size: usize,
    id: u64,
}

/// Iterator over the records of a [`Batch`].
pub struct Records<'a> {
    begin: *const u8,
    cur: *const u8,
    end: *const u8,
    half_end: *const u8,
    done: bool,
    /// An inconsistent range, not yet reported.
    out_of_bounds: bool,
    _half: PhantomData<&'a [u8]>,
}

impl<'a> Records<'a> {
    #[inline]
    fn offset(&self, p: *const u8) -> usize {
        p as usize - self.begin as usize
    }

    /// Checks a variable-data array of `count` entries of `elem` bytes, for the record `site`.
    #[inline]
    fn array(
        &self,
        ptr: *const u8,
        count: u64,
        elem: usize,
        site: Site,
        field: &'static str,
    ) -> Result<(*const u8, usize), RecordError> {
        let Site {
            at,
            size: rec_size,
            id,
        } = site;
        if count == 0 {
            return Ok((std::ptr::null(), 0));
        }
        let bad = || RecordError::PointerOutOfBuffer {
            offset: self.offset(at),
            id,
            field,
        };
        let len = usize::try_from(count).map_err(|_| bad())?;
        let bytes = len.checked_mul(elem).ok_or_else(bad)?;
        if ptr.is_null() {
            return Err(bad());
        }
        let p = ptr as usize;
        let last = p.checked_add(bytes).ok_or_else(bad)?;
        if p >= self.end as usize && last <= self.half_end as usize {
            return Ok((ptr, len));
        }
        if self.uncopied(p, last, at, rec_size, bytes) {
            return Ok((ptr, len));
        }
        Err(bad())
    }

    /// Whether `[p, last)` can be data the vendor left in the producer's memory: disjoint from the half, larger
    /// than what the half could take next to the record, and the record ends the batch.
    #[inline]
    fn uncopied(
        &self,
        p: usize,
        last: usize,
        at: *const u8,
        rec_size: usize,
        bytes: usize,
    ) -> bool {
        let (lo, hi) = (self.begin as usize, self.half_end as usize);
        let disjoint = last <= lo || p >= hi;
        let is_last = at as usize + rec_size == self.end as usize;
        disjoint && is_last && bytes > (hi - lo).saturating_sub(rec_size)
    }

    #[inline]
    fn name(
        &self,
        ptr: *const std::os::raw::c_char,
        at: *const u8,
        rec_size: usize,
        id: u64,
    ) -> Result<Option<&'a CStr>, RecordError> {
        if ptr.is_null() {
            return Ok(None);
        }
        let p = ptr as usize;
        if p >= self.end as usize && p < self.half_end as usize {
            let len = self.half_end as usize - p;
            // SAFETY: [p, half_end) is inside the half, readable for 'a (Batch::new's contract).
            let bytes = unsafe { std::slice::from_raw_parts(ptr.cast::<u8>(), len) };
            return CStr::from_bytes_until_nul(bytes).map(Some).map_err(|_| {
                RecordError::UnterminatedName {
                    offset: self.offset(at),
                    id,
                }
            });
        }
        let (lo, hi) = (self.begin as usize, self.half_end as usize);
        let is_last = at as usize + rec_size == self.end as usize;
        if (p < lo || p >= hi) && is_last {
            // SAFETY: a name outside the half is one the vendor did not copy because it did not fit; it then
            // handed the half over at once and keeps the name alive until this callback returns.
            let name = unsafe { CStr::from_ptr(ptr) };
            if name.to_bytes_with_nul().len() > (hi - lo).saturating_sub(rec_size) {
                return Ok(Some(name));
            }
        }
        Err(RecordError::PointerOutOfBuffer {
            offset: self.offset(at),
            id,
            field: "name",
        })
    }

    /// A record's counter array of `count` entries of `R` at `ptr`, checked to lie in the buffer half.
    #[inline]
    fn counters<R: Copy>(
        &self,
        ptr: *const u8,
        count: u64,
        site: Site,
    ) -> Result<RawArray<'a, R>, RecordError> {
        let (p, n) = self.array(ptr, count, size_of::<R>(), site, "counters")?;
        Ok(if n == 0 {
            RawArray::EMPTY
        } else {
            // SAFETY: `array` checked n * size_of::<R>() bytes at p readable for 'a; R is a plain C struct of the
            // header, valid for any bits.
            unsafe { RawArray::new(p, n) }
        })
    }

    #[inline]
    fn decode(&self, kind: u32, at: *const u8, size: usize) -> Result<Record<'a>, RecordError> {
        // SAFETY (for each cast below): `at` is 8-aligned, `size` bytes of the kind's struct lie inside
        // [begin, end), readable for 'a, and every field of these plain C structs is valid for any bits.
        Ok(match kind {
            sys::ROCPROFILER_PROFILER_RECORD => {
                // SAFETY: see above.
                let raw = unsafe { &*at.cast::<sys::rocprofiler_record_profiler_t>() };
                let counters = Counters {
                    raw: self.counters(
                        raw.counters.cast(),
                        raw.counters_count.value,
                        Site {
                            at,
                            size,
                            id: raw.header.id.handle,
                        },
                    )?,
                };
                Record::Profiler(ProfilerRecord { raw, counters })
            }
            sys::ROCPROFILER_TRACER_RECORD => {
                // SAFETY: see above.
                let raw = unsafe { &*at.cast::<sys::rocprofiler_record_tracer_t>() };
                let name = self.name(raw.name, at, size, raw.header.id.handle)?;
                Record::Tracer(TracerRecord { raw, name })
            }
            sys::ROCPROFILER_ATT_TRACER_RECORD => Record::Att(AttRecord {
                // SAFETY: see above.
                raw: unsafe { &*at.cast::<sys::rocprofiler_record_att_tracer_t>() },
            }),
            sys::ROCPROFILER_PC_SAMPLING_RECORD => Record::PcSample(PcSampleRecord {
                // SAFETY: see above.
                raw: unsafe { &*at.cast::<sys::rocprofiler_record_pc_sample_t>() },
            }),
            sys::ROCPROFILER_SPM_RECORD => Record::Spm(SpmRecord {
                // SAFETY: see above.
                raw: unsafe { &*at.cast::<sys::rocprofiler_record_spm_t>() },
            }),
            _ => {
                // SAFETY: see above; `record_size` knows no other kind.
                let raw = unsafe { &*at.cast::<sys::rocprofiler_record_counters_sampler_t>() };
                let counters = SampledCounters {
                    raw: self.counters(
                        raw.counters.cast_const().cast(),
                        u64::from(raw.num_counters),
                        Site {
                            at,
                            size,
                            id: raw.header.id.handle,
                        },
                    )?,
                };
                Record::CountersSampler(CountersSamplerRecord { raw, counters })
            }
        })
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, RecordError>;

    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            if self.out_of_bounds {
                self.out_of_bounds = false;
                return Some(Err(RecordError::OutOfBounds));
            }
            return None;
        }
        let at = self.cur;
        let remaining = self.end as usize - at as usize;
        if remaining == 0 {
            self.done = true;
            return None;
        }
        let offset = self.offset(at);
        if remaining < HEADER {
            self.done = true;
            return Some(Err(RecordError::Truncated { offset, kind: None }));
        }
        if at as usize % align_of::<u64>() != 0 {
            self.done = true;
            return Some(Err(RecordError::Misaligned { offset }));
        }
        // SAFETY: 16 readable, aligned bytes at `at` inside the batch.
        let header = unsafe { &*at.cast::<sys::rocprofiler_record_header_t>() };
        let kind = header.kind;
        let Some(size) = record_size(kind) else {
            self.done = true;
            return Some(Ok(Record::Unknown {
                kind,
                id: header.id.handle,
            }));
        };
        if remaining < size {
            self.done = true;
            return Some(Err(RecordError::Truncated {
                offset,
                kind: Some(kind),
            }));
        }
        self.cur = at.wrapping_add(size);
        Some(self.decode(kind, at, size))
    }
}

impl std::fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("offset", &self.offset(self.cur))
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errors<'a>(batch: &Batch<'a>) -> Vec<Result<Record<'a>, RecordError>> {
        batch.records().collect()
    }

    #[test]
    fn an_inconsistent_range_is_reported_once_and_never_read() {
        let half = [0u64; 64];
        let begin = half.as_ptr().cast::<u8>();
        // SAFETY: the 512-byte half is readable; the ranges below end past it or run backwards, which `new` must
        // refuse to read.
        for batch in unsafe {
            [
                Batch::new(begin, begin.wrapping_add(1024), 512),
                Batch::new(begin.wrapping_add(8), begin, 512),
                Batch::new(std::ptr::null(), std::ptr::null(), 512),
            ]
        } {
            assert!(!batch.is_consistent());
            assert!(batch.is_empty());
            assert_eq!(batch.len_bytes(), 0);
            let all = errors(&batch);
            assert_eq!(all.len(), 1);
            assert!(matches!(all[0], Err(RecordError::OutOfBounds)), "{all:?}");
        }
        // SAFETY: as above; an empty range at the half's front is consistent.
        let empty = unsafe { Batch::new(begin, begin, 512) };
        assert!(empty.is_consistent());
        assert!(errors(&empty).is_empty());
    }
}
