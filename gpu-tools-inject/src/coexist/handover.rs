//! Handing the program copies of its records, in buffers of its own, as CUPTI would.
//!
//! As CUPTI does, one of the program's buffers stays open between batches: it is handed back when full, at the
//! program's forced flush, when the program registers other callbacks and at the session's end. That matters:
//! Kineto flushes only while CUPTI holds a buffer of its (`CuptiActivityApi::activityBuffers`), so buffers
//! handed back at once would never be read.

use std::sync::atomic::Ordering;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use gpu_tools::cupti::activity::ActivityBatch;
use gpu_tools::sys::cupti as sys;

use super::clock::{ClockMap, convert_record, start_of};
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

/// A kind the program enabled while the trace recorded it: a record of it that started before then was launched
/// while the kind was off for the program, and CUPTI would not have recorded it for the program alone. The trace's
/// records of a kernel launched between two of its sessions and still running at the next one's start came after
/// that start (the CUPTI double's lagging GPU: twice in 40 runs of its scheduled-profiler test, a kernel
/// more than its sessions made).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Enabled {
    pub(super) kind: u32,
    /// When (the trace's clock).
    pub(super) at: u64,
}

impl Enabled {
    /// `kind`, enabled now.
    pub(super) fn now(kind: u32) -> Enabled {
        Enabled {
            kind,
            at: super::clock::monotonic_ns(),
        }
    }

    /// Whether a record of this kind, starting at `start`, can be the program's: not one that started before.
    fn keeps(&self, start: Option<u64>) -> bool {
        start.is_none_or(|start| start >= self.at)
    }
}

/// A kind the program disabled, whose records made before still reach it until its next forced flush.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Disabled {
    pub(super) kind: u32,
    /// When (the trace's clock): a record that starts later is not the program's...
    pub(super) at: u64,
    /// ...unless the API call that launched it began before then: the greatest correlation id of the API records
    /// seen so far that began before `at` (0: none seen). CUPTI records a kernel, copy or set launched while its
    /// kind was on, however late the GPU runs it: on an H200 a torch.profiler cycle during a window lost the last
    /// 3 of its 141 kernels, queued when its profiler disabled kernels and started after.
    pub(super) launched_before: u32,
}

impl Disabled {
    /// `kind`, disabled now.
    pub(super) fn now(kind: u32) -> Disabled {
        Disabled {
            kind,
            at: super::clock::monotonic_ns(),
            launched_before: 0,
        }
    }

    /// Whether a record of this kind, starting at `start`, with correlation id `correlation` (0: none), is one the
    /// program gets.
    fn keeps(&self, start: Option<u64>, correlation: u32) -> bool {
        start.is_none_or(|start| start <= self.at)
            || (correlation != 0 && correlation <= self.launched_before)
    }
}

/// A record's start on the trace's clock, and whether CUPTI stamped it on the program's: before the trace's clock
/// went in (a kernel that ran as the attach began, in the trace's first buffer). The sharing's moments are on the
/// trace's clock, and such a record's timestamps need no conversion. Compared as it was, the realtime start of one
/// such kernel came after the program's disable, and that kernel of its session did not reach it (the CUPTI double,
/// about one run in sixty of its probe test).
fn trace_clock_start(bytes: &[u8], kind: u32, map: &ClockMap, now: u64) -> (Option<u64>, bool) {
    let start = start_of(bytes, kind);
    let programs = map.converts()
        && start.is_some_and(|t| {
            t != 0 && t != u64::MAX && map.stamped_by_trace(t, now) == Some(false)
        });
    if programs {
        (start.map(|t| map.on_trace_clock(t)), true)
    } else {
        (start, false)
    }
}

/// Raises each disabled kind's `launched_before` by the API records of `batch` that began before it was disabled.
fn note_launches(batch: &ActivityBatch<'_>, disabled: &mut [Disabled], map: &ClockMap) {
    let now = super::clock::monotonic_ns();
    for r in batch.raw_records() {
        let kind = r.kind.0;
        if kind != sys::CUPTI_ACTIVITY_KIND_RUNTIME && kind != sys::CUPTI_ACTIVITY_KIND_DRIVER {
            continue;
        }
        let (Some(start), Some(correlation)) = (
            trace_clock_start(r.bytes, kind, map, now).0,
            correlation_of(r.bytes, kind),
        ) else {
            continue;
        };
        for d in disabled.iter_mut().filter(|d| start <= d.at) {
            d.launched_before = d.launched_before.max(correlation);
        }
    }
}

