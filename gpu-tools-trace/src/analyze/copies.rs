//! The copies of the windows analysed, summed by direction and memory, for the copy findings.

use std::collections::BTreeMap;

use super::collect::What;
use super::finding::{Evidence, EvidenceKind};
use super::tally::evidence;
use super::words::{bytes, count, duration};
use super::{Ctx, Span};

/// Copies of one direction and memory: how many, bytes, device time, the largest.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Sum {
    pub count: u64,
    pub bytes: u64,
    pub time: u64,
    pub largest: u64,
}

/// The copies in the windows that `keep` accepts, by `HtoD (pageable -> device)`; and the steps of the GPUs.
pub(crate) fn sums(ctx: &Ctx<'_>, keep: impl Fn(&What) -> bool) -> (BTreeMap<String, Sum>, u64) {
    let mut out: BTreeMap<String, Sum> = BTreeMap::new();
    let mut steps = 0;
    for view in &ctx.views {
        steps += view.steps();
        for i in view.ops_in_window() {
            let op = &view.p.ops[i];
            if let What::Copy {
                kind,
                src,
                dst,
                bytes,
                ..
            } = op.what
            {
                if !keep(&op.what) {
                    continue;
                }
                let key = format!("{} ({} -> {})", kind.name(), src.name(), dst.name());
                let s = out.entry(key).or_default();
                s.count += 1;
                s.bytes += bytes;
                s.time += op.end - op.start;
                s.largest = s.largest.max(bytes);
            }
        }
    }
    (out, steps)
}

/// A line per direction and memory, the most copies first.
pub(crate) fn evidence_of(sums: &BTreeMap<String, Sum>, steps: u64) -> Vec<Evidence> {
    let mut rows: Vec<(&String, &Sum)> = sums.iter().collect();
    rows.sort_by(|a, b| b.1.count.cmp(&a.1.count).then(a.0.cmp(b.0)));
    rows.iter()
        .take(3)
        .map(|(key, s)| {
            let per_step = if steps > 0 {
                format!(" ({:.1} a step)", s.count as f64 / steps as f64)
            } else {
                String::new()
            };
            evidence(
                EvidenceKind::Copy,
                key.as_str(),
                Some(s.count),
                Some(s.time),
                format!(
                    "{} {key}{per_step}: {} in all, the largest {}, {} of device time",
                    count(s.count, "copy", "copies"),
                    bytes(s.bytes),
                    bytes(s.largest),
                    duration(s.time)
                ),
            )
        })
        .collect()
}

/// The device time of the copies in the windows that `keep` accepts during which no kernel ran on their GPU (time
/// a copy from page-locked memory on a stream of its own would overlap with computation), and those spans.
pub(crate) fn exposed(ctx: &Ctx<'_>, keep: impl Fn(&What) -> bool) -> (u64, Vec<Span>) {
    let mut total = 0;
    let mut spans = Vec::new();
    for view in &ctx.views {
        // The time kernels ran, as intervals that do not overlap, in order.
        let kernels = super::union(
            view.ops_in_window()
                .map(|i| &view.p.ops[i])
                .filter(|o| matches!(o.what, What::Kernel { .. } | What::Graph))
                .map(|o| (o.start, o.end))
                .collect(),
        );
        for i in view.ops_in_window() {
            let op = &view.p.ops[i];
            if !matches!(op.what, What::Copy { .. }) || !keep(&op.what) {
                continue;
            }
            let end = op.end.min(view.window.1);
            let from = kernels.partition_point(|k| k.1 <= op.start);
            let covered: u64 = kernels[from..]
                .iter()
                .take_while(|k| k.0 < end)
                .map(|k| k.1.min(end).saturating_sub(k.0.max(op.start)))
                .sum();
            let bare = end.saturating_sub(op.start) - covered;
            if bare > 0 {
                total += bare;
                spans.push(view.span(op.start, end));
            }
        }
    }
    (total, spans)
}
