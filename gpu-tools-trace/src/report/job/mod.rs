//! One job of many ranks: the records of every rank of a multi-host job, kept compactly, put on one clock by the
//! job's own NCCL collectives, and the `stragglers` report made from them.
//!
//! [`Job`] takes the records of one or more trace files as they are read and keeps, per traced process (a *rank*),
//! only what the report needs: each NCCL collective kernel (name, stream, start, end: 24 bytes), the GPU's busy
//! intervals (coalesced as they come: kernels that overlap or follow without a gap are one interval), the NVTX
//! ranges, and a few counters. Nothing else of a record is held, so 512 ranks of a 5-second job fit in well under
//! a gigabyte (`docs/measurements.md` has the figures).
//!
//! **Alignment on collectives.** Clock anchors put each host on the reference host's clock only as well as the
//! hosts' wall clocks agree (hundreds of microseconds apart with NTP). A collective, though, ends at one instant on
//! every rank it joins, within the kernel's end jitter (a few microseconds). [`Job::collective_alignment`] matches
//! the n-th collective kernel of one name on one stream of each rank (a *sequence*; a rank's streams that run a
//! name are numbered by their first kernel), finds where each rank's sequence starts in the reference rank's by
//! the nearest end (so windows that did not start together still match), and moves each host by the median of the
//! differences between its ranks' collective ends and the median end over all ranks of the same collective
//! (repeated until it settles). What it reports per host: the move beyond the anchors, how many collectives it
//! rests on, and how far the ends still disagree (90th percentile). Sequences of different lengths, ranks whose
//! sequences could not be placed, hosts with no collective shared with the others: each is said in a note, never
//! left out silently. The match assumes the anchors agree within half the interval between two collectives of one
//! name; a move larger than a quarter of that interval is flagged.
//!
//! **Ranks.** A rank is a traced process that ran device work (a launcher that ran none is no rank). Its number is
//! the process's `RANK` (or `OMPI_COMM_WORLD_RANK`, `PMI_RANK`, `SLURM_PROCID`) where every rank has one, else the
//! order of the files and streams given; the report says which. A rank traced twice (two streams of one rank
//! number) is refused ([`Job::check`]); ranks below the job's size (`WORLD_SIZE`, or `OMPI_COMM_WORLD_SIZE`,
//! `PMI_SIZE`, `SLURM_NTASKS` beside the launcher's rank variable; else the largest rank) without a trace are named
//! as missing ([`Job::gaps`]).
//!
//! **Steps.** From an NVTX range that repeats on every rank (one whose name holds `step` or `iter`, else the
//! repeating range that covers the most time), else from the repeating pattern of collectives: the smallest period
//! of a rank's collective names (and of the gaps between them) is a step, measured from one collective at a position
//! of the pattern to the next collective at the same position. A step's time runs from its start to the next step's
//! start (the last step's to its end).

mod collectives;
mod steps;
mod stragglers;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;

pub use collectives::{CollectiveAlignment, HostAlignment};

use super::{Alignment, StreamKey};
use crate::file::{TraceFileError, TraceItem, TraceReader};
use crate::record::{MarkerKind, ProcessInfo, Record};

/// The name of the report [`Job::stragglers`] makes.
pub const STRAGGLERS: &str = "stragglers";

/// Whether a kernel is an NCCL collective, and its name without a signature: `ncclDevKernel_AllReduce_Sum_f32_RING_LL`
/// for that name as recorded, with its parameters (`ncclKernel_...(ncclDevComm*, ...)`) or mangled
/// (`_Z40ncclKernel_...P11ncclDevComm...`).
pub fn collective_name(kernel: &str) -> Option<&str> {
    let is_nccl = |s: &str| s.starts_with("ncclDevKernel_") || s.starts_with("ncclKernel_");
    if let Some(rest) = kernel.strip_prefix("_Z") {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        let len: usize = rest.get(..digits)?.parse().ok()?;
        let name = rest.get(digits..digits.checked_add(len)?)?;
        return is_nccl(name).then_some(name);
    }
    let name = kernel.split(['(', ' ']).next().unwrap_or(kernel);
    is_nccl(name).then_some(name)
}

