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

/// Completions under way on this thread, 0 where its thread-local storage is gone (its exit).
fn here() -> usize {
    HERE.try_with(Cell::get).unwrap_or(0)
}

/// One completion under way on this thread, counted in [`completions_elsewhere`] from its making to its drop. The
/// tracer's completion callback holds one from its first step to its last; a consumer that hands batches on outside
/// that callback (a stand-in for CUPTI's thread in a test) holds its own. Neither its making nor its drop panics.
#[must_use = "a completion is counted only while its guard lives"]
#[derive(Debug)]
pub struct CompletionUnderWay {
    _counted: (),
}

impl CompletionUnderWay {
    /// Counts one more completion under way on this thread until the guard is dropped.
    pub fn enter() -> CompletionUnderWay {
        UNDER_WAY.fetch_add(1, Ordering::AcqRel);
        let _ = HERE.try_with(|h| h.set(h.get().saturating_add(1)));
        CompletionUnderWay { _counted: () }
    }
}

impl Drop for CompletionUnderWay {
    fn drop(&mut self) {
        let _ = HERE.try_with(|h| h.set(h.get().saturating_sub(1)));
        UNDER_WAY.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Buffers CUPTI is completing to the tracer now on threads other than the caller's: from the first step of the
/// tracer's completion callback to its last, the consumer's closure (or the handler of unlent buffers) included,
/// and the [`CompletionUnderWay`] guards of other threads. The moments inside CUPTI before it calls the callback
/// are not seen.
pub fn completions_elsewhere() -> usize {
    UNDER_WAY.load(Ordering::Acquire).saturating_sub(here())
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
            let c = CompletionUnderWay::enter();
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
