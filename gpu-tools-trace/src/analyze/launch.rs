//! Finding: the GPU waits for the host to launch short kernels (idle cause `launch`): inside a step, the host
//! issued each next kernel only after the GPU had finished the last. With the kernels' own time against their
//! launch calls', and the step's repeating sequence that a CUDA graph would replay with one launch.

use std::collections::{BTreeMap, HashMap};

use super::collect::{CallClass, What};
use super::finding::{Evidence, EvidenceKind, Finding, FindingKind, IdleCause};
use super::tally::{Draft, Tally, evidence, tally, where_steps};
use super::words::{count, duration, median, percent, share};
use super::{Ctx, View};

/// A step sequence of at least this many kernels is worth a CUDA graph: a graph launch costs about as much as a
/// few kernel launches, so with ten or more the launches it saves outweigh it.
const GRAPH_KERNELS: usize = 10;

/// Where the host was when the GPU ran out: (in launch calls, outside CUDA calls, in other calls by name).
fn host_split(ctx: &Ctx<'_>, t: &Tally<'_>) -> (u64, u64, BTreeMap<String, u64>) {
    let (mut launching, mut own) = (0, 0);
    let mut other: BTreeMap<String, u64> = BTreeMap::new();
    for &(v, g) in &t.gaps {
        let calls = &ctx.views[v].p.calls;
        match g.call.map(|c| &calls[c]) {
            None => own += g.len(),
            Some(c) if matches!(c.class, CallClass::Launch | CallClass::Copy) => {
                launching += g.len()
            }
            Some(c) => *other.entry(ctx.names.get(c.name).to_string()).or_default() += g.len(),
        }
    }
    (launching, own, other)
}

/// Per kernel name in the windows: launches, durations, durations of their launch calls.
type Kernels = HashMap<u32, (Vec<u64>, Vec<u64>)>;

fn kernels(ctx: &Ctx<'_>) -> Kernels {
    let mut k: Kernels = HashMap::new();
    for view in &ctx.views {
        for i in view.ops_in_window() {
            let op = &view.p.ops[i];
            if !matches!(op.what, What::Kernel { nccl: false, .. }) {
                continue;
            }
            let e = k.entry(op.name).or_default();
            e.0.push(op.end - op.start);
            if let Some(c) = view.host.launch_of(op) {
                let c = &view.host.calls[c];
                e.1.push(c.end - c.start);
            }
        }
    }
    k
}

/// The kernels against their launches: how many, per step, how long, how many shorter than their launch call;
/// and the most frequent short names.
fn kernel_evidence(ctx: &Ctx<'_>, steps: u64) -> Vec<Evidence> {
    let k = kernels(ctx);
    let n: u64 = k.values().map(|e| e.0.len() as u64).sum();
    let mut runs: Vec<u64> = k.values().flat_map(|e| e.0.iter().copied()).collect();
    let mut calls: Vec<u64> = k.values().flat_map(|e| e.1.iter().copied()).collect();
    let (run, call) = (median(&mut runs), median(&mut calls));
    let mut shorter = 0u64;
    let mut names: Vec<(u64, u32, u64, u64)> = Vec::new();
    for (name, (runs, calls)) in &k {
        let (mut r, mut c) = (runs.clone(), calls.clone());
        let (r, c) = (median(&mut r), median(&mut c));
        let short = runs.iter().filter(|&&d| d < c).count() as u64;
        shorter += short;
        if c > 0 && r < c {
            names.push((runs.len() as u64, *name, r, c));
        }
    }
    let per_step = if steps > 0 {
        format!(" ({:.0} a step)", n as f64 / steps as f64)
    } else {
        String::new()
    };
    let mut ev = vec![evidence(
        EvidenceKind::Kernel,
        "",
        Some(n),
        None,
        format!(
            "{}{per_step}, {} each (median) against a launch call of {}; {shorter} of them ({}) ran shorter than \
             their launch call",
            count(n, "kernel", "kernels"),
            duration(run),
            duration(call),
            percent(share(shorter, n))
        ),
    )];
    names.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    for &(launches, name, r, c) in names.iter().take(3) {
        let name = ctx.names.get(name);
        ev.push(evidence(
            EvidenceKind::Kernel,
            name,
            Some(launches),
            Some(r),
            format!(
                "{name}: {} of {} (median) each, launched by calls of {}",
                count(launches, "launch", "launches"),
                duration(r),
                duration(c)
            ),
        ));
    }
    ev
}

