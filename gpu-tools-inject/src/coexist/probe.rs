//! Finding a profiler inside the program that was recording already when the trace attached.
//!
//! CUPTI keeps one pair of buffer callbacks and has no call that returns them. A trace that registers its own
//! while the program's profiler records (a `torch.profiler` session open across the attach) would take every
//! record of that session, and at its end leave the profiler's kinds disabled and its callbacks gone. CUPTI 12.9
//! and 13.0 keep the pair in their own writable data, side by side (request, then completion; seen with the
//! wheels' libraries). So before the trace starts: CUPTI's writable memory is copied, probe callbacks are
//! registered, and the two words that now hold the probe's functions held the program's before. The probe
//! callbacks pass everything on to the program's for a moment, while they note which kinds its buffers hold: those
//! are the kinds its session records. The sharing (`coexist`) then treats the program as a profiler that
//! registered and enabled them during the trace: it gets its records throughout, and its callbacks and kinds go
//! back to CUPTI at the end.
//!
//! A program that launches while the probe looks at CUPTI's memory may have CUPTI complete a buffer, or ask for
//! one, before the program's pair is known: such a buffer waits, and a request gets a buffer of the probe's own
//! whose records are copied on into the program's buffers once its pair is known (records that cannot reach it are
//! counted, and the stream says so). Before, the first was lost to the program and the second made CUPTI drop
//! records (a busy stand-in program against the CUPTI double).

use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use gpu_tools::linux::procfs::{Mapping, Process};
use gpu_tools::sys::cupti as sys;

use super::{Real, bit};

type RequestFn = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
type CompleteFn = unsafe extern "C" fn(sys::CUcontext, u32, *mut u8, usize, usize);

/// The program's callbacks, as addresses (0: none found).
static PROGRAM_REQUEST: AtomicUsize = AtomicUsize::new(0);
static PROGRAM_COMPLETE: AtomicUsize = AtomicUsize::new(0);
/// CUPTI asked the program for a buffer during the probe: a kind of its is enabled and records.
static ASKED: AtomicBool = AtomicBool::new(false);
/// The kinds of the records in the program's buffers during the probe.
static KINDS_SEEN: AtomicU64 = AtomicU64::new(0);
/// CUPTI's clock, the program's, when the last probe's watch ended (`u64::MAX`: not yet, or not read).
static WATCH_ENDED: AtomicU64 = AtomicU64::new(u64::MAX);
/// The kinds of the records the probe's callbacks passed on that started after [`WATCH_ENDED`]: kinds on after the
/// attach began (one the program disabled since came through the watched import slots). An older record may be of a
/// session that ended before the watch, a kernel of it that the GPU ran late included.
static KINDS_SINCE_WATCH: AtomicU64 = AtomicU64::new(0);
/// Buffers CUPTI completed through the probe's callbacks holding a record of work, of a kind other than CUPTI's own
/// overhead (since the process started): the watch's end waits for one. CUPTI 13.0 keeps a buffer per thread, and
/// the one of its own thread, two overhead records from the last flush, comes back at once while the program's
/// threads' buffers, with kernels still running, stay: on an H200 the watch's end took that one for the program's,
/// the probe saw its profiler record overhead alone, and the window's end left its kernel and API kinds disabled for
/// the rest of the job (its torch.profiler kept 116,125 of 481,785 kernels).
static COMPLETED_WITH_WORK: AtomicU64 = AtomicU64::new(0);
/// `cuptiActivityGetNextRecord`, as an address (0: not resolved).
static NEXT_RECORD: AtomicUsize = AtomicUsize::new(0);
/// Between the probe's registration and the moment the program's pair is known: CUPTI may fill and complete a
/// buffer then, or ask for one (a program that launches while the probe looks at CUPTI's memory). Its completed
/// buffers wait (`PARKED`), and its requests get buffers of the probe's own (`LENT`), whose records go on to the
/// program in buffers of its own once its pair is known; without this, a buffer completed then was lost to the
/// program and a request answered with none made CUPTI drop records (seen with the double's busy program).
static LOCATING: AtomicBool = AtomicBool::new(false);
/// Buffers CUPTI completed before the program's pair was known, in order; the lock also orders those completions
/// with the moment the pair becomes known.
static PARKED: Mutex<Vec<Completed>> = Mutex::new(Vec::new());
/// The probe's own buffers lent to CUPTI while locating (addresses); each is [`LENT_BYTES`] long.
static LENT: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// Records of the probe's own buffers that could not reach the program (it gave no buffer, or none was found).
static LOST: AtomicU64 = AtomicU64::new(0);
/// The program's buffers CUPTI took through the probe's request callback and has not completed yet (addresses),
/// since the last probe began. CUPTI holds one when the tracer registers its callbacks (it asks for the next buffer
/// while the probe's callbacks stand), and the window's records go into it: it must come back through the tracer's
/// callbacks, which read those records for the trace and put them on the program's clock, before the program's
/// callbacks go back to CUPTI (`super::give_back_callbacks`). Completed after that, it reached the program as CUPTI
/// wrote it: the trace lost every kernel of a 50 ms window (the CUPTI double, a kernel still running at the stop),
/// and the program got them on the trace's clock, which Kineto takes for times outside its session and drops.
static HELD_FOR_PROGRAM: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// The size of a buffer the probe lends CUPTI. Small: while CUPTI holds one, the program's profiler has no buffer
/// out, and one that flushes only then (Kineto) records nothing. On an H200 a buffer of 256 KiB lent at the
/// moment of locating held a torch.profiler's records for four of its cycles, which came back empty; 32 KiB is
/// half such a cycle.
const LENT_BYTES: usize = 32 * 1024;

/// A buffer of the program's being filled with copies: its size, the bytes used, its limit of records (0: none) and
/// the records in it.
struct Filling {
    buffer: *mut u8,
    size: usize,
    used: usize,
    max: usize,
    records: usize,
}

/// A buffer CUPTI completed, with its completion's arguments.
#[derive(Clone, Copy)]
struct Completed {
    context: usize,
    stream: u32,
    buffer: usize,
    size: usize,
    valid: usize,
}

fn parked() -> std::sync::MutexGuard<'static, Vec<Completed>> {
    PARKED.lock().unwrap_or_else(|p| p.into_inner())
}

fn lent() -> std::sync::MutexGuard<'static, Vec<usize>> {
    LENT.lock().unwrap_or_else(|p| p.into_inner())
}

