//! Walking a CUPTI activity buffer: [`ActivityBatch`] and its record iterator.
//!
//! Records lie back to back from the buffer's start, each beginning with its `CUpti_ActivityKind` and as long as
//! its kind's struct in the writing release (a multiple of 8 bytes, so every record is 8-aligned). The walk steps
//! by the sizes of the batch's [`RecordLayout`]; for a library the crate does not know exactly, it steps with the
//! vendor's `cuptiActivityGetNextRecord` and checks each step against the layout. Every read is bounds-checked
//! against the valid part of the buffer.

use std::marker::PhantomData;

use super::layout::RecordLayout;
use super::record::Activity;
use super::{
    ApiCall, ContextRecord, DeviceRecord, ExternalCorrelation, GraphTrace, Kernel, Marker,
    MarkerData, Memcpy, MemoryRecord, Memset, NameRecord, Overhead, PeerCopy, StreamRecord,
    Synchronization,
};
use crate::cupti::CuptiError;
use crate::cupti::activity_kind::ActivityKind;
use crate::cupti::library::NextRecordFn;
use crate::sys::cupti as sys;

/// A record the walk could not decode. Errors that leave the next record's position known skip only this
/// record ([`UnexpectedSize`](Self::UnexpectedSize)); the others end the walk.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RecordError {
    /// The valid bytes end inside a record.
    #[error(
        "record at offset {offset} ({kind:?}) is cut off: {remaining} bytes left, the record needs {needed:?}"
    )]
    Truncated {
        /// Byte offset from the batch's start.
        offset: usize,
        /// The record's kind, where its 4 bytes were there to read.
        kind: Option<ActivityKind>,
        /// Bytes left from the offset.
        remaining: usize,
        /// The size the layout gives the kind, where known.
        needed: Option<usize>,
    },
    /// A record does not start on an 8-byte boundary (the buffer itself is misaligned).
    #[error("record at offset {offset} is not 8-byte aligned")]
    Misaligned {
        /// Byte offset from the batch's start.
        offset: usize,
    },
    /// The vendor's walk stepped over a record of a size the layout does not give its kind (a release the crate
    /// does not know changed that record). The record is skipped.
    #[error("record at offset {offset} ({kind}) is {size} bytes; the layout expects {expected}")]
    UnexpectedSize {
        /// Byte offset from the batch's start.
        offset: usize,
        /// The record's kind.
        kind: ActivityKind,
        /// Its size according to the vendor's walk.
        size: usize,
        /// The layout's size for the kind.
        expected: usize,
    },
    /// `cuptiActivityGetNextRecord` failed, or stepped outside the valid bytes.
    #[error("the vendor's record walk failed at offset {offset}: {error:?}")]
    VendorWalk {
        /// Byte offset from the batch's start.
        offset: usize,
        /// The vendor's code, `None` where it returned a position outside the batch.
        error: Option<CuptiError>,
    },
}

impl RecordError {
    /// Where in the batch the record starts.
    pub fn offset(&self) -> usize {
        match self {
            RecordError::Truncated { offset, .. }
            | RecordError::Misaligned { offset }
            | RecordError::UnexpectedSize { offset, .. }
            | RecordError::VendorWalk { offset, .. } => *offset,
        }
    }
}

/// The records CUPTI handed over in one completed buffer, borrowed for the duration of the callback.
///
/// The buffer goes back to the tracer's pool when the callback returns, so a batch and every record decoded
/// from it carry the callback's lifetime and cannot be kept:
///
/// ```compile_fail
/// # use gpu_tools::cupti::activity::{ActivityTracer, Activity};
/// # use std::ffi::CStr;
/// let mut names: Vec<&'static CStr> = Vec::new();
/// let _ = ActivityTracer::builder().start(move |batch| {
///     for r in batch.records().flatten() {
///         if let Activity::Kernel(k) = r {
///             names.extend(k.name()); // error: the name borrows the batch
///         }
///     }
/// });
/// ```
///
/// Nor can a batch be sent to, or shared with, another thread:
///
/// ```compile_fail
/// fn send<T: Send>() {}
/// send::<gpu_tools::cupti::activity::ActivityBatch<'static>>();
/// ```
///
/// ```compile_fail
/// fn sync<T: Sync>() {}
/// sync::<gpu_tools::cupti::activity::ActivityBatch<'static>>();
/// ```
pub struct ActivityBatch<'a> {
    begin: *const u8,
    len: usize,
    layout: RecordLayout,
    /// Whether string pointers in records may be followed.
    follow: bool,
    /// The vendor's walk, for a release whose layouts the crate does not know exactly.
    vendor_step: Option<NextRecordFn>,
    dropped: u64,
    _buffer: PhantomData<&'a [u8]>,
}