/// One collective kernel of a rank, times as its stream has them.
#[derive(Debug, Clone, Copy)]
struct Collective {
    /// Index into [`Job::names`].
    name: u32,
    /// The CUDA stream it ran on.
    stream: u32,
    start: u64,
    end: u64,
}

/// Gaps shorter than this between a rank's device operations do not start a new interval of [`Busy`].
const COALESCE_NS: u64 = 10_000;

/// The busy time of a rank's device(s) as intervals, coalesced as they come: an operation that starts inside the
/// last interval, or less than [`COALESCE_NS`] after it, extends it. Each interval keeps its exact busy time
/// (the union of its operations), so that only the gaps' places are lost, not their length: a few intervals per
/// step instead of one per kernel.
#[derive(Debug, Default)]
struct Busy(Vec<(u64, u64, u64)>);

impl Busy {
    fn push(&mut self, start: u64, end: u64) {
        let end = end.max(start);
        if let Some(last) = self.0.last_mut() {
            if start >= last.0 && start <= last.1.saturating_add(COALESCE_NS) {
                last.2 = last.2.saturating_add(end.saturating_sub(start.max(last.1)));
                last.1 = last.1.max(end);
                return;
            }
        }
        self.0.push((start, end, end - start));
    }

    /// The intervals in start order, those that overlap (operations delivered out of order) merged: their busy
    /// times added less the overlap (taken as busy in both).
    fn merged(&self) -> Vec<(u64, u64, u64)> {
        let mut v = self.0.clone();
        v.sort_unstable();
        let mut out: Vec<(u64, u64, u64)> = Vec::with_capacity(v.len());
        for (s, e, b) in v {
            match out.last_mut() {
                Some(c) if s < c.1 => {
                    let overlap = c.1.min(e) - s;
                    c.2 = c.2.saturating_add(b).saturating_sub(overlap);
                    c.1 = c.1.max(e);
                    c.2 = c.2.min(c.1 - c.0);
                }
                _ => out.push((s, e, b)),
            }
        }
        out
    }

    /// The time covered by at least one operation.
    fn covered(&self) -> u64 {
        self.merged().iter().map(|i| i.2).sum()
    }

    /// The busy time within each of `spans` (in start order, not overlapping), an interval that straddles a span's
    /// edge counted in proportion.
    fn within(&self, spans: &[(u64, u64)]) -> Vec<u64> {
        let merged = self.merged();
        let mut out = Vec::with_capacity(spans.len());
        let mut first = 0;
        for &(s, e) in spans {
            while first < merged.len() && merged[first].1 <= s {
                first += 1;
            }
            let mut busy = 0u64;
            for &(a, b, t) in merged[first..].iter().take_while(|i| i.0 < e) {
                let overlap = b.min(e).saturating_sub(a.max(s));
                let length = b - a;
                busy += if length == 0 {
                    0
                } else {
                    (u128::from(t) * u128::from(overlap) / u128::from(length)) as u64
                };
            }
            out.push(busy);
        }
        out
    }
}

/// What is kept of one traced process.
#[derive(Debug, Default)]
struct RankStream {
    pid: u32,
    header_pid: Option<u32>,
    started: bool,
    counter_records: bool,
    info: Option<ProcessInfo>,
    collectives: Vec<Collective>,
    /// Every device operation.
    busy: Busy,
    /// Device operations other than collectives: the rank's own work.
    work: Busy,
    /// Device operations (kernels, copies, sets, graph launches).
    ops: u64,
    /// Sum of the collective kernels' durations.
    nccl_time: u64,
    /// First start and last end of its device work.
    first: u64,
    last: u64,
    /// Open NVTX ranges by marker id: (start, name).
    open: HashMap<u32, (u64, u32)>,
    /// Closed NVTX ranges: (name, start, end); names index [`Job::names`].
    ranges: Vec<(u32, u64, u64)>,
}

