//! Finding: work queued on the GPU waits on the device's side (idle cause `queued`): the next operation had been
//! issued before the GPU ran out of work, and still started late (an event, another stream, another process).

use std::collections::BTreeMap;

use super::Ctx;
use super::finding::{EvidenceKind, Finding, FindingKind, IdleCause};
use super::tally::{Draft, evidence, tally};
use super::words::{count, duration, median};

/// Gaps with work queued are reported only when their median is at least this long: a queued operation starts a
/// few microseconds after the last one ends (the launch latency of back-to-back kernels), which no one can
/// remove; ten times that is a wait on something else.
const QUEUED_MEDIAN: u64 = 10_000;

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::Queued);
    let mut lengths: Vec<u64> = t.gaps.iter().map(|(_, g)| g.len()).collect();
    let typical = median(&mut lengths);
    if t.cost == 0 || typical < QUEUED_MEDIAN {
        return None;
    }
    let mut ev = vec![t.gaps_evidence("ended with work issued before the GPU ran out of it")];
    let mut other_stream = 0u64;
    let mut streams: BTreeMap<u32, u64> = BTreeMap::new();
    for &(v, g) in &t.gaps {
        let view = &ctx.views[v];
        let next = &view.p.ops[g.next];
        *streams.entry(next.stream).or_default() += g.len();
        let at = view
            .gpu
            .ops
            .partition_point(|&i| view.p.ops[i].start < next.start);
        // The last to end among the operations just before (bounded: the gap's neighbours are near).
        let previous = view.gpu.ops[..at]
            .iter()
            .rev()
            .take(64)
            .copied()
            .max_by_key(|&i| view.p.ops[i].end);
        if previous.is_some_and(|i| view.p.ops[i].stream != next.stream) {
            other_stream += 1;
        }
    }
    ev.push(evidence(
        EvidenceKind::Gap,
        "",
        Some(other_stream),
        Some(typical),
        format!(
            "{} each (median); {} of them the next work was on another stream than the last that ran",
            duration(typical),
            count(other_stream, "in one", "in")
        ),
    ));
    if let Some((stream, time)) = streams
        .iter()
        .max_by_key(|(s, t)| (**t, std::cmp::Reverse(**s)))
    {
        ev.push(evidence(
            EvidenceKind::Gap,
            format!("stream {stream}"),
            None,
            Some(*time),
            format!(
                "most of it before work on stream {stream} ({})",
                duration(*time)
            ),
        ));
    }
    let waits: u64 = ctx
        .views
        .iter()
        .flat_map(|v| v.p.calls.iter().filter(|c| v.issued_inside(c.start)))
        .filter(|c| ctx.names.get(c.name).contains("StreamWaitEvent"))
        .count() as u64;
    if waits > 0 {
        ev.push(evidence(
            EvidenceKind::Call,
            "cudaStreamWaitEvent",
            Some(waits),
            None,
            format!(
                "{} made streams wait on events in the window",
                count(waits, "call", "calls")
            ),
        ));
    }
    Some(
        Draft {
            kind: FindingKind::QueuedWork,
            title: "Work queued on the GPU waits to start: on events, another stream, or another process".into(),
            cost: t.cost,
            basis: "the idle gaps whose next work had been issued before the GPU ran out of work (typical gap at least \
                    10 µs, beyond launch latency): time the device waited on a dependency"
                .into(),
            evidence: ev,
            advice: vec![
                "look at the dependencies between streams (events, `cudaStreamWaitEvent`): a stream that waits on \
                 another serialises them"
                    .into(),
                "check for other processes on the same GPU (another job, MPS clients) and for the GPU's clocks \
                 (throttling)"
                    .into(),
            ],
            spans: t.spans(ctx),
        }
        .finish(ctx),
    )
}
