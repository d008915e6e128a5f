//! Finding: the GPU idles while the host waits in synchronisation inside the step loop (idle cause `sync`):
//! explicit synchronisation calls, blocking copies, implicit synchronisation (`cudaFree`), and `.item()`-style
//! reads (a small device-to-host copy and the wait for it).

use std::collections::{BTreeMap, HashMap};

use super::collect::{CallClass, Op, What};
use super::finding::{EvidenceKind, Finding, FindingKind, IdleCause};
use super::idle::ITEM_BYTES;
use super::tally::{Draft, Tally, evidence, tally, where_steps};
use super::words::{bytes, count, duration, percent, share};
use super::{Ctx, View};
use crate::record::CopyKind;

/// Whether `op` is a small device-to-host read.
fn item_read(op: &Op) -> bool {
    matches!(op.what, What::Copy { kind: CopyKind::DtoH, bytes, .. } if bytes <= ITEM_BYTES)
}

/// The operation whose result a copy reads: the last one on its stream that ended before it started.
fn read_of(view: &View<'_>, copy: usize) -> Option<usize> {
    let c = &view.p.ops[copy];
    let before = view
        .gpu
        .ops
        .partition_point(|&i| view.p.ops[i].start < c.start);
    view.gpu.ops[..before]
        .iter()
        .rev()
        .copied()
        .find(|&i| i != copy && view.p.ops[i].stream == c.stream)
}

/// The innermost NVTX range of `thread` that holds `t`.
pub(crate) fn range_at(view: &View<'_>, thread: u32, t: u64) -> Option<u32> {
    view.p
        .ranges
        .iter()
        .filter(|r| r.thread == thread && r.start <= t && t < r.end)
        .min_by_key(|r| r.end - r.start)
        .map(|r| r.name)
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::Sync);
    if t.cost == 0 {
        return None;
    }
    // Stalls by the call held in, the reads by the kernel they read, stalls by NVTX range.
    let mut by_call: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    let mut reads: HashMap<String, (u64, u64, u64)> = HashMap::new();
    let mut ranges: HashMap<String, u64> = HashMap::new();
    let mut read_cost = 0u64;
    for &(v, g) in &t.gaps {
        let view = &ctx.views[v];
        let call = g.call.map(|c| &view.p.calls[c]);
        let name = call.map_or("a synchronisation record".to_string(), |c| {
            ctx.names.get(c.name).to_string()
        });
        let e = by_call.entry(name).or_default();
        e.0 += 1;
        e.1 += g.len();
        if let Some(copy) = g.copy.filter(|&c| item_read(&view.p.ops[c])) {
            read_cost += g.len();
            let of = read_of(view, copy).map_or("?", |k| ctx.names.get(view.p.ops[k].name));
            let bytes = match view.p.ops[copy].what {
                What::Copy { bytes, .. } => bytes,
                _ => 0,
            };
            let e = reads.entry(of.to_string()).or_default();
            e.0 += 1;
            e.1 += g.len();
            e.2 = e.2.max(bytes);
        }
        if let Some(r) = call.and_then(|c| range_at(view, c.thread, c.start)) {
            *ranges.entry(ctx.names.get(r).to_string()).or_default() += g.len();
        }
    }
    let items = read_cost * 2 >= t.cost;
    let mut ev = vec![t.gaps_evidence("began while the host waited for the device")];
    let mut calls: Vec<(String, (u64, u64))> = by_call.into_iter().collect();
    calls.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
    for (name, (n, idle)) in calls.iter().take(3) {
        ev.push(evidence(
            EvidenceKind::Call,
            name.as_str(),
            Some(*n),
            Some(*idle),
            format!(
                "{name}: the host waited in it as the GPU ran out of work {}, {} of idle time",
                count(*n, "time", "times"),
                duration(*idle)
            ),
        ));
    }
    let mut reads: Vec<(String, (u64, u64, u64))> = reads.into_iter().collect();
    reads.sort_by(|a, b| b.1.1.cmp(&a.1.1).then(a.0.cmp(&b.0)));
    for (kernel, (n, idle, size)) in reads.iter().take(2) {
        ev.push(evidence(
            EvidenceKind::Kernel,
            kernel.as_str(),
            Some(*n),
            Some(*idle),
            format!(
                "{} of at most {} (a value read back, `.item()`-style), each queued right after {kernel}, and the \
                 host waited for them ({} idle)",
                count(*n, "device-to-host copy", "device-to-host copies"),
                bytes(*size),
                duration(*idle)
            ),
        ));
    }
    ev.push(calls_evidence(ctx));
    let mut ranges: Vec<(String, u64)> = ranges.into_iter().collect();
    ranges.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    if let Some((range, idle)) = ranges.first() {
        ev.push(evidence(
            EvidenceKind::Nvtx,
            range.as_str(),
            None,
            Some(*idle),
            format!(
                "inside NVTX range {range:?}: {} of this idle time ({})",
                duration(*idle),
                percent(share(*idle, t.cost))
            ),
        ));
    }
    Some(draft(&t, ctx, items, &calls, ev).finish(ctx))
}

