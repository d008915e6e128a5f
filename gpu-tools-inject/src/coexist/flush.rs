//! Flushing CUPTI for the program's profiler without handing it the records of kernels still running
//! ([`gpu_tools::cupti::activity::flush_complete_first`]), with the real flush: where the attach must have a buffer
//! of the program's back (before its callbacks go back to CUPTI, before the probe lets the program's profiler lend
//! again, at the end of the probe's watch).

use gpu_tools::cupti::activity::{CompleteFirst, flush_complete_first};

use super::Real;

/// Flushes without force until `done` says what was waited for is back, then forces what is left at the bound.
/// Call it from a thread that holds none of the sharing's locks: the completion callbacks it runs take them.
pub(super) fn complete_first(real: &Real, done: impl Fn() -> bool) -> CompleteFirst {
    // SAFETY: the real cuptiActivityFlushAll, called from a thread that holds none of the sharing's locks.
    unsafe { flush_complete_first(real.flush_all, done) }
}
