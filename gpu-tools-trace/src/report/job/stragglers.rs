//! The `stragglers` report: per rank, its steps, the time in NCCL kernels and waiting there, GPU idle, how often
//! it enters collectives last; and, in words, the rank the others wait for.

use std::collections::HashMap;

use super::collectives::{Entry, align, median_i64, on_clock, p90};
use super::steps::{
    StepSource, collective_order, nvtx_step_name, nvtx_steps, pattern_steps, period,
};
use super::{CollectiveAlignment, Job, STRAGGLERS};
use crate::report::align::duration;
use crate::report::{Cell, Table};

/// How much more device time outside collectives a rank's steps must take than the median rank's for the rank
/// that enters collectives last to be named a straggler.
const SLOWER: f64 = 1.1;

/// What one rank's row is made of.
#[derive(Debug, Default)]
struct Row {
    steps: Vec<u64>,
    /// Per step, the device time of its own work (operations other than collectives).
    work: Vec<u64>,
    /// Per collective (by its index among the rank's), the time it waited in it for the last rank to enter.
    waits: Vec<u64>,
    /// Waits by collective name.
    wait_by_name: HashMap<u32, u64>,
    /// Collectives shared with at least one other rank, and those it entered last.
    shared: u64,
    last: u64,
    window: u64,
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        100.0 * part as f64 / whole as f64
    }
}

fn median_u64(v: &[u64]) -> Option<f64> {
    let mut v: Vec<i64> = v
        .iter()
        .map(|x| i64::try_from(*x).unwrap_or(i64::MAX))
        .collect();
    let n = v.len();
    let lower = median_i64(&mut v)?;
    // The exact mean of the middle two for an even count.
    Some(if n % 2 == 0 {
        (v[n / 2 - 1] as f64 + v[n / 2] as f64) / 2.0
    } else {
        lower as f64
    })
}

/// The ranks without a trace, in words (`ranks 4-5 of 0-7 have no trace (WORLD_SIZE 8)`), where the ranks are
/// numbered by their rank variables; and apart, those traced without device work (`rank 0 (pid 1398 on vm) was
/// traced but its trace holds no device work ...`), which are not the same: the process was reached.
fn missing(p: &super::Prepared<'_>) -> Option<String> {
    if !p.from_labels {
        return None;
    }
    let idle: Vec<&super::IdleRank> = p
        .idle
        .iter()
        .filter(|i| !p.ranks.iter().any(|r| r.rank == i.rank))
        .collect();
    let idle_text = (!idle.is_empty()).then(|| {
        let list: Vec<String> = idle
            .iter()
            .take(8)
            .map(|i| format!("rank {} (pid {} on {})", i.rank, i.pid, i.host))
            .collect();
        let more = if idle.len() > 8 {
            format!(" and {} more", idle.len() - 8)
        } else {
            String::new()
        };
        format!(
            "{}{more} {} traced but {} no device work (no kernel, copy or set record: CUPTI gave none, or {} ran \
             none in the window)",
            list.join(", "),
            if idle.len() == 1 { "was" } else { "were" },
            if idle.len() == 1 { "its trace holds" } else { "their traces hold" },
            if idle.len() == 1 { "it" } else { "they" },
        )
    });
    let absent = absent(p, &idle);
    match (absent, idle_text) {
        (None, None) => None,
        (Some(a), None) => Some(a),
        (None, Some(i)) => Some(i),
        (Some(a), Some(i)) => Some(format!("{a}; {i}")),
    }
}

