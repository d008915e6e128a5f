//! Flushing CUPTI for a consumer of kept kinds without handing it the records of kernels still running.
//!
//! A forced flush ([`FlushMode::Forced`]) returns every buffer, with the records of kernels still queued or running
//! left without a start and an end, and CUPTI writes no complete record of them later: on an H200 a torch.profiler
//! cycle lost the 44 kernels running at a window's end so. A default flush ([`FlushMode::Completed`]) returns only
//! the buffers whose records are all complete, full or not (CUPTI's header). So where buffers must come back (a
//! tracer's stop that keeps kinds for another consumer; an attach giving a program's profiler its callbacks back),
//! the flush is made without force, a few milliseconds apart, until they are back, and forced once at the bound.

use std::time::Duration;

use super::FlushMode;

/// How long [`flush_complete_first`] waits between its flushes.
pub const COMPLETE_WAIT: Duration = Duration::from_millis(2);
/// How many times [`flush_complete_first`] waits at most: 50 ms in all, for a program whose kernels run longer, or
/// whose GPU never drains.
pub const COMPLETE_WAITS: u32 = 25;

/// How [`flush_complete_first`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompleteFirst {
    /// Waits made before it was done, or before the forced flush.
    pub waits: u32,
    /// What was waited for did not come in time: it was forced out.
    pub forced: bool,
}

/// Flushes with `flush` ([`FlushMode::Completed`]) until `done` says what was waited for is back, with
/// [`COMPLETE_WAIT`] between flushes and [`COMPLETE_WAITS`] waits at most; then once with [`FlushMode::Forced`].
/// `done` is asked after each flush, the first made at once. A flush's error ends it and is returned.
pub fn flush_complete_first<E>(
    mut flush: impl FnMut(FlushMode) -> Result<(), E>,
    done: impl Fn() -> bool,
) -> Result<CompleteFirst, E> {
    if let Some(waits) = flush_until_complete(&mut flush, done)? {
        return Ok(CompleteFirst {
            waits,
            forced: false,
        });
    }
    flush(FlushMode::Forced)?;
    Ok(CompleteFirst {
        waits: COMPLETE_WAITS,
        forced: true,
    })
}

/// [`flush_complete_first`] without its forced flush at the bound: for a buffer that may hold nothing (CUPTI 13.0
/// keeps an empty one across forced flushes), where forcing would only hand out the running kernels of the others.
/// Returns the waits made before `done` said yes, or `None` at the bound. A flush's error ends it and is returned.
pub fn flush_until_complete<E>(
    mut flush: impl FnMut(FlushMode) -> Result<(), E>,
    done: impl Fn() -> bool,
) -> Result<Option<u32>, E> {
    let mut waits = 0;
    loop {
        flush(FlushMode::Completed)?;
        if done() {
            return Ok(Some(waits));
        }
        if waits == COMPLETE_WAITS {
            return Ok(None);
        }
        std::thread::sleep(COMPLETE_WAIT);
        waits += 1;
    }
}

/// How long [`flush_forced_until`] waits between its flushes.
pub const LATE_WAIT: Duration = Duration::from_millis(1);
/// How many more flushes [`flush_forced_until`] makes at most: 10 ms in all. A buffer CUPTI took for a record it
/// was writing comes back within microseconds; one it keeps empty across forced flushes (CUPTI 13.0) never does.
pub const LATE_FLUSHES: u32 = 10;