/// Every synchronising call in the windows, by name: how many, per step, the host's time in them.
fn calls_evidence(ctx: &Ctx<'_>) -> super::Evidence {
    let mut all: BTreeMap<&str, (u64, u64)> = BTreeMap::new();
    let mut steps = 0;
    for view in &ctx.views {
        steps += view.steps();
        for c in view.p.calls.iter().filter(|c| view.issued_inside(c.start)) {
            if matches!(c.class, CallClass::Sync | CallClass::BlockingCopy) {
                let e = all.entry(ctx.names.get(c.name)).or_default();
                e.0 += 1;
                e.1 += c.end - c.start;
            }
        }
    }
    let n: u64 = all.values().map(|e| e.0).sum();
    let time: u64 = all.values().map(|e| e.1).sum();
    let list: Vec<String> = all
        .iter()
        .map(|(name, (k, _))| format!("{name} ×{k}"))
        .collect();
    let per_step = if steps > 0 {
        format!(", {:.1} a step", n as f64 / steps as f64)
    } else {
        String::new()
    };
    evidence(
        EvidenceKind::Call,
        "",
        Some(n),
        Some(time),
        format!(
            "{} in the window{per_step} ({}), the host in them {}",
            count(n, "synchronising call", "synchronising calls"),
            list.join(", "),
            duration(time)
        ),
    )
}

fn draft(
    t: &Tally<'_>,
    ctx: &Ctx<'_>,
    items: bool,
    calls: &[(String, (u64, u64))],
    evidence: Vec<super::Evidence>,
) -> Draft {
    let title = if items {
        format!(
            "The GPU idles after `.item()`-style reads of results{}: the host waits for each before it issues more \
             work",
            where_steps(t)
        )
    } else {
        format!(
            "The GPU idles while the host waits in synchronisation{}",
            where_steps(t)
        )
    };
    let mut advice = Vec::new();
    if items {
        advice.push(
            "keep results on the GPU and read them every N steps (accumulate the loss in a tensor, log less \
             often): `.item()`, `.cpu()`, `.tolist()`, `print(tensor)` and `if tensor:` each wait for the GPU"
                .to_string(),
        );
    }
    let named = |w: &str| calls.iter().any(|(n, _)| n.contains(w));
    if named("Synchronize") {
        advice.push(
            "take `torch.cuda.synchronize()` / `cudaDeviceSynchronize` / `cudaStreamSynchronize` out of the loop \
             (for timing use events); where one stream needs another's result, make it wait on an event \
             (`cudaStreamWaitEvent`) instead of the host"
                .to_string(),
        );
    }
    if named("Free") {
        advice.push(
            "`cudaFree` synchronises the device: allocate once outside the loop, or use a caching or stream-ordered \
             allocator (`cudaMallocAsync`/`cudaFreeAsync`)"
                .to_string(),
        );
    }
    if named("Memcpy") && !items {
        advice.push(
            "copy with `cudaMemcpyAsync` from pinned memory (`non_blocking=True`) and wait only where the host \
             needs the data"
                .to_string(),
        );
    }
    if advice.is_empty() {
        advice.push(
            "wait for the device only where the host needs a result, and as late as possible"
                .into(),
        );
    }
    Draft {
        kind: FindingKind::SyncStall,
        title,
        cost: t.cost,
        basis: "the idle gaps that began while the host thread that issued the next work waited for the device (in a \
                synchronisation call, a blocking copy, or the wait after a small device-to-host read): the GPU ran out \
                of work because the host could not queue more; an upper bound on what removing the waits saves"
            .into(),
        evidence,
        advice,
        spans: t.spans(ctx),
    }
}
