//! The answer, not just the data: what slows a traced job, ranked by the GPU time it costs, with the evidence and
//! what to try ([`Trace::diagnose`]).
//!
//! [`Trace`] takes the records of one or more trace files (as [`report::Analysis`](crate::report::Analysis) does)
//! and keeps, per traced process, its device operations, API calls, NVTX ranges and synchronisations (about 60
//! bytes a record), and the job-wide summary the `stragglers` report needs ([`Job`]). [`Trace::diagnose`] then
//! returns a [`Diagnosis`]: per GPU its window, busy and idle time and steps; the [`Finding`]s, the costliest
//! first; and what the trace lacks to say more. Nothing is printed: the `gpu-tools analyze` command renders it.
//!
//! ```no_run
//! use gpu_tools_trace::analyze::Trace;
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut trace = Trace::new();
//! let file = std::io::BufReader::new(std::fs::File::open("run.gputrace")?);
//! for error in trace.read(0, file) {
//!     eprintln!("{error}");
//! }
//! for finding in trace.diagnose().findings.iter().take(3) {
//!     println!("{} ({} ns): {}", finding.title, finding.cost, finding.basis);
//! }
//! # Ok(()) }
//! ```
//!
//! **The window.** Each GPU (a device of a traced process) is analysed over its steps ([`steps`](self) below),
//! the warm-up left out: from the first steady step's start to the last step's end. Without steps, over its whole
//! trace, start-up included (said among the lacks). Costs are GPU time: their share is of the sum of the GPUs'
//! windows.
//!
//! **Steps** come from an NVTX range that repeats (named `step` or `iter` first), else from the repeating pattern
//! of the GPU's operations, CUDA graph launches among them (the module `steps` says how).
//!
//! **Idle time** is split by cause: each gap between busy intervals is given one ([`IdleCause`], decided when the
//! GPU ran out of work, from what the host thread that issued the next operation was doing then). The findings of
//! idle causes cost their gaps, so they never count one gap twice and sum to at most the idle time:
//! [`FindingKind::SyncStall`], [`LaunchBound`](FindingKind::LaunchBound),
//! [`BetweenSteps`](FindingKind::BetweenSteps), [`PageableCopies`](FindingKind::PageableCopies),
//! [`SmallCopies`](FindingKind::SmallCopies), [`QueuedWork`](FindingKind::QueuedWork). The cost is what the GPU
//! lost while the cause held the host: an upper bound on what removing it saves (the host may have other work to
//! do before it can issue the next).
//!
//! **Busy time** is judged where the trace can: time in NCCL collectives waiting for the last rank (from the
//! `stragglers` report: [`Straggler`](FindingKind::Straggler), [`CollectiveWait`](FindingKind::CollectiveWait)),
//! collectives with no computation beside them beyond that wait
//! ([`ExposedCommunication`](FindingKind::ExposedCommunication)), and, where device counters were sampled
//! (`trace --counters`), kernels bound by DRAM bandwidth, by computation, or leaving SMs idle
//! ([`MemoryBound`](FindingKind::MemoryBound), [`ComputeBound`](FindingKind::ComputeBound),
//! [`LowSmActivity`](FindingKind::LowSmActivity)), whose cost is the kernels' GPU time (what their bound limits).
//!
//! Findings under [`MIN_SHARE`] of the GPU time are left out.

mod between;
mod bound;
mod collect;
mod copies;
mod finding;
mod gpu;
mod host;
mod idle;
mod lacks;
mod launch;
mod overlap;
mod pageable;
mod queued;
mod small_copies;
mod steps;
mod straggler;
mod sync;
mod tally;
pub mod words;

pub(crate) use overlap::union;

use std::collections::{BTreeMap, HashSet};
use std::io::Read;

pub use finding::{
    Diagnosis, Evidence, EvidenceKind, Finding, FindingKind, GpuId, GpuSummary, IdleCause,
    MAX_SPANS, SignalEnd, Span, StepSource, Steps,
};
pub use idle::{ITEM_BYTES, SMALL_COPY};

