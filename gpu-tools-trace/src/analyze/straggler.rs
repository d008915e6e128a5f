//! Findings from the `stragglers` report ([`Job::stragglers`](crate::report::Job::stragglers)): the rank the
//! others wait for in collectives ([`FindingKind::Straggler`]), or, without a single one to blame, the time ranks
//! wait in collectives ([`FindingKind::CollectiveWait`]).
//!
//! The report gives each rank's wait as a share of its whole window (its first device operation to its last); the
//! finding counts the part of it inside the window analysed, in proportion to the rank's NCCL time there.

use std::collections::HashMap;

use super::finding::{EvidenceKind, Finding, FindingKind};
use super::tally::{Draft, evidence, longest};
use super::words::{duration, percent};
use super::{Ctx, What};
use crate::report::{Cell, StreamKey, Table};

/// One rank's row of the report.
#[derive(Debug, Clone)]
pub(crate) struct RankRow {
    pub rank: u32,
    pub host: String,
    pub pid: u32,
    /// Its stream, where it is one of the processes read with device work.
    pub key: Option<StreamKey>,
    /// Time waiting in collectives inside the windows analysed, ns.
    pub wait: u64,
    pub last_in: Option<f64>,
    pub work: Option<f64>,
}

fn column<'t>(t: &'t Table, row: &'t [Cell], name: &str) -> Option<&'t Cell> {
    let i = t.columns.iter().position(|c| *c == name)?;
    row.get(i)
}

fn number(c: Option<&Cell>) -> Option<f64> {
    match c? {
        Cell::Int(v) => Some(*v as f64),
        Cell::Float(v) => Some(*v),
        _ => None,
    }
}

/// The report's rows, each rank's wait counted inside the windows analysed; and its verdict (its first note).
pub(crate) fn ranks<'c>(ctx: &'c Ctx<'_>) -> &'c (Vec<RankRow>, String) {
    ctx.ranks.get_or_init(|| make_ranks(ctx))
}

fn make_ranks(ctx: &Ctx<'_>) -> (Vec<RankRow>, String) {
    let t = ctx.trace.job().stragglers();
    // A row's stream by its rank, not by its pid and host: ranks in containers of their own share those.
    let keys = ctx.trace.job().rank_keys();
    let mut rows = Vec::new();
    for row in &t.rows {
        let rank = number(column(&t, row, "Rank")).unwrap_or(0.0) as u32;
        let pid = number(column(&t, row, "PID")).unwrap_or(0.0) as u32;
        let host = match column(&t, row, "Host") {
            Some(Cell::Text(h)) => h.clone(),
            _ => String::new(),
        };
        let key = keys.get(&rank).copied().filter(|k| {
            ctx.trace
                .processes()
                .get(k)
                .is_some_and(|p| !p.ops.is_empty())
        });
        let wait_pct = number(column(&t, row, "Wait (%)")).unwrap_or(0.0);
        rows.push(RankRow {
            rank,
            host,
            pid,
            key,
            wait: key.map_or(0, |k| inside(ctx, k, wait_pct)),
            last_in: number(column(&t, row, "Last In (%)")),
            work: number(column(&t, row, "Work/Step Med (ns)")),
        });
    }
    (rows, t.notes.first().cloned().unwrap_or_default())
}

/// A rank's wait of `pct` percent of its whole window, the part inside the windows analysed.
fn inside(ctx: &Ctx<'_>, key: StreamKey, pct: f64) -> u64 {
    let Some(p) = ctx.trace.processes().get(&key) else {
        return 0;
    };
    let first = p.ops.iter().map(|o| o.start).min().unwrap_or(0);
    let last = p.ops.iter().map(|o| o.end).max().unwrap_or(0);
    let whole = pct / 100.0 * (last - first) as f64;
    let nccl = |keep: &dyn Fn(u64) -> bool| -> u64 {
        p.ops
            .iter()
            .filter(|o| matches!(o.what, What::Kernel { nccl: true, .. }) && keep(o.start))
            .map(|o| o.end - o.start)
            .sum()
    };
    let all = nccl(&|_| true);
    let views: Vec<&super::View<'_>> = ctx.views.iter().filter(|v| v.key == key).collect();
    let within = nccl(&|t| views.iter().any(|v| v.inside(t)));
    if all == 0 {
        return 0;
    }
    (whole * within as f64 / all as f64).round() as u64
}

