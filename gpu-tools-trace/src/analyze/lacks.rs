//! What the trace lacks to say more, each said once: API records, copy records, device counters, steps, records
//! the vendor dropped, kernels hidden in whole graph launches, ranks of the job without a trace.

use super::Ctx;
use super::collect::CallClass;
use super::finding::{SignalEnd, StepSource};
use super::words::count;
use crate::record::EndReason;

pub(crate) fn lacks(ctx: &Ctx<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let traced: Vec<_> = ctx
        .trace
        .processes()
        .iter()
        .filter(|(_, p)| !p.is_counters() && (p.started || !p.ops.is_empty()))
        .collect();
    if ctx.views.is_empty() {
        out.push("no device work in the trace (no kernel, copy, set or graph record): nothing to analyse".into());
    }
    if ctx.views.iter().any(|v| v.p.calls.is_empty()) {
        out.push(
            "no API records for some or all processes: why their GPU was idle cannot be told (those gaps are \
             `unknown`); record with API tracing on (the default of `gpu-tools trace`)"
                .into(),
        );
    }
    let copy_calls = traced.iter().any(|(_, p)| {
        p.calls.iter().any(|c| {
            matches!(c.class, CallClass::Copy | CallClass::BlockingCopy)
                && ctx
                    .names
                    .get(c.name)
                    .to_ascii_lowercase()
                    .contains("memcpy")
        })
    });
    let copies = traced.iter().any(|(_, p)| {
        p.ops
            .iter()
            .any(|o| matches!(o.what, super::What::Copy { .. }))
    });
    if copy_calls && !copies {
        out.push(
            "copy calls but no copy records: pageable and small copies cannot be judged (a trace attached with \
             `trace --pid` leaves copies out unless named: `--kinds kernel,memcpy,memset,runtime,driver,nvtx`)"
                .into(),
        );
    }
    if !ctx
        .trace
        .processes()
        .values()
        .any(|p| !p.samples.is_empty())
    {
        out.push(
            "no device counters: kernels bound by memory or by computation cannot be told (record them with \
             `gpu-tools trace --counters`)"
                .into(),
        );
    }
    let stepless: Vec<String> = ctx
        .views
        .iter()
        .filter(|v| v.plan.source == StepSource::None)
        .map(|v| v.id.to_string())
        .collect();
    if !stepless.is_empty() {
        out.push(format!(
            "no steps found on {} (no NVTX range named step or iter, no repeating graph launch or pattern of \
             operations): the whole trace is analysed, start-up included; mark each step with an NVTX range \
             (`torch.cuda.nvtx.range_push(\"step\")`)",
            list(&stepless)
        ));
    }
    let dropped: u64 = traced.iter().map(|(_, p)| p.dropped).sum();
    if dropped > 0 {
        out.push(format!(
            "{} dropped by the vendor's buffers: every figure is a lower bound",
            count(dropped, "record was", "records were")
        ));
    }
    if traced.iter().any(|(_, p)| p.graph_launches > 0) {
        out.push(
            "CUDA graphs traced as whole launches (graph mode): the kernels inside them are not seen one by one"
                .into(),
        );
    }
    // A pid that another traced process has too is said with its stream.
    let cut: Vec<String> = traced
        .iter()
        .filter(|(_, p)| p.started && !p.ended)
        .map(|(key, p)| {
            if traced.iter().filter(|(_, o)| o.pid == p.pid).count() > 1 {
                format!("pid {} (file {} stream {})", p.pid, key.0, key.1)
            } else {
                format!("pid {}", p.pid)
            }
        })
        .collect();
    if !cut.is_empty() {
        out.push(format!(
            "no end record for {} (crashed, killed, or the file cut short): their last records may be missing",
            list(&cut)
        ));
    }
    let job = ctx.trace.job();
    out.extend(job.gaps(&job.collective_alignment()));
    out
}

/// Each traced process whose trace ended at a fatal signal, in (file, stream) order.
pub(crate) fn ended_at_signal(trace: &super::Trace) -> Vec<SignalEnd> {
    trace
        .processes()
        .iter()
        .filter(|(_, p)| !p.is_counters())
        .filter_map(|(key, p)| {
            let (reason @ EndReason::Signal(signal), time) = p.end? else {
                return None;
            };
            let host = p.info.as_ref().map(|i| i.host.clone()).unwrap_or_default();
            let rank = p.info.as_ref().and_then(|i| i.rank());
            let mut who = match rank {
                Some(r) => format!("rank {r} (pid {}", p.pid),
                None => format!("pid {}", p.pid),
            };
            if !host.is_empty() {
                who.push_str(&format!(" on {host}"));
            }
            if rank.is_some() {
                who.push(')');
            }
            Some(SignalEnd {
                file: key.0,
                stream: key.1,
                pid: p.pid,
                host,
                rank,
                signal,
                time,
                text: format!(
                    "the trace of {who} ended at {reason}, which was ending the process: its work then in flight \
                     (kernels queued or running, calls not yet returned) has no record, so idle time and the last \
                     steps near the end are not whole"
                ),
            })
        })
        .collect()
}

/// The first few of `items`, and how many more.
fn list(items: &[String]) -> String {
    match items.len() {
        0..=3 => items.join(", "),
        n => format!("{} and {} more", items[..3].join(", "), n - 3),
    }
}
