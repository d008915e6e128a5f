//! What the tool and an injected library take as the program's own work in a window: the CPU time of its threads
//! less the library's (whose names begin [`LIBRARY_THREADS`]), and the share of a window above which the program
//! counts as having run ([`RAN_FRACTION`]). The tool judges an attached trace's window without records by it; the
//! library judges a PC sampling window without stall records by it.

use std::time::Duration;

/// How the names of the injected library's threads begin (and of the CUPTI threads they start, which inherit the
/// name): the attach's own work in the process (its search for NVTX state, the PC sampling before a first trace) is
/// not the program running, and counted so made a job waiting for its child look busy.
pub const LIBRARY_THREADS: &[u8] = b"gpu-tools-";

/// CPU time within a window above which the program counts as having run. One that launches GPU work spends most
/// of the window on a core (a PyTorch job at 1000 steps a second: all of it); one that waits uses little, but not
/// none: a PyTorch job waiting for the child it started used 6% (30 ms of a 0.5 s window, its background threads),
/// which 5% took for a process that ran.
pub const RAN_FRACTION: f64 = 0.2;

/// Whether a program whose threads used `cpu` of CPU time in a window of `window` ran in it.
pub fn ran(cpu: Duration, window: Duration) -> bool {
    cpu.as_secs_f64() >= window.as_secs_f64() * RAN_FRACTION
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fifth_of_the_window_on_a_core_is_running() {
        let ms = Duration::from_millis;
        assert!(ran(ms(1000), ms(1000)));
        assert!(ran(ms(200), ms(1000)));
        assert!(!ran(ms(199), ms(1000)));
        assert!(!ran(ms(30), ms(500)), "a job waiting for its child");
        assert!(
            ran(ms(0), ms(0)),
            "no window: nothing to tell, taken as ran"
        );
    }
}