/// The ranks with no stream at all, in words; `idle` ranks were traced and are not among them.
fn absent(p: &super::Prepared<'_>, idle: &[&super::IdleRank]) -> Option<String> {
    let mut present: Vec<u32> = p.ranks.iter().map(|r| r.rank).collect();
    present.extend(idle.iter().map(|i| i.rank));
    present.sort_unstable();
    present.dedup();
    let top = present.last().copied().unwrap_or(0);
    let size = p.world.map_or(top + 1, |w| w.1).max(top + 1);
    // The gaps as ranges, without a list of every missing rank (a WORLD_SIZE may be large).
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let mut next = 0u32;
    for &r in present.iter().chain(std::iter::once(&size)) {
        if r > next {
            ranges.push((next, r - 1));
        }
        next = r.saturating_add(1);
    }
    if ranges.is_empty() {
        return None;
    }
    let count: u64 = ranges.iter().map(|(a, b)| u64::from(b - a) + 1).sum();
    let mut parts: Vec<String> = ranges
        .iter()
        .take(8)
        .map(|&(a, b)| {
            if a == b {
                a.to_string()
            } else {
                format!("{a}-{b}")
            }
        })
        .collect();
    if ranges.len() > 8 {
        parts.push(format!("{} more", ranges.len() - 8));
    }
    let list = match parts.len() {
        1 => parts.remove(0),
        n if ranges.len() > 8 => format!("{} and {}", parts[..n - 1].join(", "), parts[n - 1]),
        _ => parts.join(", "),
    };
    let world = match p.world {
        Some((variable, w)) => format!("{variable} {w}"),
        None => format!("the largest rank traced is {top}"),
    };
    Some(format!(
        "{} {} of 0-{} {} no trace ({world})",
        if count == 1 { "rank" } else { "ranks" },
        list,
        size - 1,
        if count == 1 { "has" } else { "have" },
    ))
}

/// Who enters each collective shared by two ranks or more last (on the aligned clock), and how long each other
/// rank waits for it there, into `rows`.
fn last_in(
    p: &super::Prepared<'_>,
    alignment: &CollectiveAlignment,
    entries: &[Entry],
    rows: &mut [Row],
) {
    let correction_of = |e: &Entry| {
        p.ranks[e.rank as usize]
            .domain
            .map_or(0, |d| alignment.hosts[d].correction)
    };
    for group in entries.chunk_by(|a, b| (a.seq, a.index) == (b.seq, b.index)) {
        if group.len() < 2 {
            continue;
        }
        let start = |e: &Entry| e.start.saturating_add(correction_of(e));
        let Some(last) = group
            .iter()
            .max_by_key(|e| (start(e), std::cmp::Reverse(e.rank)))
        else {
            continue;
        };
        let latest = start(last);
        for e in group {
            let row = &mut rows[e.rank as usize];
            row.shared += 1;
            if e.rank == last.rank {
                row.last += 1;
                continue;
            }
            let length = e.end.saturating_sub(e.start).max(0).unsigned_abs();
            let wait = latest
                .saturating_sub(start(e))
                .max(0)
                .unsigned_abs()
                .min(length);
            row.waits[e.local as usize] = wait;
            let c = p.ranks[e.rank as usize].stream.collectives[e.local as usize];
            *row.wait_by_name.entry(c.name).or_default() += wait;
        }
    }
}

/// The table's row of each rank, in rank order.
fn push_rows(t: &mut Table, p: &super::Prepared<'_>, rows: &[Row]) {
    let mut order: Vec<usize> = (0..p.ranks.len()).collect();
    order.sort_by_key(|&r| (p.ranks[r].rank, p.ranks[r].key));
    for &r in &order {
        let (rank, row) = (&p.ranks[r], &rows[r]);
        let s = rank.stream;
        let waited: u64 = row.waits.iter().sum();
        let idle = row.window.saturating_sub(s.busy.covered());
        let mut steps = row.steps.clone();
        let number = |v: Option<f64>| v.map_or(Cell::Missing, Cell::Float);
        t.rows.push(vec![
            Cell::Int(u64::from(rank.rank)),
            Cell::Text(rank.host.clone()),
            Cell::Int(u64::from(s.pid)),
            Cell::Int(row.steps.len() as u64),
            number(median_u64(&row.steps)),
            if steps.is_empty() {
                Cell::Missing
            } else {
                Cell::Int(p90(&mut steps))
            },
            number(median_u64(&row.work)),
            Cell::Float(pct(s.nccl_time, row.window)),
            Cell::Float(pct(waited, row.window)),
            Cell::Float(pct(idle, row.window)),
            if row.shared == 0 {
                Cell::Missing
            } else {
                Cell::Float(pct(row.last, row.shared))
            },
            Cell::Int(s.collectives.len() as u64),
        ]);
    }
}

