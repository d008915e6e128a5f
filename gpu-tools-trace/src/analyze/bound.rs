//! Findings from device counters (`trace --counters`), where the trace has them: kernels bound by DRAM bandwidth
//! ([`FindingKind::MemoryBound`]), by computation ([`FindingKind::ComputeBound`]), or leaving the SMs idle much of
//! their time ([`FindingKind::LowSmActivity`]), each with its share of the GPU time. The counters per kernel are
//! [`counters::attribution`](crate::counters::attribution)'s (shares of elapsed time fitted where a kernel's
//! samples are mostly other kernels'), over the kernels of the windows analysed.
//!
//! A kernel is judged only where samples cover at least half its time, and only the kernels that make up the
//! first 90% of the kernel time (at most ten): the rest cannot move the total much. In this order:
//! - tensor pipes active at least 40% of its time: compute-bound on tensor cores (well-tuned matrix products
//!   reach 60-90%; at 40% the tensor pipes are what the kernel mostly waits on);
//! - DRAM traffic at least 60% of the device's peak bandwidth (memory-bound kernels reach 70-90% of it, so at 60%
//!   little headroom is left), the peak from the device's name where the counter stream names a known GPU, else
//!   the highest rate any sample of the trace reached (said), and at least 200 GB/s (less than any current
//!   data-centre GPU's memory-bound kernels move);
//! - SMs active at least 80% with neither of those: compute-bound on the SMs (or on latency with full occupancy);
//! - SMs active under 50%: the kernel leaves half the GPU idle (too few blocks, a tail).

use std::collections::HashMap;

use super::finding::{Evidence, EvidenceKind, Finding, FindingKind};
use super::tally::{Draft, evidence, longest};
use super::words::{count, duration, percent, share};
use super::{Ctx, Span, What};
use crate::counters::{
    Attribution, DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND, KernelCounters, SM_ACTIVE,
    TENSOR_ACTIVE,
};
use crate::{CounterGap, CounterSample};

/// Peak DRAM bandwidth of known GPUs, bytes per second, by a part of the name NVIDIA gives them (the more
/// specific first: `GH200` holds `H200`, `L40S` holds `L4`).
const PEAKS: [(&str, f64); 19] = [
    ("GH200", 4.0e12),
    ("H200", 4.8e12),
    ("H100 PCIe", 2.0e12),
    ("H100 NVL", 3.9e12),
    ("H100", 3.35e12),
    ("H800", 3.35e12),
    ("B200", 8.0e12),
    ("B100", 8.0e12),
    ("A100 80GB", 2.0e12),
    ("A100-SXM4-80GB", 2.0e12),
    ("A100", 1.555e12),
    ("A800", 2.0e12),
    ("L40S", 0.864e12),
    ("L40", 0.864e12),
    ("L4", 0.3e12),
    ("A10", 0.6e12),
    ("A30", 0.933e12),
    ("T4", 0.32e12),
    ("V100", 0.9e12),
];

/// Below this a kernel is not called memory-bound whatever the reference: bytes per second.
const MIN_MEMORY_BOUND: f64 = 200e9;

/// A device's peak DRAM bandwidth from its name, where it is a known GPU.
pub(crate) fn peak_of(name: &str) -> Option<f64> {
    PEAKS.iter().find(|(k, _)| name.contains(k)).map(|p| p.1)
}

/// The GPU name a counter stream's notice gives (`counters: device 0 is GPU-… (NVIDIA H200, this host's …`).
fn device_name(notice: &str) -> Option<&str> {
    let rest = notice.strip_prefix("counters: device ")?;
    let open = rest.find(" (")?;
    let name = &rest[open + 2..];
    Some(&name[..name.find(',')?])
}

