//! Flushing CUPTI for another consumer of its records without handing it the records of kernels still running.
//!
//! A forced flush (`CUPTI_ACTIVITY_FLAG_FLUSH_FORCED`) returns every buffer, with the records of kernels still
//! queued or running left without a start and an end, and CUPTI writes no complete record of them later: on an
//! H200 a torch.profiler cycle lost the 44 kernels running at a window's end so. A flush with flag 0 returns only
//! the buffers whose records are all complete, full or not (CUPTI's header). So where a buffer of another
//! consumer's must come back (an attach that shares CUPTI with the program's own profiler), the flush is made
//! without force, a few milliseconds apart, until that buffer is back, and forced only at the bound.

use std::time::Duration;

use crate::sys::cupti as sys;

/// How long [`flush_complete_first`] waits between its flushes.
pub const COMPLETE_WAIT: Duration = Duration::from_millis(2);
/// How many times [`flush_complete_first`] waits at most: 50 ms in all, for a program whose kernels run longer, or
/// whose GPU never drains.
pub const COMPLETE_WAITS: u32 = 25;

/// `cuptiActivityFlushAll`'s signature.
pub type FlushAllFn = unsafe extern "C" fn(u32) -> sys::CUptiResult;

/// How [`flush_complete_first`] ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CompleteFirst {
    /// Waits made before it was done, or before the forced flush.
    pub waits: u32,
    /// What was waited for did not come in time: it was forced out.
    pub forced: bool,
}

/// Flushes without force until `done` says what was waited for is back, with [`COMPLETE_WAIT`] between flushes and
/// [`COMPLETE_WAITS`] waits at most; then forces out what is left, once. `done` is asked after each flush, the first
/// made at once.
///
/// # Safety
///
/// `flush` is `cuptiActivityFlushAll` of the CUPTI this process uses (or a function with its contract), and the
/// calling thread holds no lock that the registered completion callback takes: the flush runs that callback on this
/// thread.
pub unsafe fn flush_complete_first(flush: FlushAllFn, done: impl Fn() -> bool) -> CompleteFirst {
    let mut waits = 0;
    loop {
        // SAFETY: the caller's promise: CUPTI's flush, callable from this thread.
        unsafe { flush(0) };
        if done() {
            return CompleteFirst {
                waits,
                forced: false,
            };
        }
        if waits == COMPLETE_WAITS {
            break;
        }
        std::thread::sleep(COMPLETE_WAIT);
        waits += 1;
    }
    // SAFETY: as above.
    unsafe { flush(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
    CompleteFirst {
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
    /// The tests share the statics above.
    static SERIAL: Mutex<()> = Mutex::new(());

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
        // SAFETY: the stand-in flush above, which takes no lock the test holds.
        let flushed = unsafe { flush_complete_first(flush, || BACK.load(Ordering::SeqCst)) };
        (
            flushed,
            FLAGS.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        )
    }

    #[test]
    fn a_buffer_whose_kernel_ends_comes_back_complete_and_one_that_never_does_is_forced_at_the_bound()
     {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Back at once: one flush, no wait.
        let done_at_once = CompleteFirst {
            waits: 0,
            forced: false,
        };
        assert_eq!(run(1), (done_at_once, vec![0]));
        // Its kernel ends at the third flush: back then, never forced.
        let done_later = CompleteFirst {
            waits: 2,
            forced: false,
        };
        assert_eq!(run(3), (done_later, vec![0, 0, 0]));
        // It never ends: after the bound, one forced flush.
        let (flushed, flags) = run(0);
        let forced = CompleteFirst {
            waits: COMPLETE_WAITS,
            forced: true,
        };
        assert_eq!(flushed, forced);
        assert_eq!(flags.len() as u32, COMPLETE_WAITS + 2);
        assert!(flags[..flags.len() - 1].iter().all(|&f| f == 0));
        assert_eq!(flags.last(), Some(&sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
    }
}