pub(crate) use collect::{Names, Process, What};
pub(crate) use gpu::Gpu;
pub(crate) use host::Host;
pub(crate) use idle::Gap;
pub(crate) use steps::StepPlan;

use crate::file::{TraceFileError, TraceItem, TraceReader};
use crate::record::Record;
use crate::report::{Alignment, Job, StreamKey};

/// Findings that cost less than this share of the GPU time are left out: below one percent a cause is within
/// the launch latencies and timing noise of any loop, and not where an on-call engineer should look first.
pub const MIN_SHARE: f64 = 0.01;

/// Collects the records of one or more traces for [`diagnose`](Self::diagnose) (see the module docs).
#[derive(Debug, Default)]
pub struct Trace {
    processes: BTreeMap<StreamKey, Process>,
    names: Names,
    job: Job,
    alignment: Alignment,
    records: BTreeMap<u32, u64>,
    versions: BTreeMap<u32, u16>,
}

impl Trace {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Reads a whole trace file or stream as file number `file`, returning the errors met (in order). A fatal
    /// error ends the reading of that input; the records before it are kept.
    pub fn read(&mut self, file: u32, source: impl Read) -> Vec<TraceFileError> {
        let mut errors = Vec::new();
        let mut reader = TraceReader::new(source);
        for item in reader.by_ref() {
            match item {
                Ok(item) => self.add_item(file, &item),
                Err(e) => errors.push(e),
            }
        }
        if let Some(version) = reader.file_version() {
            self.versions.insert(file, version);
        }
        errors
    }

    /// The format version of file number `file`, once read; `None` for a single stream.
    pub fn file_version(&self, file: u32) -> Option<u16> {
        self.versions.get(&file).copied()
    }

    /// The records read so far of file number `file`.
    pub fn records(&self, file: u32) -> u64 {
        self.records.get(&file).copied().unwrap_or(0)
    }

    /// Takes one item of a [`TraceReader`] of file number `file`.
    pub fn add_item(&mut self, file: u32, item: &TraceItem) {
        self.job.add_item(file, item);
        match item {
            TraceItem::Header { stream, header } => {
                let p = self.processes.entry((file, *stream)).or_default();
                p.pid = header.pid;
                p.header_pid = Some(header.pid);
            }
            TraceItem::Record { stream, record } => self.add_record((file, *stream), record),
            _ => {}
        }
    }

    /// Takes one record of stream `key`.
    pub fn add(&mut self, key: StreamKey, record: &Record) {
        self.job.add(key, record);
        self.add_record(key, record);
    }

    fn add_record(&mut self, key: StreamKey, record: &Record) {
        *self.records.entry(key.0).or_default() += 1;
        match record {
            Record::ProcessInfo(i) => self.alignment.process_info(key.0, key.1, i),
            Record::ClockAnchor(a) => self.alignment.anchor(key.0, key.1, a),
            _ => {}
        }
        self.processes
            .entry(key)
            .or_default()
            .add(record, &mut self.names);
    }

    /// The job-wide collector fed with the same records (its `stragglers` report).
    pub fn job(&self) -> &Job {
        &self.job
    }

    /// The diagnosis of what was read (see the module docs).
    pub fn diagnose(&self) -> Diagnosis {
        let hosts = self.hosts();
        let views = self.views(&hosts);
        let gpu_time = views.iter().map(|v| v.window.1 - v.window.0).sum();
        let ctx = Ctx {
            trace: self,
            names: &self.names,
            views,
            gpu_time,
            ranks: std::cell::OnceCell::new(),
        };
        let mut findings: Vec<Finding> = Vec::new();
        findings.extend(sync::detect(&ctx));
        findings.extend(launch::detect(&ctx));
        findings.extend(between::detect(&ctx));
        findings.extend(pageable::detect(&ctx));
        findings.extend(small_copies::detect(&ctx));
        findings.extend(queued::detect(&ctx));
        findings.extend(straggler::detect(&ctx));
        findings.extend(overlap::detect(&ctx));
        findings.extend(bound::detect(&ctx));
        findings.retain(|f| f.share >= MIN_SHARE);
        findings.sort_by(|a, b| b.cost.cmp(&a.cost).then(a.kind.cmp(&b.kind)));
        Diagnosis {
            gpus: ctx.views.iter().map(View::summary).collect(),
            gpu_time,
            lacks: lacks::lacks(&ctx),
            ended_at_signal: lacks::ended_at_signal(self),
            findings,
        }
    }

