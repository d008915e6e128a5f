//! A rank's steps: from an NVTX range that repeats on every rank, else from the repeating pattern of its
//! collectives.

use std::collections::HashMap;

use super::{Names, RankView};

/// Where the steps came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StepSource {
    /// The NVTX range of this name (index into the names).
    Nvtx(u32),
    /// Every `period`-th collective of a rank.
    Collectives { period: usize },
    /// Neither: no step is known.
    None,
}

/// The NVTX range that marks steps on every rank, if one does: of the ranges with at least two instances on every
/// rank (NCCL's own ranges left out), one whose name says `step` or `iter`, else the one that covers the most time.
pub(super) fn nvtx_step_name(ranks: &[RankView<'_>], names: &Names) -> Option<u32> {
    let mut per_name: HashMap<u32, (usize, u64)> = HashMap::new();
    for (i, r) in ranks.iter().enumerate() {
        let mut mine: HashMap<u32, (usize, u64)> = HashMap::new();
        for &(name, start, end) in &r.stream.ranges {
            let m = mine.entry(name).or_default();
            m.0 += 1;
            m.1 = m.1.saturating_add(end - start);
        }
        for (name, (n, total)) in mine {
            if n < 2 {
                continue;
            }
            let e = per_name.entry(name).or_default();
            // Counted only while every rank so far had it.
            if e.0 == i {
                e.0 += 1;
                e.1 = e.1.saturating_add(total);
            }
        }
    }
    let everywhere = per_name
        .into_iter()
        .filter(|(name, (n, _))| *n == ranks.len() && !names.get(*name).starts_with("NCCL:"));
    everywhere
        .max_by_key(|(name, (_, total))| {
            let lower = names.get(*name).to_ascii_lowercase();
            (
                lower.contains("step") || lower.contains("iter"),
                *total,
                std::cmp::Reverse(*name),
            )
        })
        .map(|(name, _)| name)
}

/// The steps of a rank from NVTX ranges named `name`: each from its start to the next one's start, the last to its
/// end.
pub(super) fn nvtx_steps(rank: &RankView<'_>, name: u32) -> Vec<(u64, u64)> {
    let mut ranges: Vec<(u64, u64)> = rank
        .stream
        .ranges
        .iter()
        .filter(|r| r.0 == name)
        .map(|r| (r.1, r.2))
        .collect();
    ranges.sort_unstable();
    let mut steps = Vec::with_capacity(ranges.len());
    for (i, &(start, end)) in ranges.iter().enumerate() {
        let to = ranges.get(i + 1).map_or(end, |next| next.0);
        steps.push((start, to.max(start)));
    }
    steps
}

/// A rank's collectives in start order: (name, start).
pub(super) fn collective_order(rank: &RankView<'_>) -> Vec<(u32, u64)> {
    let mut v: Vec<(u32, u64)> = rank
        .stream
        .collectives
        .iter()
        .map(|c| (c.name, c.start))
        .collect();
    v.sort_unstable_by_key(|c| (c.1, c.0));
    v
}

/// Whether two gaps between collectives are alike: within a quarter of the larger, or 2 µs.
fn alike(a: u64, b: u64) -> bool {
    a.abs_diff(b) <= (a.max(b) / 4).max(2_000)
}

/// The period of a sequence of collectives: of the numbers `p` such that, for nine in ten positions, the collective
/// `p` later has the same name (at least three whole periods seen), the smallest whose gaps repeat nearly as well as
/// the best's (the share of gaps alike to the gap `p` later at least 90% of the best share). Names alone cannot
/// tell three buckets of one name a step from three steps; the gaps (a long one before the first bucket) can,
/// while a real job's uneven steps still give the smallest period.
pub(super) fn period(order: &[(u32, u64)]) -> Option<usize> {
    let n = order.len();
    let gaps: Vec<u64> = order.windows(2).map(|w| w[1].1 - w[0].1).collect();
    let candidates: Vec<(usize, f64)> = (1..=64.min(n / 3))
        .filter(|&p| {
            let checks = n - p;
            let names = (0..checks)
                .filter(|&i| order[i].0 == order[i + p].0)
                .count();
            names * 10 >= checks * 9
        })
        .map(|p| {
            let pairs = gaps.len().saturating_sub(p);
            let timing = (0..pairs).filter(|&i| alike(gaps[i], gaps[i + p])).count();
            (p, timing as f64 / pairs.max(1) as f64)
        })
        .collect();
    let best = candidates.iter().map(|c| c.1).fold(0.0, f64::max);
    candidates.iter().find(|c| c.1 >= 0.9 * best).map(|c| c.0)
}

/// The steps of a rank from every `period`-th collective: from one to the next.
pub(super) fn pattern_steps(order: &[(u32, u64)], period: usize) -> Vec<(u64, u64)> {
    order
        .iter()
        .step_by(period.max(1))
        .map(|c| c.1)
        .collect::<Vec<u64>>()
        .windows(2)
        .map(|w| (w[0], w[1]))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_follows_names_and_gaps() {
        // One name, three buckets a step: a long gap then two short ones.
        let mut order = Vec::new();
        let mut t = 0;
        for _ in 0..10 {
            for gap in [50_000, 5_000, 5_000] {
                t += gap;
                order.push((0, t));
            }
        }
        assert_eq!(period(&order), Some(3));
        assert_eq!(pattern_steps(&order, 3)[0], (50_000, 110_000));
        // Two names alternating, even gaps: 2.
        let two: Vec<(u32, u64)> = (0..30).map(|i| (i % 2, i as u64 * 10_000)).collect();
        assert_eq!(period(&two), Some(2));
        // One name, even gaps: every collective is a step.
        let one: Vec<(u32, u64)> = (0..30).map(|i| (0, i as u64 * 10_000)).collect();
        assert_eq!(period(&one), Some(1));
        // Too few to say.
        assert_eq!(period(&one[..2]), None);
    }
}