fn held_for_program() -> std::sync::MutexGuard<'static, Vec<usize>> {
    HELD_FOR_PROGRAM.lock().unwrap_or_else(|p| p.into_inner())
}

/// How many of the program's buffers CUPTI took through the probe's request callback and still holds
/// ([`HELD_FOR_PROGRAM`]).
pub(super) fn program_buffers_held() -> usize {
    held_for_program().len()
}

/// Stops counting the program's buffers CUPTI still holds ([`HELD_FOR_PROGRAM`]), once its callbacks are back in
/// CUPTI: they go to the program directly from then on. Returns how many there were.
pub(super) fn forget_program_buffers_held() -> usize {
    std::mem::take(&mut *held_for_program()).len()
}

fn lent_layout() -> std::alloc::Layout {
    // 8-byte aligned, as CUPTI needs its buffers.
    std::alloc::Layout::from_size_align(LENT_BYTES, 8).unwrap_or(std::alloc::Layout::new::<u64>())
}

/// A buffer of the probe's own for CUPTI (null when none can be had).
fn lend() -> *mut u8 {
    let layout = lent_layout();
    if layout.size() != LENT_BYTES {
        return std::ptr::null_mut();
    }
    // SAFETY: a layout of non-zero size.
    let buffer = unsafe { std::alloc::alloc(layout) };
    if !buffer.is_null() {
        lent().push(buffer as usize);
    }
    buffer
}

/// Whether `buffer` is one the probe lent; it is no longer counted as lent after this says so.
fn take_lent(buffer: *mut u8) -> bool {
    let mut lent = lent();
    match lent.iter().position(|&b| b == buffer as usize) {
        Some(at) => {
            lent.swap_remove(at);
            true
        }
        None => false,
    }
}

/// Frees a buffer the probe lent (after [`take_lent`] said it was one).
fn free_lent(buffer: *mut u8) {
    // SAFETY: allocated by `lend` with this layout, and no longer lent (CUPTI completed it).
    unsafe { std::alloc::dealloc(buffer, lent_layout()) };
}