impl RankStream {
    fn is_counters(&self) -> bool {
        !self.started
            && (self.header_pid == Some(crate::counters::COUNTER_STREAM_PID)
                || self.counter_records)
    }

    fn is_rank(&self) -> bool {
        !self.is_counters() && self.ops > 0
    }

    /// A process with a rank variable whose trace holds no device work: traced, but not a rank of the report.
    fn idle_rank(&self) -> Option<IdleRank> {
        let info = self.info.as_ref()?;
        let rank = info.rank()?;
        (!self.is_counters() && self.ops == 0).then(|| IdleRank {
            rank,
            pid: self.pid,
            host: info.host.clone(),
        })
    }

    fn op(&mut self, start: u64, end: u64, collective: bool) {
        if self.ops == 0 {
            self.first = start;
            self.last = end;
        } else {
            self.first = self.first.min(start);
            self.last = self.last.max(end);
        }
        self.ops += 1;
        self.busy.push(start, end);
        if !collective {
            self.work.push(start, end);
        }
    }
}

/// Two streams of one rank number: refused, since the rank's time would count twice.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "rank {rank} is traced twice: file {} stream {} (pid {}, host {}) and file {} stream {} (pid {}, host {})",
    first.0 .0, first.0 .1, first.1, first.2, second.0 .0, second.0 .1, second.1, second.2
)]
pub struct DuplicateRank {
    /// The rank number.
    pub rank: u32,
    /// The first stream of it: (file, stream), pid, host.
    pub first: (StreamKey, u32, String),
    /// The second.
    pub second: (StreamKey, u32, String),
}

/// Collects what the job-wide reports need from the records of one or more traces (see the module docs).
#[derive(Debug, Default)]
pub struct Job {
    streams: BTreeMap<StreamKey, RankStream>,
    alignment: Alignment,
    names: Names,
    name_ids: HashMap<Arc<str>, u32>,
}

/// Collective and NVTX range names by id.
#[derive(Debug, Default)]
struct Names(Vec<Arc<str>>);

impl Names {
    fn get(&self, id: u32) -> &str {
        self.0.get(id as usize).map_or("?", |n| n)
    }
}

/// A rank as the reports see it.
#[derive(Debug)]
struct RankView<'a> {
    key: StreamKey,
    stream: &'a RankStream,
    rank: u32,
    host: String,
    /// Its host's index among the hosts with ranks (0: the reference), where its host is known.
    domain: Option<usize>,
}

/// The ranks and their hosts.
#[derive(Debug)]
struct Prepared<'a> {
    ranks: Vec<RankView<'a>>,
    /// (host, boot id) of each host with a rank, the reference first.
    hosts: Vec<(String, String)>,
    /// Each rank's clock anchor shift.
    anchor_shifts: Vec<i64>,
    /// Ranks numbered by their `RANK` variables (else by order).
    from_labels: bool,
    /// Streams without a rank variable where others have one.
    unlabelled: usize,
    /// The job's size, where the processes say (`WORLD_SIZE` or another launcher's), with its variable.
    world: Option<(&'static str, u32)>,
    /// Processes with a rank variable that were traced but recorded no device work (their kernel records missing,
    /// or none run in the window): not "without a trace", and said apart.
    idle: Vec<IdleRank>,
}

/// A traced process with a rank variable and no device work in its trace.
#[derive(Debug, Clone, PartialEq, Eq)]
struct IdleRank {
    rank: u32,
    pid: u32,
    host: String,
}

impl Job {
    /// Nothing read yet.
    pub fn new() -> Self {
        Self::default()
    }