pub(crate) fn detect(ctx: &Ctx<'_>) -> Option<Finding> {
    let (rows, verdict) = ranks(ctx);
    if rows.len() < 2 {
        return None;
    }
    let verdict = verdict.clone();
    // The report's verdict (its first note) names a straggler only as `rank N[ on HOST] enters collectives last
    // ...`; its other verdicts begin `no ...` (no straggler by its work, no single straggler, no collective).
    let named = verdict.starts_with("rank ");
    let slow = rows
        .iter()
        .filter(|r| named && r.last_in.is_some())
        .max_by(|a, b| {
            let (x, y) = (a.last_in.unwrap_or(0.0), b.last_in.unwrap_or(0.0));
            x.total_cmp(&y).then(b.rank.cmp(&a.rank))
        });
    let cost: u64 = rows
        .iter()
        .filter(|r| slow.is_none_or(|s| s.rank != r.rank))
        .map(|r| r.wait)
        .sum();
    if cost == 0 {
        return None;
    }
    let mut ev = vec![evidence(
        EvidenceKind::Rank,
        "stragglers",
        None,
        None,
        verdict.clone(),
    )];
    let mut works: Vec<f64> = rows.iter().filter_map(|r| r.work).collect();
    works.sort_by(f64::total_cmp);
    let typical = works.get((works.len().max(1) - 1) / 2).copied();
    if let Some(s) = slow {
        let on = if s.host.is_empty() {
            String::new()
        } else {
            format!(" on {}", s.host)
        };
        let work = match (s.work, typical) {
            (Some(w), Some(m)) => format!(
                "; its own work a step {} against the median rank's {}",
                duration(w as u64),
                duration(m as u64)
            ),
            _ => String::new(),
        };
        ev.push(evidence(
            EvidenceKind::Rank,
            format!("rank {}", s.rank),
            None,
            None,
            format!(
                "rank {} (pid {}{on}) enters collectives last in {:.0}% of them{work}",
                s.rank,
                s.pid,
                s.last_in.unwrap_or(0.0)
            ),
        ));
    }
    let mut waiting: Vec<&RankRow> = rows.iter().filter(|r| r.wait > 0).collect();
    waiting.sort_by(|a, b| b.wait.cmp(&a.wait).then(a.rank.cmp(&b.rank)));
    for r in waiting.iter().take(3) {
        let length: u64 = ctx
            .views
            .iter()
            .filter(|v| Some(v.key) == r.key)
            .map(|v| v.length())
            .sum();
        ev.push(evidence(
            EvidenceKind::Rank,
            format!("rank {}", r.rank),
            None,
            Some(r.wait),
            format!(
                "rank {} waits {} in collectives for the last rank to enter ({} of its window)",
                r.rank,
                duration(r.wait),
                percent(super::words::share(r.wait, length))
            ),
        ));
    }
    let mut spans: Vec<_> = ctx
        .views
        .iter()
        .filter(|v| slow.is_some_and(|s| Some(v.key) == s.key))
        .map(|v| v.span(v.window.0, v.window.1))
        .collect();
    longest(&mut spans);
    Some(draft(slow, cost, ev, spans).finish(ctx))
}

fn draft(
    slow: Option<&RankRow>,
    cost: u64,
    evidence: Vec<super::Evidence>,
    spans: Vec<super::Span>,
) -> Draft {
    let basis = "the time the other ranks waited inside collectives for the last rank to enter them, from the \
                 stragglers report (each rank's wait over its whole window, counted inside the window analysed in \
                 proportion to its NCCL time there)"
        .to_string();
    match slow {
        Some(s) => Draft {
            kind: FindingKind::Straggler,
            title: format!(
                "Rank {}{} is the straggler: the other ranks wait for it in collectives",
                s.rank,
                if s.host.is_empty() { String::new() } else { format!(" on {}", s.host) }
            ),
            cost,
            basis,
            evidence,
            advice: vec![
                format!(
                    "compare rank {}'s work with another rank's: `gpu-tools diff FILE FILE --a-process rank={} \
                     --b-process rank=N` (which kernels take longer or run more often)",
                    s.rank, s.rank
                ),
                "check its host and GPU: other processes on the CPUs, data loading, thermal or power throttling, a \
                 slower link"
                    .into(),
                "balance the work across ranks (uneven shards, sequence lengths, or layers)".into(),
            ],
            spans,
        },
        None => Draft {
            kind: FindingKind::CollectiveWait,
            title: "Ranks wait in collectives for each other, with no single rank to blame".into(),
            cost,
            basis,
            evidence,
            advice: vec![
                "the ranks take turns being last: look for jitter in each rank's steps (data loading, garbage \
                 collection, host noise) with `gpu-tools diff` of two ranks"
                    .into(),
                "overlap the collectives with computation so that a late rank costs less (DDP buckets, FSDP \
                 prefetch)"
                    .into(),
            ],
            spans,
        },
    }
}

/// Each rank's wait inside the windows analysed, by stream.
pub(crate) fn waits(ctx: &Ctx<'_>) -> HashMap<StreamKey, u64> {
    let (rows, _) = ranks(ctx);
    if rows.len() < 2 {
        return HashMap::new();
    }
    rows.iter().filter_map(|r| Some((r.key?, r.wait))).collect()
}