/// The records of one of the probe's buffers go to the program, copied into buffers from its request callback as
/// CUPTI wrote them, each buffer completed once full and the last at the end; the probe's buffer is freed.
fn lent_to_program(buffer: *mut u8, valid: usize) {
    let request = PROGRAM_REQUEST.load(Ordering::Acquire);
    let complete = PROGRAM_COMPLETE.load(Ordering::Acquire);
    let next = NEXT_RECORD.load(Ordering::Acquire);
    let spans = if next == 0 {
        Vec::new()
    } else {
        // SAFETY: the address of cuptiActivityGetNextRecord, whose C signature the type states, walking a buffer
        // CUPTI completed with `valid` bytes of records.
        unsafe {
            super::clock::record_spans(
                buffer,
                valid,
                std::mem::transmute::<usize, super::NextRecordFn>(next),
            )
        }
    };
    if request == 0 || complete == 0 {
        LOST.fetch_add(spans.len() as u64, Ordering::Relaxed);
        free_lent(buffer);
        return;
    }
    // SAFETY: both are the program's own callbacks, found where CUPTI keeps them and checked to be code.
    let (request, complete) = unsafe {
        (
            std::mem::transmute::<usize, RequestFn>(request),
            std::mem::transmute::<usize, CompleteFn>(complete),
        )
    };
    // The program's buffer being filled.
    let mut open: Option<Filling> = None;
    let hand_back = |open: &mut Option<Filling>| {
        if let Some(f) = open.take() {
            // SAFETY: the program's completion callback with its own buffer and the bytes written in it.
            unsafe { complete(std::ptr::null_mut(), 0, f.buffer, f.size, f.used) };
        }
    };
    for (at, len, _) in spans {
        if open
            .as_ref()
            .is_some_and(|f| f.size - f.used < len || (f.max != 0 && f.records >= f.max))
        {
            hand_back(&mut open);
        }
        if open.is_none() {
            let (mut b, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
            // SAFETY: the program's request callback, called as CUPTI calls it, with valid out-pointers.
            unsafe { request(&mut b, &mut size, &mut max) };
            if b.is_null() {
                LOST.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            if size < len || b as usize % 8 != 0 {
                // SAFETY: its own buffer back, empty.
                unsafe { complete(std::ptr::null_mut(), 0, b, size, 0) };
                LOST.fetch_add(1, Ordering::Relaxed);
                continue;
            }
            open = Some(Filling {
                buffer: b,
                size,
                used: 0,
                max,
                records: 0,
            });
        }
        if let Some(f) = open.as_mut() {
            // SAFETY: `len` bytes of a record inside the probe's buffer (its walk by CUPTI), copied to room checked
            // above in the program's buffer, a distinct allocation.
            unsafe { std::ptr::copy_nonoverlapping(buffer.add(at), f.buffer.add(f.used), len) };
            f.used += len;
            f.records += 1;
        }
    }
    hand_back(&mut open);
    free_lent(buffer);
}

/// The program's pair is known now (or will not be: `None`): what waited goes on, and the probe lends no more.
fn end_locating(pair: Option<(usize, usize)>) {
    let waiting = {
        let mut parked = parked();
        if let Some((request, complete)) = pair {
            PROGRAM_REQUEST.store(request, Ordering::Release);
            PROGRAM_COMPLETE.store(complete, Ordering::Release);
        }
        LOCATING.store(false, Ordering::Release);
        std::mem::take(&mut *parked)
    };
    for c in waiting {
        // SAFETY: the arguments of a completion CUPTI made, kept as they were.
        unsafe {
            hand_to_program(
                c.context as sys::CUcontext,
                c.stream,
                c.buffer as *mut u8,
                c.size,
                c.valid,
            )
        };
    }
}

/// Once the program's callbacks are known, and again before they go back into CUPTI without a trace
/// (`program_profiler_now`): a buffer the probe lent while it looked for them, which CUPTI still holds because
/// nothing was written into it yet (CUPTI asks for one right after it completes one, and keeps an empty one across
/// forced flushes), would be completed to the program's profiler, which (Kineto) passes over a buffer it did not
/// lend, records and all. So this waits for it to fill, flushing after each wait: it comes back through the probe's
/// callbacks, whose copies go on to the program. The flushes are made without force until the bound
/// (`flush::complete_first`): forced, they handed the program the records of its kernels still running without an
/// end. Returns the buffers still lent after that (a program whose kinds recorded nothing meanwhile).
pub(super) fn flush_back_lent(real: &Real) -> usize {
    if lent().is_empty() {
        return 0;
    }
    super::flush::complete_first(real, || lent().is_empty());
    lent().len()
}

/// At the watch's end, where the program neither flushed nor registered while watched: the buffer CUPTI holds of the
/// program's goes back through the probe, which sees its kinds, at a moment when every record in it is complete
/// (flushes without force until one comes back, forced once at the bound: `flush::complete_first`). Forced at once,
/// as it was, the flush handed the program the records of its kernels still running, without an end, whenever its
/// session recorded then: on an H100, a torch.profiler on a schedule lost the first step of a cycle (47 of its 141
/// kernels) at a `profile --pid` beside it, whose look has no watch of the program's calls and so always flushed,
/// and likely so at a first trace (whose watch saw no flush of the program's); a training step's synchronise gives
/// such a moment every step.
/// A buffer holding only CUPTI's overhead records does not count (see [`COMPLETED_WITH_WORK`]).
fn flush_back_at_watch_end(real: &Real) -> gpu_tools::cupti::activity::CompleteFirst {
    let before = COMPLETED_WITH_WORK.load(Ordering::Acquire);
    super::flush::complete_first(real, || {
        COMPLETED_WITH_WORK.load(Ordering::Acquire) != before
    })
}

/// The kinds of the records that started after the last probe's watch which the probe's callbacks passed on, until
/// the tracer's callbacks replaced the probe's (its forced flush before its start completes the program's buffers
/// through them).
pub(super) fn kinds_since_watch() -> u64 {
    KINDS_SINCE_WATCH.load(Ordering::Acquire)
}

/// CUPTI's clock, the program's, when the last probe's watch ended (`None`: not read).
pub(super) fn watch_ended() -> Option<u64> {
    Some(WATCH_ENDED.load(Ordering::Acquire)).filter(|&t| t != u64::MAX)
}

/// How long a flush or a registration of the program's waits for the probe to find its callbacks.
const LOCATING_WAIT: Duration = Duration::from_millis(100);

/// From the moment the probe waits for the program's calls already inside CUPTI ([`hold_off_program_calls`]) until
/// [`LOCATING`] is set: a flush or registration of the program's that comes then waits as it would while locating.
static STARTING: AtomicBool = AtomicBool::new(false);
/// The program's flushes and registrations inside CUPTI now (their hooks hold a [`ProgramCall`]).
static PROGRAM_CALLS: AtomicUsize = AtomicUsize::new(0);
/// The most the probe waits for such a call to return before it registers its own callbacks.
const PROGRAM_CALL_WAIT: Duration = Duration::from_millis(100);

/// A flush or registration of the program's, inside CUPTI while this lives ([`enter_program_call`]).
pub(super) struct ProgramCall(());

impl Drop for ProgramCall {
    fn drop(&mut self) {
        PROGRAM_CALLS.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Called by the program's flush and registration (their hooks) before they reach CUPTI; the call stays counted
/// inside CUPTI while the returned [`ProgramCall`] lives. While the probe looks for the program's callbacks, the
/// probe's own are in CUPTI and what CUPTI completes is kept until the program's are known: a flush of the
/// program's would return without its buffers, which reach it only afterwards (Kineto counts them in its next
/// cycle, out of range, and the one whose end it was collecting as empty), and a registration of its would replace
/// the probe's callbacks while they are being looked for. Such a call waits for the look to end (two copies of
/// CUPTI's writable memory and a scan: milliseconds), [`LOCATING_WAIT`] at most. Returns the wait, with the call.
pub(super) fn enter_program_call() -> (ProgramCall, Duration) {
    let t0 = std::time::Instant::now();
    let mut first = true;
    loop {
        // Counted first, then the probe's state read (both sequentially consistent): either the probe sees this
        // call inside CUPTI and waits for it, or this call sees the probe and waits for it.
        PROGRAM_CALLS.fetch_add(1, Ordering::SeqCst);
        let call = ProgramCall(());
        let looking = STARTING.load(Ordering::SeqCst) || LOCATING.load(Ordering::SeqCst);
        if !looking || t0.elapsed() >= LOCATING_WAIT {
            let waited = if first { Duration::ZERO } else { t0.elapsed() };
            return (call, waited);
        }
        // Not counted while it waits, so that the probe's own wait for calls inside CUPTI does not wait for it.
        drop(call);
        first = false;
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// Before the probe registers its callbacks: from now on the program's flushes and registrations wait
/// ([`enter_program_call`]), and one already inside CUPTI is waited for, [`PROGRAM_CALL_WAIT`] at most. A forced
/// flush of the program's that CUPTI was still running when the probe registered completed the program's buffer to
/// the probe's callbacks, where it waited for the locate while the flush returned without it: on an H100 a
/// torch.profiler on a schedule collected a cycle of 0 so, its flush having begun 0.7 ms after the import slots
/// were watched. Returns the wait; [`start_locating`] follows.
fn hold_off_program_calls() -> Duration {
    STARTING.store(true, Ordering::SeqCst);
    let t0 = std::time::Instant::now();
    while PROGRAM_CALLS.load(Ordering::SeqCst) > 0 && t0.elapsed() < PROGRAM_CALL_WAIT {
        std::thread::sleep(Duration::from_micros(100));
    }
    if PROGRAM_CALLS.load(Ordering::SeqCst) == 0 && t0.elapsed() < Duration::from_micros(150) {
        return Duration::ZERO;
    }
    t0.elapsed()
}

/// The probe's callbacks go into CUPTI now: what CUPTI completes waits for the program's pair ([`end_locating`]).
fn start_locating() {
    LOCATING.store(true, Ordering::SeqCst);
    STARTING.store(false, Ordering::SeqCst);
}

/// Records the probe's own buffers held that could not reach the program (since the process started).
pub(super) fn lost_records() -> u64 {
    LOST.load(Ordering::Relaxed)
}

/// A profiler inside the program whose callbacks were registered when the trace attached.
#[derive(Debug, Clone, Copy)]
pub struct Found {
    pub request: RequestFn,
    pub complete: CompleteFn,
    /// The kinds its buffers held during the probe: what its session records now (none: it is not recording, or
    /// its program launched nothing meanwhile).
    pub kinds: u64,
    /// CUPTI asked it for a buffer during the probe.
    pub asked: bool,
}

/// Where the probe's pair was found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Located {
    /// At one place, which held this pair before.
    Before(usize, usize),
    /// Nowhere.
    Nowhere,
    /// At several places: which one is CUPTI's cannot be told.
    Several(usize),
}

/// Finds the 8-byte-aligned place in `now` (copies of CUPTI's writable ranges) that holds `pair` side by side, and
/// returns what the same place held in `before`.
pub(super) fn locate(before: &[Vec<u8>], now: &[Vec<u8>], pair: (usize, usize)) -> Located {
    let word = |bytes: &[u8], at: usize| -> Option<usize> {
        let b: [u8; 8] = bytes.get(at..at + 8)?.try_into().ok()?;
        Some(usize::from_ne_bytes(b))
    };
    let mut found = Vec::new();
    for (old, new) in before.iter().zip(now) {
        let mut at = 0;
        while at + 16 <= new.len().min(old.len()) {
            if word(new, at) == Some(pair.0) && word(new, at + 8) == Some(pair.1) {
                found.push((word(old, at).unwrap_or(0), word(old, at + 8).unwrap_or(0)));
            }
            at += 8;
        }
    }
    match found.as_slice() {
        [] => Located::Nowhere,
        [(request, complete)] => Located::Before(*request, *complete),
        more => Located::Several(more.len()),
    }
}

/// CUPTI's writable ranges: the writable mappings of its file, and the anonymous mapping right after the last of
/// them (its zero-initialised data).
pub(super) fn writable_ranges(maps: &[Mapping], library: &Path) -> Vec<(u64, u64)> {
    let mut ranges = Vec::new();
    let mut last_of_library: Option<u64> = None;
    for m in maps {
        let ours = m.path().is_some_and(|p| p == library);
        let writable = m.permissions[0] == b'r' && m.permissions[1] == b'w';
        if ours {
            last_of_library = Some(m.end);
            if writable {
                ranges.push((m.start, m.end));
            }
        } else if m.path().is_none() && writable && last_of_library == Some(m.start) {
            ranges.push((m.start, m.end));
            last_of_library = None;
        } else {
            last_of_library = None;
        }
    }
    ranges
}

/// Copies of `ranges` of this process's memory.
fn snapshot(ranges: &[(u64, u64)]) -> Vec<Vec<u8>> {
    ranges
        .iter()
        .map(|&(start, end)| {
            let len = usize::try_from(end.saturating_sub(start)).unwrap_or(0);
            // SAFETY: a readable and writable mapping of this process, from its memory map, which CUPTI (loaded and
            // pinned) does not unmap; reading it races with nothing that frees it.
            unsafe { std::slice::from_raw_parts(start as usize as *const u8, len) }.to_vec()
        })
        .collect()
}

/// Whether `address` lies in this library (the injection library, which holds the crate's tracer).
fn in_this_library(address: usize) -> bool {
    let base = |a: usize| -> Option<usize> {
        crate::loaded_modules::module_of(a)
            .map(|(base, _)| base)
            .filter(|&base| base != 0)
    };
    let own = base(in_this_library as *const () as usize);
    own.is_some() && base(address) == own
}

fn is_code(maps: &[Mapping], address: usize) -> bool {
    maps.iter()
        .any(|m| m.is_executable() && m.contains(address as u64))
}

/// The probe's request callback: the program's buffer, noting that CUPTI asked for one.
unsafe extern "C" fn probe_request(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let run = std::panic::catch_unwind(|| {
        ASKED.store(true, Ordering::Release);
        let f = PROGRAM_REQUEST.load(Ordering::Acquire);
        if f == 0 {
            // While the program's pair is being looked for, a buffer of the probe's own (its records go on to the
            // program); otherwise none, and CUPTI drops the records and counts them.
            let own = if LOCATING.load(Ordering::Acquire) {
                lend()
            } else {
                std::ptr::null_mut()
            };
            // SAFETY: CUPTI's out-pointers.
            unsafe {
                *buffer = own;
                *size = if own.is_null() { 0 } else { LENT_BYTES };
                *max = 0;
            }
            return;
        }
        // SAFETY: the program's own request callback (checked to be code), called as CUPTI calls it.
        unsafe { std::mem::transmute::<usize, RequestFn>(f)(buffer, size, max) };
        // SAFETY: CUPTI's out-pointer, which the program's callback has just set.
        let lent = unsafe { *buffer };
        if !lent.is_null() {
            held_for_program().push(lent as usize);
        }
    });
    if let Err(payload) = run {
        std::mem::forget(payload);
    }
}

/// The probe's completion callback: notes the kinds in the buffer, then gives it to the program.
unsafe extern "C" fn probe_complete(
    context: sys::CUcontext,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    let run = std::panic::catch_unwind(|| {
        let (kinds, recent) = kinds_in(buffer, valid);
        KINDS_SEEN.fetch_or(kinds, Ordering::AcqRel);
        KINDS_SINCE_WATCH.fetch_or(recent, Ordering::AcqRel);
        if kinds & !bit(sys::CUPTI_ACTIVITY_KIND_OVERHEAD) != 0 {
            COMPLETED_WITH_WORK.fetch_add(1, Ordering::AcqRel);
        }
        // SAFETY: the program's completion callback, with the buffer its request callback gave.
        unsafe { hand_to_program(context, stream, buffer, size, valid) }
    });
    if let Err(payload) = run {
        std::mem::forget(payload);
    }
}

/// Gives a buffer that came from the program's request callback back to its completion callback; also the
/// tracer's handler of buffers it did not lend (CUPTI completes them to whoever registered last).
///
/// # Safety
///
/// `buffer` came from the program's request callback and holds `valid` bytes of records.
pub(super) unsafe extern "C" fn hand_to_program(
    context: sys::CUcontext,
    stream: u32,
    buffer: *mut u8,
    size: usize,
    valid: usize,
) {
    // The program's completion callback, where the buffer goes to it as it is (0: it was parked, copied on, or has
    // nowhere to go). No panic leaves: this runs on CUPTI's thread.
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        {
            let mut held = held_for_program();
            if let Some(at) = held.iter().position(|&b| b == buffer as usize) {
                held.swap_remove(at);
            }
        }
        {
            let mut parked = parked();
            if PROGRAM_COMPLETE.load(Ordering::Acquire) == 0 && LOCATING.load(Ordering::Acquire) {
                // The program's pair is not known yet: this waits for it (`end_locating`).
                parked.push(Completed {
                    context: context as usize,
                    stream,
                    buffer: buffer as usize,
                    size,
                    valid,
                });
                return 0;
            }
        }
        if take_lent(buffer) {
            lent_to_program(buffer, valid);
            return 0;
        }
        PROGRAM_COMPLETE.load(Ordering::Acquire)
    }));
    let f = run.unwrap_or_else(|payload| {
        std::mem::forget(payload);
        0
    });
    if f != 0 {
        // SAFETY: the program's own completion callback (checked to be code), called as CUPTI calls it.
        unsafe { std::mem::transmute::<usize, CompleteFn>(f)(context, stream, buffer, size, valid) }
    }
}

/// The kinds of the records in a buffer, walked with CUPTI's own `cuptiActivityGetNextRecord`, and those of its
/// records that started after the probe's watch ([`WATCH_ENDED`]).
fn kinds_in(buffer: *mut u8, valid: usize) -> (u64, u64) {
    let next = NEXT_RECORD.load(Ordering::Acquire);
    if next == 0 {
        return (0, 0);
    }
    // SAFETY: the address of cuptiActivityGetNextRecord, whose C signature the type states.
    let next = unsafe { std::mem::transmute::<usize, super::NextRecordFn>(next) };
    let since = WATCH_ENDED.load(Ordering::Acquire);
    // SAFETY: a buffer CUPTI filled with `valid` bytes of its records, walked by CUPTI's own function.
    unsafe { super::clock::kinds_of(buffer, valid, next, |t| t >= since) }
}

/// Looks for the program's callbacks and, where found, watches its buffers for `watch`. Call it before the
/// trace's tracer registers its own callbacks. `Ok(None)`: none were registered. `Err`: they could not be found,
/// and the probe's callbacks stand in CUPTI in their place (the trace's replace them next: as without the probe).
pub(super) fn probe(real: &Real, library: &Path, watch: Duration) -> Result<Option<Found>, String> {
    let maps = Process::current()
        .maps()
        .map_err(|e| format!("cannot read this process's memory map: {e}"))?;
    // The memory map names files by their real path.
    let library = std::fs::canonicalize(library).unwrap_or_else(|_| library.to_path_buf());
    let ranges = writable_ranges(&maps, &library);
    if ranges.is_empty() {
        return Err(format!("no writable mapping of {}", library.display()));
    }
    if let Some(next) = real.get_next_record {
        NEXT_RECORD.store(next as usize, Ordering::Release);
    }
    // No flush first. Any flush here may complete the program's open buffer; CUPTI then asks for the next one while
    // the probe looks for the program's callbacks, and the probe lends one of its own. A profiler that flushes only
    // while a buffer of its own is out (Kineto) then skipped its cycle's flush: on an H200 a torch.profiler on a
    // schedule got cycles of 0 at windows' starts so (the probe's locate took 80 ms in one, under 16 jobs). Forced,
    // the flush also handed out the program's running kernels without a start or an end (a cycle of 110 of 141).
    // The buffer CUPTI holds comes to the program later, through the probe's callbacks or the tracer's. Whether
    // callbacks were ever registered, which the flush's answer said, the probe's locate says (`Before(0, 0)`).
    let held_off = hold_off_program_calls();
    let before = snapshot(&ranges);
    ASKED.store(false, Ordering::Release);
    KINDS_SEEN.store(0, Ordering::Release);
    KINDS_SINCE_WATCH.store(0, Ordering::Release);
    WATCH_ENDED.store(u64::MAX, Ordering::Release);
    PROGRAM_REQUEST.store(0, Ordering::Release);
    PROGRAM_COMPLETE.store(0, Ordering::Release);
    // Those of an earlier attach CUPTI still holds go to the program directly (its callbacks are back).
    forget_program_buffers_held();
    start_locating();
    if !held_off.is_zero() {
        log::debug!(
            "the probe waited {:.2} ms for a flush or registration of the program's inside CUPTI to return",
            held_off.as_secs_f64() * 1e3
        );
    }
    // SAFETY: the real registration with two functions of this (pinned) library that have CUPTI's signatures.
    let code = unsafe { (real.register_callbacks)(Some(probe_request), Some(probe_complete)) };
    if code != sys::CUPTI_SUCCESS {
        end_locating(None);
        return Err(format!("registering the probe's callbacks returned {code}"));
    }
    let now = snapshot(&ranges);
    let pair = (
        probe_request as *const () as usize,
        probe_complete as *const () as usize,
    );
    let located = locate(&before, &now, pair);
    let program = match located {
        Located::Before(r, c) if r != 0 && !in_this_library(r) && !in_this_library(c) => {
            (is_code(&maps, r) && is_code(&maps, c)).then_some((r, c))
        }
        _ => None,
    };
    // What CUPTI completed meanwhile goes on to the program (or, with no program found, is let go).
    end_locating(program);
    let (request, complete) = match located {
        Located::Before(0, 0) => return Ok(None),
        // This library's own tracer, from an earlier attach (CUPTI keeps the callbacks of the last registration):
        // not a profiler of the program's.
        Located::Before(r, c) if in_this_library(r) || in_this_library(c) => return Ok(None),
        Located::Before(r, c) if is_code(&maps, r) && is_code(&maps, c) => (r, c),
        Located::Before(r, c) => {
            // Not functions: either the place found is not CUPTI's, or CUPTI would crash calling them. Never
            // registered: the probe's callbacks stay (they lend no buffer; CUPTI drops and counts the records of a
            // kind that records) until the trace's own replace them.
            return Err(format!(
                "CUPTI held {r:#x} and {c:#x} as its callbacks, which are not code"
            ));
        }
        Located::Nowhere => {
            return Err("the registered callbacks were not found in CUPTI's memory".into());
        }
        Located::Several(n) => {
            return Err(format!(
                "the registered callbacks were found at {n} places in CUPTI's memory"
            ));
        }
    };
    // A buffer lent while locating goes back as soon as it holds records, and the next comes from the program:
    // until then its profiler has no buffer of its own out (see `LENT_BYTES`).
    let left = flush_back_lent(real);
    if left > 0 {
        log::debug!("{left} buffers the probe lent are still in CUPTI, empty");
    }
    log::debug!(
        "the program's buffers are watched for {} ms",
        watch.as_millis()
    );
    std::thread::sleep(watch);
    WATCH_ENDED.store(real.timestamp().unwrap_or(u64::MAX), Ordering::Release);
    if super::watch::program_flushed_or_registered() {
        // Its buffers went back at its own flush (through the probe's callbacks, which saw their kinds), or its own
        // callbacks are in CUPTI again (a flush now would not pass through the probe's), and the watch noted the
        // kinds it enabled since: a forced flush here would only hand out its running kernels incomplete (an H200:
        // a torch.profiler on a schedule lost one step's 47 kernels of a cycle so).
        log::debug!("the program flushed or registered while watched: no flush at the watch's end");
    } else {
        let flushed = flush_back_at_watch_end(real);
        log::debug!(
            "the program's buffer is flushed back at the watch's end after {} waits{}",
            flushed.waits,
            if flushed.forced {
                ", forced (kernels still running are handed out incomplete)"
            } else {
                ""
            }
        );
    }
    // SAFETY: both are addresses checked to be code in this process, found where CUPTI keeps its callbacks.
    let (request, complete) = unsafe {
        (
            std::mem::transmute::<usize, RequestFn>(request),
            std::mem::transmute::<usize, CompleteFn>(complete),
        )
    };
    Ok(Some(Found {
        request,
        complete,
        kinds: KINDS_SEEN.load(Ordering::Acquire),
        asked: ASKED.load(Ordering::Acquire),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lent buffer [`completing_flush`] completes, as an address.
    static HELD: AtomicUsize = AtomicUsize::new(0);
    /// Forced flushes [`completing_flush`] saw; it completes [`HELD`] at the second.
    static FLUSHES: AtomicUsize = AtomicUsize::new(0);
    /// Whether it completes [`HELD`] at all.
    static COMPLETES: AtomicBool = AtomicBool::new(true);

    /// Forced flushes among them.
    static FORCED: AtomicUsize = AtomicUsize::new(0);

    unsafe extern "C" fn completing_flush(flag: u32) -> sys::CUptiResult {
        if flag == sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED {
            FORCED.fetch_add(1, Ordering::SeqCst);
        }
        let n = FLUSHES.fetch_add(1, Ordering::SeqCst) + 1;
        if n == 2 && COMPLETES.load(Ordering::SeqCst) {
            // SAFETY: a buffer `lend` made, completed once, as CUPTI would, with no records.
            unsafe {
                probe_complete(
                    std::ptr::null_mut(),
                    0,
                    HELD.load(Ordering::SeqCst) as *mut u8,
                    LENT_BYTES,
                    0,
                )
            };
        }
        sys::CUPTI_SUCCESS
    }

    #[test]
    fn a_buffer_the_probe_lent_that_cupti_holds_empty_is_flushed_back_before_the_program_registers()
    {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let real = Real {
            flush_all: completing_flush,
            ..super::super::tests::no_cupti()
        };
        // It comes back at the second flush: none is left, the probe waited no longer, and forced nothing out (a
        // forced flush hands the program its running kernels without an end).
        FLUSHES.store(0, Ordering::SeqCst);
        FORCED.store(0, Ordering::SeqCst);
        COMPLETES.store(true, Ordering::SeqCst);
        HELD.store(lend() as usize, Ordering::SeqCst);
        assert_eq!(lent().len(), 1);
        assert_eq!(flush_back_lent(&real), 0, "flushed back");
        assert_eq!(FLUSHES.load(Ordering::SeqCst), 2);
        assert_eq!(FORCED.load(Ordering::SeqCst), 0, "no forced flush");
        // It never fills: the probe gives up after 50 ms, forces once, and says one is left.
        FLUSHES.store(0, Ordering::SeqCst);
        COMPLETES.store(false, Ordering::SeqCst);
        let held = lend();
        assert_eq!(flush_back_lent(&real), 1, "still lent");
        assert_eq!(
            FLUSHES.load(Ordering::SeqCst),
            gpu_tools::cupti::activity::COMPLETE_WAITS as usize + 2
        );
        assert_eq!(FORCED.load(Ordering::SeqCst), 1, "forced at the bound");
        assert!(take_lent(held));
        free_lent(held);
        // Nothing lent: no flush at all.
        FLUSHES.store(0, Ordering::SeqCst);
        assert_eq!(flush_back_lent(&real), 0);
        assert_eq!(FLUSHES.load(Ordering::SeqCst), 0);
    }

    /// A flush that completes a buffer of the program's through the probe at the flush [`LANDS_AT`] counts (0:
    /// never), forced or not, as CUPTI returns a buffer whose records are whole; every flush before it completes
    /// the buffer of CUPTI's own thread, which holds overhead records only (CUPTI 13.0 keeps a buffer per thread).
    static LANDS_AT: AtomicUsize = AtomicUsize::new(0);

    /// Two records of 8 bytes each (a kind and padding), walked by [`eight_byte_records`].
    #[repr(C, align(8))]
    struct TwoRecords([u32; 4]);

    /// The program's thread's buffer: an API record and a kernel.
    static WORK: TwoRecords = TwoRecords([
        sys::CUPTI_ACTIVITY_KIND_RUNTIME,
        0,
        sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
        0,
    ]);
    /// CUPTI's own thread's buffer: the overhead of the last flush.
    static OVERHEAD_ONLY: TwoRecords = TwoRecords([
        sys::CUPTI_ACTIVITY_KIND_OVERHEAD,
        0,
        sys::CUPTI_ACTIVITY_KIND_OVERHEAD,
        0,
    ]);

    /// `cuptiActivityGetNextRecord` over records of 8 bytes.
    unsafe extern "C" fn eight_byte_records(
        buffer: *mut u8,
        valid: usize,
        record: *mut *mut sys::CUpti_Activity,
    ) -> sys::CUptiResult {
        // SAFETY: the walk's out-pointer, null at its start or the record it gave last.
        let last = unsafe { *record };
        let at = if last.is_null() {
            0
        } else {
            last as usize - buffer as usize + 8
        };
        if at + 8 > valid {
            return sys::CUPTI_ERROR_MAX_LIMIT_REACHED;
        }
        // SAFETY: inside the buffer's valid bytes.
        unsafe { *record = buffer.add(at).cast() };
        sys::CUPTI_SUCCESS
    }

    /// Completes `records` through the probe, while no look runs and no pair of the program's is known (the test
    /// clears both first): `hand_to_program` then passes it to no one.
    fn complete_through_probe(records: &'static TwoRecords) {
        let buffer = records.0.as_ptr().cast::<u8>().cast_mut();
        // SAFETY: 16 bytes of two records; the walk only reads them, and no one is handed the buffer.
        unsafe { probe_complete(std::ptr::null_mut(), 0, buffer, 16, 16) };
    }

    unsafe extern "C" fn landing_flush(flag: u32) -> sys::CUptiResult {
        if flag == sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED {
            FORCED.fetch_add(1, Ordering::SeqCst);
        }
        let n = FLUSHES.fetch_add(1, Ordering::SeqCst) + 1;
        let lands = LANDS_AT.load(Ordering::SeqCst);
        complete_through_probe(&OVERHEAD_ONLY);
        if (lands != 0 && n >= lands) || flag == sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED {
            complete_through_probe(&WORK);
        }
        sys::CUPTI_SUCCESS
    }

    #[test]
    fn the_watch_end_flushes_without_force_until_the_programs_buffer_is_back() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let real = Real {
            flush_all: landing_flush,
            ..super::super::tests::no_cupti()
        };
        // No look runs and no pair is known (an earlier test may have left one): the completions go to no one.
        LOCATING.store(false, Ordering::Release);
        PROGRAM_REQUEST.store(0, Ordering::Release);
        PROGRAM_COMPLETE.store(0, Ordering::Release);
        let next_before =
            NEXT_RECORD.swap(eight_byte_records as *const () as usize, Ordering::AcqRel);
        WATCH_ENDED.store(0, Ordering::Release);
        let overhead = bit(sys::CUPTI_ACTIVITY_KIND_OVERHEAD);
        let work =
            bit(sys::CUPTI_ACTIVITY_KIND_RUNTIME) | bit(sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
        // Its records whole at the third flush: back then, nothing forced. The overhead buffer that came back at
        // the first flush did not end the wait, and the kinds seen are the program's.
        KINDS_SEEN.store(0, Ordering::SeqCst);
        FLUSHES.store(0, Ordering::SeqCst);
        FORCED.store(0, Ordering::SeqCst);
        LANDS_AT.store(3, Ordering::SeqCst);
        let ended = flush_back_at_watch_end(&real);
        assert_eq!((ended.waits, ended.forced), (2, false));
        assert_eq!(FLUSHES.load(Ordering::SeqCst), 3);
        assert_eq!(
            FORCED.load(Ordering::SeqCst),
            0,
            "no running kernel handed out"
        );
        assert_eq!(KINDS_SEEN.load(Ordering::SeqCst), work | overhead);
        // Never whole: forced once, at the bound, which brings the program's buffer back.
        KINDS_SEEN.store(0, Ordering::SeqCst);
        FLUSHES.store(0, Ordering::SeqCst);
        LANDS_AT.store(0, Ordering::SeqCst);
        let ended = flush_back_at_watch_end(&real);
        assert!(ended.forced);
        assert_eq!(
            FLUSHES.load(Ordering::SeqCst),
            gpu_tools::cupti::activity::COMPLETE_WAITS as usize + 2
        );
        assert_eq!(FORCED.load(Ordering::SeqCst), 1, "forced at the bound");
        assert_eq!(KINDS_SEEN.load(Ordering::SeqCst), work | overhead);
        NEXT_RECORD.store(next_before, Ordering::Release);
    }

    /// A flush of the program's on a thread of its own, returning its wait ([`enter_program_call`]); returns once
    /// the thread runs (a barrier), not when it was only spawned.
    fn program_call_on_a_running_thread() -> std::thread::JoinHandle<Duration> {
        let running = std::sync::Arc::new(std::sync::Barrier::new(2));
        let program = std::thread::spawn({
            let running = running.clone();
            move || {
                running.wait();
                enter_program_call().1
            }
        });
        running.wait();
        program
    }

    #[test]
    fn a_flush_of_the_programs_made_while_its_callbacks_are_looked_for_waits_until_they_are_found()
    {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        assert_eq!(enter_program_call().1, Duration::ZERO, "nothing looked for");
        start_locating();
        // The program's thread runs before the look ends (on a busy machine a thread spawned alone started only
        // after it, found nothing looked for, and did not wait).
        let program = program_call_on_a_running_thread();
        std::thread::sleep(Duration::from_millis(20));
        end_locating(None);
        let waited = program.join().unwrap();
        assert!(
            waited > Duration::ZERO && waited < LOCATING_WAIT,
            "waited until the look ended, not to the bound: {waited:?}"
        );
        // A look that never ends holds the program back no longer than the bound.
        start_locating();
        let waited = enter_program_call().1;
        end_locating(None);
        assert!(waited >= LOCATING_WAIT, "waited {waited:?}");
        assert_eq!(
            PROGRAM_CALLS.load(Ordering::SeqCst),
            0,
            "every call left CUPTI"
        );
    }

    #[test]
    fn the_probe_waits_for_a_flush_of_the_programs_already_inside_cupti() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        assert_eq!(
            hold_off_program_calls(),
            Duration::ZERO,
            "no call inside CUPTI"
        );
        start_locating();
        end_locating(None);
        // The program's flush entered CUPTI before the probe began, and returns 30 ms later.
        let (inside, waited) = enter_program_call();
        assert_eq!(waited, Duration::ZERO);
        let flushing = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(30));
            drop(inside);
        });
        let held_off = hold_off_program_calls();
        assert!(
            held_off >= Duration::from_millis(20) && held_off < PROGRAM_CALL_WAIT,
            "the probe waited for the flush to return, not to the bound: {held_off:?}"
        );
        flushing.join().unwrap();
        // Between that wait and the locate, a new call of the program's waits too (for the look to end).
        // The program's thread runs before the probe's start ends (on a busy machine a thread spawned alone may
        // start only after it, and then wait for the look alone).
        let program = program_call_on_a_running_thread();
        std::thread::sleep(Duration::from_millis(20));
        assert!(
            !program.is_finished(),
            "the program's call waits while the probe starts"
        );
        start_locating();
        std::thread::sleep(Duration::from_millis(5));
        end_locating(None);
        let waited = program.join().unwrap();
        assert!(
            waited > Duration::ZERO && waited < LOCATING_WAIT,
            "the program's call waited through the probe's start and its look, not to the bound: {waited:?}"
        );
        // A call that never returns holds the probe back no longer than its bound.
        let (stuck, _) = enter_program_call();
        let held_off = hold_off_program_calls();
        start_locating();
        end_locating(None);
        drop(stuck);
        assert!(held_off >= PROGRAM_CALL_WAIT, "held off {held_off:?}");
        assert_eq!(
            PROGRAM_CALLS.load(Ordering::SeqCst),
            0,
            "every call left CUPTI"
        );
    }

    /// The wheel's real CUPTI 13.0, loaded for the process's life, and its functions; `None` (said, and a failure in
    /// CI) where the wheel's folder is not given.
    fn wheel_cupti() -> Option<(std::path::PathBuf, super::super::Real)> {
        let Some(dir) = std::env::var_os("GPU_TOOLS_CUPTI_WHEEL_LIB") else {
            gpu_tools_testing::skip_unless_ci(
                "GPU_TOOLS_CUPTI_WHEEL_LIB (the nvidia-cuda-cupti wheel's library folder) is not set",
            );
            return None;
        };
        let path = std::fs::canonicalize(Path::new(&dir).join("libcupti.so.13"))
            .expect("the wheel's libcupti.so.13");
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: a NUL-terminated path of a real CUPTI library; the handle is kept for the process's life.
        let handle = unsafe { libc::dlopen(c_path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        assert!(!handle.is_null(), "the wheel's CUPTI loads");
        let real = super::super::real_in(&path).expect("CUPTI's functions");
        Some((path, real))
    }

    /// With the real CUPTI of the wheel (no driver needed to register callbacks): the callbacks a program
    /// registered are found, and registering them again puts them back where they were.
    #[test]
    fn the_programs_callbacks_are_found_in_the_real_cupti() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some((path, real)) = wheel_cupti() else {
            return;
        };
        // The program's callbacks stand for code of another object than this one (a test's own functions are in the
        // same object as the probe, which takes them for its own tracer's): two functions of the C library, never
        // called here (no kind is enabled, and there is no driver).
        let program_request = libc::malloc as *const () as usize;
        let program_complete = libc::free as *const () as usize;
        // SAFETY: CUPTI only stores the two addresses; it would call them only for records, and none are made.
        let code = unsafe {
            (real.register_callbacks)(
                std::mem::transmute::<usize, sys::CUpti_BuffersCallbackRequestFunc>(
                    program_request,
                ),
                std::mem::transmute::<usize, sys::CUpti_BuffersCallbackCompleteFunc>(
                    program_complete,
                ),
            )
        };
        assert_eq!(code, sys::CUPTI_SUCCESS);

        let found = probe(&real, &path, Duration::from_millis(10))
            .expect("the callbacks are found")
            .expect("the program's callbacks were registered");
        assert_eq!(found.request as usize, program_request);
        assert_eq!(found.complete as usize, program_complete);
        assert_eq!((found.kinds, found.asked), (0, false), "nothing recorded");

        // CUPTI holds the probe's pair now; the program's goes back where it was.
        let maps = Process::current().maps().unwrap();
        let ranges = writable_ranges(&maps, &path);
        let now = snapshot(&ranges);
        let probe_pair = (
            probe_request as *const () as usize,
            probe_complete as *const () as usize,
        );
        assert!(matches!(
            locate(&now, &now, probe_pair),
            Located::Before(..)
        ));
        // SAFETY: as above.
        let code = unsafe { (real.register_callbacks)(Some(found.request), Some(found.complete)) };
        assert_eq!(code, sys::CUPTI_SUCCESS);
        let now = snapshot(&ranges);
        let program_pair = (program_request, program_complete);
        assert_eq!(
            locate(&now, &now, program_pair),
            Located::Before(program_pair.0, program_pair.1)
        );
    }

    fn words(w: &[usize]) -> Vec<u8> {
        w.iter().flat_map(|v| v.to_ne_bytes()).collect()
    }

    #[test]
    fn this_librarys_own_functions_are_told_from_anothers() {
        assert!(in_this_library(probe_request as *const () as usize));
        assert!(in_this_library(hand_to_program as *const () as usize));
        assert!(!in_this_library(libc::getpid as *const () as usize));
        assert!(!in_this_library(0));
    }

    #[test]
    fn the_pair_is_found_where_it_replaced_the_old_one() {
        let before = vec![words(&[1, 2, 0x100, 0x200, 5]), words(&[9, 9])];
        let now = vec![words(&[1, 2, 0xaa, 0xbb, 5]), words(&[9, 9])];
        assert_eq!(
            locate(&before, &now, (0xaa, 0xbb)),
            Located::Before(0x100, 0x200)
        );
        // Nothing registered before: zeros.
        let before = vec![words(&[0, 0, 7])];
        let now = vec![words(&[0xaa, 0xbb, 7])];
        assert_eq!(locate(&before, &now, (0xaa, 0xbb)), Located::Before(0, 0));
    }

    #[test]
    fn a_pair_found_nowhere_or_twice_is_said() {
        let before = vec![words(&[1, 2, 3, 4])];
        assert_eq!(
            locate(&before, &before.clone(), (0xaa, 0xbb)),
            Located::Nowhere
        );
        // Only side by side, in order.
        let now = vec![words(&[0xbb, 0xaa, 3, 4])];
        assert_eq!(locate(&before, &now, (0xaa, 0xbb)), Located::Nowhere);
        let now = vec![words(&[0xaa, 0xbb, 0xaa, 0xbb])];
        assert_eq!(locate(&before, &now, (0xaa, 0xbb)), Located::Several(2));
    }

    /// `profile --pid`'s question with the real CUPTI of the wheel: a program that registered callbacks and records
    /// nothing is found idle, and CUPTI holds the program's pair again afterwards (no probe left in its place).
    #[test]
    fn profile_asks_what_the_programs_profiler_does_and_leaves_its_callbacks() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let Some((path, real)) = wheel_cupti() else {
            return;
        };
        // Two functions of the C library stand for the program's pair (never called: no kind is enabled).
        let program_pair = (
            libc::calloc as *const () as usize,
            libc::realloc as *const () as usize,
        );
        // SAFETY: CUPTI only stores the two addresses; it would call them only for records, and none are made.
        let code = unsafe {
            (real.register_callbacks)(
                std::mem::transmute::<usize, sys::CUpti_BuffersCallbackRequestFunc>(program_pair.0),
                std::mem::transmute::<usize, sys::CUpti_BuffersCallbackCompleteFunc>(
                    program_pair.1,
                ),
            )
        };
        assert_eq!(code, sys::CUPTI_SUCCESS);
        let answer = super::super::program_profiler_now().expect("the program's profiler is found");
        assert_eq!(answer, super::super::ProgramProfiler::Idle { asked: false });
        let maps = Process::current().maps().unwrap();
        let now = snapshot(&writable_ranges(&maps, &path));
        assert_eq!(
            locate(&now, &now, program_pair),
            Located::Before(program_pair.0, program_pair.1),
            "CUPTI holds the program's pair again"
        );
    }
}