impl Job {
    /// `stragglers`: a row per rank (see the module docs); the notes say how the hosts were aligned, where the
    /// ranks and steps came from, which ranks are missing, which hosts' windows do not overlap, and first, which
    /// rank the others wait for. A rank traced twice ([`Job::check`]) gives a table without rows saying so.
    pub fn stragglers(&self) -> Table {
        let mut t = Table::new(
            STRAGGLERS,
            "Stragglers: per rank, steps, NCCL time and waits",
            vec![
                "Rank",
                "Host",
                "PID",
                "Steps",
                "Step Med (ns)",
                "Step P90 (ns)",
                "Work/Step Med (ns)",
                "NCCL (%)",
                "Wait (%)",
                "GPU Idle (%)",
                "Last In (%)",
                "Collectives",
            ],
        );
        if let Err(e) = self.check() {
            t.notes.push(format!("no report: {e}"));
            return t;
        }
        let p = self.prepare();
        if p.ranks.is_empty() {
            t.notes
                .push("no traced process ran device work: no rank to report".into());
            return t;
        }
        let (alignment, entries) = align(&p.ranks, &p.hosts, &p.anchor_shifts, &self.names);
        let shift = |r: usize| {
            let correction = p.ranks[r]
                .domain
                .map_or(0, |d| alignment.hosts[d].correction);
            p.anchor_shifts[r].saturating_add(correction)
        };
        let mut rows: Vec<Row> = p
            .ranks
            .iter()
            .map(|r| Row {
                waits: vec![0; r.stream.collectives.len()],
                window: r.stream.last.saturating_sub(r.stream.first),
                ..Row::default()
            })
            .collect();

        // Who enters each collective last, and how long the others wait for it there.
        last_in(&p, &alignment, &entries, &mut rows);
        let source = self.steps(&p, &mut rows);
        push_rows(&mut t, &p, &rows);
        // The answer first, then how it was reached.
        t.notes.push(self.verdict(&p, &rows));
        t.notes.extend(self.how(&p, source));
        t.notes.extend(self.windows(&p, &shift));
        t.notes.extend(alignment.notes);
        t
    }

    /// The steps of every rank (an NVTX range that repeats on every rank, else the pattern of collectives that
    /// does), into `rows`; returns where they came from.
    fn steps(&self, p: &super::Prepared<'_>, rows: &mut [Row]) -> StepSource {
        let nvtx = nvtx_step_name(&p.ranks, &self.names);
        let orders: Vec<Vec<(u32, u64)>> = p.ranks.iter().map(collective_order).collect();
        let source = match nvtx {
            Some(name) => StepSource::Nvtx(name),
            None => {
                let mut tally: HashMap<usize, usize> = HashMap::new();
                for o in &orders {
                    if let Some(period) = period(o) {
                        *tally.entry(period).or_default() += 1;
                    }
                }
                match tally
                    .into_iter()
                    .max_by_key(|(p, n)| (*n, std::cmp::Reverse(*p)))
                {
                    Some((period, _)) => StepSource::Collectives { period },
                    None => StepSource::None,
                }
            }
        };
        for (r, rank) in p.ranks.iter().enumerate() {
            let steps = match source {
                StepSource::Nvtx(name) => nvtx_steps(rank, name),
                StepSource::Collectives { period } => pattern_steps(&orders[r], period),
                StepSource::None => Vec::new(),
            };
            let row = &mut rows[r];
            row.work = rank.stream.work.within(&steps);
            row.steps = steps.iter().map(|(s, e)| e - s).collect();
        }

        source
    }

