//! The event callback: it only wakes the session. The driver calls it on its own thread, where any debugger API
//! call would fail with `CUDBG_ERROR_RECURSIVE_API_CALL`, so the session drains the queues on its own thread.
//!
//! The state is a process-wide static rather than a pointer handed to the driver as `userData`: the driver may
//! still call the callback while `finalize` runs, and a static cannot dangle.

use std::sync::{Condvar, Mutex};
use std::time::Duration;

use crate::sys::cudbg as sys;

/// Counts notifications; waiters sleep until the count moves past what they last saw.
pub(crate) struct Notifier {
    count: Mutex<u64>,
    moved: Condvar,
}

pub(crate) static NOTIFIER: Notifier = Notifier {
    count: Mutex::new(0),
    moved: Condvar::new(),
};

impl Notifier {
    /// The current count.
    pub(crate) fn seen(&self) -> u64 {
        // A poisoned lock only means a panic elsewhere while holding it; the counter is still valid.
        *self.count.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Bumps the count and wakes every waiter.
    pub(crate) fn notify(&self) {
        let mut c = self.count.lock().unwrap_or_else(|p| p.into_inner());
        *c = c.wrapping_add(1);
        self.moved.notify_all();
    }

    /// Waits until the count differs from `seen` or `timeout` passes; returns the count then.
    pub(crate) fn wait_past(&self, seen: u64, timeout: Duration) -> u64 {
        let guard = self.count.lock().unwrap_or_else(|p| p.into_inner());
        let (guard, _) = self
            .moved
            .wait_timeout_while(guard, timeout, |c| *c == seen)
            .unwrap_or_else(|p| p.into_inner());
        *guard
    }
}

/// The `CUDBGNotifyNewEventCallback` the session registers.
pub(crate) unsafe extern "C" fn on_new_event(_data: *mut sys::CUDBGEventCallbackData) {
    // No panic may unwind into the driver; a failed wake-up is recovered by the session's periodic poll.
    let _ = std::panic::catch_unwind(|| NOTIFIER.notify());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callback_wakes_a_waiter() {
        let before = NOTIFIER.seen();
        let t = std::thread::spawn(move || NOTIFIER.wait_past(before, Duration::from_secs(10)));
        std::thread::sleep(Duration::from_millis(20));
        // SAFETY: the callback ignores its argument.
        unsafe { on_new_event(std::ptr::null_mut()) };
        let after = t.join().unwrap();
        assert_ne!(after, before);
    }

    #[test]
    fn wait_without_notification_times_out() {
        let n = Notifier {
            count: Mutex::new(5),
            moved: Condvar::new(),
        };
        let t0 = std::time::Instant::now();
        assert_eq!(n.wait_past(5, Duration::from_millis(30)), 5);
        assert!(t0.elapsed() >= Duration::from_millis(30));
    }
}
