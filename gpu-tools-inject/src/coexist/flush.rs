//! Flushing CUPTI for the program's profiler without handing it the records of kernels still running
//! ([`gpu_tools::cupti::activity::flush_complete_first`]), with the real flush: where the attach must have a buffer
//! of the program's back (before its callbacks go back to CUPTI, before the probe lets the program's profiler lend
//! again).

use std::convert::Infallible;

use gpu_tools::cupti::activity::{
    CompleteFirst, FlushMode, flush_complete_first, flush_until_complete,
};

use super::Real;

/// Flushes without force until `done` says what was waited for is back, 2 ms apart, and forces what is left once
/// at the bound (50 ms). Call it from a thread that holds none of the sharing's locks: the completion callbacks it
/// runs take them.
pub(super) fn complete_first(real: &Real, done: impl Fn() -> bool) -> CompleteFirst {
    match flush_complete_first(real_flush(real), done) {
        Ok(ended) => ended,
        Err(never) => match never {},
    }
}

/// Flushes without force until `done` says what was waited for is back, as [`complete_first`] does, and never
/// forces ([`flush_until_complete`]: for a buffer CUPTI may keep empty). Returns the waits made, or `None` where it
/// was not back at the bound. The caller holds none of the sharing's locks, as for [`complete_first`].
pub(super) fn until_back_unforced(real: &Real, done: impl Fn() -> bool) -> Option<u32> {
    match flush_until_complete(real_flush(real), done) {
        Ok(waits) => waits,
        Err(never) => match never {},
    }
}

/// CUPTI's real flush, for a caller that holds none of the sharing's locks (its completion callbacks take them).
fn real_flush(real: &Real) -> impl FnMut(FlushMode) -> Result<(), Infallible> + '_ {
    |mode| {
        // SAFETY: the real flush, called from a thread that holds none of the sharing's locks (the promise of
        // `complete_first`'s and `until_back_unforced`'s callers).
        unsafe { (real.flush_all)(mode.flag()) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::cupti::activity::COMPLETE_WAITS;
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

    /// CUPTI as [`flush`] makes it, the buffer's kernel ending at flush `lands_at`, with a fresh record of flags.
    fn cupti(lands_at: u32) -> Real {
        FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clear();
        BACK.store(false, Ordering::SeqCst);
        LANDS_AT.store(lands_at, Ordering::SeqCst);
        Real {
            flush_all: flush,
            ..super::super::tests::no_cupti()
        }
    }

    fn flags() -> Vec<u32> {
        FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    fn run(lands_at: u32) -> (CompleteFirst, Vec<u32>) {
        let flushed = complete_first(&cupti(lands_at), || BACK.load(Ordering::SeqCst));
        (flushed, flags())
    }

    #[test]
    fn a_wait_for_a_buffer_that_may_be_empty_never_forces() {
        let _serial = super::super::tests::SERIAL
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let wait = |lands_at: u32| {
            let waits = until_back_unforced(&cupti(lands_at), || BACK.load(Ordering::SeqCst));
            (waits, flags())
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