impl<'a> ActivityBatch<'a> {
    /// A batch over `len` valid bytes at `begin`, written by a CUPTI release with `layout`.
    ///
    /// # Safety
    /// `[begin, begin + len)` must be readable and unchanged for `'a`; every string pointer in a record of a kind
    /// the crate decodes (kernel, device and memory names, marker names and domains) must be null or point at a
    /// NUL-terminated string valid for `'a`. CUPTI's completed buffers satisfy this during their callback.
    pub unsafe fn from_raw(begin: *const u8, len: usize, layout: RecordLayout) -> Self {
        ActivityBatch {
            begin,
            len: if begin.is_null() { 0 } else { len },
            layout,
            follow: true,
            vendor_step: None,
            dropped: 0,
            _buffer: PhantomData,
        }
    }

    /// A batch over bytes from anywhere (a file, a socket). Pointers in its records are never followed, so
    /// every name accessor returns `None`; everything else decodes as from a live buffer.
    pub fn from_bytes(bytes: &'a [u8], layout: RecordLayout) -> Self {
        ActivityBatch {
            begin: bytes.as_ptr(),
            len: bytes.len(),
            layout,
            follow: false,
            vendor_step: None,
            dropped: 0,
            _buffer: PhantomData,
        }
    }

    /// A batch the tracer hands over: it steps with the vendor's walk where the layout is not exact, and
    /// carries the drop count read before delivery.
    ///
    /// # Safety
    /// As for [`from_raw`](Self::from_raw); `vendor_step` must be the loaded library's
    /// `cuptiActivityGetNextRecord`.
    pub(crate) unsafe fn delivered(
        begin: *const u8,
        len: usize,
        layout: RecordLayout,
        vendor_step: Option<NextRecordFn>,
        dropped: u64,
    ) -> Self {
        // SAFETY: the caller's contract.
        let mut batch = unsafe { Self::from_raw(begin, len, layout) };
        batch.vendor_step = vendor_step;
        batch.dropped = dropped;
        batch
    }

    /// The layout the records are read with.
    #[inline]
    pub fn layout(&self) -> RecordLayout {
        self.layout
    }

    /// Valid bytes in the batch.
    #[inline]
    pub fn len_bytes(&self) -> usize {
        self.len
    }

    /// Whether the batch holds no byte.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The valid bytes, for recording or forwarding the buffer as it is.
    #[inline]
    pub fn as_bytes(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: `from_raw`'s contract (or a slice given to `from_bytes`): len readable bytes for 'a.
        unsafe { std::slice::from_raw_parts(self.begin, self.len) }
    }

    /// Records CUPTI reported dropped (`cuptiActivityGetNumDroppedRecords`) when it completed this buffer, since
    /// the previous buffer: records lost because no buffer was available. 0 for batches not from a tracer.
    #[inline]
    pub fn dropped_records(&self) -> u64 {
        self.dropped
    }

    /// The records, decoded in order.
    #[inline]
    pub fn records(&self) -> Records<'a> {
        Records {
            begin: self.begin,
            len: self.len,
            offset: 0,
            layout: self.layout,
            sizes: self.layout.size_table(),
            // Records are multiples of 8 bytes long, so an aligned start keeps every record aligned.
            misaligned: self.len > 0 && self.begin as usize % 8 != 0,
            follow: self.follow,
            vendor_step: self.vendor_step,
            done: false,
            fast: self.vendor_step.is_none() && self.begin as usize % 8 == 0,
            _buffer: PhantomData,
        }
    }

    /// The records as the vendor wrote them, undecoded: each one's kind and bytes, in order, for a consumer that
    /// hands records on (a profiler inside the traced program gets copies of its own kinds). The walk stops at
    /// the first record it cannot size or read; [`RawRecords::stopped_at`] tells where.
    pub fn raw_records(&self) -> RawRecords<'a> {
        RawRecords {
            walk: self.records(),
            stopped_at: None,
        }
    }

    /// How many records the walk yields (records and errors alike), without decoding them.
    pub fn count(&self) -> usize {
        let mut walk = self.records();
        let mut n = 0;
        while walk.step().is_some() {
            n += 1;
        }
        n
    }
}

impl std::fmt::Debug for ActivityBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ActivityBatch")
            .field("len_bytes", &self.len)
            .field("layout", &self.layout)
            .field("dropped_records", &self.dropped)
            .finish_non_exhaustive()
    }
}

/// Where the walk found the next record.
enum Step {
    /// A record of `kind` and `size` bytes at `offset`, to decode.
    Record {
        offset: usize,
        kind: u32,
        size: usize,
    },
    /// Bytes of a kind the crate cannot size (`size` reaches to the batch's end or the vendor's next record).
    Unsized {
        offset: usize,
        kind: u32,
        size: usize,
    },
    Error(RecordError),
}

