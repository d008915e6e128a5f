//! The program's clock, for the timestamps of its copies.
//!
//! CUPTI has one timestamp source per process. The trace registers its own (`CLOCK_MONOTONIC`) and keeps it while
//! it runs: a program's profiler that registers another (Kineto registers the CPU's time-stamp counter) would
//! otherwise switch the trace's clock in the middle of it. The program expects its records on its own clock, so
//! the timestamps of its copies are converted: a linear map from the trace's clock to the program's, from two
//! readings of both (the first one and the latest, taken at every hand-over, so that the map follows drift).
//!
//! Which clock the program expects: the callback it registered during the session; before that, the one CUPTI
//! used when the session began, read with `cuptiGetTimestamp` before the trace registered its own and recognised
//! as CUPTI's default (`CLOCK_REALTIME`), the time-stamp counter, or `CLOCK_MONOTONIC`. At the end of the session
//! the program's source goes back to CUPTI: its callback, or one that reads the recognised clock.

use std::time::Duration;

use gpu_tools::cupti::activity::Clock;
use gpu_tools::sys::cupti as sys;

use super::NextRecordFn;

/// A timestamp callback as CUPTI takes it.
pub type TimestampFn = unsafe extern "C" fn() -> u64;

/// The clock a program's records are on.
#[derive(Debug, Clone, Copy)]
pub enum ProgramClock {
    /// CUPTI's default on Linux.
    Realtime,
    /// The CPU's time-stamp counter.
    Tsc,
    /// `CLOCK_MONOTONIC` (a tool registered it before the session: the program sees what that tool set).
    Monotonic,
    /// The program's own callback.
    Callback(TimestampFn),
    /// Not one of the above: its copies keep the trace's clock.
    Unknown,
}

/// The trace's clock.
pub fn monotonic_ns() -> u64 {
    Clock::Monotonic.now_ns()
}

/// CUPTI's default clock on Linux.
fn realtime_ns() -> u64 {
    Clock::Realtime.now_ns()
}

fn tsc() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC has no preconditions on x86-64.
        unsafe { core::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        monotonic_ns()
    }
}

/// Timestamp callbacks that give a recognised clock back to CUPTI at the end of a session.
pub unsafe extern "C" fn realtime_source() -> u64 {
    realtime_ns()
}

pub unsafe extern "C" fn tsc_source() -> u64 {
    tsc()
}

pub unsafe extern "C" fn monotonic_source() -> u64 {
    monotonic_ns()
}

impl ProgramClock {
    /// Now, on this clock.
    fn now(self) -> Option<u64> {
        match self {
            ProgramClock::Realtime => Some(realtime_ns()),
            ProgramClock::Tsc => Some(tsc()),
            ProgramClock::Monotonic => Some(monotonic_ns()),
            // SAFETY: the program's timestamp callback, which CUPTI would call from any thread.
            ProgramClock::Callback(f) => Some(unsafe { f() }),
            ProgramClock::Unknown => None,
        }
    }

    /// Recognises the clock of `cupti_now`, a `cuptiGetTimestamp` reading taken just now.
    pub fn recognise(cupti_now: u64) -> ProgramClock {
        let near = |a: u64, b: u64, within: u64| a.abs_diff(b) <= within;
        let second = Duration::from_secs(1).as_nanos() as u64;
        if near(cupti_now, realtime_ns(), second) {
            ProgramClock::Realtime
        } else if near(cupti_now, monotonic_ns(), second) {
            ProgramClock::Monotonic
        } else {
            // Counter ticks: within a second's worth at any rate up to 10 GHz.
            let t = tsc();
            if near(cupti_now, t, 10 * second) {
                ProgramClock::Tsc
            } else {
                ProgramClock::Unknown
            }
        }
    }

    /// The callback that puts this clock back in CUPTI.
    pub fn source(self) -> Option<TimestampFn> {
        match self {
            ProgramClock::Realtime => Some(realtime_source),
            ProgramClock::Tsc => Some(tsc_source),
            ProgramClock::Monotonic => Some(monotonic_source),
            ProgramClock::Callback(f) => Some(f),
            ProgramClock::Unknown => None,
        }
    }
}

/// The map from the trace's clock to the program's.
#[derive(Debug, Clone, Copy)]
pub struct ClockMap {
    clock: ProgramClock,
    first: Option<(u64, u64)>,
    latest: Option<(u64, u64)>,
}

