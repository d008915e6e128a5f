//! What this process's first attach did. PC sampling after a first attach that traced (CUPTI's activity API, the
//! flight recorder beside it) counted every sample outside the program's kernels, in every later window (four eager
//! jobs, one H200, CUPTI 13.0, driver 580, `gpu-host/scripts/pc_order_probe.sh`); a job sampled first gave stall
//! records before and after a trace. A first PC sampling window while the program was idle (waiting for a child, or
//! paused: no launch, no stall record) did not: every later window counted every sample outside the program's
//! kernels, with a trace between (the survival matrix's fork-child job, twice, and `pc_order_probe.sh`'s SET=4) or
//! without one (SET=5, an H100: the next window, the job launching again, counted 2,740,546 samples, all outside).
//! The first window decides; PC sampling is refused after such a start (`pc_attach`).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// What an attach does, as far as the order matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// PC sampling (`profile --pid --pc-sampling`).
    PcSampling,
    /// A trace (`trace --pid`, and `profile --pid`'s kernel metrics, which trace), or the range profiler.
    Trace,
}

/// How this process's CUPTI use began, as far as PC sampling after it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FirstUse {
    /// Nothing yet, or a first PC sampling window with stall records or while the program ran: later windows keep
    /// theirs.
    Kept,
    /// A trace before any PC sampling.
    TraceBeforeSampling,
    /// A first PC sampling window with no stall record while the program was idle, or one that was not judged (it
    /// did not finish) and a trace after it.
    IdleSampling,
}

const NONE: u8 = 0;
/// The first PC sampling window began and has not been judged.
const SAMPLING: u8 = 1;
/// The first PC sampling window had stall records, or the program ran in it.
const PRIMED: u8 = 2;
/// A trace before any PC sampling.
const TRACE: u8 = 3;
/// The first PC sampling window had no stall record while the program was idle; or a trace came while the first
/// window was not judged.
const IDLE_SAMPLING: u8 = 4;

/// Where the process stands; moves only forward, to PRIMED, TRACE or IDLE_SAMPLING, and stays there.
static FIRST: AtomicU8 = AtomicU8::new(NONE);

/// Moves FIRST to what `to` gives for where it stands, where it gives something; whether it moved.
fn advance(to: impl Fn(u8) -> Option<u8>) -> bool {
    FIRST
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, to)
        .is_ok()
}

/// An attach of `kind` begins: a trace reached CUPTI, or PC sampling started in a context.
pub fn note(kind: Kind) {
    advance(|now| match (kind, now) {
        (Kind::PcSampling, NONE) => Some(SAMPLING),
        (Kind::Trace, NONE) => Some(TRACE),
        (Kind::Trace, SAMPLING) => Some(IDLE_SAMPLING),
        _ => None,
    });
}

/// A PC sampling window finished: `primes` where it had stall records of the program's, or the program ran in it
/// (launches with PC sampling on were seen to keep later windows' whole, `pc_order_probe.sh`; whether a window of a
/// running job that a busy GPU left without stall records does is not known, and it is not refused for it). Only
/// the first window is judged: after an idle one, a window with launches was blind too (SET=5). True where this
/// window was the first and left PC sampling blind.
pub fn note_sampling_ended(primes: bool) -> bool {
    let to = if primes { PRIMED } else { IDLE_SAMPLING };
    advance(|now| (now == SAMPLING).then_some(to)) && !primes
}

/// How this process's CUPTI use began.
pub fn first_use() -> FirstUse {
    match FIRST.load(Ordering::SeqCst) {
        TRACE => FirstUse::TraceBeforeSampling,
        IDLE_SAMPLING => FirstUse::IdleSampling,
        _ => FirstUse::Kept,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The order's rule, on FIRST (a static of the test process: this test alone moves it).
    #[test]
    fn the_first_pc_sampling_window_or_a_trace_before_it_decides() {
        let from = |steps: &[&dyn Fn()]| {
            FIRST.store(NONE, Ordering::SeqCst);
            for step in steps {
                step();
            }
            first_use()
        };
        let pc = || note(Kind::PcSampling);
        let trace = || note(Kind::Trace);
        let records = || {
            note_sampling_ended(true);
        };
        let none = || {
            note_sampling_ended(false);
        };
        assert_eq!(from(&[]), FirstUse::Kept, "no attach yet");
        assert_eq!(from(&[&trace, &pc]), FirstUse::TraceBeforeSampling);
        assert_eq!(from(&[&pc, &records, &trace]), FirstUse::Kept);
        assert_eq!(
            from(&[&pc, &none]),
            FirstUse::IdleSampling,
            "an idle first window, no trace after it"
        );
        assert_eq!(
            from(&[&pc, &none, &pc, &records, &trace]),
            FirstUse::IdleSampling,
            "a later window with stall records does not undo it"
        );
        assert_eq!(
            from(&[&pc, &records, &pc, &none, &trace]),
            FirstUse::Kept,
            "a later idle window does not either"
        );
        assert_eq!(
            from(&[&pc, &trace]),
            FirstUse::IdleSampling,
            "a trace after a first window that was not judged"
        );
        assert_eq!(
            from(&[&trace, &records]),
            FirstUse::TraceBeforeSampling,
            "kept"
        );
        FIRST.store(NONE, Ordering::SeqCst);
        pc();
        assert!(note_sampling_ended(false), "the first window, idle");
        assert!(!note_sampling_ended(false), "only the first");
        FIRST.store(NONE, Ordering::SeqCst);
        pc();
        assert!(!note_sampling_ended(true), "the first window, primed");
        FIRST.store(NONE, Ordering::SeqCst);
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
