//! Flushing CUPTI for the program's profiler without handing it the records of kernels still running
//! ([`gpu_tools::cupti::activity::flush_complete_first`]), with the real flush: where the attach must have a buffer
//! of the program's back (before its callbacks go back to CUPTI, before the probe lets the program's profiler lend
//! again).

use std::convert::Infallible;

use gpu_tools::cupti::activity::{
    COMPLETE_WAIT, COMPLETE_WAITS, CompleteFirst, FlushMode, flush_complete_first,
};

use super::Real;

/// Flushes without force until `done` says what was waited for is back, 2 ms apart, and forces what is left once
/// at the bound (50 ms). Call it from a thread that holds none of the sharing's locks: the completion callbacks it
/// runs take them.
pub(super) fn complete_first(real: &Real, done: impl Fn() -> bool) -> CompleteFirst {
    let flushed = flush_complete_first(
        |mode| {
            // SAFETY: the real flush, called from a thread that holds none of the sharing's locks (the caller's
            // promise).
            unsafe { (real.flush_all)(mode.flag()) };
            Ok::<(), Infallible>(())
        },
        done,
    );
    match flushed {
        Ok(ended) => ended,
        Err(never) => match never {},
    }
}

/// Flushes without force, [`COMPLETE_WAIT`] apart and [`COMPLETE_WAITS`] waits at most, until `done` says what was
/// waited for is back; never forced: for a buffer that may hold nothing (CUPTI 13.0 keeps an empty one across forced
/// flushes), where a forced flush would only hand out the records of kernels still running in the others. Returns
/// the waits made, or `None` where it was not back at the bound. The caller holds none of the sharing's locks, as
/// for [`complete_first`].
pub(super) fn until_back_unforced(real: &Real, done: impl Fn() -> bool) -> Option<u32> {
    for waits in 0..=COMPLETE_WAITS {
        // SAFETY: the real flush, without force, from a thread that holds none of the sharing's locks (the
        // caller's promise).
        unsafe { (real.flush_all)(FlushMode::Completed.flag()) };
        if done() {
            return Some(waits);
        }
        if waits < COMPLETE_WAITS {
            std::thread::sleep(COMPLETE_WAIT);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::sys::cupti as sys;
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

    fn run(lands_at: u32) -> (CompleteFirst, Vec<u32>) {
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
    fn a_wait_for_a_buffer_that_may_be_empty_never_forces() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let wait = |lands_at: u32| {
            FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clear();
            BACK.store(false, Ordering::SeqCst);
            LANDS_AT.store(lands_at, Ordering::SeqCst);
            let real = Real {
                flush_all: flush,
                ..super::super::tests::no_cupti()
            };
            let waits = until_back_unforced(&real, || BACK.load(Ordering::SeqCst));
            (
                waits,
                FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            )
        };
        // Back at the third flush: two waits.
        assert_eq!(wait(3), (Some(2), vec![0, 0, 0]));
        // Never back: every flush of the bound without force, and none after.
        let (waits, flags) = wait(0);
        assert_eq!(waits, None);
        assert_eq!(flags.len() as u32, COMPLETE_WAITS + 1);
        assert!(flags.iter().all(|&f| f == 0));
    }

    #[test]
    fn the_real_flush_gets_flag_0_until_the_buffer_is_back_and_the_forced_flag_once_at_the_bound() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        // Back at once: one flush, no wait.
        assert_eq!(
            run(1),
            (
                CompleteFirst {
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
                CompleteFirst {
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
            CompleteFirst {
                waits: COMPLETE_WAITS,
                forced: true
            }
        );
        assert_eq!(flags.len() as u32, COMPLETE_WAITS + 2);
        assert!(flags[..flags.len() - 1].iter().all(|&f| f == 0));
        assert_eq!(flags.last(), Some(&sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    }
}