    /// How the report was reached, in words: the steps, the columns, the ranks, those missing.
    fn how(&self, p: &super::Prepared<'_>, source: StepSource) -> Vec<String> {
        let mut notes = Vec::new();
        match source {
        StepSource::Nvtx(name) => notes.push(format!(
            "steps: the NVTX range {:?}, each from its start to the next one's",
            self.names.get(name)
        )),
        StepSource::Collectives { period } => notes.push(format!(
            "steps: no NVTX range repeats on every rank; a step is the pattern of {period} {} that repeats, \
             from one to the next at the same place in it",
            if period == 1 { "collective" } else { "collectives" }
        )),
        StepSource::None => notes.push(
            "steps: none found (no NVTX range repeats on every rank, and the collectives repeat no pattern)"
                .into(),
        ),
    }
        notes.push(
        "Work/Step: the device time of a step's own work (kernels, copies and sets other than collectives); \
         Wait: the time in collectives before the last rank entered them; Wait, NCCL and GPU Idle: shares of \
         the rank's window (its first device operation to its last)"
            .into(),
    );
        if p.from_labels {
            notes
            .push("ranks: the processes' RANK variables (or OMPI_COMM_WORLD_RANK, PMI_RANK, SLURM_PROCID)".into());
        } else if p.unlabelled > 0 {
            notes.push(format!(
            "ranks: numbered in the order of the files and streams given, since {} of {} processes have no \
             rank variable",
            p.unlabelled,
            p.ranks.len()
        ));
        } else {
            notes.push(
            "ranks: numbered in the order of the files and streams given (the processes have no rank variable)"
                .into(),
        );
        }
        if let Some(missing) = missing(p) {
            notes.push(format!(
                "missing: {missing}; the report covers the {} traced",
                p.ranks.len()
            ));
        }
        notes
    }

    /// The rank the others wait for, in words; or why none is named.
    fn verdict(&self, p: &super::Prepared<'_>, rows: &[Row]) -> String {
        let shared: u64 = rows.iter().map(|r| r.shared).max().unwrap_or(0);
        if p.ranks.len() < 2 || shared == 0 {
            return if p.ranks.iter().all(|r| r.stream.collectives.is_empty()) {
                "no NCCL collective kernels in the trace: no rank can be seen waiting for another"
                    .into()
            } else {
                "no collective shared by two ranks: no rank can be seen waiting for another".into()
            };
        }
        let Some(slow) =
            (0..rows.len()).max_by_key(|&r| (rows[r].last, std::cmp::Reverse(p.ranks[r].rank)))
        else {
            return String::new();
        };
        let rank = &p.ranks[slow];
        let share = pct(rows[slow].last, rows[slow].shared);
        let at = if rank.host.is_empty() {
            String::new()
        } else {
            format!(" on {}", rank.host)
        };
        if share < 50.0 {
            return format!(
                "no single straggler: no rank enters most collectives last (most often rank {}{at}, {share:.0}% of \
                 its collectives)",
                rank.rank
            );
        }
        let works: Vec<u64> = rows
            .iter()
            .filter_map(|r| median_u64(&r.work))
            .map(|w| w as u64)
            .collect();
        let ratio = match (median_u64(&rows[slow].work), median_u64(&works)) {
            (Some(mine), Some(typical)) if typical > 0.0 => Some((mine, typical, mine / typical)),
            _ => None,
        };
        // Where the others wait most, and how much of their time.
        let mut by_name: HashMap<u32, u64> = HashMap::new();
        let mut window = 0u64;
        for (r, row) in rows.iter().enumerate() {
            if r == slow {
                continue;
            }
            window = window.saturating_add(row.window);
            for (name, w) in &row.wait_by_name {
                *by_name.entry(*name).or_default() += w;
            }
        }
        let others = rows.len() - 1;
        let waiting = by_name
            .into_iter()
            .max_by_key(|(n, w)| (*w, std::cmp::Reverse(*n)))
            .map(|(name, waited)| {
                let (who, their) = if others == 1 {
                    ("the other rank waits".to_string(), "its")
                } else {
                    (format!("the other {others} ranks wait"), "their")
                };
                format!(
                    "{who} for it in {}, {:.0}% of {their} time",
                    self.names.get(name),
                    pct(waited, window)
                )
            });
        // Entering last without more work of its own is no straggler: its host or launch path may be late, or
        // nobody is (two ranks alternate).
        if let Some((mine, typical, ratio)) = ratio.filter(|r| r.2 < SLOWER) {
            return format!(
                "no straggler by its work: rank {}{at} enters collectives last most often ({share:.0}% of them), \
                 but its steps' device time outside collectives is {ratio:.1}× the median rank's ({} against {}){}",
                rank.rank,
                duration(mine as u64),
                duration(typical as u64),
                waiting.map_or_else(String::new, |w| format!("; {w}"))
            );
        }
        let mut sentence = format!(
            "rank {}{at} enters collectives last ({share:.0}% of them)",
            rank.rank
        );
        if let Some((mine, typical, ratio)) = ratio {
            sentence.push_str(&format!(
                ": its steps take {ratio:.1}× the median rank's device time outside collectives ({} against {})",
                duration(mine as u64),
                duration(typical as u64)
            ));
        }
        if let Some(w) = waiting {
            sentence.push_str("; ");
            sentence.push_str(&w);
        }
        sentence
    }