    /// The host side of every traced process with device work.
    pub(crate) fn hosts(&self) -> BTreeMap<StreamKey, Host<'_>> {
        self.processes
            .iter()
            .filter(|(_, p)| !p.is_counters() && !p.ops.is_empty())
            .map(|(k, p)| (*k, Host::new(p)))
            .collect()
    }

    /// Every GPU of every traced process, with its steps, window and idle gaps.
    pub(crate) fn views<'a>(&'a self, hosts: &'a BTreeMap<StreamKey, Host<'a>>) -> Vec<View<'a>> {
        let mut views = Vec::new();
        for (key, host) in hosts {
            let Some(p) = self.processes.get(key) else {
                continue;
            };
            for gpu in Gpu::of(p) {
                views.push(View::new(*key, p, host, gpu, &self.names));
            }
        }
        // Processes whose pid, host and rank another's are: each GPU's text names its stream too.
        let mut streams: BTreeMap<(u32, &str, Option<u32>), HashSet<StreamKey>> = BTreeMap::new();
        for v in &views {
            streams
                .entry((v.id.pid, v.id.host.as_str(), v.id.rank))
                .or_default()
                .insert(v.key);
        }
        let shared: HashSet<StreamKey> = streams
            .into_values()
            .filter(|keys| keys.len() > 1)
            .flatten()
            .collect();
        for v in &mut views {
            v.id.shared = shared.contains(&v.key);
        }
        views
    }

    /// The names of operations, calls and ranges.
    pub(crate) fn names(&self) -> &Names {
        &self.names
    }

    /// The processes read.
    pub(crate) fn processes(&self) -> &BTreeMap<StreamKey, Process> {
        &self.processes
    }

    /// The clock alignment of the streams read.
    pub(crate) fn alignment(&self) -> &Alignment {
        &self.alignment
    }
}

/// One GPU as the detectors see it.
#[derive(Debug)]
pub(crate) struct View<'a> {
    pub id: GpuId,
    pub key: StreamKey,
    pub p: &'a Process,
    pub host: &'a Host<'a>,
    pub gpu: Gpu,
    pub plan: StepPlan,
    /// The window analysed: `[start, end)` on the stream's clock.
    pub window: (u64, u64),
    /// The host's side of it: from the call that issued the window's first operation to the one that issued the
    /// operation that ends it (a host ahead of the GPU issues a step's work well before it runs).
    pub host_window: (u64, u64),
    pub gaps: Vec<Gap>,
    pub busy: u64,
}

