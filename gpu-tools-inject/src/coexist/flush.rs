//! Flushing CUPTI for the program's profiler without handing it the records of kernels still running.
//!
//! A forced flush (`CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`) returns every buffer, with the records of kernels still
//! queued or running left without a start and an end, and CUPTI writes no complete record of them later: on an
//! H200 a torch.profiler cycle lost the 44 kernels running at a window's end so. A flush with flag 0 returns only
//! the buffers whose records are all complete, full or not (CUPTI's header). So where the attach must have a
//! buffer of the program's back (before its callbacks go back to CUPTI, before the probe lets the program's
//! profiler lend again), it flushes without force, a few milliseconds apart, until that buffer is back, and forces
//! only what is left at the bound.

use std::time::Duration;

use gpu_tools::sys::cupti as sys;

use super::Real;

/// How long, and how many times, [`complete_first`] waits between its flushes: 50 ms at most, for a program whose
/// kernels run longer, or whose GPU never drains.
pub(super) const WAIT: Duration = Duration::from_millis(2);
pub(super) const WAITS: u32 = 25;

/// How [`complete_first`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Flushed {
    /// Waits made before it was done, or before the forced flush.
    pub waits: u32,
    /// What was waited for did not come in time: it was forced out.
    pub forced: bool,
}

/// Flushes without force until `done` says what was waited for is back, with [`WAIT`] between flushes and
/// [`WAITS`] waits at most; then forces out what is left, once. `done` is asked after each flush, the first made at
/// once.
pub(super) fn complete_first(real: &Real, done: impl Fn() -> bool) -> Flushed {
    let mut waits = 0;
    loop {
        // SAFETY: the real flush, called from a thread that holds none of the sharing's locks (the completion
        // callbacks it runs take them).
        unsafe { (real.flush_all)(0) };
        if done() {
            return Flushed {
                waits,
                forced: false,
            };
        }
        if waits == WAITS {
            break;
        }
        std::thread::sleep(WAIT);
        waits += 1;
    }
    // SAFETY: as above.
    unsafe { (real.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    Flushed {
        waits,
        forced: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;
    use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};

    /// The flags of the flushes made, in order.
    static FLAGS: Mutex<Vec<u32>> = Mutex::new(Vec::new());
    /// The buffer waited for is back.
    static BACK: AtomicBool = AtomicBool::new(false);
    /// Its kernel ends at this flush (counting from 1; 0: never).
    static LANDS_AT: AtomicU32 = AtomicU32::new(0);

    /// CUPTI with one buffer whose kernel runs until the flush [`LANDS_AT`]: a flush without force returns it only
    /// from then on, a forced one at once.
    unsafe extern "C" fn flush(flag: u32) -> sys::CUptiResult {
        let mut flags = FLAGS.lock().unwrap_or_else(|p| p.into_inner());
        flags.push(flag);
        let n = flags.len() as u32;
        let landed = LANDS_AT.load(Ordering::SeqCst) != 0 && n >= LANDS_AT.load(Ordering::SeqCst);
        if flag == sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED || landed {
            BACK.store(true, Ordering::SeqCst);
        }
        sys::CUPTI_SUCCESS
    }

    fn run(lands_at: u32) -> (Flushed, Vec<u32>) {
        FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clear();
        BACK.store(false, Ordering::SeqCst);
        LANDS_AT.store(lands_at, Ordering::SeqCst);
        let real = Real {
            flush_all: flush,
            ..super::super::tests::no_cupti()
        };
        let flushed = complete_first(&real, || BACK.load(Ordering::SeqCst));
        (
            flushed,
            FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        )
    }

    #[test]
    fn a_buffer_whose_kernel_ends_comes_back_complete_and_one_that_never_does_is_forced_at_the_bound()
     {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Back at once: one flush, no wait.
        assert_eq!(
            run(1),
            (
                Flushed {
                    waits: 0,
                    forced: false
                },
                vec![0]
            )
        );
        // Its kernel ends at the third flush: back then, never forced.
        assert_eq!(
            run(3),
            (
                Flushed {
                    waits: 2,
                    forced: false
                },
                vec![0, 0, 0]
            )
        );
        // It never ends: after the bound, one forced flush.
        let (flushed, flags) = run(0);
        assert_eq!(
            flushed,
            Flushed {
                waits: WAITS,
                forced: true
            }
        );
        assert_eq!(flags.len() as u32, WAITS + 2);
        assert!(flags[..flags.len() - 1].iter().all(|&f| f == 0));
        assert_eq!(flags.last(), Some(&sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    }
}
