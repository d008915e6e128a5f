//! What this process's first attach did. PC sampling after a first attach that traced (CUPTI's activity API, the
//! flight recorder beside it) counted every sample outside the program's kernels, in every later window (four eager
//! jobs, one H200, CUPTI 13.0, driver 580, `gpu-host/scripts/pc_order_probe.sh`); a job sampled first gave stall
//! records before and after a trace. A sampling while the program was idle (waiting for a child: no launch, no stall
//! record) did not: a trace after it left later windows blind as a trace first does (the survival matrix's
//! fork-child job, twice, and `pc_order_probe.sh`'s SET=4). PC sampling is refused after such a start
//! (`pc_attach`).

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

/// What an attach does, as far as the order matters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// PC sampling (`profile --pid --pc-sampling`).
    PcSampling,
    /// A trace (`trace --pid`, and `profile --pid`'s kernel metrics, which trace), or the range profiler.
    Trace,
}

/// How this process's first trace came, as far as PC sampling after it goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TracedFirst {
    /// No trace yet, or one after a PC sampling window with stall records or while the program ran: later windows
    /// keep theirs.
    No,
    /// A trace before any PC sampling.
    BeforeAnySampling,
    /// A trace after PC sampling whose every window had no stall record and an idle program.
    AfterEmptySampling,
}

const NONE: u8 = 0;
/// PC sampling began, and no window of it has had a stall record or the program running yet.
const SAMPLING: u8 = 1;
/// A PC sampling window had stall records, or the program ran in it, before any trace.
const PRIMED: u8 = 2;
/// A trace before any PC sampling.
const TRACE: u8 = 3;
/// A trace after PC sampling of an idle program only.
const TRACE_AFTER_EMPTY: u8 = 4;

/// Where the process stands; moves only forward, to PRIMED, TRACE or TRACE_AFTER_EMPTY, and stays there.
static FIRST: AtomicU8 = AtomicU8::new(NONE);

/// Moves FIRST to what `to` gives for where it stands, where it gives something.
fn advance(to: impl Fn(u8) -> Option<u8>) {
    let _ = FIRST.fetch_update(Ordering::SeqCst, Ordering::SeqCst, to);
}

/// An attach of `kind` begins: a trace reached CUPTI, or PC sampling started in a context.
pub fn note(kind: Kind) {
    advance(|now| match (kind, now) {
        (Kind::PcSampling, NONE) => Some(SAMPLING),
        (Kind::Trace, NONE) => Some(TRACE),
        (Kind::Trace, SAMPLING) => Some(TRACE_AFTER_EMPTY),
        _ => None,
    });
}

/// A PC sampling window finished: `primes` where it had stall records of the program's, or the program ran in it
/// (launches with PC sampling on were seen to keep later windows' whole, `pc_order_probe.sh`; whether a window of a
/// running job that a busy GPU left without stall records does is not known, and it is not refused for it). Before
/// the first trace, such a window keeps PC sampling after traces; one of an idle program does not.
pub fn note_sampling_ended(primes: bool) {
    if primes {
        advance(|now| (now == SAMPLING).then_some(PRIMED));
    }
}

/// How this process's first trace came.
pub fn traced_first() -> TracedFirst {
    match FIRST.load(Ordering::SeqCst) {
        TRACE => TracedFirst::BeforeAnySampling,
        TRACE_AFTER_EMPTY => TracedFirst::AfterEmptySampling,
        _ => TracedFirst::No,
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
    fn a_trace_blinds_pc_sampling_unless_a_window_with_stall_records_came_first() {
        let from = |state: u8, steps: &[&dyn Fn()]| {
            FIRST.store(state, Ordering::SeqCst);
            for step in steps {
                step();
            }
            traced_first()
        };
        let pc = || note(Kind::PcSampling);
        let trace = || note(Kind::Trace);
        let records = || note_sampling_ended(true);
        let none = || note_sampling_ended(false);
        assert_eq!(from(NONE, &[]), TracedFirst::No, "no attach yet");
        assert_eq!(from(NONE, &[&trace, &pc]), TracedFirst::BeforeAnySampling);
        assert_eq!(from(NONE, &[&pc, &records, &trace]), TracedFirst::No);
        assert_eq!(
            from(NONE, &[&pc, &none, &trace, &pc, &records]),
            TracedFirst::AfterEmptySampling,
            "stall records after the trace come too late"
        );
        assert_eq!(
            from(NONE, &[&pc, &none, &pc, &records, &trace]),
            TracedFirst::No,
            "a later window with stall records, before the trace"
        );
        assert_eq!(
            from(NONE, &[&trace, &records]),
            TracedFirst::BeforeAnySampling,
            "kept"
        );
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