/// The correlation id of a record of `kind` as CUPTI 13 lays it out, where it has one.
fn correlation_of(bytes: &[u8], kind: u32) -> Option<u32> {
    use std::mem::offset_of;
    let at = match kind {
        sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
            offset_of!(sys::CUpti_ActivityKernel10, correlationId)
        }
        sys::CUPTI_ACTIVITY_KIND_RUNTIME | sys::CUPTI_ACTIVITY_KIND_DRIVER => {
            offset_of!(sys::CUpti_ActivityAPI, correlationId)
        }
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => offset_of!(sys::CUpti_ActivityMemcpy6, correlationId),
        sys::CUPTI_ACTIVITY_KIND_MEMCPY2 => {
            offset_of!(sys::CUpti_ActivityMemcpyPtoP4, correlationId)
        }
        sys::CUPTI_ACTIVITY_KIND_MEMSET => offset_of!(sys::CUpti_ActivityMemset4, correlationId),
        _ => return None,
    };
    let field = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_ne_bytes([field[0], field[1], field[2], field[3]]))
}

/// The API record's callback id (`CUpti_ActivityAPI`: kind, then cbid, as 32-bit words).
fn api_cbid(bytes: &[u8]) -> Option<u32> {
    bytes
        .get(4..8)
        .map(|b| u32::from_ne_bytes([b[0], b[1], b[2], b[3]]))
}

/// How long a forced flush of the program's waited for batches that other threads were handing over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DispatchWait {
    /// None was under way.
    None,
    /// They ended after this long.
    Ended(Duration),
    /// Some were still under way at the bound: the completions and hand-overs counted then.
    TimedOut(usize),
}

/// Batches on their way to the program on other threads: buffers CUPTI is completing to the trace there (a batch
/// spends most of its way in the tracer before the hand-over: dropped records asked of CUPTI, its records counted),
/// and hand-overs under way there, each counted by [`dispatch`] too (a test's come without CUPTI).
fn on_their_way_elsewhere() -> usize {
    gpu_tools::cupti::activity::completions_elsewhere()
}

/// Waits, `bound` at most, until no batch is on its way to the program on another thread. The program's forced
/// flush calls it after CUPTI's flush returned and before its open buffer goes back: CUPTI completes the trace's
/// buffers on other threads too (its own, the trace's periodic flusher), and its flush does not wait for those. A
/// batch such a thread was handing over then reached the program after the flush had taken its buffer and ended its
/// draining kinds: its records were dropped, or written into a buffer it would read only after its next session's
/// start, and then pass over as out of its range. Such a batch holds records of each of a cycle's steps: on an H100 a
/// torch.profiler cycle kept 58 of its 141 kernels, its losses in each of its three steps (found by reading, after
/// that run; that it was this race is not shown).
pub(super) fn wait_for_dispatches(bound: Duration) -> DispatchWait {
    if on_their_way_elsewhere() == 0 {
        return DispatchWait::None;
    }
    let t0 = Instant::now();
    loop {
        let now = on_their_way_elsewhere();
        if now == 0 {
            return DispatchWait::Ended(t0.elapsed());
        }
        if t0.elapsed() >= bound {
            return DispatchWait::TimedOut(now);
        }
        std::thread::sleep(Duration::from_micros(20));
    }
}

/// Hands the program the records of its kinds in `batch` (one of the trace's, on CUPTI's thread or the one that
/// flushes), before the trace's writer reads it.
pub fn dispatch(batch: &ActivityBatch<'_>) {
    // Counted first, before anything of the sharing's is read: a forced flush of the program's that comes meanwhile
    // waits for this batch before its buffer goes back.
    let _in_flight = gpu_tools::cupti::activity::CompletionUnderWay::enter();
    if !DISPATCHING.load(Ordering::Acquire) {
        return;
    }
    let Some((
        kinds,
        request,
        complete,
        skip_runtime,
        skip_driver,
        map,
        mut disabled_at,
        enabled_at,
    )) = with_mux(|m| {
        m.clock.read();
        (
            m.program.receives(),
            m.program.request,
            m.program.complete,
            m.program.skip_runtime.clone(),
            m.program.skip_driver.clone(),
            m.clock,
            m.program.disabled_at.clone(),
            m.program.enabled_at.clone(),
        )
    })
    else {
        return;
    };
    if !disabled_at.is_empty() {
        note_launches(batch, &mut disabled_at, &map);
        // Kept for the batches that follow (a launch's kernel record may come after its API record's batch).
        with_mux(|m| {
            for d in m.program.disabled_at.iter_mut() {
                if let Some(seen) = disabled_at
                    .iter()
                    .find(|s| s.kind == d.kind && s.at == d.at)
                {
                    d.launched_before = d.launched_before.max(seen.launched_before);
                }
            }
        });
    }
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
    let now = super::clock::monotonic_ns();
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
        let (start, programs) = trace_clock_start(r.bytes, kind, &map, now);
        // A kind it enabled: nothing that started before (launched while the kind was off for it).
        if let Some(e) = enabled_at.iter().find(|e| e.kind == kind) {
            if !e.keeps(start) {
                continue;
            }
        }
        // A kind it disabled: only what started, or was launched, before that (CUPTI made no more for it).
        if let Some(d) = disabled_at.iter().find(|d| d.kind == kind) {
            let correlation = correlation_of(r.bytes, kind).unwrap_or(0);
            if !d.keeps(start, correlation) {
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
        if convert && !programs {
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