    fn name_id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.name_ids.get(name) {
            return id;
        }
        let id = u32::try_from(self.names.0.len()).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(name);
        self.names.0.push(Arc::clone(&name));
        self.name_ids.insert(name, id);
        id
    }

    /// Reads a whole trace file or stream as file number `file`, returning the errors met; the records before a
    /// fatal error are kept.
    pub fn read(&mut self, file: u32, source: impl Read) -> Vec<TraceFileError> {
        let mut errors = Vec::new();
        for item in TraceReader::new(source) {
            match item {
                Ok(item) => self.add_item(file, &item),
                Err(e) => errors.push(e),
            }
        }
        errors
    }

    /// Takes one item of a [`TraceReader`] of file number `file`.
    pub fn add_item(&mut self, file: u32, item: &TraceItem) {
        match item {
            TraceItem::Header { stream, header } => {
                let s = self.streams.entry((file, *stream)).or_default();
                s.pid = header.pid;
                s.header_pid = Some(header.pid);
            }
            TraceItem::Record { stream, record } => self.add((file, *stream), record),
            TraceItem::Closed { .. } => {}
        }
    }

    /// Takes one record of stream `key`.
    pub fn add(&mut self, key: StreamKey, record: &Record) {
        match record {
            Record::ProcessStart(p) => {
                let s = self.streams.entry(key).or_default();
                s.pid = p.pid;
                s.started = true;
            }
            Record::ProcessInfo(i) => {
                self.alignment.process_info(key.0, key.1, i);
                self.streams.entry(key).or_default().info = Some(i.clone());
            }
            Record::ClockAnchor(a) => self.alignment.anchor(key.0, key.1, a),
            Record::CounterSample(_) | Record::CounterGap(_) => {
                self.streams.entry(key).or_default().counter_records = true
            }
            Record::Kernel(k) => {
                let name = collective_name(&k.name).map(|n| self.name_id(n));
                let s = self.streams.entry(key).or_default();
                s.op(k.start, k.end, name.is_some());
                if let Some(name) = name {
                    s.nccl_time = s.nccl_time.saturating_add(k.end.saturating_sub(k.start));
                    s.collectives.push(Collective {
                        name,
                        stream: k.stream,
                        start: k.start,
                        end: k.end.max(k.start),
                    });
                }
            }
            Record::Memcpy(m) => self
                .streams
                .entry(key)
                .or_default()
                .op(m.start, m.end, false),
            Record::Memset(m) => self
                .streams
                .entry(key)
                .or_default()
                .op(m.start, m.end, false),
            Record::GraphLaunch(g) => self
                .streams
                .entry(key)
                .or_default()
                .op(g.start, g.end, false),
            Record::Marker(m) => match m.kind {
                MarkerKind::Start => {
                    let full = if m.domain.is_empty() {
                        m.name.clone()
                    } else {
                        format!("{}:{}", m.domain, m.name)
                    };
                    let name = self.name_id(&full);
                    let s = self.streams.entry(key).or_default();
                    // A range never closed is forgotten past this many (a leak in the program's markers).
                    if s.open.len() < 1 << 16 {
                        s.open.insert(m.id, (m.time, name));
                    }
                }
                MarkerKind::End => {
                    let s = self.streams.entry(key).or_default();
                    if let Some((start, name)) = s.open.remove(&m.id) {
                        s.ranges.push((name, start, m.time.max(start)));
                    }
                }
                _ => {}
            },
            _ => {}
        }
    }

    /// The clock anchors' alignment of the streams read.
    pub fn anchors(&self) -> &Alignment {
        &self.alignment
    }

    /// The ranks: streams that ran device work, in key order.
    fn rank_streams(&self) -> Vec<(StreamKey, &RankStream)> {
        self.streams
            .iter()
            .filter(|(_, s)| s.is_rank())
            .map(|(k, s)| (*k, s))
            .collect()
    }

    /// The (host, rank) of every process read that has a rank variable, in stream order: what
    /// [`Timeline::order_ranks`](crate::export::Timeline::order_ranks) orders the groups of an export by.
    pub fn process_ranks(&self) -> Vec<(String, u32)> {
        self.streams
            .values()
            .filter_map(|s| {
                let info = s.info.as_ref()?;
                Some((info.host.clone(), info.rank()?))
            })
            .collect()
    }

    /// The stream of each rank of [`stragglers`](Self::stragglers)' rows, by its rank number: what tells a row's
    /// process from another with its pid and host (ranks in containers of their own share a pid).
    pub(crate) fn rank_keys(&self) -> HashMap<u32, StreamKey> {
        self.prepare()
            .ranks
            .iter()
            .map(|r| (r.rank, r.key))
            .collect()
    }

    /// Refuses a rank traced twice (two streams of one rank number, in one file or two).
    pub fn check(&self) -> Result<(), DuplicateRank> {
        first_duplicate_rank(
            self.rank_streams()
                .into_iter()
                .filter_map(|(key, s)| Some((key, s.pid, s.info.as_ref()?))),
        )
    }
}

