//! The clock of every timestamp in activity records.
//!
//! CUPTI reads `CLOCK_REALTIME` by default on Linux and maps GPU timestamps onto it by linear interpolation. The
//! tracer registers a timestamp callback (`cuptiActivityRegisterTimestampCallback`) before it enables any kind, so
//! that CPU timestamps, and GPU ones through CUPTI's interpolation, are read from the clock the tracer was built
//! with. The callback stays registered for the process (CUPTI cannot unregister it); which clock it reads is a
//! process-wide setting that each tracer sets when it starts.

use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};

/// The clock timestamps are on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Clock {
    /// `CLOCK_MONOTONIC` nanoseconds: the clock `std::time::Instant` reads on Linux. Immune to the wall clock
    /// being set; comparable with [`Clock::now_ns`] and with other processes on the same machine.
    #[default]
    Monotonic,
    /// `CLOCK_REALTIME` nanoseconds since the Unix epoch: CUPTI's own default on Linux.
    Realtime,
}

impl Clock {
    /// The clock's current time in nanoseconds.
    pub fn now_ns(self) -> u64 {
        let id = match self {
            Clock::Monotonic => libc::CLOCK_MONOTONIC,
            Clock::Realtime => libc::CLOCK_REALTIME,
        };
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid clock id and out-pointer; clock_gettime writes the struct and nothing else.
        if unsafe { libc::clock_gettime(id, &mut ts) } != 0 {
            return 0;
        }
        let secs = u64::try_from(ts.tv_sec).unwrap_or(0);
        let nanos = u64::try_from(ts.tv_nsec).unwrap_or(0);
        secs.saturating_mul(1_000_000_000).saturating_add(nanos)
    }
}

/// The clock the registered callback reads: 0 monotonic, 1 realtime.
static CURRENT: AtomicU8 = AtomicU8::new(0);

pub(crate) fn set_current(clock: Clock) {
    CURRENT.store(
        match clock {
            Clock::Monotonic => 0,
            Clock::Realtime => 1,
        },
        Ordering::Release,
    );
}

/// Whether the callback counts its calls, and how many it counted.
static COUNTING: AtomicBool = AtomicBool::new(false);
static CALLS: AtomicU64 = AtomicU64::new(0);

/// Counts the timestamp callback's calls from now on, for the rest of the process: a diagnosis of where a traced
/// launch's time goes (CUPTI calls the callback on the program's threads as well as its own, and each call reads
/// the clock: a system call where the kernel's clock source has no vDSO read). Off unless asked: the count is a
/// shared atomic add at each call.
pub fn count_timestamp_calls() {
    COUNTING.store(true, Ordering::Relaxed);
}

/// The timestamp callback's calls since [`count_timestamp_calls`]; `None` when counting was never asked for.
pub fn timestamp_calls() -> Option<u64> {
    COUNTING
        .load(Ordering::Relaxed)
        .then(|| CALLS.load(Ordering::Relaxed))
}

/// The timestamp callback given to CUPTI; called on any thread, also inside CUPTI's post-processing. It cannot
/// panic.
pub(crate) unsafe extern "C" fn timestamp_callback() -> u64 {
    if COUNTING.load(Ordering::Relaxed) {
        CALLS.fetch_add(1, Ordering::Relaxed);
    }
    let clock = if CURRENT.load(Ordering::Acquire) == 0 {
        Clock::Monotonic
    } else {
        Clock::Realtime
    };
    clock.now_ns()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_callback_counts_its_calls_once_asked() {
        // Other tests may call the callback meanwhile: the count only grows, by at least this test's calls.
        count_timestamp_calls();
        let before = timestamp_calls().unwrap_or(0);
        for _ in 0..3 {
            // SAFETY: the callback takes nothing and only reads a clock.
            let _ = unsafe { timestamp_callback() };
        }
        let after = timestamp_calls().unwrap_or(0);
        assert!(after >= before + 3, "{before} then {after}");
    }

    #[test]
    fn monotonic_is_the_clock_of_instant() {
        // Instant is opaque, but its differences come from CLOCK_MONOTONIC on Linux: the two advance together.
        let (a, i) = (Clock::Monotonic.now_ns(), std::time::Instant::now());
        std::thread::sleep(std::time::Duration::from_millis(20));
        let (b, e) = (Clock::Monotonic.now_ns(), i.elapsed());
        let diff = (b - a) as i128 - e.as_nanos() as i128;
        assert!(
            diff.abs() < 5_000_000,
            "monotonic {} ns, Instant {e:?}",
            b - a
        );
        // Realtime is seconds since 1970: far larger than the time since boot.
        assert!(Clock::Realtime.now_ns() > 1_600_000_000 * 1_000_000_000);
        set_current(Clock::Realtime);
        // SAFETY: the callback only reads a clock.
        let r = unsafe { timestamp_callback() };
        set_current(Clock::Monotonic);
        // SAFETY: as above.
        let m = unsafe { timestamp_callback() };
        assert!(r > m, "realtime {r} monotonic {m}");
    }
}
