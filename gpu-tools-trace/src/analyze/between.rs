//! Finding: the GPU idles between steps (idle cause `between_steps`): at a step's start the host issued the step's
//! first work only after the GPU had run out; the host was loading input, logging, or running the loop itself.

use std::collections::BTreeMap;

use super::Ctx;
use super::finding::{EvidenceKind, Finding, FindingKind, IdleCause};
use super::steps::range_group;
use super::tally::{Draft, Tally, evidence, tally};
use super::words::{count, duration, median, percent, share};

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::BetweenSteps);
    if t.cost == 0 {
        return None;
    }
    let mut ev =
        vec![t.gaps_evidence(
            "began at a step's start, before the host issued the step's first work",
        )];
    let mut lengths: Vec<u64> = t.gaps.iter().map(|(_, g)| g.len()).collect();
    let longest = lengths.iter().copied().max().unwrap_or(0);
    let typical = median(&mut lengths);
    let mut steps: Vec<u64> = t
        .gaps
        .iter()
        .map(|(v, _)| ctx.views[*v].length() / ctx.views[*v].steps().max(1))
        .collect();
    let step = median(&mut steps);
    ev.push(evidence(
        EvidenceKind::Step,
        "",
        None,
        Some(typical),
        format!(
            "{} at each step's start (median; the longest {}), against a step of {} (median over the GPUs)",
            duration(typical),
            duration(longest),
            duration(step)
        ),
    ));
    let (ranges, calls) = host_work(ctx, &t);
    if let Some((name, overlap)) = ranges
        .iter()
        .max_by_key(|(n, o)| (**o, std::cmp::Reverse(*n)))
    {
        ev.push(evidence(
            EvidenceKind::Nvtx,
            name.as_str(),
            None,
            Some(*overlap),
            format!(
                "NVTX range {name:?} covers {} of these gaps ({})",
                duration(*overlap),
                percent(share(*overlap, t.cost))
            ),
        ));
    }
    let made: u64 = calls.values().sum();
    let mut top: Vec<(&String, &u64)> = calls.iter().collect();
    top.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
    let list: Vec<String> = top
        .iter()
        .take(3)
        .map(|(n, k)| format!("{n} ×{k}"))
        .collect();
    ev.push(evidence(
        EvidenceKind::Call,
        "",
        Some(made),
        None,
        if made == 0 {
            "the host made no CUDA call in these gaps before issuing the step: the time is its own work (input, \
             logging, the loop)".into()
        } else {
            format!(
                "the host made {} in these gaps before issuing the step ({}); the rest of the time is its own work",
                count(made, "CUDA call", "CUDA calls"),
                list.join(", ")
            )
        },
    ));
    Some(
        Draft {
            kind: FindingKind::BetweenSteps,
            title: "The GPU idles between steps: the host prepares each step (input, logging, the loop) while the \
                    GPU waits"
                .into(),
            cost: t.cost,
            basis: "the idle gaps that ended with a step's first work, begun before the host issued it, and not while \
                    it waited for the device: what overlapping the host's work between steps with the GPU's would \
                    save at most"
                .into(),
            evidence: ev,
            advice: vec![
                "prepare the next batch while the GPU runs: `DataLoader(num_workers=N, pin_memory=True, \
                 persistent_workers=True, prefetch_factor=...)` and `.to(device, non_blocking=True)`"
                    .into(),
                "move logging, metrics and checkpointing out of the step, or do them every N steps".into(),
                "look at what the host does in these gaps (py-spy, perf), or mark it with an NVTX range".into(),
            ],
            spans: t.spans(ctx),
        }
        .finish(ctx),
    )
}

/// Over the gaps of `t`: the NVTX ranges (other than the steps') by the time they cover, and the CUDA calls the
/// host made before the one that issued the step's first work, by name.
fn host_work(ctx: &Ctx<'_>, t: &Tally<'_>) -> (BTreeMap<String, u64>, BTreeMap<String, u64>) {
    let mut ranges: BTreeMap<String, u64> = BTreeMap::new();
    let mut calls: BTreeMap<String, u64> = BTreeMap::new();
    for (v, view) in ctx.views.iter().enumerate() {
        let gaps: Vec<_> = t
            .gaps
            .iter()
            .filter(|(w, _)| *w == v)
            .map(|(_, g)| *g)
            .collect();
        if gaps.is_empty() {
            continue;
        }
        let steps_name = match &view.plan.source {
            super::StepSource::Nvtx(n) => Some(n.as_str()),
            _ => None,
        };
        let mut by_start: Vec<(u64, u32)> =
            view.p.calls.iter().map(|c| (c.start, c.name)).collect();
        by_start.sort_unstable();
        let mut spans: Vec<(u64, u64, u32)> = view
            .p
            .ranges
            .iter()
            .map(|r| (r.start, r.end, r.name))
            .collect();
        spans.sort_unstable();
        for g in gaps {
            // The calls before the one that issued the step's first work.
            let until = view
                .host
                .launch_of(&view.p.ops[g.next])
                .map_or(g.end, |c| view.host.calls[c].start.min(g.end));
            let from = by_start.partition_point(|c| c.0 < g.start);
            for c in by_start[from..].iter().take_while(|c| c.0 < until) {
                *calls.entry(ctx.names.get(c.1).to_string()).or_default() += 1;
            }
            let to = spans.partition_point(|r| r.0 < g.end);
            for r in spans[..to].iter().filter(|r| r.1 > g.start) {
                let name = ctx.names.get(r.2);
                if Some(range_group(name)) != steps_name {
                    *ranges.entry(name.to_string()).or_default() +=
                        r.1.min(g.end) - r.0.max(g.start);
                }
            }
        }
    }
    (ranges, calls)
}