/// The first rank number two of `streams` (key, pid, process info) share, in their order; streams without a rank
/// are passed over.
pub(super) fn first_duplicate_rank<'a>(
    streams: impl Iterator<Item = (StreamKey, u32, &'a ProcessInfo)>,
) -> Result<(), DuplicateRank> {
    let mut seen: HashMap<u32, (StreamKey, u32, String)> = HashMap::new();
    for (key, pid, info) in streams {
        let Some(rank) = info.rank() else { continue };
        let this = (key, pid, info.host.clone());
        if let Some(first) = seen.get(&rank) {
            return Err(DuplicateRank {
                rank,
                first: first.clone(),
                second: this,
            });
        }
        seen.insert(rank, this);
    }
    Ok(())
}

impl Job {
    /// The ranks, numbered, with their hosts.
    fn prepare(&self) -> Prepared<'_> {
        let streams = self.rank_streams();
        let labelled = streams
            .iter()
            .filter(|(_, s)| s.info.as_ref().and_then(ProcessInfo::rank).is_some())
            .count();
        let from_labels = !streams.is_empty() && labelled == streams.len();
        let mut hosts: Vec<(String, String)> = Vec::new();
        // Hosts in the anchors' order, so that the reference host comes first.
        for d in self.alignment.domains() {
            let has_rank = streams.iter().any(|(_, s)| {
                s.info
                    .as_ref()
                    .is_some_and(|i| i.host == d.host && i.boot_id == d.boot_id)
            });
            if has_rank {
                hosts.push((d.host.clone(), d.boot_id.clone()));
            }
        }
        let mut ranks = Vec::with_capacity(streams.len());
        let mut anchor_shifts = Vec::with_capacity(streams.len());
        for (i, (key, s)) in streams.iter().enumerate() {
            let rank = match (&s.info, from_labels) {
                (Some(info), true) => info.rank().unwrap_or(0),
                _ => u32::try_from(i).unwrap_or(u32::MAX),
            };
            let host = s.info.as_ref().map_or_else(String::new, |i| i.host.clone());
            let domain = s.info.as_ref().and_then(|info| {
                hosts
                    .iter()
                    .position(|(h, b)| *h == info.host && *b == info.boot_id)
            });
            ranks.push(RankView {
                key: *key,
                stream: s,
                rank,
                host,
                domain,
            });
            anchor_shifts.push(self.alignment.shift(key.0, key.1));
        }
        let world = streams
            .iter()
            .filter_map(|(_, s)| s.info.as_ref()?.world_size_variable())
            .max_by_key(|w| w.1);
        Prepared {
            ranks,
            hosts,
            anchor_shifts,
            from_labels,
            unlabelled: if labelled > 0 {
                streams.len() - labelled
            } else {
                0
            },
            world,
            idle: {
                let mut idle: Vec<IdleRank> = self
                    .streams
                    .values()
                    .filter_map(RankStream::idle_rank)
                    .collect();
                idle.sort_unstable_by_key(|i| i.rank);
                idle
            },
        }
    }

    /// Aligns the hosts of the ranks read on their collectives (see the module docs): per host, the move beyond its
    /// clock anchors. Give each host's [`HostAlignment::correction`] to [`Alignment::correct`] (or
    /// [`Timeline::correct`](crate::export::Timeline::correct)) to put another reading of the same files on the
    /// same clock.
    pub fn collective_alignment(&self) -> CollectiveAlignment {
        let p = self.prepare();
        collectives::align(&p.ranks, &p.hosts, &p.anchor_shifts, &self.names).0
    }
}
