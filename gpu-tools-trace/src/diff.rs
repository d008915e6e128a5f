//! Two traces of the same program side by side (before and after a change, two ranks, two hosts): step time, GPU
//! busy and idle time (idle by cause), the kernels whose time or count changed most, kernels new or gone, API
//! time, copies ([`diff`]).
//!
//! Each side is a [`Profile`] of an [`analyze::Trace`](crate::analyze::Trace): its GPUs' windows as the analysis
//! finds them (steps, the warm-up and start-up left out), all of its traced processes or one of them
//! ([`Select`]). Kernels, copies and API calls count where they start inside a window. Where both sides have
//! steps, changes are compared per step (two runs of different lengths compare); else as totals.
//!
//! ```no_run
//! use gpu_tools_trace::analyze::Trace;
//! use gpu_tools_trace::diff::{Profile, Select, diff};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let read = |path: &str| -> std::io::Result<Trace> {
//!     let mut t = Trace::new();
//!     t.read(0, std::io::BufReader::new(std::fs::File::open(path)?));
//!     Ok(t)
//! };
//! let (before, after) = (read("before.gputrace")?, read("after.gputrace")?);
//! let d = diff(&Profile::of(&before, Select::All)?, &Profile::of(&after, Select::All)?, 10);
//! for k in &d.kernels_by_time {
//!     println!("{}: {} ns -> {} ns", k.name, k.a.time, k.b.time);
//! }
//! # Ok(()) }
//! ```

use std::collections::BTreeMap;

use crate::analyze::{IdleCause, Trace, What};

/// Which traced processes of a trace make a side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Select {
    /// Every traced process with device work.
    All,
    /// The process of this rank (`RANK`, ...).
    Rank(u32),
    /// The process of this pid. Two traced processes can share a pid (two PID namespaces, two hosts, a pid used
    /// again): a pid that is several is refused ([`SelectError::Several`]).
    Pid(u32),
    /// The process of this stream: its file number and its stream number there (as the `processes` report lists
    /// them).
    Stream {
        /// The file number.
        file: u32,
        /// The stream number in that file.
        stream: u32,
    },
}

impl std::fmt::Display for Select {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Select::All => write!(f, "every process"),
            Select::Rank(r) => write!(f, "rank {r}"),
            Select::Pid(p) => write!(f, "pid {p}"),
            Select::Stream { file, stream } => write!(f, "file {file} stream {stream}"),
        }
    }
}

/// A traced process a side covers: its stream (what tells it from another process of its pid), pid and rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Process {
    /// The file number.
    pub file: u32,
    /// The stream number in that file.
    pub stream: u32,
    /// The process id.
    pub pid: u32,
    /// Its rank, where it has one.
    pub rank: Option<u32>,
}

/// A side selected no process, or more than one where its selection names one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectError {
    /// No traced process with device work is the one selected.
    #[error("no traced process with device work is {0}")]
    Nothing(Select),
    /// The selection names one process and is several (a pid shared by processes of two PID namespaces, two hosts,
    /// or a pid used again; a rank traced twice): these, each by its stream.
    #[error("{0} is {n} traced processes with device work ({list}): select one by its stream", n = .1.len(), list = streams(.1))]
    Several(Select, Vec<Process>),
}

/// `file 0 stream 1, file 0 stream 2`.
fn streams(processes: &[Process]) -> String {
    processes
        .iter()
        .map(|p| format!("file {} stream {}", p.file, p.stream))
        .collect::<Vec<_>>()
        .join(", ")
}

/// How many and how long.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Totals {
    /// Launches, calls or copies.
    pub count: u64,
    /// Their summed duration, ns.
    pub time: u64,
}