    /// What the files read lack as a job, each said in a sentence (for a warning): the ranks without a trace
    /// (below the job's size, or the largest rank traced, where every rank has a rank variable), and the hosts
    /// whose windows do not overlap another's on the clock of `alignment` (from
    /// [`collective_alignment`](Self::collective_alignment) of the same reading). The `stragglers` report has them
    /// among its notes.
    pub fn gaps(&self, alignment: &CollectiveAlignment) -> Vec<String> {
        let p = self.prepare();
        let shift = |r: usize| {
            let correction = p.ranks[r]
                .domain
                .and_then(|d| alignment.hosts.get(d))
                .map_or(0, |h| h.correction);
            p.anchor_shifts[r].saturating_add(correction)
        };
        let mut gaps: Vec<String> = missing(&p).into_iter().collect();
        gaps.extend(self.windows(&p, &shift));
        gaps
    }

    /// Hosts whose windows (on the common clock) do not overlap another's, each said.
    fn windows(&self, p: &super::Prepared<'_>, shift: &dyn Fn(usize) -> i64) -> Vec<String> {
        let mut spans: Vec<Option<(i64, i64)>> = vec![None; p.hosts.len()];
        for (r, rank) in p.ranks.iter().enumerate() {
            let Some(d) = rank.domain else { continue };
            let (a, b) = (
                on_clock(rank.stream.first, shift(r)),
                on_clock(rank.stream.last, shift(r)),
            );
            spans[d] = Some(match spans[d] {
                Some((x, y)) => (x.min(a), y.max(b)),
                None => (a, b),
            });
        }
        let Some(origin) = spans.iter().flatten().map(|s| s.0).min() else {
            return Vec::new();
        };
        let at = |t: i64| format!("+{:.3} s", (t - origin) as f64 / 1e9);
        let mut notes = Vec::new();
        for (d, span) in spans.iter().enumerate() {
            let Some((a, b)) = span else { continue };
            let apart: Vec<String> = spans
                .iter()
                .enumerate()
                .filter(|(o, s)| *o != d && s.is_some_and(|(x, y)| y < *a || x > *b))
                .filter_map(|(o, s)| {
                    let (x, y) = (*s)?;
                    Some(format!("{}'s ({} to {})", p.hosts[o].0, at(x), at(y)))
                })
                .collect();
            if !apart.is_empty() {
                notes.push(format!(
                    "host {}'s window ({} to {}) does not overlap host {}: their ranks were not traced at the same \
                     time, and what they wait for cannot be compared",
                    p.hosts[d].0,
                    at(*a),
                    at(*b),
                    apart.join(", ")
                ));
            }
        }
        notes
    }
}