/// The step's sequence of operations on `view`, if most steps (four in five) repeat it: (operations, kernels in
/// it, steps that repeat it).
fn repeated(view: &View<'_>) -> Option<(usize, usize, usize)> {
    let steps = view.plan.steady();
    if steps.len() < 3 {
        return None;
    }
    let mut sequences: HashMap<Vec<u32>, (usize, usize)> = HashMap::new();
    let ops: Vec<usize> = view.ops_in_window().collect();
    let mut at = 0;
    for &(s, e) in steps {
        while at < ops.len() && view.p.ops[ops[at]].start < s {
            at += 1;
        }
        let (mut names, mut kernels) = (Vec::new(), 0);
        while at < ops.len() && view.p.ops[ops[at]].start < e {
            let op = &view.p.ops[ops[at]];
            names.push(op.name);
            kernels += usize::from(matches!(op.what, What::Kernel { .. }));
            at += 1;
        }
        sequences.entry(names).or_insert((0, kernels)).0 += 1;
    }
    let (seq, (same, kernels)) = sequences
        .into_iter()
        .max_by_key(|(s, (n, _))| (*n, s.len()))?;
    (same * 5 >= steps.len() * 4).then_some((seq.len(), kernels, same))
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let t = tally(ctx, IdleCause::Launch);
    if t.cost == 0 {
        return None;
    }
    let mut ev = vec![
        t.gaps_evidence("began inside a step while the host had not yet issued the next work"),
    ];
    let (launching, own, other) = host_split(ctx, &t);
    let mut split = format!(
        "when the GPU ran out, the host was in launch calls for {} of it and in its own work between calls for {}",
        percent(share(launching, t.cost)),
        percent(share(own, t.cost))
    );
    if let Some((name, time)) = other
        .iter()
        .max_by_key(|(n, t)| (**t, std::cmp::Reverse(*n)))
    {
        split.push_str(&format!(
            "; in {name} for {}",
            percent(share(*time, t.cost))
        ));
    }
    ev.push(evidence(EvidenceKind::Gap, "", None, Some(own), split));
    ev.extend(kernel_evidence(ctx, t.steps));
    let graph = graph_evidence(ctx, &t);
    let graphs_run = graph.as_ref().is_some_and(|g| g.1);
    if let Some((e, _)) = graph {
        ev.push(e);
    }
    let mut advice = Vec::new();
    if !graphs_run {
        advice.push(
            "capture the step in a CUDA graph and replay it with one launch: `torch.compile(mode=\"reduce-overhead\")`, \
             `torch.cuda.CUDAGraph`, or `cudaStreamBeginCapture` … `cudaGraphLaunch` (synchronisation and host reads \
             must move out of the captured part)"
                .to_string(),
        );
    } else {
        advice.push(
            "bring the kernels that still run outside the CUDA graphs into them (the loss, the optimizer step)".into(),
        );
    }
    advice.push(
        "fuse the short kernels (`torch.compile`, fused optimizers: `torch.optim.AdamW(fused=True)` or \
         `foreach=True`) and give each launch more work (a larger batch, fewer and larger tensors)"
            .to_string(),
    );
    if own * 2 > t.cost {
        advice.push(
            "most of the gap is the host's own work between launches (framework and Python overhead): profile the \
             host side (py-spy, perf) and move work out of the step"
                .to_string(),
        );
    }
    Some(
        Draft {
            kind: FindingKind::LaunchBound,
            title: format!(
                "The GPU waits for the host to launch short kernels (launch-bound{})",
                where_steps(&t)
            ),
            cost: t.cost,
            basis: "the idle gaps inside steps that began before the host thread had issued the next work (it issued \
                    it after the GPU ran out, from a launch call or its own work between calls): time the GPU \
                    waited for launches"
                .into(),
            evidence: ev,
            advice,
            spans: t.spans(ctx),
        }
        .finish(ctx),
    )
}

/// On the GPU that loses the most to launches: the sequence a CUDA graph would replay, or that its steps already
/// launch graphs (`true`).
fn graph_evidence(ctx: &Ctx<'_>, t: &Tally<'_>) -> Option<(Evidence, bool)> {
    let mut per_view: HashMap<usize, u64> = HashMap::new();
    for &(v, g) in &t.gaps {
        *per_view.entry(v).or_default() += g.len();
    }
    let (&v, _) = per_view
        .iter()
        .max_by_key(|(v, c)| (**c, std::cmp::Reverse(**v)))?;
    let view = &ctx.views[v];
    let graphs = view
        .ops_in_window()
        .filter(|&i| matches!(view.p.ops[i].what, What::Graph))
        .count();
    if graphs > 0 {
        let kernels = view
            .ops_in_window()
            .filter(|&i| matches!(view.p.ops[i].what, What::Kernel { .. }))
            .count();
        let steps = view.steps().max(1) as usize;
        let text = format!(
            "{}'s steps already launch CUDA graphs ({} a step), and {:.0} kernels a step run outside them",
            view.id,
            graphs / steps,
            kernels as f64 / steps as f64
        );
        return Some((
            evidence(EvidenceKind::Pattern, "", Some(graphs as u64), None, text),
            true,
        ));
    }
    let (ops, kernels, same) = repeated(view)?;
    if kernels < GRAPH_KERNELS {
        return None;
    }
    let text = format!(
        "the same {ops} operations ({kernels} kernels) run in the same order in {same} of {} steps on {}: a CUDA \
         graph would replay them with one launch",
        view.steps(),
        view.id
    );
    Some((
        evidence(EvidenceKind::Pattern, "", Some(same as u64), None, text),
        false,
    ))
}
