//! A GPU's steps, found as the stragglers report finds a rank's (`report/job/steps.rs`), for one process: from an
//! NVTX range that repeats (one named `step` or `iter` first), else from the repeating pattern of its device
//! operations, where the launches of a CUDA graph count as operations (a step then runs from one launch of the
//! graph to the next).
//!
//! **The pattern.** Each operation has an identity: a kernel's name, a copy's direction and size, a set's size, a
//! graph's id. In a loop of `c` steps every identity the step runs occurs a multiple of `c` times (once per step,
//! twice, ...), and most identities once per step. Of the counts that occur (at least 3), `c` is the one that most
//! identities have (within one, or 2% of `c`: a warm-up step, a step cut at the window's edge), then the one under
//! which most operations fit a multiple, then the larger; at least half of the operations must fit, or there is
//! no pattern. The step starts at an
//! operation that occurs about `c` times: a graph launch if one does (the eager warm-up step of a captured loop
//! has none), else a host-to-device copy (a step's input), else one that occurs exactly `c` times, with the
//! longest median idle time before it (where a loop pauses: between steps). Each step runs from one occurrence to
//! the next.
//!
//! **Warm-up.** Leading steps longer than twice the median step (autotuning, compilation, lazy loading: many
//! times a step) are left out of the window analysed, and counted.

use std::collections::HashMap;

use super::collect::{Names, Op, Process, What};
use super::finding::StepSource;
use super::gpu::Gpu;
use super::host::Host;
use crate::record::CopyKind;

/// The steps of one GPU: each step's span and the operation that starts it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StepPlan {
    pub source: StepSource,
    /// Every step, warm-up included, in order: (start, end).
    pub spans: Vec<(u64, u64)>,
    /// For each step, the operation (index into the process's ops) that starts it, where one does (and, for a
    /// pattern, the one that starts the step after the last).
    pub first_ops: Vec<Option<usize>>,
    /// Leading steps that are warm-up.
    pub warmup: usize,
}

impl StepPlan {
    fn none() -> Self {
        StepPlan {
            source: StepSource::None,
            spans: Vec::new(),
            first_ops: Vec::new(),
            warmup: 0,
        }
    }

    /// The steps after the warm-up.
    pub(crate) fn steady(&self) -> &[(u64, u64)] {
        &self.spans[self.warmup.min(self.spans.len())..]
    }

    /// Leaves out leading steps longer than twice the median (and keeps at least two).
    fn mark_warmup(mut self) -> Self {
        let mut lengths: Vec<u64> = self.spans.iter().map(|s| s.1 - s.0).collect();
        lengths.sort_unstable();
        let median = lengths.get(lengths.len() / 2).copied().unwrap_or(0);
        self.warmup = self
            .spans
            .iter()
            .take_while(|s| s.1 - s.0 > median.saturating_mul(2))
            .count()
            .min(self.spans.len().saturating_sub(2));
        self
    }
}

/// An NVTX range's name without a step number at its end: `ProfilerStep#12` and `step 12` are `ProfilerStep` and
/// `step`.
pub(crate) fn range_group(name: &str) -> &str {
    let digits = name.trim_end_matches(|c: char| c.is_ascii_digit());
    if digits.len() == name.len() {
        return name;
    }
    let bare = digits.trim_end_matches(['#', ' ', '_', '-', ':', '=']);
    if bare.is_empty() { name } else { bare }
}

/// The steps of GPU `gpu` of `p`.
pub(crate) fn find(p: &Process, gpu: &Gpu, host: &Host<'_>, names: &Names) -> StepPlan {
    if let Some(plan) = nvtx(p, gpu, host, names) {
        return plan.mark_warmup();
    }
    match pattern(&p.ops, gpu, names) {
        Some(plan) => plan.mark_warmup(),
        None => StepPlan::none(),
    }
}

/// Steps from NVTX ranges: of the groups of ranges (names, numbers at the end left out; NCCL's own left out) that
/// follow each other without overlapping on one thread, one whose name says `step` or `iter` with at least two
/// ranges, else the one of at least three ranges, filling at least half the time from its first to its last,
/// that covers the most time.
fn nvtx(p: &Process, gpu: &Gpu, host: &Host<'_>, names: &Names) -> Option<StepPlan> {
    let mut groups: HashMap<(u32, &str), Vec<(u64, u64)>> = HashMap::new();
    for r in &p.ranges {
        let name = range_group(names.get(r.name));
        if name.starts_with("NCCL:") {
            continue;
        }
        groups
            .entry((r.thread, name))
            .or_default()
            .push((r.start, r.end));
    }
    // ((named step or iter, time covered), name, ranges)
    type Best<'n> = ((bool, u64), &'n str, Vec<(u64, u64)>);
    let mut best: Option<Best<'_>> = None;
    for ((_, name), mut ranges) in groups {
        ranges.sort_unstable();
        let sequential = ranges.windows(2).all(|w| w[1].0 >= w[0].1);
        let lower = name.to_ascii_lowercase();
        let named = lower.contains("step") || lower.contains("iter");
        if !sequential || ranges.len() < if named { 2 } else { 3 } {
            continue;
        }
        let total = ranges
            .iter()
            .fold(0u64, |t, r| t.saturating_add(r.1.saturating_sub(r.0)));
        // Unnamed, a range must fill most of the time from its first instance to its last, as steps do: ranges
        // of one operation (`aten::conv2d`, several a step) leave the rest of the step out.
        let span = ranges.last().map_or(0, |l| l.1) - ranges.first().map_or(0, |f| f.0);
        // `total < span - total`: half the span, without overflow (sequential ranges: `total <= span`).
        if !named && total < span.saturating_sub(total) {
            continue;
        }
        let score = (named, total);
        if best.as_ref().is_none_or(|b| (score, name) > (b.0, b.1)) {
            best = Some((score, name, ranges));
        }
    }
    let (_, name, ranges) = best?;
    let spans: Vec<(u64, u64)> = ranges
        .iter()
        .enumerate()
        .map(|(i, r)| (r.0, ranges.get(i + 1).map_or(r.1, |n| n.0)))
        .collect();
    let first_ops = spans
        .iter()
        .map(|&(s, e)| {
            gpu.ops.iter().copied().find(|&i| {
                let op = &p.ops[i];
                match host.launch_of(op) {
                    Some(c) => (s..e).contains(&host.calls[c].start),
                    None => op.start >= s && op.start < e,
                }
            })
        })
        .collect();
    Some(StepPlan {
        source: StepSource::Nvtx(name.to_string()),
        spans,
        first_ops,
        warmup: 0,
    })
}