/// After a forced flush that left a buffer lent: forced flushes, [`LATE_WAIT`] apart, until `done` says it is
/// back, [`LATE_FLUSHES`] at most. Returns the flushes made; a flush's error ends it and is returned.
pub fn flush_forced_until<E>(
    mut flush: impl FnMut(FlushMode) -> Result<(), E>,
    done: impl Fn() -> bool,
) -> Result<u32, E> {
    let mut made = 0;
    while made < LATE_FLUSHES && !done() {
        std::thread::sleep(LATE_WAIT);
        flush(FlushMode::Forced)?;
        made += 1;
    }
    Ok(made)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::RefCell;

    /// CUPTI with one buffer whose kernel runs until the flush `lands_at` (counting from 1; 0: never): a default
    /// flush returns it only from then on, a forced one at once. Returns how it ended and the flushes made.
    fn run(lands_at: usize) -> (CompleteFirst, Vec<FlushMode>) {
        let flushes = RefCell::new(Vec::new());
        let back = RefCell::new(false);
        let ended = flush_complete_first(
            |mode| {
                flushes.borrow_mut().push(mode);
                let n = flushes.borrow().len();
                if mode == FlushMode::Forced || (lands_at != 0 && n >= lands_at) {
                    *back.borrow_mut() = true;
                }
                Ok::<(), ()>(())
            },
            || *back.borrow(),
        );
        (
            ended.unwrap_or(CompleteFirst {
                waits: u32::MAX,
                forced: false,
            }),
            flushes.into_inner(),
        )
    }

    #[test]
    fn a_buffer_whose_kernel_ends_comes_back_complete_and_one_that_never_does_is_forced_at_the_bound()
     {
        use FlushMode::{Completed, Forced};
        // Back at once: one flush, no wait.
        assert_eq!(
            run(1),
            (
                CompleteFirst {
                    waits: 0,
                    forced: false
                },
                vec![Completed]
            )
        );
        // Its kernel ends at the third flush: back then, never forced.
        assert_eq!(
            run(3),
            (
                CompleteFirst {
                    waits: 2,
                    forced: false
                },
                vec![Completed; 3]
            )
        );
        // It never ends: after the bound, one forced flush.
        let (ended, flushes) = run(0);
        assert_eq!(
            ended,
            CompleteFirst {
                waits: COMPLETE_WAITS,
                forced: true
            }
        );
        assert_eq!(flushes.len() as u32, COMPLETE_WAITS + 2);
        assert!(flushes[..flushes.len() - 1].iter().all(|&m| m == Completed));
        assert_eq!(flushes.last(), Some(&Forced));
    }

    #[test]
    fn flushing_until_complete_never_forces() {
        let mut flushes = Vec::new();
        let waits = flush_until_complete(
            |mode| {
                flushes.push(mode);
                Ok::<(), ()>(())
            },
            || false,
        );
        assert_eq!(waits, Ok(None), "not back at the bound");
        assert_eq!(flushes.len() as u32, COMPLETE_WAITS + 1);
        assert!(flushes.iter().all(|&m| m == FlushMode::Completed));
    }

    #[test]
    fn late_flushes_are_forced_until_the_buffer_is_back_and_stop_at_the_bound() {
        // `back_after` forced flushes bring it back (0: never). Returns what it said and the flushes made.
        let run = |back_after: u32| {
            let flushes = RefCell::new(Vec::new());
            let made = flush_forced_until(
                |mode| {
                    flushes.borrow_mut().push(mode);
                    Ok::<(), ()>(())
                },
                || back_after != 0 && flushes.borrow().len() as u32 >= back_after,
            );
            (made, flushes.into_inner())
        };
        assert_eq!(run(1), (Ok(1), vec![FlushMode::Forced]));
        assert_eq!(run(3), (Ok(3), vec![FlushMode::Forced; 3]));
        assert_eq!(
            run(0),
            (
                Ok(LATE_FLUSHES),
                vec![FlushMode::Forced; LATE_FLUSHES as usize]
            )
        );
        // Back already: no flush.
        let mut made = 0;
        assert_eq!(
            flush_forced_until(
                |_| {
                    made += 1;
                    Ok::<(), ()>(())
                },
                || true
            ),
            Ok(0)
        );
        assert_eq!(made, 0);
        // A flush that fails ends it.
        assert_eq!(
            flush_forced_until(|_| Err("refused"), || false),
            Err("refused")
        );
    }

    #[test]
    fn a_flush_that_fails_ends_it_with_its_error() {
        let mut made = 0;
        let ended = flush_complete_first(
            |_| {
                made += 1;
                if made == 2 { Err("refused") } else { Ok(()) }
            },
            || false,
        );
        assert_eq!(ended, Err("refused"));
        assert_eq!(made, 2, "no flush after the error");
    }
}