impl ClockMap {
    pub fn new(clock: ProgramClock) -> Self {
        let mut map = ClockMap {
            clock,
            first: None,
            latest: None,
        };
        map.read();
        map
    }

    /// Reads both clocks (the program's between two readings of the trace's).
    pub fn read(&mut self) {
        let before = monotonic_ns();
        let Some(theirs) = self.clock.now() else {
            return;
        };
        let after = monotonic_ns();
        let pair = (before + (after - before) / 2, theirs);
        self.first.get_or_insert(pair);
        self.latest = Some(pair);
    }

    /// `t` (the trace's clock) on the program's clock; unchanged where the program's is unknown.
    pub fn convert(&self, t: u64) -> u64 {
        self.map(t, true)
    }

    /// `t` (the program's clock) on the trace's: [`convert`](Self::convert) the other way; unchanged where no
    /// conversion applies.
    pub fn on_trace_clock(&self, t: u64) -> u64 {
        self.map(t, false)
    }

    /// `t` from one clock to the other (`to_program`: from the trace's), through the first and latest readings.
    fn map(&self, t: u64, to_program: bool) -> u64 {
        let (Some(first), Some(latest)) = (self.first, self.latest) else {
            return t;
        };
        // The readings as (from, to), in the direction asked.
        let orient = |(m, p): (u64, u64)| if to_program { (m, p) } else { (p, m) };
        let ((from0, to0), (from1, to1)) = (orient(first), orient(latest));
        // Nanosecond clocks run at one tick a nanosecond; a counter's rate comes from the two readings, once
        // they are far enough apart (on the trace's clock) to give it.
        let rate = match self.clock {
            // Whole nanoseconds: an f64 of CLOCK_REALTIME's size keeps only 256 ns steps.
            ProgramClock::Realtime | ProgramClock::Monotonic => {
                let mapped = to1 as i128 + (t as i128 - from1 as i128);
                return u64::try_from(mapped.max(0)).unwrap_or(u64::MAX);
            }
            _ if latest.0.saturating_sub(first.0) >= 1_000_000 && from1 != from0 => {
                (to1 as f64 - to0 as f64) / (from1 as f64 - from0 as f64)
            }
            _ => return t,
        };
        let delta = t as i128 - from1 as i128;
        let mapped = to1 as f64 + delta as f64 * rate;
        if mapped <= 0.0 { 0 } else { mapped as u64 }
    }

    /// Now on the program's clock, where it is known.
    pub fn program_now(&self) -> Option<u64> {
        self.clock.now()
    }

    /// Whether a conversion applies (the program's clock is known and, for a counter, its rate too).
    pub fn converts(&self) -> bool {
        match (self.clock, self.first, self.latest) {
            (ProgramClock::Unknown, ..) => false,
            (ProgramClock::Realtime | ProgramClock::Monotonic, Some(_), Some(_)) => true,
            (_, Some((m0, _)), Some((m1, _))) => m1.saturating_sub(m0) >= 1_000_000,
            _ => false,
        }
    }
}

