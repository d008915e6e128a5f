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
        let (Some((m0, p0)), Some((m1, p1))) = (self.first, self.latest) else {
            return t;
        };
        // Nanosecond clocks run at one tick a nanosecond; a counter's rate comes from the two readings, once
        // they are far enough apart to give it.
        let rate = match self.clock {
            ProgramClock::Realtime | ProgramClock::Monotonic => 1.0,
            _ if m1.saturating_sub(m0) >= 1_000_000 => (p1 as f64 - p0 as f64) / (m1 - m0) as f64,
            _ => return t,
        };
        let delta = t as i128 - m1 as i128;
        let mapped = p1 as f64 + delta as f64 * rate;
        if mapped <= 0.0 { 0 } else { mapped as u64 }
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