/// The kernels of the windows and every counter sample, on one timeline; the reference DRAM rate and how it was
/// found.
fn attribution(ctx: &Ctx<'_>) -> Option<(Attribution, f64, String)> {
    let mut a = Attribution::new();
    let align = ctx.trace.alignment();
    for view in &ctx.views {
        let host = view.id.host.as_str();
        for i in view.ops_in_window() {
            let op = &view.p.ops[i];
            if matches!(op.what, What::Kernel { .. }) {
                let (s, e) = (
                    align.apply(view.key.0, view.key.1, op.start),
                    align.apply(view.key.0, view.key.1, op.end),
                );
                a.add_kernel(host, op.device, &ctx.names.arc(op.name), s, e);
            }
        }
    }
    let (mut observed, mut peaks, mut named) = (0f64, Vec::new(), true);
    for (key, p) in ctx.trace.processes() {
        let host = p.info.as_ref().map_or("", |i| i.host.as_str());
        let at = |t: u64| align.apply(key.0, key.1, t);
        for c in &p.samples {
            let rate = [DRAM_READ_PER_SECOND, DRAM_WRITE_PER_SECOND]
                .iter()
                .filter_map(|m| c.values.iter().find(|v| &*v.0 == *m).map(|v| v.1))
                .filter(|v| v.is_finite())
                .sum::<f64>();
            observed = observed.max(rate);
            a.add_sample(
                host,
                &CounterSample {
                    start: at(c.start),
                    end: at(c.end),
                    ..c.clone()
                },
            );
        }
        for g in &p.gaps {
            a.add_gap(
                host,
                &CounterGap {
                    start: at(g.start),
                    end: at(g.end),
                    ..*g
                },
            );
        }
        if !p.samples.is_empty() {
            match p
                .notices
                .iter()
                .find_map(|n| device_name(n))
                .and_then(|n| Some((n, peak_of(n)?)))
            {
                Some((name, peak)) => peaks.push((name.to_string(), peak)),
                None => named = false,
            }
        }
    }
    if !a.has_samples() {
        return None;
    }
    let slowest = peaks
        .iter()
        .min_by(|x, y| x.1.total_cmp(&y.1))
        .filter(|_| named);
    Some(match slowest {
        Some((name, peak)) => (
            a,
            *peak,
            format!("{name}'s peak of {:.2} TB/s", peak / 1e12),
        ),
        None => (
            a,
            observed,
            format!(
                "the highest rate any sample of the trace reached, {:.2} TB/s (no known GPU named: its peak may be higher)",
                observed / 1e12
            ),
        ),
    })
}

/// What bounds a kernel, from its counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Bound {
    Memory,
    Tensor,
    Sm,
    Idle,
}

/// A kernel's SM and tensor active (fitted where statistical), and its DRAM rate.
fn levels(k: &KernelCounters) -> (Option<f64>, Option<f64>, Option<f64>) {
    let share = |m: &str| {
        let fitted = if k.statistical() { k.fitted(m) } else { None };
        fitted.or_else(|| k.value(m))
    };
    let bytes = match (
        k.value(DRAM_READ_PER_SECOND),
        k.value(DRAM_WRITE_PER_SECOND),
    ) {
        (None, None) => None,
        (r, w) => Some(r.unwrap_or(0.0) + w.unwrap_or(0.0)),
    };
    let rate = bytes
        .filter(|_| k.covered_time > 0)
        .map(|b| b / (k.covered_time as f64 / 1e9));
    (share(SM_ACTIVE), share(TENSOR_ACTIVE), rate)
}

