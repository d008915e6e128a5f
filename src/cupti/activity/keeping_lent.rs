//! The buffers CUPTI holds from the keeping lender ([`super::set_keeping_lender`]): lent to CUPTI after a stop that
//! keeps kinds closed the pool, completed back to the handler of unlent buffers while the tracer's callbacks are
//! still registered.
//!
//! The other consumer's callbacks go back to CUPTI at the end of such a stop. A buffer of its that CUPTI filled
//! meanwhile should come back first (its records are on the trace's clock, which the handler converts), and with
//! every record complete: a forced flush hands out the records of kernels still running without an end, and CUPTI
//! writes no complete one later. So whoever gives the callbacks back takes a [`keeping_mark`] before and waits, flushing
//! without force, until [`held_for_keeping`] says no buffer lent up to the mark is still in CUPTI. The lender's order, not the
//! buffer's address, tells the buffers apart: the consumer may hand the same address out again once CUPTI gave one
//! back.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// Buffers the keeping lender lent that CUPTI has not completed: the address and the order of the lending.
static HELD: Mutex<Vec<(usize, u64)>> = Mutex::new(Vec::new());
/// Buffers the keeping lender has lent since the process started.
static LENDS: AtomicU64 = AtomicU64::new(0);

/// A point in the keeping lender's lending: the buffers lent up to it ([`held_for_keeping`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct KeepingMark(u64);

fn held_list() -> std::sync::MutexGuard<'static, Vec<(usize, u64)>> {
    HELD.lock().unwrap_or_else(|p| p.into_inner())
}

/// The keeping lender gave CUPTI `buffer` (from the buffer-requested callback).
pub(super) fn lent(buffer: usize) {
    if buffer == 0 {
        return;
    }
    let order = LENDS.fetch_add(1, Ordering::AcqRel) + 1;
    held_list().push((buffer, order));
}

/// CUPTI completed `buffer`, which the pool did not lend (from the buffer-completed callback, before the handler of
/// unlent buffers takes it). The oldest lending of that address is the one CUPTI gives back.
pub(super) fn completed(buffer: usize) {
    let mut held = held_list();
    let oldest = held
        .iter()
        .enumerate()
        .filter(|(_, (b, _))| *b == buffer)
        .min_by_key(|(_, (_, order))| *order)
        .map(|(at, _)| at);
    if let Some(at) = oldest {
        held.swap_remove(at);
    }
}

/// The keeping lender's lending begins or ends (a stop that keeps kinds): what it lent before is not waited for. Once
/// the other consumer's callbacks are back, CUPTI completes such a buffer to them directly, and it never comes here;
/// counted still, each would hold every later wait to its bound.
pub(super) fn forget() {
    held_list().clear();
}

/// Now, in the keeping lender's lending: buffers it lends from here on are after the mark.
pub fn keeping_mark() -> KeepingMark {
    KeepingMark(LENDS.load(Ordering::Acquire))
}

/// How many buffers the keeping lender lent up to `mark` CUPTI still holds.
pub fn held_for_keeping(mark: KeepingMark) -> usize {
    held_list()
        .iter()
        .filter(|(_, order)| *order <= mark.0)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The list is the process's: one test at a time.
    static SERIAL: Mutex<()> = Mutex::new(());

    #[test]
    fn a_buffer_lent_after_the_mark_is_not_counted_and_a_reused_address_is_told_apart() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        // Only this one's addresses are counted.
        let (a, b) = (0x7000_0000_1000usize, 0x7000_0000_2000usize);
        lent(a);
        let m = keeping_mark();
        let mine = |m: KeepingMark| {
            held_list()
                .iter()
                .filter(|(x, o)| (*x == a || *x == b) && *o <= m.0)
                .count()
        };
        assert_eq!(mine(m), 1);
        lent(b);
        assert_eq!(mine(m), 1, "b came after the mark");
        completed(a);
        assert_eq!(mine(m), 0, "a came back");
        // The consumer lends a's address again: a new lending, after the mark.
        lent(a);
        assert_eq!(mine(m), 0);
        assert_eq!(mine(keeping_mark()), 2);
        completed(a);
        completed(b);
        assert_eq!(mine(keeping_mark()), 0);
        // An address never lent changes nothing.
        completed(0x7000_0000_3000);
        lent(0);
    }

    #[test]
    fn what_was_lent_before_the_lending_ended_is_not_waited_for() {
        let _serial = SERIAL.lock().unwrap_or_else(|p| p.into_inner());
        let a = 0x7000_0000_4000usize;
        lent(a);
        let m = keeping_mark();
        assert!(held_list().iter().any(|(x, o)| *x == a && *o <= m.0));
        forget();
        assert!(held_list().iter().all(|(x, _)| *x != a), "forgotten");
    }
}
