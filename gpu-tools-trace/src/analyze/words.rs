//! Numbers as the findings' sentences write them; a report of the findings writes its own numbers with these,
//! so that the two agree.

/// `800 ns`, `45.1 µs`, `2.79 ms`, `1.24 s`.
pub fn duration(ns: u64) -> String {
    let f = ns as f64;
    if ns < 1_000 {
        format!("{ns} ns")
    } else if ns < 1_000_000 {
        format!("{:.1} µs", f / 1e3)
    } else if ns < 1_000_000_000 {
        format!("{:.2} ms", f / 1e6)
    } else {
        format!("{:.2} s", f / 1e9)
    }
}

/// A share (0 to 1) as a percentage: `38%`, `4.2%`, `0.3%`.
pub fn percent(share: f64) -> String {
    let p = 100.0 * share;
    if p >= 10.0 {
        format!("{p:.0}%")
    } else {
        format!("{p:.1}%")
    }
}

/// `4 B`, `512 B`, `64.0 KiB`, `768.0 KiB`, `1.5 MiB`, `2.0 GiB`.
pub(crate) fn bytes(n: u64) -> String {
    let f = n as f64;
    if n < 1024 {
        format!("{n} B")
    } else if n < 1 << 20 {
        format!("{:.1} KiB", f / 1024.0)
    } else if n < 1 << 30 {
        format!("{:.1} MiB", f / f64::from(1u32 << 20))
    } else {
        format!("{:.1} GiB", f / f64::from(1u32 << 30))
    }
}

/// `n` and its noun: `1 call`, `3 calls`.
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// `a / b` as a share, 0 where `b` is 0.
pub(crate) fn share(a: u64, b: u64) -> f64 {
    if b == 0 { 0.0 } else { a as f64 / b as f64 }
}

/// The median of `v` (sorted in place; the lower middle for an even count), 0 when empty.
pub(crate) fn median(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() - 1) / 2]
}

/// The 90th percentile (nearest rank) of `v`, sorted in place; 0 when empty.
pub(crate) fn p90(v: &mut [u64]) -> u64 {
    if v.is_empty() {
        return 0;
    }
    v.sort_unstable();
    v[(v.len() * 9).div_ceil(10) - 1]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_read_as_written() {
        assert_eq!(duration(800), "800 ns");
        assert_eq!(duration(45_100), "45.1 µs");
        assert_eq!(duration(2_790_000), "2.79 ms");
        assert_eq!(duration(1_240_000_000), "1.24 s");
        assert_eq!(percent(0.38), "38%");
        assert_eq!(percent(0.042), "4.2%");
        assert_eq!(bytes(4), "4 B");
        assert_eq!(bytes(786_432), "768.0 KiB");
        assert_eq!(count(1, "call", "calls"), "1 call");
        let mut v = vec![5, 1, 3, 2];
        assert_eq!(median(&mut v), 2);
        assert_eq!(p90(&mut v), 5);
    }
}
