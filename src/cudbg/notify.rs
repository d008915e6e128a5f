//! The event callback: it only wakes the session. The driver calls it on its own thread, where any debugger API
//! call would fail with `CUDBG_ERROR_RECURSIVE_API_CALL`, so the session drains the queues on its own thread.
//!
//! The state is a process-wide static rather than a pointer handed to the driver as `userData`: the driver may
//! still call the callback while `finalize` runs, and a static cannot dangle.
//!
//! Waiting spins on an atomic counter for a bounded window before parking on a condition variable: a parked
//! thread takes tens of microseconds to be woken, which a debuggee blocked on every launch pays each time.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::sys::cudbg as sys;

/// Counts notifications; waiters spin, then sleep, until the count moves past what they last saw.
pub(crate) struct Notifier {
    count: AtomicU64,
    /// When the latest notification came, in nanoseconds after [`epoch`] (0: none yet).
    last_ns: AtomicU64,
    /// Waiters parked on `moved`; the callback skips the wake-up system call when there are none.
    parked: AtomicU32,
    lock: Mutex<()>,
    moved: Condvar,
}

pub(crate) static NOTIFIER: Notifier = Notifier::new();

/// The reference point of notification times.
pub(crate) fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

impl Notifier {
    pub(crate) const fn new() -> Self {
        Notifier {
            count: AtomicU64::new(0),
            last_ns: AtomicU64::new(0),
            parked: AtomicU32::new(0),
            lock: Mutex::new(()),
            moved: Condvar::new(),
        }
    }

    /// The current count.
    pub(crate) fn seen(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// When the latest notification came, if any did.
    pub(crate) fn last_notified(&self) -> Option<Instant> {
        match self.last_ns.load(Ordering::Acquire) {
            0 => None,
            ns => Some(epoch() + Duration::from_nanos(ns)),
        }
    }

    /// Bumps the count and wakes every waiter.
    pub(crate) fn notify(&self) {
        let ns = u64::try_from(epoch().elapsed().as_nanos()).unwrap_or(u64::MAX);
        self.last_ns.store(ns.max(1), Ordering::Release);
        // SeqCst on the count here and on `parked` in `wait_past`: either the waiter sees the new count before it
        // sleeps, or this side sees the waiter parked and wakes it.
        self.count.fetch_add(1, Ordering::SeqCst);
        if self.parked.load(Ordering::SeqCst) > 0 {
            // Taking the lock orders this wake-up after a waiter's check-then-sleep.
            drop(self.lock.lock().unwrap_or_else(|p| p.into_inner()));
            self.moved.notify_all();
        }
    }

    /// Waits until the count differs from `seen` or `timeout` passes; returns the count then. The first `spin`
    /// of the wait busy-polls the counter (burning a core) and only then parks the thread.
    pub(crate) fn wait_past(&self, seen: u64, spin: Duration, timeout: Duration) -> u64 {
        let start = Instant::now();
        let spin = spin.min(timeout);
        if !spin.is_zero() {
            loop {
                let now = self.count.load(Ordering::SeqCst);
                if now != seen {
                    return now;
                }
                for _ in 0..32 {
                    std::hint::spin_loop();
                }
                if start.elapsed() >= spin {
                    break;
                }
            }
        }
        let left = timeout.saturating_sub(start.elapsed());
        self.parked.fetch_add(1, Ordering::SeqCst);
        // A poisoned lock only means a panic elsewhere while holding it; it guards no data.
        let guard = self.lock.lock().unwrap_or_else(|p| p.into_inner());
        let waited = self
            .moved
            .wait_timeout_while(guard, left, |_| self.count.load(Ordering::SeqCst) == seen);
        drop(waited);
        self.parked.fetch_sub(1, Ordering::SeqCst);
        self.count.load(Ordering::SeqCst)
    }
}

/// The `CUDBGNotifyNewEventCallback` the session registers.
pub(crate) unsafe extern "C" fn on_new_event(_data: *mut sys::CUDBGEventCallbackData) {
    wake();
}

/// The same callback for a CUDA 12 driver, whose callback data has another layout (it is not read).
pub(crate) unsafe extern "C" fn on_new_event_cuda12(_data: *mut sys::CUDBGEventCallbackData41) {
    wake();
}

fn wake() {
    // No panic may unwind into the driver; a failed wake-up is recovered by the session's periodic poll. A caught
    // payload is leaked, not dropped: its `Drop` could panic again outside any `catch_unwind`.
    if let Err(payload) = std::panic::catch_unwind(|| NOTIFIER.notify()) {
        std::mem::forget(payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_wakes_a_parked_waiter() {
        let before = NOTIFIER.seen();
        let t = std::thread::spawn(move || {
            NOTIFIER.wait_past(before, Duration::ZERO, Duration::from_secs(10))
        });
        std::thread::sleep(Duration::from_millis(20));
        let sent = Instant::now();
        // SAFETY: the callback ignores its argument.
        unsafe { on_new_event(std::ptr::null_mut()) };
        let after = t.join().unwrap();
        assert_ne!(after, before);
        let at = NOTIFIER.last_notified().expect("a notification time");
        assert!(at >= sent - Duration::from_millis(1) && at <= Instant::now());
    }

    #[test]
    fn spinning_waiter_sees_a_notification() {
        let n: &'static Notifier = Box::leak(Box::new(Notifier::new()));
        let t = std::thread::spawn(move || {
            let t0 = Instant::now();
            let c = n.wait_past(0, Duration::from_secs(5), Duration::from_secs(10));
            (c, t0.elapsed())
        });
        std::thread::sleep(Duration::from_millis(20));
        n.notify();
        let (count, waited) = t.join().unwrap();
        assert_eq!(count, 1);
        // Woken while spinning, long before the spin window ended.
        assert!(waited < Duration::from_secs(4), "{waited:?}");
        assert_eq!(n.parked.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn wait_without_notification_times_out_after_spinning() {
        let n = Notifier::new();
        let t0 = Instant::now();
        assert_eq!(
            n.wait_past(0, Duration::from_millis(10), Duration::from_millis(30)),
            0
        );
        assert!(t0.elapsed() >= Duration::from_millis(30));
        assert_eq!(n.parked.load(Ordering::SeqCst), 0);
        assert!(n.last_notified().is_none());
    }

    #[test]
    fn a_count_already_moved_returns_at_once() {
        let n = Notifier::new();
        n.notify();
        let t0 = Instant::now();
        assert_eq!(n.wait_past(0, Duration::ZERO, Duration::from_secs(10)), 1);
        assert!(t0.elapsed() < Duration::from_secs(5));
    }
}
