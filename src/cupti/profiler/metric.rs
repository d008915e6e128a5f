//! Metric names: a base (`dram__bytes_read`, or with a unit prefix `TPC.TriageCompute.sm__cycles_active`) and a
//! submetric suffix (`.sum`, `.avg.per_second`), and the close names offered for a misspelt one.

/// A full name split at the end of its base.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct MetricName<'a> {
    name: &'a str,
    /// Byte length of the base, where a known base was found.
    base_len: Option<usize>,
}

impl<'a> MetricName<'a> {
    /// Splits `name` at the shortest prefix ending at a `.` (or the whole name) for which `is_base` holds.
    pub(crate) fn parse(name: &'a str, is_base: impl Fn(&str) -> bool) -> Self {
        let ends = name
            .match_indices('.')
            .map(|(i, _)| i)
            .chain(std::iter::once(name.len()));
        let base_len = ends.into_iter().find(|&i| i > 0 && is_base(&name[..i]));
        MetricName { name, base_len }
    }

    /// The base and the rest (empty or starting with `.`).
    pub(crate) fn base_and_suffix(&self) -> Option<(&'a str, &'a str)> {
        self.base_len.map(|n| self.name.split_at(n))
    }
}

/// The part of a name that spells its base, for comparing a misspelt name with the catalogue: up to the first `.`
/// after the `__` that separates unit and counter (or the whole name).
fn guessed_base(name: &str) -> (&str, &str) {
    let from = name.find("__").unwrap_or(0);
    match name[from..].find('.') {
        Some(i) => name.split_at(from + i),
        None => (name, ""),
    }
}

/// Levenshtein distance, with the usual two-row table.
pub(crate) fn distance(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.iter().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cost = usize::from(ca != cb);
            cur[j + 1] = (prev[j] + cost).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

/// Up to `max` base names close to `name` (by edit distance of the base part, or containing it), best first, each
/// with `name`'s suffix.
pub(crate) fn close_names<'a>(
    name: &str,
    bases: impl Iterator<Item = &'a str>,
    max: usize,
) -> Vec<String> {
    let (base, suffix) = guessed_base(name);
    if base.is_empty() {
        return Vec::new();
    }
    let limit = (base.chars().count() / 3).max(2);
    let mut scored: Vec<(usize, &str)> = bases
        .filter_map(|b| {
            let d = distance(base, b);
            if d <= limit {
                Some((d, b))
            } else if base.len() >= 4 && b.contains(base) {
                Some((limit + 1 + b.len() - base.len(), b))
            } else {
                None
            }
        })
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(max)
        .map(|(_, b)| format!("{b}{suffix}"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BASES: [&str; 5] = [
        "dram__bytes_read",
        "dram__bytes_write",
        "dram__bytes",
        "sm__cycles_active",
        "TPC.TriageCompute.sm__cycles_active",
    ];

    fn known(b: &str) -> bool {
        BASES.contains(&b)
    }

    #[test]
    fn names_split_after_their_base() {
        let p = MetricName::parse("dram__bytes_read.sum.per_second", known);
        assert_eq!(
            p.base_and_suffix(),
            Some(("dram__bytes_read", ".sum.per_second"))
        );
        let p = MetricName::parse("TPC.TriageCompute.sm__cycles_active.avg", known);
        assert_eq!(
            p.base_and_suffix(),
            Some(("TPC.TriageCompute.sm__cycles_active", ".avg"))
        );
        assert_eq!(
            MetricName::parse("dram__bytes_read", known).base_and_suffix(),
            Some(("dram__bytes_read", ""))
        );
        assert_eq!(
            MetricName::parse("dram__bytes_reed.sum", known).base_and_suffix(),
            None
        );
        assert_eq!(MetricName::parse("", known).base_and_suffix(), None);
        assert_eq!(MetricName::parse(".sum", known).base_and_suffix(), None);
    }

    #[test]
    fn misspelt_names_get_close_ones_with_their_suffix() {
        let close = close_names("dram__bytes_reed.sum", BASES.into_iter(), 3);
        assert_eq!(close[0], "dram__bytes_read.sum");
        assert!(
            close.contains(&"dram__bytes_write.sum".to_string()),
            "{close:?}"
        );
        assert!(close_names("zzzzzzzzzzzz.sum", BASES.into_iter(), 3).is_empty());
        // A fragment finds the names containing it.
        let close = close_names("cycles_active", BASES.into_iter(), 3);
        assert!(
            close.contains(&"sm__cycles_active".to_string()),
            "{close:?}"
        );
    }

    #[test]
    fn distances() {
        assert_eq!(distance("", ""), 0);
        assert_eq!(distance("abc", ""), 3);
        assert_eq!(distance("kitten", "sitting"), 3);
        assert_eq!(distance("dram__bytes_reed", "dram__bytes_read"), 1);
    }
}