/// One side: what a diff compares.
#[derive(Debug, Clone, Default, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Profile {
    /// The processes it covers, each once (by its stream), in the order of their streams.
    pub processes: Vec<Process>,
    /// GPUs.
    pub gpus: u64,
    /// Steps analysed, over the GPUs.
    pub steps: u64,
    /// Median step (over every GPU's steps), ns; 0 without steps.
    pub step_median: u64,
    /// 90th percentile step, ns.
    pub step_p90: u64,
    /// The GPUs' windows, summed, ns.
    pub window: u64,
    /// Busy time in them, ns.
    pub busy: u64,
    /// Idle time in them, ns.
    pub idle: u64,
    /// Idle time by cause, ns.
    pub idle_by_cause: BTreeMap<IdleCause, u64>,
    /// Kernels by name.
    pub kernels: BTreeMap<String, Totals>,
    /// Copies and sets by kind (`[CUDA memcpy HtoD]`, `[CUDA memset]`, `[CUDA graph]`): count, device time.
    pub copies: BTreeMap<String, Totals>,
    /// API calls by function.
    pub api: BTreeMap<String, Totals>,
}

/// The nearest-rank 90th percentile and the lower median of `v` (sorted in place).
fn median_p90(v: &mut [u64]) -> (u64, u64) {
    if v.is_empty() {
        return (0, 0);
    }
    v.sort_unstable();
    (v[(v.len() - 1) / 2], v[(v.len() * 9).div_ceil(10) - 1])
}

impl Profile {
    /// The side of `trace` that `select` names: an error where it names no process with device work, or one
    /// process and is several.
    pub fn of(trace: &Trace, select: Select) -> Result<Profile, SelectError> {
        let hosts = trace.hosts();
        let views = trace.views(&hosts);
        let chosen: Vec<_> = views
            .iter()
            .filter(|v| match select {
                Select::All => true,
                Select::Rank(r) => v.id.rank == Some(r),
                Select::Pid(p) => v.id.pid == p,
                Select::Stream { file, stream } => v.key == (file, stream),
            })
            .collect();
        let mut processes: Vec<Process> = chosen
            .iter()
            .map(|v| Process {
                file: v.key.0,
                stream: v.key.1,
                pid: v.id.pid,
                rank: v.id.rank,
            })
            .collect();
        processes.sort_unstable();
        processes.dedup();
        match processes.len() {
            0 => return Err(SelectError::Nothing(select)),
            1 => {}
            _ if select != Select::All => return Err(SelectError::Several(select, processes)),
            _ => {}
        }
        let names = trace.names();
        let mut p = Profile {
            processes,
            ..Profile::default()
        };
        let mut lengths = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for v in &chosen {
            p.gpus += 1;
            p.steps += v.steps();
            lengths.extend(v.plan.steady().iter().map(|s| s.1 - s.0));
            p.window += v.length();
            p.busy += v.busy;
            p.idle += v.length() - v.busy.min(v.length());
            for g in &v.gaps {
                *p.idle_by_cause.entry(g.cause).or_default() += g.len();
            }
            for i in v.ops_in_window() {
                let op = &v.p.ops[i];
                let (key, map) = match op.what {
                    What::Kernel { .. } => (names.get(op.name).to_string(), &mut p.kernels),
                    What::Copy { kind, .. } => {
                        (format!("[CUDA memcpy {}]", kind.name()), &mut p.copies)
                    }
                    What::Set => ("[CUDA memset]".to_string(), &mut p.copies),
                    What::Graph => ("[CUDA graph]".to_string(), &mut p.copies),
                };
                let t = map.entry(key).or_default();
                t.count += 1;
                t.time = t.time.saturating_add(op.end - op.start);
            }
            // A process's calls count once, over its first GPU's window.
            if !seen.insert(v.key) {
                continue;
            }
            for c in v.p.calls.iter().filter(|c| v.issued_inside(c.start)) {
                let t = p.api.entry(names.get(c.name).to_string()).or_default();
                t.count += 1;
                t.time = t.time.saturating_add(c.end - c.start);
            }
        }
        (p.step_median, p.step_p90) = median_p90(&mut lengths);
        Ok(p)
    }
}

/// One name on both sides.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Change {
    /// The kernel, copy kind or API function.
    pub name: String,
    /// Side A.
    pub a: Totals,
    /// Side B.
    pub b: Totals,
}