impl<'a> View<'a> {
    fn new(key: StreamKey, p: &'a Process, host: &'a Host<'a>, gpu: Gpu, names: &Names) -> Self {
        let plan = steps::find(p, &gpu, host, names);
        let (first, last) = gpu.extent();
        let window = match (plan.steady().first(), plan.steady().last()) {
            (Some(a), Some(b)) => (a.0.max(first), b.1.min(last).max(a.0.max(first))),
            _ => (first, last),
        };
        let starts: HashSet<usize> = plan.first_ops[plan.warmup.min(plan.first_ops.len())..]
            .iter()
            .flatten()
            .copied()
            .collect();
        let gaps = gpu
            .idle_within(window.0, window.1)
            .into_iter()
            .filter_map(|i| {
                let (start, end) = (i.from.max(window.0), i.to.min(window.1));
                if start >= end {
                    return None;
                }
                let boundary = starts.contains(&i.next);
                let (cause, call, copy) = idle::classify(host, &p.ops, i.from, i.next, boundary);
                Some(Gap {
                    start,
                    end,
                    next: i.next,
                    cause,
                    call,
                    copy,
                })
            })
            .collect();
        let busy = gpu.busy_within(window.0, window.1);
        let issued = |t: u64| {
            let at = gpu.ops.partition_point(|&i| p.ops[i].start < t);
            gpu.ops
                .get(at)
                .and_then(|&i| host.launch_of(&p.ops[i]))
                .map_or(t, |c| host.calls[c].start)
        };
        let host_window = (issued(window.0), issued(window.1).max(issued(window.0)));
        let id = GpuId {
            file: key.0,
            stream: key.1,
            device: gpu.device,
            pid: p.pid,
            host: p.info.as_ref().map_or_else(String::new, |i| i.host.clone()),
            rank: p.info.as_ref().and_then(|i| i.rank()),
            shared: false,
        };
        View {
            id,
            key,
            p,
            host,
            gpu,
            plan,
            window,
            host_window,
            gaps,
            busy,
        }
    }

    /// The window's length.
    pub(crate) fn length(&self) -> u64 {
        self.window.1 - self.window.0
    }

    /// Steps analysed (the warm-up left out).
    pub(crate) fn steps(&self) -> u64 {
        self.plan.steady().len() as u64
    }

    /// Whether `t` lies in the window.
    pub(crate) fn inside(&self, t: u64) -> bool {
        (self.window.0..self.window.1).contains(&t)
    }

    /// Whether a host time `t` lies in the host's side of the window ([`host_window`](Self::host_window)).
    pub(crate) fn issued_inside(&self, t: u64) -> bool {
        (self.host_window.0..self.host_window.1).contains(&t)
    }

    /// The operations of this GPU that start in the window (indices into the process's ops), in start order.
    pub(crate) fn ops_in_window(&self) -> impl Iterator<Item = usize> + '_ {
        self.gpu
            .ops
            .iter()
            .copied()
            .filter(|&i| self.inside(self.p.ops[i].start))
    }

    /// A span of this GPU.
    pub(crate) fn span(&self, start: u64, end: u64) -> Span {
        Span {
            file: self.key.0,
            stream: self.key.1,
            device: self.gpu.device,
            start,
            end,
        }
    }

    fn summary(&self) -> GpuSummary {
        let mut lengths: Vec<u64> = self.plan.steady().iter().map(|s| s.1 - s.0).collect();
        let mut by_cause: Vec<(IdleCause, u64)> = IdleCause::ALL
            .iter()
            .map(|&c| {
                let t = self
                    .gaps
                    .iter()
                    .filter(|g| g.cause == c)
                    .map(Gap::len)
                    .sum();
                (c, t)
            })
            .filter(|c| c.1 > 0)
            .collect();
        by_cause.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        GpuSummary {
            gpu: self.id.clone(),
            start: self.window.0,
            end: self.window.1,
            busy: self.busy,
            idle: self.length() - self.busy.min(self.length()),
            steps: Steps {
                source: self.plan.source.clone(),
                count: lengths.len() as u64,
                warmup: self.plan.warmup as u64,
                median: words::median(&mut lengths),
                p90: words::p90(&mut lengths),
            },
            idle_by_cause: by_cause,
            before: self.window.0 - self.gpu.extent().0.min(self.window.0),
        }
    }
}

/// What every detector reads.
#[derive(Debug)]
pub(crate) struct Ctx<'a> {
    pub trace: &'a Trace,
    pub names: &'a Names,
    pub views: Vec<View<'a>>,
    /// The sum of the windows.
    pub gpu_time: u64,
    /// The `stragglers` report's rows and verdict, made once when first asked for.
    pub ranks: std::cell::OnceCell<(Vec<straggler::RankRow>, String)>,
}