/// Where the timestamps of a record of `kind` lie (CUPTI 13.0's structures; the earlier ones of 12.x have
/// them at the same offsets).
pub fn timestamp_offsets(kind: u32) -> &'static [usize] {
    use std::mem::offset_of;
    const KERNEL: [usize; 5] = [
        offset_of!(sys::CUpti_ActivityKernel10, start),
        offset_of!(sys::CUpti_ActivityKernel10, end),
        offset_of!(sys::CUpti_ActivityKernel10, completed),
        offset_of!(sys::CUpti_ActivityKernel10, queued),
        offset_of!(sys::CUpti_ActivityKernel10, submitted),
    ];
    const API: [usize; 2] = [
        offset_of!(sys::CUpti_ActivityAPI, start),
        offset_of!(sys::CUpti_ActivityAPI, end),
    ];
    const MEMCPY: [usize; 2] = [
        offset_of!(sys::CUpti_ActivityMemcpy6, start),
        offset_of!(sys::CUpti_ActivityMemcpy6, end),
    ];
    const PEER: [usize; 2] = [
        offset_of!(sys::CUpti_ActivityMemcpyPtoP4, start),
        offset_of!(sys::CUpti_ActivityMemcpyPtoP4, end),
    ];
    const MEMSET: [usize; 2] = [
        offset_of!(sys::CUpti_ActivityMemset4, start),
        offset_of!(sys::CUpti_ActivityMemset4, end),
    ];
    const SYNC: [usize; 2] = [
        offset_of!(sys::CUpti_ActivitySynchronization2, start),
        offset_of!(sys::CUpti_ActivitySynchronization2, end),
    ];
    const OVERHEAD: [usize; 2] = [
        offset_of!(sys::CUpti_ActivityOverhead3, start),
        offset_of!(sys::CUpti_ActivityOverhead3, end),
    ];
    match kind {
        sys::CUPTI_ACTIVITY_KIND_KERNEL | sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => &KERNEL,
        sys::CUPTI_ACTIVITY_KIND_RUNTIME
        | sys::CUPTI_ACTIVITY_KIND_DRIVER
        | sys::CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API => &API,
        sys::CUPTI_ACTIVITY_KIND_MEMCPY => &MEMCPY,
        sys::CUPTI_ACTIVITY_KIND_MEMCPY2 => &PEER,
        sys::CUPTI_ACTIVITY_KIND_MEMSET => &MEMSET,
        sys::CUPTI_ACTIVITY_KIND_SYNCHRONIZATION => &SYNC,
        sys::CUPTI_ACTIVITY_KIND_OVERHEAD => &OVERHEAD,
        _ => &[],
    }
}

/// How far apart the two clocks' present times must be, against the age of the records, for a timestamp to say
/// which clock it is on (see [`ClockMap::stamped_by_trace`]).
const APART: u64 = 4;

impl ClockMap {
    /// Whether `t`, a timestamp made since the map's first reading (less a second, for kernels that began before
    /// and ended after), is on the trace's clock rather than the program's: nearer the trace's present than the
    /// program's. `None` where the two presents are too close for that to be told (a clock that runs near the
    /// trace's, such as `CLOCK_MONOTONIC` itself, whose records need no change anyway).
    pub fn stamped_by_trace(&self, t: u64, now: u64) -> Option<bool> {
        let (m0, _) = self.first?;
        let age = now.saturating_sub(m0) + 1_000_000_000;
        let theirs = self.convert(now);
        if theirs.abs_diff(now) <= APART.saturating_mul(age) {
            return None;
        }
        Some(t.abs_diff(now) < t.abs_diff(theirs))
    }
}

/// CUPTI's walk of a buffer: where each record lies (offset, length) and its kind; a record runs to the next one,
/// the last to the end of the valid bytes.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub(super) unsafe fn record_spans(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
) -> Vec<(usize, usize, u32)> {
    let mut starts = Vec::new();
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: CUPTI's own walk of a buffer of `valid` bytes of its records.
    while unsafe { next(buffer, valid, &mut record) } == sys::CUPTI_SUCCESS && !record.is_null() {
        // SAFETY: a record CUPTI returned, which starts with its 32-bit kind.
        let kind = unsafe { (*record).kind };
        starts.push(((record as usize).saturating_sub(buffer as usize), kind));
    }
    let mut spans = Vec::with_capacity(starts.len());
    for (i, &(at, kind)) in starts.iter().enumerate() {
        let end = starts.get(i + 1).map_or(valid, |&(n, _)| n).min(valid);
        if end > at {
            spans.push((at, end - at, kind));
        }
    }
    spans
}

/// The start of a record of `kind` (its first timestamp), where it has one and `bytes` hold it.
pub(super) fn start_of(bytes: &[u8], kind: u32) -> Option<u64> {
    let at = *timestamp_offsets(kind).first()?;
    let field = bytes.get(at..at.checked_add(8)?)?;
    let mut word = [0u8; 8];
    word.copy_from_slice(field);
    Some(u64::from_ne_bytes(word))
}