/// Iterator over the records of an [`ActivityBatch`].
pub struct Records<'a> {
    begin: *const u8,
    len: usize,
    offset: usize,
    layout: RecordLayout,
    /// `layout`'s record sizes by kind.
    sizes: &'static [u16; 64],
    misaligned: bool,
    follow: bool,
    vendor_step: Option<NextRecordFn>,
    done: bool,
    /// Neither done, nor misaligned, nor stepped by the vendor: the short path of `next` applies.
    fast: bool,
    _buffer: PhantomData<&'a [u8]>,
}

impl<'a> Records<'a> {
    /// Finds the next record and moves past it.
    #[inline(always)]
    fn step(&mut self) -> Option<Step> {
        if self.done {
            return None;
        }
        let offset = self.offset;
        let remaining = self.len - offset;
        if remaining == 0 {
            self.done = true;
            self.fast = false;
            return None;
        }
        let at = self.begin.wrapping_add(offset);
        if self.misaligned {
            self.done = true;
            self.fast = false;
            return Some(Step::Error(RecordError::Misaligned { offset }));
        }
        if remaining < 4 {
            self.done = true;
            self.fast = false;
            return Some(Step::Error(RecordError::Truncated {
                offset,
                kind: None,
                remaining,
                needed: None,
            }));
        }
        // SAFETY: 4 readable, aligned bytes at `at` inside the batch.
        let kind = unsafe { at.cast::<u32>().read() };
        let expected = match self.sizes.get(kind as usize) {
            Some(&size) if size != 0 => Some(usize::from(size)),
            _ => None,
        };
        let Some(step) = self.vendor_step else {
            return Some(match expected {
                Some(size) if size <= remaining => {
                    self.offset += size;
                    Step::Record { offset, kind, size }
                }
                Some(size) => {
                    self.done = true;
                    self.fast = false;
                    Step::Error(RecordError::Truncated {
                        offset,
                        kind: Some(ActivityKind(kind)),
                        remaining,
                        needed: Some(size),
                    })
                }
                None => {
                    // Nothing tells where this record ends: hand over the rest and stop.
                    self.done = true;
                    self.fast = false;
                    Step::Unsized {
                        offset,
                        kind,
                        size: remaining,
                    }
                }
            });
        };
        let size = match self.vendor_size(step, at, remaining) {
            Ok(size) => size,
            Err(error) => {
                self.done = true;
                self.fast = false;
                return Some(Step::Error(RecordError::VendorWalk { offset, error }));
            }
        };
        self.offset += size;
        Some(match expected {
            Some(e) if e == size => Step::Record { offset, kind, size },
            Some(e) => Step::Error(RecordError::UnexpectedSize {
                offset,
                kind: ActivityKind(kind),
                size,
                expected: e,
            }),
            None => Step::Unsized { offset, kind, size },
        })
    }

    /// The size of the record at `at` by the vendor's walk: the distance to the next record, or the rest of the
    /// batch for the last one.
    fn vendor_size(
        &self,
        step: NextRecordFn,
        at: *const u8,
        remaining: usize,
    ) -> Result<usize, Option<CuptiError>> {
        let mut record = at.cast_mut().cast::<sys::CUpti_Activity>();
        // SAFETY: the batch's bytes are readable (its contract) and `record` points at a record inside them; the
        // vendor only reads the kind there and computes the next position.
        let code = unsafe { step(self.begin.cast_mut(), self.len, &mut record) };
        if code == sys::CUPTI_ERROR_MAX_LIMIT_REACHED {
            return Ok(remaining);
        }
        CuptiError::check(code).map_err(Some)?;
        let next = record as usize;
        let here = at as usize;
        // A step that is not a whole number of 8-byte words would misalign every record after it.
        if next <= here || next - here > remaining || (next - here) % 8 != 0 {
            return Err(None);
        }
        Ok(next - here)
    }

