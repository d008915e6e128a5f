//! Buffer completions under way. CUPTI completes buffers on its own threads and on any thread that flushes, and a
//! flush returns once the buffers it completed itself are handed over, not those another thread is handing over
//! then: CUPTI's thread, or a tracer's periodic flush. A consumer that must have every record of a moment's past in
//! hand (another profiler's forced flush, which an injected tool shares CUPTI with) waits for
//! [`completions_elsewhere`] to reach zero.

use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Completions under way, on every thread.
static UNDER_WAY: AtomicUsize = AtomicUsize::new(0);

thread_local! {
    /// Completions under way on this thread (a consumer may flush from inside one).
    static HERE: Cell<usize> = const { Cell::new(0) };
}

/// One completion, counted from the tracer's callback's first step to its last, however it ends.
pub(super) struct Completing;

impl Completing {
    pub(super) fn enter() -> Completing {
        UNDER_WAY.fetch_add(1, Ordering::AcqRel);
        HERE.set(HERE.get() + 1);
        Completing
    }
}

impl Drop for Completing {
    fn drop(&mut self) {
        HERE.set(HERE.get().saturating_sub(1));
        UNDER_WAY.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Buffers CUPTI is completing to the tracer now on threads other than the caller's: from the first step of the
/// tracer's completion callback to its last, the consumer's closure (or the handler of unlent buffers) included.
/// The moments inside CUPTI before it calls the callback are not seen.
pub fn completions_elsewhere() -> usize {
    UNDER_WAY.load(Ordering::Acquire).saturating_sub(HERE.get())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_completion_is_seen_from_other_threads_only_while_it_is_under_way() {
        let (inside_tx, inside_rx) = std::sync::mpsc::channel();
        let (leave_tx, leave_rx) = std::sync::mpsc::channel::<()>();
        let before = completions_elsewhere();
        let other = std::thread::spawn(move || {
            let c = Completing::enter();
            // Its own completion is not elsewhere.
            inside_tx
                .send(completions_elsewhere())
                .expect("the test waits");
            leave_rx.recv().expect("the test says when");
            drop(c);
        });
        let seen_there = inside_rx.recv().expect("the other thread");
        assert_eq!(completions_elsewhere(), before + 1, "seen from here");
        leave_tx.send(()).expect("the other thread waits");
        other.join().expect("the other thread");
        assert_eq!(completions_elsewhere(), before, "ended");
        // Other tests' completions may be under way meanwhile: the other thread saw at most those.
        assert!(seen_there <= before + 1);
    }
}