/// The records of `buffer` made on the trace's clock (where the two clocks cannot be told apart, every record:
/// then they are one clock), as (offset, length), by CUPTI's own walk; records of kinds with no timestamp are left
/// out.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub unsafe fn trace_stamped_spans(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    map: &ClockMap,
) -> Vec<(usize, usize)> {
    let now = monotonic_ns();
    // SAFETY: the caller's promise.
    let spans = unsafe { record_spans(buffer, valid, next) };
    let mut out = Vec::new();
    for (at, len, kind) in spans {
        // SAFETY: the record's `len` bytes lie inside the buffer's valid bytes (CUPTI's walk).
        let bytes = unsafe { std::slice::from_raw_parts(buffer.add(at), len) };
        let Some(t) = start_of(bytes, kind) else {
            continue;
        };
        if t == 0 || t == u64::MAX {
            continue;
        }
        if !map.converts() || map.stamped_by_trace(t, now) != Some(false) {
            out.push((at, len));
        }
    }
    out
}

impl ClockMap {
    /// Whether `t`, a record's start, was stamped before the trace's clock went in: on the program's clock where
    /// the two are told apart, before the map's first reading where they run as one (`CLOCK_MONOTONIC`); never where
    /// the program's clock is unknown.
    pub fn stamped_before_trace(&self, t: u64, now: u64) -> bool {
        match self.stamped_by_trace(t, now) {
            Some(by_trace) => !by_trace,
            None => self.converts() && self.first.is_some_and(|(m0, _)| t < m0),
        }
    }
}

/// The kinds of the records in `buffer`, and the kinds of those whose start `keep` accepts (a record with no start,
/// or one CUPTI left unset, is left out of the second), by CUPTI's own walk.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub(super) unsafe fn kinds_of(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    keep: impl Fn(u64) -> bool,
) -> (u64, u64) {
    if buffer.is_null() {
        return (0, 0);
    }
    let (mut all, mut kept) = (0u64, 0u64);
    // SAFETY: the caller's promise.
    for (at, len, kind) in unsafe { record_spans(buffer, valid, next) } {
        all |= super::bit(kind);
        // SAFETY: the record's `len` bytes lie inside the buffer's valid bytes (CUPTI's walk).
        let bytes = unsafe { std::slice::from_raw_parts(buffer.add(at), len) };
        if start_of(bytes, kind).is_some_and(|t| t != 0 && t != u64::MAX && keep(t)) {
            kept |= super::bit(kind);
        }
    }
    (all, kept)
}

/// The kinds of the records in `buffer` that started at `since` (the program's clock) or later and were stamped
/// before the trace's clock went in ([`ClockMap::stamped_before_trace`]): CUPTI made them before the trace enabled
/// any kind (the clock goes in first), so they are kinds the profiler whose buffer this is had on since then.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub unsafe fn kinds_stamped_before_trace(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    map: &ClockMap,
    since: u64,
) -> u64 {
    let now = monotonic_ns();
    // SAFETY: the caller's promise.
    let (_, kept) = unsafe {
        kinds_of(buffer, valid, next, |t| {
            t >= since && map.stamped_before_trace(t, now)
        })
    };
    kept
}

/// Puts the records of `buffer` that are on the trace's clock on the program's, in place; returns how many.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub unsafe fn convert_trace_stamped(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    map: &ClockMap,
) -> usize {
    if buffer.is_null() || !map.converts() {
        return 0;
    }
    let now = monotonic_ns();
    let mut converted = 0;
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: CUPTI's own walk of a buffer of `valid` bytes of its records.
    while unsafe { next(buffer, valid, &mut record) } == sys::CUPTI_SUCCESS && !record.is_null() {
        // SAFETY: a record CUPTI returned, which starts with its 32-bit kind.
        let kind = unsafe { (*record).kind };
        let offsets = timestamp_offsets(kind);
        let Some(&last) = offsets.iter().max() else {
            continue;
        };
        let start = (record as usize).saturating_sub(buffer as usize);
        let len = (last + 8).min(valid.saturating_sub(start));
        // SAFETY: the record lies in the buffer; `len` stops at the buffer's valid end.
        let bytes = unsafe { std::slice::from_raw_parts_mut(record.cast::<u8>(), len) };
        let Some(t) = start_of(bytes, kind) else {
            continue;
        };
        if t == 0 || t == u64::MAX {
            continue;
        }
        match map.stamped_by_trace(t, now) {
            Some(true) => {
                convert_record(bytes, kind, map);
                converted += 1;
            }
            Some(false) => {}
            None => return converted,
        }
    }
    converted
}