    #[inline(always)]
    fn decode(&self, offset: usize, kind: u32, size: usize) -> Activity<'a> {
        let at = self.begin.wrapping_add(offset);
        let (layout, follow) = (self.layout, self.follow);
        // SAFETY: for each view below, `at` is 8-aligned and `size` bytes, the layout's size for `kind`, lie
        // inside the batch, readable for 'a; with `follow`, the batch's contract makes its string pointers valid.
        unsafe {
            match kind {
                sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
                    Activity::Kernel(Kernel::new(at, layout, follow))
                }
                sys::CUPTI_ACTIVITY_KIND_MEMCPY => Activity::Memcpy(Memcpy::new(at, layout)),
                sys::CUPTI_ACTIVITY_KIND_MEMCPY2 => Activity::PeerCopy(PeerCopy::new(at)),
                sys::CUPTI_ACTIVITY_KIND_MEMSET => Activity::Memset(Memset::new(at, layout)),
                sys::CUPTI_ACTIVITY_KIND_DRIVER
                | sys::CUPTI_ACTIVITY_KIND_RUNTIME
                | sys::CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API => Activity::Api(ApiCall::new(at)),
                sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => {
                    Activity::Synchronization(Synchronization::new(at))
                }
                sys::CUPTI_ACTIVITY_KIND_OVERHEAD => Activity::Overhead(Overhead::new(at)),
                sys::CUPTI_ACTIVITY_KIND_CONTEXT => Activity::Context(ContextRecord::new(at)),
                sys::CUPTI_ACTIVITY_KIND_STREAM => Activity::Stream(StreamRecord::new(at)),
                sys::CUPTI_ACTIVITY_KIND_DEVICE => Activity::Device(DeviceRecord::new(at, follow)),
                sys::CUPTI_ACTIVITY_KIND_NAME => Activity::Name(NameRecord::new(at, follow)),
                sys::CUPTI_ACTIVITY_KIND_MARKER => Activity::Marker(Marker::new(at, follow)),
                sys::CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION => {
                    Activity::ExternalCorrelation(ExternalCorrelation::new(at))
                }
                sys::CUPTI_ACTIVITY_KIND_MEMORY2 => Activity::Memory(MemoryRecord::new(at, follow)),
                sys::CUPTI_ACTIVITY_KIND_GRAPH_TRACE => Activity::GraphTrace(GraphTrace::new(at)),
                sys::CUPTI_ACTIVITY_KIND_MARKER_DATA => Activity::MarkerData(MarkerData::new(at)),
                _ => Activity::Unknown {
                    kind: ActivityKind(kind),
                    bytes: std::slice::from_raw_parts(at, size),
                },
            }
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Activity<'a>, RecordError>;

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        // The common case, kept short: a whole record of a sized kind, stepped by the layout.
        if self.fast {
            let offset = self.offset;
            let remaining = self.len - offset;
            if remaining >= 4 {
                // SAFETY: 4 readable, 8-aligned bytes at the offset inside the batch.
                let kind = unsafe { self.begin.add(offset).cast::<u32>().read() };
                let size = self.sizes.get(kind as usize).map_or(0, |s| usize::from(*s));
                if size != 0 && size <= remaining {
                    self.offset += size;
                    return Some(Ok(self.decode(offset, kind, size)));
                }
            }
        }
        Some(match self.step()? {
            Step::Record { offset, kind, size } => Ok(self.decode(offset, kind, size)),
            Step::Unsized { offset, kind, size } => Ok(Activity::Unknown {
                kind: ActivityKind(kind),
                // SAFETY: `size` bytes from `offset` lie inside the batch (checked by `step`).
                bytes: unsafe { std::slice::from_raw_parts(self.begin.wrapping_add(offset), size) },
            }),
            Step::Error(e) => Err(e),
        })
    }
}

impl std::iter::FusedIterator for Records<'_> {}

/// One record as the vendor wrote it: see [`ActivityBatch::raw_records`].
#[derive(Debug, Clone, Copy)]
pub struct RawRecord<'a> {
    /// Where it starts in the batch.
    pub offset: usize,
    /// Its kind.
    pub kind: ActivityKind,
    /// Its bytes, a multiple of 8 long (the vendor's record alignment).
    pub bytes: &'a [u8],
}

/// Iterator over the records of a batch, undecoded.
#[derive(Debug)]
pub struct RawRecords<'a> {
    walk: Records<'a>,
    stopped_at: Option<usize>,
}

impl RawRecords<'_> {
    /// Where the walk stopped before the batch's end (a record it could not size, or a damaged one), once it
    /// did; `None` while it runs and when it reached the end.
    pub fn stopped_at(&self) -> Option<usize> {
        self.stopped_at
    }
}

impl<'a> Iterator for RawRecords<'a> {
    type Item = RawRecord<'a>;

    fn next(&mut self) -> Option<RawRecord<'a>> {
        if self.stopped_at.is_some() {
            return None;
        }
        match self.walk.step()? {
            Step::Record { offset, kind, size } => Some(RawRecord {
                offset,
                kind: ActivityKind(kind),
                // SAFETY: `size` bytes from `offset` lie inside the batch (checked by `step`), readable for 'a.
                bytes: unsafe {
                    std::slice::from_raw_parts(self.walk.begin.wrapping_add(offset), size)
                },
            }),
            // An unsized kind's extent is a guess (to the batch's end) and a damaged record has none.
            Step::Unsized { offset, .. } => {
                self.stopped_at = Some(offset);
                None
            }
            Step::Error(e) => {
                self.stopped_at = Some(e.offset());
                None
            }
        }
    }
}

impl std::fmt::Debug for Records<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Records")
            .field("offset", &self.offset)
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}