/// Two profiles compared.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Diff {
    /// Side A.
    pub a: Profile,
    /// Side B.
    pub b: Profile,
    /// Changes are ranked per step (both sides have steps), else by totals.
    pub per_step: bool,
    /// Kernels on both sides whose time changed most (per step where `per_step`).
    pub kernels_by_time: Vec<Change>,
    /// Kernels on both sides whose count changed most.
    pub kernels_by_count: Vec<Change>,
    /// Kernels only in B, the longest first.
    pub new_kernels: Vec<Change>,
    /// Kernels only in A, the longest first.
    pub gone_kernels: Vec<Change>,
    /// API functions whose time changed most (new and gone ones among them).
    pub api: Vec<Change>,
    /// Copies, sets and graph launches by kind, every kind of either side.
    pub copies: Vec<Change>,
}

/// `t` of a side with `steps` steps, per step where `per_step` (as a float, to compare).
fn scaled(t: u64, steps: u64, per_step: bool) -> f64 {
    if per_step && steps > 0 {
        t as f64 / steps as f64
    } else {
        t as f64
    }
}

/// The `top` names (at most) of `a` and `b` that `keep` accepts, ranked by the size of the change `by` measures.
fn ranked(
    a: &BTreeMap<String, Totals>,
    b: &BTreeMap<String, Totals>,
    keep: impl Fn(Option<&Totals>, Option<&Totals>) -> bool,
    by: impl Fn(&Totals, &Totals) -> f64,
    top: usize,
) -> Vec<Change> {
    let mut names: Vec<&String> = a.keys().chain(b.keys()).collect();
    names.sort_unstable();
    names.dedup();
    let mut out: Vec<(f64, Change)> = names
        .into_iter()
        .filter(|n| keep(a.get(*n), b.get(*n)))
        .map(|n| {
            let (x, y) = (
                a.get(n).copied().unwrap_or_default(),
                b.get(n).copied().unwrap_or_default(),
            );
            (
                by(&x, &y),
                Change {
                    name: n.clone(),
                    a: x,
                    b: y,
                },
            )
        })
        .filter(|(size, _)| *size > 0.0)
        .collect();
    out.sort_by(|x, y| y.0.total_cmp(&x.0).then(x.1.name.cmp(&y.1.name)));
    out.into_iter().take(top).map(|c| c.1).collect()
}

/// Compares `a` with `b`, keeping the `top` largest changes of each kind.
pub fn diff(a: &Profile, b: &Profile, top: usize) -> Diff {
    let per_step = a.steps > 0 && b.steps > 0;
    let (sa, sb) = (a.steps, b.steps);
    let time = |x: &Totals, y: &Totals| {
        (scaled(y.time, sb, per_step) - scaled(x.time, sa, per_step)).abs()
    };
    let count = |x: &Totals, y: &Totals| {
        (scaled(y.count, sb, per_step) - scaled(x.count, sa, per_step)).abs()
    };
    let both = |x: Option<&Totals>, y: Option<&Totals>| x.is_some() && y.is_some();
    Diff {
        per_step,
        kernels_by_time: ranked(&a.kernels, &b.kernels, both, time, top),
        kernels_by_count: ranked(&a.kernels, &b.kernels, both, count, top),
        new_kernels: ranked(
            &a.kernels,
            &b.kernels,
            |x, y| x.is_none() && y.is_some(),
            time,
            top,
        ),
        gone_kernels: ranked(
            &a.kernels,
            &b.kernels,
            |x, y| x.is_some() && y.is_none(),
            time,
            top,
        ),
        api: ranked(&a.api, &b.api, |_, _| true, time, top),
        copies: ranked(
            &a.copies,
            &b.copies,
            |_, _| true,
            |x, y| x.time as f64 + y.time as f64 + x.count as f64 + y.count as f64,
            usize::MAX,
        ),
        a: a.clone(),
        b: b.clone(),
    }
}