/// How far from `c` (or a multiple of it) a count may lie and still fit `c` steps: one, or 2% of `c` (a warm-up
/// step run eagerly before a graph was captured, a step cut at the window's edge).
fn tolerance(c: usize) -> usize {
    (c / 50).max(1)
}

/// Most distinct counts tried as the number of steps.
const MAX_COUNTS: usize = 256;

/// Steps from the repeating pattern of the GPU's operations (see the module docs).
fn pattern(ops: &[Op], gpu: &Gpu, names: &Names) -> Option<StepPlan> {
    let mut counts: HashMap<u32, usize> = HashMap::new();
    for &i in &gpu.ops {
        *counts.entry(ops[i].name).or_default() += 1;
    }
    // Each count that occurs (at least 3), by how many identities occur about that often.
    let mut candidates: Vec<usize> = counts.values().copied().filter(|&n| n >= 3).collect();
    candidates.sort_unstable();
    candidates.dedup();
    let near = |c: usize| {
        counts
            .values()
            .filter(|&&n| n.abs_diff(c) <= tolerance(c))
            .count()
    };
    let mut candidates: Vec<(usize, usize)> =
        candidates.into_iter().map(|c| (c, near(c))).collect();
    candidates.sort_unstable_by_key(|c| (std::cmp::Reverse(c.1), std::cmp::Reverse(c.0)));
    candidates.truncate(MAX_COUNTS);
    // The operations whose count is about a multiple of `c`.
    let fits = |c: usize| -> usize {
        counts
            .values()
            .filter(|&&n| {
                let k = ((n as f64 / c as f64).round() as usize).max(1);
                n.abs_diff(k * c) <= tolerance(c)
            })
            .sum()
    };
    let (steps, _, score) = candidates
        .iter()
        .map(|&(c, identities)| (c, identities, fits(c)))
        .max_by_key(|&(c, identities, score)| (identities, score, c))?;
    if score * 2 < gpu.ops.len() {
        return None;
    }
    let anchor = anchor(ops, gpu, &counts, steps)?;
    let at: Vec<usize> = gpu
        .ops
        .iter()
        .copied()
        .filter(|&i| ops[i].name == anchor)
        .collect();
    let spans: Vec<(u64, u64)> = at
        .windows(2)
        .map(|w| (ops[w[0]].start, ops[w[1]].start))
        .collect();
    // Every occurrence starts a step: the last one the step after the last whole one.
    let first_ops = at.iter().map(|&i| Some(i)).collect();
    let name = names.get(anchor).to_string();
    let source = if matches!(ops[at[0]].what, What::Graph) {
        StepSource::Graph(name)
    } else {
        StepSource::Pattern(name)
    };
    Some(StepPlan {
        source,
        spans,
        first_ops,
        warmup: 0,
    })
}

/// The identity a step starts at, of those that occur about `steps` times (within the tolerance of the count):
/// a graph launch if one is; else a host-to-device copy (where a step's input arrives); then one that occurs
/// exactly `steps` times; then the one with the longest median idle time before it (where the loop pauses); the
/// earliest on a tie.
fn anchor(ops: &[Op], gpu: &Gpu, counts: &HashMap<u32, usize>, steps: usize) -> Option<u32> {
    let near = |n: usize| n.abs_diff(steps) <= tolerance(steps);
    // Idle time before each operation: its start less the latest end before it.
    let mut before: HashMap<u32, Vec<u64>> = HashMap::new();
    let mut first: HashMap<u32, (usize, bool, bool)> = HashMap::new();
    let mut latest = 0u64;
    for (k, &i) in gpu.ops.iter().enumerate() {
        let op = &ops[i];
        if counts.get(&op.name).is_some_and(|&n| n >= 2 && near(n)) {
            let idle = if k == 0 {
                0
            } else {
                op.start.saturating_sub(latest)
            };
            before.entry(op.name).or_default().push(idle);
            let input = matches!(
                op.what,
                What::Copy {
                    kind: CopyKind::HtoD,
                    ..
                }
            );
            first
                .entry(op.name)
                .or_insert((k, matches!(op.what, What::Graph), input));
        }
        latest = latest.max(op.end);
    }
    before
        .into_iter()
        .map(|(name, mut idle)| {
            idle.sort_unstable();
            let (at, graph, input) =
                first
                    .get(&name)
                    .copied()
                    .unwrap_or((usize::MAX, false, false));
            let exact = counts.get(&name) == Some(&steps);
            (
                graph,
                input,
                exact,
                idle[idle.len() / 2],
                std::cmp::Reverse(at),
                name,
            )
        })
        .max()
        .map(|c| c.5)
}
