//! Handing the program copies of its records, in buffers of its own, as CUPTI would.
//!
//! As CUPTI does, one of the program's buffers stays open between batches: it is handed back when full, at the
//! program's forced flush, when the program registers other callbacks and at the session's end. That matters:
//! Kineto flushes only while CUPTI holds a buffer of its (`CuptiActivityApi::activityBuffers`), so buffers
//! handed back at once would never be read.

use std::sync::{Mutex, MutexGuard};

use gpu_tools::cupti::activity::ActivityBatch;
use gpu_tools::sys::cupti as sys;

use super::clock::{convert_record, start_of};
use super::{DISPATCHING, Handed, bit, with_mux};

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(sys::CUcontext, u32, *mut u8, usize, usize);

/// The program's buffer being filled.
struct OpenBuffer {
    buffer: *mut u8,
    size: usize,
    used: usize,
    /// Its limit of records (0: none), and the records in it.
    max_records: usize,
    records: usize,
    /// Where it goes back to (the callbacks it came from).
    complete: CompleteFn,
}

// SAFETY: the buffer is the program's, lent to whoever holds this value (behind `OPEN`'s lock).
unsafe impl Send for OpenBuffer {}

/// The program's open buffer, and whether a sharing lets one be opened.
struct Slot {
    /// Between the sharing's start and its end: a dispatch or an enable that read the program's callbacks just
    /// before the end finds it false once it holds the lock, and takes no buffer of the program's (one taken then
    /// would stay open, and written into, after the program's callbacks went back to CUPTI).
    live: bool,
    open: Option<OpenBuffer>,
}

/// Tests only: what runs after a batch read the program's callbacks and before it takes the slot's lock.
#[cfg(test)]
pub(super) static BEFORE_OPEN: Mutex<Option<fn()>> = Mutex::new(None);

/// Held while a batch is handed over, and while the open buffer goes back.
static OPEN: Mutex<Slot> = Mutex::new(Slot {
    live: false,
    open: None,
});

fn open() -> MutexGuard<'static, Slot> {
    OPEN.lock().unwrap_or_else(|p| p.into_inner())
}

/// Hands the open buffer back to the program, with what it holds.
fn hand_back(slot: &mut Option<OpenBuffer>) -> u64 {
    match slot.take() {
        Some(b) => {
            // Each buffer's way, for a heap the program's profiler finds damaged (thread and address).
            log::debug!(
                "program's buffer {:p} back to it: {} of {} bytes, {} records",
                b.buffer,
                b.used,
                b.size,
                b.records
            );
            // SAFETY: the program's completion callback with its own buffer and the bytes written in it; the
            // context is NULL and the stream 0, as CUPTI reports its global queue since CUDA 6.0.
            unsafe { (b.complete)(std::ptr::null_mut(), 0, b.buffer, b.size, b.used) };
            1
        }
        None => 0,
    }
}

/// Opens a buffer of the program's if none is open and it has registered callbacks.
pub(super) fn ensure_open() {
    let Some((Some(request), Some(complete))) =
        with_mux(|m| (m.program.request, m.program.complete))
    else {
        return;
    };
    let mut slot = open();
    if slot.live && slot.open.is_none() {
        slot.open = take_new(request, complete, 0);
    }
}

/// The sharing begins: the program's buffers may be opened from now on.
pub(super) fn begin() {
    open().live = true;
}

/// The sharing ends: the open buffer goes back, and none is opened after.
pub(super) fn end() -> Handed {
    let mut slot = open();
    slot.live = false;
    Handed {
        buffers: hand_back(&mut slot.open),
        ..Handed::default()
    }
}

/// The sharing ends while CUPTI still holds a buffer of the tracer's, which it will complete to the program's
/// callbacks (CUPTI keeps a buffer it has written nothing into across forced flushes): the open buffer goes back,
/// and one more of the program's is taken and never handed back. Kineto flushes CUPTI at a session's end only while
/// a buffer of its is outstanding, and CUPTI asks it for none while it fills the tracer's: on an H200 a
/// torch.profiler on a `schedule` recorded nothing in any cycle after such a window. Kept, the buffer makes it flush,
/// which brings the tracer's buffer out (Kineto passes over a buffer it did not give: the records in it are lost to
/// it) and CUPTI asks it for its own again. Returns the buffers handed back and whether one was kept.
pub(super) fn end_keeping_one(
    request: sys::CUpti_BuffersCallbackRequestFunc,
    complete: sys::CUpti_BuffersCallbackCompleteFunc,
) -> (Handed, bool) {
    let mut slot = open();
    slot.live = false;
    let handed = Handed {
        buffers: hand_back(&mut slot.open),
        ..Handed::default()
    };
    let kept = match (request, complete) {
        (Some(request), Some(complete)) => take_new(request, complete, 0).map(|b| {
            log::debug!("program's buffer {:p} kept, never handed back", b.buffer);
        }),
        _ => None,
    };
    (handed, kept.is_some())
}

/// Drops the open buffer without calling the program (its process is exiting), and opens none after.
pub(super) fn forget() {
    let mut slot = open();
    slot.live = false;
    slot.open.take();
}

