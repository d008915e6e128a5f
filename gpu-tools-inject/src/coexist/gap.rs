//! The moments between the program's profiler sessions, where an attached window starts and stops.
//!
//! A profiler on a `schedule` (torch.profiler's, as training frameworks run it) ends a session every few steps: it
//! disables its kinds and forces a flush, and some tens of milliseconds later registers its callbacks and enables
//! them again. The attach makes a forced flush as its tracer starts (CUPTI loses the records it has not written out
//! when a tracer registers), and its stop, when the program's kinds stay enabled, forces the buffers CUPTI holds back
//! when no moment without running kernels comes within 50 ms. Either, made inside a session, hands the profiler the
//! records of the kernels running then without a start or an end, which CUPTI never completes: on an H200 such
//! torch.profiler cycles kept 94 of their 141 kernels, and one of a longer session 1,598 of 2,350. Made in the gap
//! after a session's end, they touch nothing of the profiler's: its kinds are off, its last records flushed. So a
//! window beside such a profiler starts and stops in that gap, waiting for the program's next session end for at
//! most twice the time between its last two (a second at most).

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The program's session ends seen (forced flushes of its own made while none of its kinds was enabled).
#[derive(Debug, Default, Clone, Copy)]
struct Ends {
    count: u64,
    last: Option<Instant>,
    before_last: Option<Instant>,
    /// `count` when a wait for a recording profiler with no end seen ran to its cap: a session open across that
    /// wait (torch.profiler's around a whole run) is not waited for again until one of its sessions is seen to end.
    open_at: Option<u64>,
}

static ENDS: Mutex<Ends> = Mutex::new(Ends {
    count: 0,
    last: None,
    before_last: None,
    open_at: None,
});

fn ends() -> std::sync::MutexGuard<'static, Ends> {
    ENDS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The most a window waits for the gap.
pub(super) const GAP_WAIT_CAP: Duration = Duration::from_secs(1);
/// Session ends further apart than this are not a schedule: a window does not wait for the next.
const CYCLING_WITHIN: Duration = Duration::from_secs(2);
/// How often the wait looks.
const POLL: Duration = Duration::from_micros(200);

/// The program's forced flush returned with none of its kinds enabled: its session ended.
pub(super) fn session_ended() {
    let mut e = ends();
    e.count += 1;
    e.before_last = e.last;
    e.last = Some(Instant::now());
}

/// How [`wait_for_gap`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gap {
    /// The program's profiler does not end sessions on a schedule (none ended in the last 2 s): no wait.
    NotCycling,
    /// Its next session ended after this wait.
    Found(Duration),
    /// None ended within the bound.
    Missed(Duration),
    /// Its profiler records, no session end of it was seen since an earlier wait ran to the cap: a session open
    /// across windows, not waited for again.
    StillOpen,
}

/// Waits for the program's next session end when its profiler ends sessions on a schedule: for at most twice the
/// time between its last two ends (`cap` where only one was seen), and never more than `cap`. `recording`: the
/// program's profiler records now (found by the attach's probe) though no session end of it was seen lately, as
/// at a window's start in a process whose library has not watched that profiler before (the matrix's
/// profiler-schedule row: a cycle of 0 kernels at such a start): its session's end is waited for, up to `cap`, once
/// until one is seen (a session open across the whole run, as the matrix's profiler-open row keeps, would otherwise
/// hold every window's start back by `cap`).
pub(super) fn wait_for_gap(cap: Duration, recording: bool) -> Gap {
    let Ends {
        count,
        last,
        before_last,
        open_at,
    } = *ends();
    let now = Instant::now();
    let bound = match last.filter(|&l| now.duration_since(l) <= CYCLING_WITHIN) {
        Some(last) => before_last
            .map(|b| last.duration_since(b).saturating_mul(2))
            .map_or(cap, |twice| twice.min(cap)),
        None if recording && open_at == Some(count) => return Gap::StillOpen,
        None if recording => cap,
        None => return Gap::NotCycling,
    };
    let open = last.is_none_or(|l| now.duration_since(l) > CYCLING_WITHIN);
    loop {
        let waited = now.elapsed();
        if ends().count > count {
            return Gap::Found(waited);
        }
        if waited >= bound {
            if open {
                ends().open_at = Some(count);
            }
            return Gap::Missed(waited);
        }
        std::thread::sleep(POLL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests share [`ENDS`].
    static SERIAL: Mutex<()> = Mutex::new(());

    fn reset() {
        *ends() = Ends::default();
    }

    #[test]
    fn no_session_end_seen_lately_is_no_schedule_and_no_wait() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        reset();
        assert_eq!(wait_for_gap(GAP_WAIT_CAP, false), Gap::NotCycling);
        ends().last = Instant::now().checked_sub(Duration::from_secs(3));
        ends().count = 1;
        assert_eq!(wait_for_gap(GAP_WAIT_CAP, false), Gap::NotCycling);
    }

    #[test]
    fn the_wait_ends_at_the_next_session_end_or_at_twice_the_last_interval() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        reset();
        session_ended();
        std::thread::sleep(Duration::from_millis(20));
        session_ended();
        // Ends 20 ms apart and none comes: the wait gives up after about 40 ms.
        match wait_for_gap(GAP_WAIT_CAP, false) {
            Gap::Missed(w) => assert!(
                w >= Duration::from_millis(40) && w < Duration::from_millis(500),
                "{w:?}"
            ),
            other => panic!("{other:?}"),
        }
        // One comes 10 ms into the wait: found then.
        let ender = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(10));
            session_ended();
        });
        match wait_for_gap(GAP_WAIT_CAP, false) {
            Gap::Found(w) => assert!(w >= Duration::from_millis(9), "{w:?}"),
            other => panic!("{other:?}"),
        }
        ender.join().unwrap_or(());
    }

    #[test]
    fn a_recording_profiler_with_no_end_seen_is_waited_for_up_to_the_cap() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        reset();
        // No end seen, and none comes: the wait runs to the cap.
        let cap = Duration::from_millis(60);
        match wait_for_gap(cap, true) {
            Gap::Missed(w) => assert!(w >= cap && w < Duration::from_millis(500), "{w:?}"),
            other => panic!("{other:?}"),
        }
        // A session open across that wait is not waited for again while none of its ends is seen.
        assert_eq!(wait_for_gap(cap, true), Gap::StillOpen);
        // Once one of its sessions is seen to end (long enough ago not to be a schedule), it is waited for again.
        session_ended();
        ends().last = Instant::now().checked_sub(Duration::from_secs(3));
        assert!(matches!(wait_for_gap(cap, true), Gap::Missed(_)));
        reset();
        // Its session ends 10 ms into the wait: found then.
        let ender = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_millis(10));
            session_ended();
        });
        match wait_for_gap(GAP_WAIT_CAP, true) {
            Gap::Found(w) => assert!(
                w >= Duration::from_millis(9) && w < Duration::from_millis(500),
                "{w:?}"
            ),
            other => panic!("{other:?}"),
        }
        ender.join().unwrap_or(());
    }
}
