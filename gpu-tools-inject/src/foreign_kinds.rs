//! The activity kinds enabled for the program's own profiler alone (`coexist` sets them while it shares CUPTI):
//! their records go to the program, and the trace's writer leaves them out. A leaf module, so that the writer reads
//! what `coexist` decides without depending on it.

use std::sync::atomic::{AtomicU64, Ordering};

/// Bit `k` set: CUPTI activity kind `k` is enabled for the program alone.
static FOREIGN: AtomicU64 = AtomicU64::new(0);

/// Sets the kinds enabled for the program alone (0: none).
pub fn set(kinds: u64) {
    FOREIGN.store(kinds, Ordering::Release);
}

/// The kinds enabled for the program alone.
pub fn get() -> u64 {
    FOREIGN.load(Ordering::Acquire)
}

/// Whether a record of CUPTI activity kind `kind` belongs to the program alone.
pub fn is_foreign(foreign: u64, kind: u32) -> bool {
    foreign != 0 && 1u64.checked_shl(kind).unwrap_or(0) & foreign != 0
}

#[cfg(test)]
mod tests {
    use super::is_foreign;

    #[test]
    fn a_kind_is_foreign_only_where_its_bit_is_set() {
        assert!(is_foreign(1 << 10, 10));
        assert!(!is_foreign(1 << 10, 5));
        assert!(!is_foreign(0, 10));
        // A kind past the mask's width is nobody's.
        assert!(!is_foreign(u64::MAX, 64));
    }
}
