//! Holding back the sessions of the program's own profiler while the PC sampling before a first trace (the primer)
//! runs.
//!
//! A primer beside a profiler that had registered with CUPTI was refused, whatever it did at the moment: one of its
//! sessions may start during the sampling (a torch.profiler on a `schedule` starts one every few steps), and PC
//! sampling beside a recording profiler left CUPTI delivering no activity record in the process afterwards (CUPTI
//! 13.0, driver 580). Refused, the first trace went unprimed, and every PC sampling window after it was refused
//! too (CUPTI counts all its samples outside the program's kernels then): on the GPU, the survival matrix's
//! profiler-schedule and profiler-late rows. So the primer first redirects the program's CUPTI calls to the hooks
//! and closes this hold, then looks at the program's profiler: one that records is refused, as before; one that is
//! idle stays idle, since its calls that begin a session (`cuptiActivityEnable`, `cuptiSubscribe`) wait in the
//! hooks until the sampling has ended. The waiting thread is outside the CUDA driver and CUPTI (in this library),
//! so the sampling's start and finish still find their moment. It waits [`HOLD_LIMIT`] at most from the hold's
//! start: past it the call goes on, the sampling's end says so, and the program never hangs on the tool.

use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a program's call waits from the moment the hold began. The primer's own bounds: its start looks
/// for a moment for 3 s, it samples 1 s, and its finish is made at once where the program's threads are outside the
/// driver (a thread waiting here is).
pub const HOLD_LIMIT: Duration = Duration::from_secs(8);

#[derive(Debug, Default)]
struct State {
    /// While held: when the program's calls stop waiting.
    until: Option<Instant>,
    /// Calls that waited during the current hold, and the longest wait.
    waited: u32,
    longest: Duration,
    /// Calls that went on at the limit, the hold still on.
    timed_out: u32,
}

static STATE: Mutex<State> = Mutex::new(State {
    until: None,
    waited: 0,
    longest: Duration::ZERO,
    timed_out: 0,
});
static RELEASED: Condvar = Condvar::new();

fn state() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(|p| p.into_inner())
}

/// What a hold came to, at its release.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Held {
    /// The program's calls that waited for the release (or the limit).
    pub waited: u32,
    /// The longest of their waits.
    pub longest: Duration,
    /// Those that went on at the limit, before the release.
    pub timed_out: u32,
}

/// Closes the hold for `limit` from now. `false`: one is closed already (nothing changed).
pub(super) fn close(limit: Duration) -> bool {
    let mut s = state();
    if s.until.is_some() {
        return false;
    }
    *s = State {
        until: Some(Instant::now() + limit),
        ..State::default()
    };
    true
}

/// Opens the hold: the calls waiting go on now. Returns what it held back.
pub(super) fn open() -> Held {
    let mut s = state();
    s.until = None;
    let held = Held {
        waited: s.waited,
        longest: s.longest,
        timed_out: s.timed_out,
    };
    drop(s);
    RELEASED.notify_all();
    held
}

/// Called by a hook before a call of the program's that begins a session (`what`, for the log): waits while the
/// hold is closed, up to its limit. No wait when it is open.
pub(super) fn wait(what: &str) {
    let mut s = state();
    let Some(mut until) = s.until else {
        return;
    };
    let began = Instant::now();
    // Counted as it begins, so that the release's account has every call that waited, woken or not.
    s.waited += 1;
    loop {
        let now = Instant::now();
        if now >= until {
            s.timed_out += 1;
            break;
        }
        s = RELEASED
            .wait_timeout(s, until - now)
            .map(|(g, _)| g)
            .unwrap_or_else(|p| p.into_inner().0);
        match s.until {
            Some(u) => until = u,
            None => break,
        }
    }
    let waited = began.elapsed();
    s.longest = s.longest.max(waited);
    drop(s);
    log::debug!(
        "the program {what}: it waited {:.1} ms for the PC sampling before the first trace to end",
        waited.as_secs_f64() * 1e3
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_call_waits_for_the_release_and_an_open_hold_lets_it_pass() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        open();
        let t0 = Instant::now();
        wait("enables a kind");
        assert!(t0.elapsed() < Duration::from_millis(50), "open: no wait");
        assert!(close(Duration::from_secs(30)));
        assert!(!close(Duration::from_secs(30)), "one hold at a time");
        let waiter = std::thread::spawn(|| {
            let t0 = Instant::now();
            wait("enables a kind");
            t0.elapsed()
        });
        let t0 = Instant::now();
        while state().waited == 0 {
            assert!(
                t0.elapsed() < Duration::from_secs(10),
                "the waiter never came"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(150));
        assert!(!waiter.is_finished(), "held");
        let held = open();
        let waited = waiter.join().expect("the waiter");
        assert!(waited >= Duration::from_millis(150), "{waited:?}");
        assert!(waited < Duration::from_secs(10), "released, not timed out");
        assert_eq!((held.waited, held.timed_out), (1, 0));
        // The next hold starts at nothing.
        assert!(close(Duration::from_secs(30)));
        assert_eq!(open(), Held::default());
    }

    #[test]
    fn a_call_goes_on_at_the_limit_and_is_counted() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        open();
        assert!(close(Duration::from_millis(100)));
        let t0 = Instant::now();
        wait("subscribes");
        let waited = t0.elapsed();
        assert!(waited >= Duration::from_millis(90), "{waited:?}");
        assert!(waited < Duration::from_secs(5), "{waited:?}");
        let held = open();
        assert_eq!(held.waited, 1);
        assert_eq!(held.timed_out, 1);
        assert!(held.longest >= Duration::from_millis(90));
    }
}
