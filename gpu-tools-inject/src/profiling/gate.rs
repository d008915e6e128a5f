//! The launch gate: the profiling of an attach may have to end on one of the program's threads, at a graph launch
//! or at the first launch after its tracer went away, while the program's other threads go on launching. Ending
//! the range profiler while another thread is inside a kernel launch that CUPTI replays would take the profiler
//! away from under that replay (the replay saves and restores the kernel's memory around its passes). So every
//! kernel launch is counted from its entry callback to its exit callback, and the thread that ends the profiling
//! first closes the gate (launches that begin then wait at their entry) and waits until no other thread is inside
//! a launch.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Kernel launches between their entry and exit callbacks, on every thread.
static INSIDE: AtomicUsize = AtomicUsize::new(0);
/// Set while a thread ends the profiling: launches wait at their entry.
static CLOSED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// This thread's launches counted in `INSIDE` (0 or 1: a launch does not launch).
    static DEPTH: Cell<usize> = const { Cell::new(0) };
}

/// How long a launch waits at a closed gate, and the closer for the launches inside, before going on regardless
/// (said by the caller): the end of a profiler takes milliseconds, a launch microseconds.
pub(crate) const PATIENCE: Duration = Duration::from_secs(5);

/// A kernel launch's entry callback: waits while the gate is closed, then counts the launch as inside.
pub(crate) fn enter() {
    let deadline = Instant::now() + PATIENCE;
    loop {
        // Counted first, then the gate read: a closer that saw no launch inside cannot miss this one, and this one
        // cannot miss a closed gate (both sides SeqCst).
        INSIDE.fetch_add(1, Ordering::SeqCst);
        if !CLOSED.load(Ordering::SeqCst) || Instant::now() >= deadline {
            DEPTH.with(|d| d.set(d.get() + 1));
            return;
        }
        INSIDE.fetch_sub(1, Ordering::SeqCst);
        while CLOSED.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_micros(50));
        }
    }
}

/// A kernel launch's exit callback: the launch is no longer inside (when its entry was counted).
pub(crate) fn leave() {
    DEPTH.with(|d| {
        if d.get() > 0 {
            d.set(d.get() - 1);
            INSIDE.fetch_sub(1, Ordering::SeqCst);
        }
    });
}

/// Closes the gate and waits until no launch of another thread is inside; returns whether that happened within
/// [`PATIENCE`] (the gate is closed either way). [`open`] must follow.
pub(crate) fn close_and_drain() -> bool {
    CLOSED.store(true, Ordering::SeqCst);
    let own = DEPTH.with(Cell::get);
    let deadline = Instant::now() + PATIENCE;
    while INSIDE.load(Ordering::SeqCst) > own {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_micros(20));
    }
    true
}

/// Opens the gate after [`close_and_drain`].
pub(crate) fn open() {
    CLOSED.store(false, Ordering::SeqCst);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::AtomicU64;

    // One test holds the process-wide gate: its cases run in turn.
    #[test]
    fn the_closer_waits_for_launches_inside_and_later_launches_wait_for_it() {
        // A launch inside on another thread: the closer waits until it leaves.
        let (to_leave, leave_rx) = std::sync::mpsc::channel::<()>();
        let (entered_tx, entered) = std::sync::mpsc::channel::<()>();
        let launcher = std::thread::spawn(move || {
            enter();
            entered_tx.send(()).expect("test channel");
            leave_rx.recv().expect("test channel");
            leave();
        });
        entered.recv().expect("launcher entered");
        let left_at = Arc::new(AtomicU64::new(0));
        let t0 = Instant::now();
        let release = {
            let left_at = Arc::clone(&left_at);
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(100));
                left_at.store(t0.elapsed().as_micros() as u64, Ordering::SeqCst);
                to_leave.send(()).expect("test channel");
            })
        };
        assert!(close_and_drain(), "the launch left within the patience");
        let drained_at = t0.elapsed().as_micros() as u64;
        let left = left_at.load(Ordering::SeqCst);
        assert!(
            left > 0 && drained_at >= left,
            "drained at {drained_at} µs, the launch left at {left} µs"
        );
        launcher.join().expect("launcher");
        release.join().expect("release");

        // The gate is closed: a launch that begins now waits until it opens.
        let started = Instant::now();
        let waiter = std::thread::spawn(move || {
            enter();
            let waited = started.elapsed();
            leave();
            waited
        });
        std::thread::sleep(Duration::from_millis(100));
        open();
        let waited = waiter.join().expect("waiter");
        assert!(waited >= Duration::from_millis(100), "waited {waited:?}");

        // The closer's own launch (it ends the profiling at its own launch's entry) is not waited for.
        enter();
        let t1 = Instant::now();
        assert!(close_and_drain());
        assert!(t1.elapsed() < Duration::from_secs(1));
        open();
        leave();
        assert_eq!(INSIDE.load(Ordering::SeqCst), 0);

        // An exit whose entry was not counted (the launch began before the profiling) changes nothing.
        leave();
        assert_eq!(INSIDE.load(Ordering::SeqCst), 0);
    }
}