/// Hands the open buffer back (the program's forced flush, a new registration, the session's end).
pub(super) fn close() -> Handed {
    Handed {
        buffers: hand_back(&mut open().open),
        ..Handed::default()
    }
}

/// The API record's callback id (`CUpti_ActivityAPI`: kind, then cbid, as 32-bit words).
fn api_cbid(bytes: &[u8]) -> Option<u32> {
    bytes
        .get(4..8)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// Hands the program the records of its kinds in `batch` (one of the trace's, on CUPTI's thread or the one that
/// flushes), before the trace's writer reads it.
pub fn dispatch(batch: &ActivityBatch<'_>) {
    if !DISPATCHING.load(std::sync::atomic::Ordering::Acquire) {
        return;
    }
    let Some((kinds, request, complete, skip_runtime, skip_driver, map, disabled_at)) =
        with_mux(|m| {
            m.clock.read();
            (
                m.program.receives(),
                m.program.request,
                m.program.complete,
                m.program.skip_runtime.clone(),
                m.program.skip_driver.clone(),
                m.clock,
                m.program.disabled_at.clone(),
            )
        })
    else {
        return;
    };
    let (Some(request), Some(complete)) = (request, complete) else {
        return;
    };
    let convert = map.converts();
    #[cfg(test)]
    if let Some(between) = *BEFORE_OPEN.lock().unwrap_or_else(|p| p.into_inner()) {
        between();
    }
    let mut guard = open();
    let mut handed = Handed::default();
    // For the debug log: the least and greatest start handed.
    let (mut least, mut greatest, mut kernels) = (u64::MAX, 0u64, 0u64);
    if !guard.live {
        // The sharing ended after this batch read the program's callbacks: nothing of it goes to the program now.
        return;
    }
    let slot = &mut guard.open;
    for r in batch.raw_records() {
        let kind = r.kind.0;
        if kinds & bit(kind) == 0 {
            continue;
        }
        let skip = match kind {
            sys::CUPTI_ACTIVITY_KIND_RUNTIME => &skip_runtime,
            sys::CUPTI_ACTIVITY_KIND_DRIVER => &skip_driver,
            _ => &Vec::new(),
        };
        if !skip.is_empty() && api_cbid(r.bytes).is_some_and(|c| skip.contains(&c)) {
            continue;
        }
        // A kind it disabled: only what started before that (CUPTI made no more for it).
        if let Some(&(_, at)) = disabled_at.iter().find(|(k, _)| *k == kind) {
            if start_of(r.bytes, kind).is_some_and(|start| start > at) {
                continue;
            }
        }
        let full = match &*slot {
            Some(b) => {
                b.size - b.used < r.bytes.len()
                    || (b.max_records != 0 && b.records >= b.max_records)
            }
            None => true,
        };
        if full {
            handed.buffers += hand_back(slot);
            *slot = take_new(request, complete, r.bytes.len());
        }
        let Some(b) = slot.as_mut() else {
            handed.lost += 1;
            continue;
        };
        // SAFETY: the program's buffer has room for the record at `used` (checked above); the record's bytes are
        // the trace's, a distinct allocation.
        let copy = unsafe {
            let at = b.buffer.add(b.used);
            std::ptr::copy_nonoverlapping(r.bytes.as_ptr(), at, r.bytes.len());
            std::slice::from_raw_parts_mut(at, r.bytes.len())
        };
        if convert {
            convert_record(copy, kind, &map);
        }
        if kind == sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL {
            kernels += 1;
        }
        if let Some(t) = start_of(copy, kind).filter(|&t| t != 0 && t != u64::MAX) {
            least = least.min(t);
            greatest = greatest.max(t);
        }
        b.used += r.bytes.len();
        b.records += 1;
        handed.records += 1;
    }
    drop(guard);
    log::debug!(
        "handed {} records ({kernels} kernels) to the program (kinds {kinds:#x}, clock converted: {convert}; \
         starts {} to {}, the program's clock {:?}, map {map:?})",
        handed.records,
        least,
        greatest,
        map.program_now(),
    );
    with_mux(|m| {
        m.handed.records += handed.records;
        m.handed.buffers += handed.buffers;
        m.handed.lost += handed.lost;
    });
}

/// A new buffer from the program, big enough for a record of `needed` bytes.
fn take_new(request: RequestFn, complete: CompleteFn, needed: usize) -> Option<OpenBuffer> {
    let (mut buffer, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
    // SAFETY: the program's request callback, called as CUPTI calls it, with valid out-pointers.
    unsafe { request(&mut buffer, &mut size, &mut max) };
    if buffer.is_null() {
        return None;
    }
    log::debug!("program's buffer {buffer:p} taken: {size} bytes");
    if size < needed || buffer as usize % 8 != 0 {
        // Unusable (CUPTI needs 8-byte aligned buffers): given back empty.
        // SAFETY: the program's completion callback with its own buffer and no valid bytes.
        unsafe { complete(std::ptr::null_mut(), 0, buffer, size, 0) };
        return None;
    }
    Some(OpenBuffer {
        buffer,
        size,
        used: 0,
        max_records: max,
        records: 0,
        complete,
    })
}