fn judge(k: &KernelCounters, reference: f64) -> Option<Bound> {
    let (sm, tensor, rate) = levels(k);
    if tensor.is_some_and(|t| t >= 40.0) {
        return Some(Bound::Tensor);
    }
    if rate.is_some_and(|r| r >= 0.6 * reference && r >= MIN_MEMORY_BOUND) {
        return Some(Bound::Memory);
    }
    match sm {
        Some(s) if s >= 80.0 => Some(Bound::Sm),
        Some(s) if s < 50.0 => Some(Bound::Idle),
        _ => None,
    }
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Vec<Finding> {
    let Some((a, reference, why)) = attribution(ctx) else {
        return Vec::new();
    };
    let result = a.attribute();
    let kernel_time: u64 = result.kernels.iter().map(|k| k.gpu_time).sum();
    let mut groups: HashMap<Bound, Vec<&KernelCounters>> = HashMap::new();
    let mut so_far = 0u64;
    for k in result.kernels.iter().take(10) {
        if so_far as f64 >= 0.9 * kernel_time as f64 {
            break;
        }
        so_far += k.gpu_time;
        if k.covered() < 0.5 {
            continue;
        }
        if let Some(b) = judge(k, reference) {
            groups.entry(b).or_default().push(k);
        }
    }
    let busy: u64 = ctx.views.iter().map(|v| v.busy).sum();
    let mut out = Vec::new();
    for bound in [Bound::Memory, Bound::Tensor, Bound::Sm, Bound::Idle] {
        let Some(kernels) = groups.get(&bound) else {
            continue;
        };
        let cost: u64 = kernels.iter().map(|k| k.gpu_time).sum();
        let mut ev: Vec<Evidence> = kernels
            .iter()
            .map(|k| kernel_evidence(ctx, k, busy, reference))
            .collect();
        if bound == Bound::Memory {
            ev.push(evidence(
                EvidenceKind::Counter,
                "",
                None,
                None,
                format!("DRAM reference: {why}"),
            ));
        }
        let names: Vec<&str> = kernels.iter().map(|k| &*k.name).collect();
        out.push(draft(bound, cost, ev, spans(ctx, &names), kernels.len()).finish(ctx));
    }
    out
}

/// A kernel's counters in words, with its share of the GPU's busy time and its median grid.
fn kernel_evidence(ctx: &Ctx<'_>, k: &KernelCounters, busy: u64, reference: f64) -> Evidence {
    let (sm, tensor, rate) = levels(k);
    let pct = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}%"));
    let mut blocks: Vec<u64> = ctx
        .views
        .iter()
        .flat_map(|v| v.ops_in_window().map(move |i| &v.p.ops[i]))
        .filter(|o| ctx.names.get(o.name) == &*k.name)
        .filter_map(|o| match o.what {
            What::Kernel { blocks, .. } => Some(blocks),
            _ => None,
        })
        .collect();
    let grid = super::words::median(&mut blocks);
    let dram = rate.map_or("-".to_string(), |r| {
        format!(
            "{:.0} GB/s ({} of the reference)",
            r / 1e9,
            percent(r / reference.max(1.0))
        )
    });
    evidence(
        EvidenceKind::Counter,
        &*k.name,
        Some(k.launches),
        Some(k.gpu_time),
        format!(
            "{}: {} ({} of the GPU's busy time), {}; SM active {}, tensor active {}, DRAM {dram}; {} a launch \
             (median); samples cover {}",
            k.name,
            duration(k.gpu_time),
            percent(share(k.gpu_time, busy)),
            count(k.launches, "launch", "launches"),
            pct(sm),
            pct(tensor),
            count(grid, "block", "blocks"),
            percent(k.covered())
        ),
    )
}

/// The longest launches of the kernels named.
fn spans(ctx: &Ctx<'_>, names: &[&str]) -> Vec<Span> {
    let mut spans: Vec<Span> = Vec::new();
    for v in &ctx.views {
        for i in v.ops_in_window() {
            let op = &v.p.ops[i];
            if names.contains(&ctx.names.get(op.name)) {
                spans.push(v.span(op.start, op.end));
            }
        }
    }
    longest(&mut spans);
    spans
}

fn draft(bound: Bound, cost: u64, evidence: Vec<Evidence>, spans: Vec<Span>, n: usize) -> Draft {
    let basis = "the GPU time of these kernels in the window (what their bound limits; a fix saves a part of it), \
                 judged from the device counters sampled while they ran"
        .to_string();
    let kernels = count(n as u64, "kernel", "kernels");
    let (kind, title, advice): (FindingKind, String, Vec<String>) = match bound {
        Bound::Memory => (
            FindingKind::MemoryBound,
            format!("{kernels} bound by DRAM bandwidth"),
            vec![
                "move fewer bytes: fuse elementwise kernels into their producers (`torch.compile`), keep tensors in \
                 lower precision (bf16, fp8), avoid layout copies (`.contiguous()`, transposes)"
                    .into(),
                "reuse what is loaded (tiling, larger tiles in shared memory), so that each byte feeds more work".into(),
            ],
        ),
        Bound::Tensor => (
            FindingKind::ComputeBound,
            format!("{kernels} bound by computation on the tensor cores"),
            vec![
                "the tensor cores are busy: lower precision (fp8 where accuracy allows) or less work (smaller or \
                 sparser layers) is what remains"
                    .into(),
            ],
        ),
        Bound::Sm => (
            FindingKind::ComputeBound,
            format!("{kernels} bound by computation on the SMs, not on tensor cores"),
            vec![
                "move the math to tensor cores: TF32 or bf16 matrix products (`torch.backends.cuda.matmul.allow_tf32`, \
                 autocast), or libraries' tensor-core kernels"
                    .into(),
                "cut instructions per element (fuse, vectorise loads, avoid recomputation)".into(),
            ],
        ),
        Bound::Idle => (
            FindingKind::LowSmActivity,
            format!("{kernels} that leave the SMs idle half their time or more"),
            vec![
                "give the kernel more parallel work: more blocks than the GPU has SMs (a larger batch, a split of \
                 the reduction dimension), or fuse it with its neighbours"
                    .into(),
                "look for a tail: a last wave of few blocks, or one long block".into(),
            ],
        ),
    };
    Draft {
        kind,
        title,
        cost,
        basis,
        evidence,
        advice,
        spans,
    }
}