/// Converts the timestamps of one copied record in place; 0 and `u64::MAX` (not collected) stay.
pub fn convert_record(record: &mut [u8], kind: u32, map: &ClockMap) {
    for &at in timestamp_offsets(kind) {
        let Some(field) = record.get_mut(at..at + 8) else {
            continue;
        };
        let mut word = [0u8; 8];
        word.copy_from_slice(field);
        let t = u64::from_ne_bytes(word);
        if t == 0 || t == u64::MAX {
            continue;
        }
        field.copy_from_slice(&map.convert(t).to_ne_bytes());
    }
}

/// For the debug log: the starts of `buffer`'s records against both clocks' present (the first and last two, the
/// least and greatest), and how [`ClockMap::stamped_by_trace`] judges them.
///
/// # Safety
///
/// `buffer` holds `valid` bytes of CUPTI records, and `next` is CUPTI's `cuptiActivityGetNextRecord`.
pub unsafe fn describe_stamps(
    buffer: *mut u8,
    valid: usize,
    next: NextRecordFn,
    map: &ClockMap,
) -> String {
    let now = monotonic_ns();
    // SAFETY: the caller's promise.
    let spans = unsafe { record_spans(buffer, valid, next) };
    let mut starts = Vec::new();
    for (at, len, kind) in spans {
        // SAFETY: the record's `len` bytes lie inside the buffer's valid bytes (CUPTI's walk).
        let bytes = unsafe { std::slice::from_raw_parts(buffer.add(at), len) };
        if let Some(t) = start_of(bytes, kind).filter(|&t| t != 0 && t != u64::MAX) {
            starts.push((kind, t));
        }
    }
    let judged = |want: Option<bool>| {
        starts
            .iter()
            .filter(|&&(_, t)| map.stamped_by_trace(t, now) == want)
            .count()
    };
    let mut kinds: Vec<(u32, usize)> = Vec::new();
    for &(k, _) in &starts {
        match kinds.iter_mut().find(|(kind, _)| *kind == k) {
            Some((_, n)) => *n += 1,
            None => kinds.push((k, 1)),
        }
    }
    let kernels: Vec<u64> = starts
        .iter()
        .filter(|&&(k, _)| k == sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL)
        .map(|&(_, t)| t)
        .collect();
    let kernel_trace = kernels
        .iter()
        .filter(|&&t| map.stamped_by_trace(t, now) == Some(true))
        .count();
    let kernel_ends: Vec<String> = kernels
        .iter()
        .take(3)
        .chain(kernels.iter().rev().take(3).rev())
        .map(|t| t.to_string())
        .collect();
    let ends: Vec<String> = starts
        .iter()
        .take(2)
        .chain(starts.iter().rev().take(2).rev())
        .map(|(k, t)| format!("{k}:{t}"))
        .collect();
    format!(
        "{} stamped records [{}], least {:?} greatest {:?}; trace now {now}, program now {:?}, mapped {}; \
         map {:?}; judged trace {} program {} unknown {}; kinds {kinds:?}; kernels {} ({kernel_trace} on the \
         trace's clock) [{}]",
        starts.len(),
        ends.join(" "),
        starts.iter().map(|&(_, t)| t).min(),
        starts.iter().map(|&(_, t)| t).max(),
        map.program_now(),
        map.convert(now),
        map,
        judged(Some(true)),
        judged(Some(false)),
        judged(None),
        kernels.len(),
        kernel_ends.join(" "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const SECOND: u64 = 1_000_000_000;

    #[test]
    fn a_timestamp_says_its_clock_where_the_clocks_are_far_apart() {
        let map = ClockMap::new(ProgramClock::Realtime);
        let now = monotonic_ns();
        // A record made half a second ago on each clock.
        assert_eq!(map.stamped_by_trace(now - SECOND / 2, now), Some(true));
        assert_eq!(
            map.stamped_by_trace(realtime_ns() - SECOND / 2, now),
            Some(false)
        );
        // The trace's own clock: nothing can be told, and nothing needs changing.
        let same = ClockMap::new(ProgramClock::Monotonic);
        assert_eq!(same.stamped_by_trace(now, monotonic_ns()), None);
    }

    /// CUPTI's walk, for a buffer of API records laid end to end.
    unsafe extern "C" fn next_api(
        buffer: *mut u8,
        valid: usize,
        record: *mut *mut sys::CUpti_Activity,
    ) -> sys::CUptiResult {
        let size = std::mem::size_of::<sys::CUpti_ActivityAPI>();
        // SAFETY: the test's out-pointer and buffer.
        unsafe {
            let at = if (*record).is_null() {
                0
            } else {
                (*record as usize - buffer as usize) + size
            };
            if at + size > valid {
                return sys::CUPTI_ERROR_MAX_LIMIT_REACHED;
            }
            *record = buffer.add(at).cast();
        }
        sys::CUPTI_SUCCESS
    }

    #[test]
    fn only_the_records_on_the_traces_clock_are_converted() {
        let mut map = ClockMap::new(ProgramClock::Realtime);
        map.read();
        let api = |start: u64| sys::CUpti_ActivityAPI {
            kind: sys::CUPTI_ACTIVITY_KIND_RUNTIME,
            start,
            end: start + 1000,
            // SAFETY: a plain C structure, all zeros valid.
            ..unsafe { std::mem::zeroed() }
        };
        let on_program = realtime_ns() - SECOND;
        let on_trace = monotonic_ns() - SECOND / 4;
        let mut records = [api(on_program), api(on_trace)];
        let valid = std::mem::size_of_val(&records);
        // SAFETY: two whole API records, walked by `next_api`.
        let n =
            unsafe { convert_trace_stamped(records.as_mut_ptr().cast(), valid, next_api, &map) };
        assert_eq!(n, 1);
        assert_eq!(records[0].start, on_program, "the program's record stays");
        let converted = records[1].start;
        assert!(
            converted.abs_diff(realtime_ns() - SECOND / 4) < SECOND / 10,
            "the trace's record is put on the program's clock: {converted}"
        );
        assert_eq!(records[1].end - records[1].start, 1000);
    }

    #[test]
    fn the_kinds_stamped_before_the_traces_clock_since_a_moment_are_the_programs() {
        let api = |kind: u32, start: u64| sys::CUpti_ActivityAPI {
            kind,
            start,
            end: start + 1000,
            // SAFETY: a plain C structure, all zeros valid.
            ..unsafe { std::mem::zeroed() }
        };
        let bits = |kinds: &[u32]| kinds.iter().fold(0u64, |a, &k| a | (1u64 << k));
        let (old, theirs, trace) = (
            sys::CUPTI_ACTIVITY_KIND_INTERNAL_LAUNCH_API,
            sys::CUPTI_ACTIVITY_KIND_RUNTIME,
            sys::CUPTI_ACTIVITY_KIND_DRIVER,
        );
        // The program on CLOCK_REALTIME: its runtime record since the moment is of its kind; the driver record on
        // the trace's clock is the trace's (the kind the trace enabled); the one from before the moment may be of a
        // session that ended.
        let map = ClockMap::new(ProgramClock::Realtime);
        let since = realtime_ns() - 2 * SECOND;
        let mut records = [
            api(theirs, realtime_ns() - SECOND),
            api(trace, monotonic_ns() - SECOND / 4),
            api(old, realtime_ns() - 3 * SECOND),
        ];
        let valid = std::mem::size_of_val(&records);
        // SAFETY: three whole API records, walked by `next_api`.
        let kinds = unsafe {
            kinds_stamped_before_trace(records.as_mut_ptr().cast(), valid, next_api, &map, since)
        };
        assert_eq!(kinds, bits(&[theirs]));
        // The program on the trace's own clock: a record from before the map's first reading is its, one since is
        // not known to be.
        let map = ClockMap::new(ProgramClock::Monotonic);
        let since = monotonic_ns() - 2 * SECOND;
        let mut records = [
            api(theirs, monotonic_ns() - SECOND),
            api(trace, monotonic_ns() + SECOND),
            api(old, monotonic_ns() - 3 * SECOND),
        ];
        // SAFETY: as above.
        let kinds = unsafe {
            kinds_stamped_before_trace(records.as_mut_ptr().cast(), valid, next_api, &map, since)
        };
        assert_eq!(kinds, bits(&[theirs]));
        // A clock that cannot be read: nothing is known.
        let map = ClockMap::new(ProgramClock::Unknown);
        // SAFETY: as above.
        let kinds = unsafe {
            kinds_stamped_before_trace(records.as_mut_ptr().cast(), valid, next_api, &map, 0)
        };
        assert_eq!(kinds, 0);
    }
}
