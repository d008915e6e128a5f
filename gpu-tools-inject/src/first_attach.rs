//! What this process's first attach did. PC sampling after a first attach that traced (CUPTI's activity API, the
//! flight recorder beside it) counted every sample outside the program's kernels, in every later window (four eager
//! jobs, one H200, CUPTI 13.0, driver 580, `gpu-host/scripts/pc_order_probe.sh`); a job sampled first gave stall
//! records before and after a trace. PC sampling is refused after such a first attach (`pc_attach`).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// What an attach does, as far as the order matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// PC sampling (`profile --pid --pc-sampling`).
    PcSampling,
    /// A trace (`trace --pid`, and `profile --pid`'s kernel metrics, which trace), or the range profiler.
    Trace,
}

const NONE: u8 = 0;
const PC_SAMPLING: u8 = 1;
const TRACE: u8 = 2;

/// Set once, by the first attach.
static FIRST: AtomicU8 = AtomicU8::new(NONE);

/// An attach of `kind` begins: the first one is kept, a later one changes nothing.
pub fn note(kind: Kind) {
    let code = match kind {
        Kind::PcSampling => PC_SAMPLING,
        Kind::Trace => TRACE,
    };
    let _ = FIRST.compare_exchange(NONE, code, Ordering::SeqCst, Ordering::SeqCst);
}

/// Set once a PC sampling window started in this process.
static PC_SAMPLED: AtomicBool = AtomicBool::new(false);

/// A PC sampling window started in this process.
pub fn note_pc_sampled() {
    PC_SAMPLED.store(true, Ordering::SeqCst);
}

/// Whether a PC sampling window has started in this process: the flight recorder's callbacks are then enabled only
/// while the program's threads are held (see `attach::run`).
pub fn pc_sampled() -> bool {
    PC_SAMPLED.load(Ordering::SeqCst)
}

/// Set once an attach found the program's own profiler registered with CUPTI before any PC sampling here.
static PROGRAM_PROFILER_FIRST: AtomicBool = AtomicBool::new(false);

/// An attach found the program's own profiler registered with CUPTI (recording or not): where no PC sampling ran in
/// this process before, its activity API came first, and PC sampling after that counted every sample outside the
/// program's kernels (`PC_AFTER_PROGRAM_PROFILER`).
pub fn note_program_profiler() {
    if !pc_sampled() {
        PROGRAM_PROFILER_FIRST.store(true, Ordering::SeqCst);
    }
}

/// Whether the program's own profiler was found registered before any PC sampling in this process.
pub fn program_profiler_first() -> bool {
    PROGRAM_PROFILER_FIRST.load(Ordering::SeqCst)
}

/// Whether this process's first attach traced it, not PC sampling.
pub fn traced() -> bool {
    FIRST.load(Ordering::SeqCst) == TRACE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_attach_is_kept() {
        assert!(!traced(), "no attach yet");
        note(Kind::Trace);
        note(Kind::PcSampling);
        assert!(traced(), "the first was a trace");
    }

    #[test]
    fn the_programs_profiler_counts_only_before_any_pc_sampling() {
        // Statics of the test process: this test alone sets them.
        assert!(!program_profiler_first());
        note_program_profiler();
        assert!(program_profiler_first(), "found before any PC sampling");
        PROGRAM_PROFILER_FIRST.store(false, Ordering::SeqCst);
        note_pc_sampled();
        note_program_profiler();
        assert!(!program_profiler_first(), "PC sampling came first");
    }
}
