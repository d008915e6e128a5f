//! Finding: collectives running with no computation beside them ([`FindingKind::ExposedCommunication`]): the time
//! NCCL kernels ran while no other operation did, less the time they waited for other ranks (the straggler's or
//! the collective wait's finding counts that): transfer time that overlapping with computation would hide.

use std::collections::BTreeMap;

use super::finding::{EvidenceKind, Finding, FindingKind};
use super::straggler::waits;
use super::tally::{Draft, evidence, longest};
use super::words::{count, duration, percent, share};
use super::{Ctx, Span, View, What};

/// Union of the spans `[start, end)`, in any order: spans that do not overlap, in start order.
pub(crate) fn union(mut spans: Vec<(u64, u64)>) -> Vec<(u64, u64)> {
    spans.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for (s, e) in spans {
        match out.last_mut() {
            Some(l) if s <= l.1 => l.1 = l.1.max(e),
            _ => out.push((s, e)),
        }
    }
    out
}

/// A GPU's NCCL time in its window, the part of it with no other operation running, and those exposed spans.
fn exposed(view: &View<'_>) -> (u64, u64, Vec<(u64, u64)>) {
    let (mut comm, mut compute) = (Vec::new(), Vec::new());
    for i in view.ops_in_window() {
        let op = &view.p.ops[i];
        let span = (op.start, op.end.min(view.window.1));
        if matches!(op.what, What::Kernel { nccl: true, .. }) {
            comm.push(span);
        } else {
            compute.push(span);
        }
    }
    let (comm, compute) = (union(comm), union(compute));
    let total: u64 = comm.iter().map(|c| c.1 - c.0).sum();
    let mut bare = Vec::new();
    let mut j = 0;
    for &(s, e) in &comm {
        let mut at = s;
        while j < compute.len() && compute[j].1 <= s {
            j += 1;
        }
        let mut k = j;
        while k < compute.len() && compute[k].0 < e {
            if compute[k].0 > at {
                bare.push((at, compute[k].0));
            }
            at = at.max(compute[k].1);
            k += 1;
        }
        if at < e {
            bare.push((at, e));
        }
    }
    let exposed = bare.iter().map(|b| b.1 - b.0).sum();
    (total, exposed, bare)
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let waits = waits(ctx);
    let (mut total, mut bare, mut waited) = (0u64, 0u64, 0u64);
    let mut spans: Vec<Span> = Vec::new();
    let mut names: BTreeMap<u32, (u64, u64)> = BTreeMap::new();
    let mut seen = std::collections::HashSet::new();
    for view in &ctx.views {
        let (t, e, parts) = exposed(view);
        if t == 0 {
            continue;
        }
        total += t;
        bare += e;
        // A rank's wait counted once, on its first GPU.
        if seen.insert(view.key) {
            waited += waits.get(&view.key).copied().unwrap_or(0).min(e);
        }
        spans.extend(parts.iter().map(|&(s, e)| view.span(s, e)));
        for i in view.ops_in_window() {
            let op = &view.p.ops[i];
            if matches!(op.what, What::Kernel { nccl: true, .. }) {
                let n = names.entry(op.name).or_default();
                n.0 += 1;
                n.1 += op.end - op.start;
            }
        }
    }
    let cost = bare.saturating_sub(waited);
    if cost == 0 {
        return None;
    }
    longest(&mut spans);
    let ranks = ctx
        .views
        .iter()
        .map(|v| v.key)
        .collect::<std::collections::HashSet<_>>()
        .len();
    let mut ev = vec![evidence(
        EvidenceKind::Gap,
        "",
        None,
        Some(bare),
        format!(
            "NCCL kernels ran {} in the window, {} of it ({}) with no other operation on their GPU",
            duration(total),
            duration(bare),
            percent(share(bare, total))
        ),
    )];
    ev.push(evidence(
        EvidenceKind::Rank,
        "",
        None,
        Some(waited),
        if waits.is_empty() {
            format!(
                "only {} in the trace: part of this time may be waiting for ranks not traced",
                count(ranks as u64, "process", "processes")
            )
        } else {
            format!(
                "{} of it was waiting for the last rank to enter (counted in the straggler or collective wait \
                 finding, not here)",
                duration(waited)
            )
        },
    ));
    let mut top: Vec<(u32, (u64, u64))> = names.into_iter().collect();
    top.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
    for (name, (n, time)) in top.iter().take(2) {
        let name = ctx.names.get(*name);
        ev.push(evidence(
            EvidenceKind::Kernel,
            name,
            Some(*n),
            Some(*time),
            format!(
                "{name}: {}, {}",
                count(*n, "launch", "launches"),
                duration(*time)
            ),
        ));
    }
    Some(
        Draft {
            kind: FindingKind::ExposedCommunication,
            title: "Collectives run with no computation beside them: communication is not overlapped".into(),
            cost,
            basis: "the time NCCL kernels ran while no other kernel, copy or set did on their GPU, less the time they \
                    waited for the last rank: transfer time that overlapping with computation would hide"
                .into(),
            evidence: ev,
            advice: vec![
                "overlap communication with the backward pass: DDP's gradient buckets (`bucket_cap_mb`), FSDP's \
                 `backward_prefetch` and `forward_prefetch`, collectives on their own stream"
                    .into(),
                "send fewer bytes: gradient compression or lower precision for the reduction, larger buckets for \
                 fewer collectives"
                    .into(),
                "check the interconnect NCCL uses (`NCCL_DEBUG=INFO`: NVLink, InfiniBand, or sockets)".into(),
            ],
            spans,
        }
        .finish(ctx),
    )
}
