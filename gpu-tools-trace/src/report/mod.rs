//! Reports of a recorded trace, as Nsight Systems' `nsys stats` computes them: per-kernel, API, memory-copy time
//! and size summaries, NVTX range summary and NVTX GPU projection, CUDA graph launches, and the processes; and,
//! where the trace holds device counter samples, the counters per kernel (`cuda_gpu_kern_counters_sum`, from
//! [`counters::attribution`](crate::counters::attribution)).
//!
//! [`Analysis`] takes the records of one or more trace files (each stream keyed by file and stream number) in one
//! pass; [`Analysis::reports`] then builds the [`Table`]s, which render as text, CSV or JSON.
//!
//! ```no_run
//! use gpu_tools_trace::report::{Analysis, Format, write_tables};
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let mut analysis = Analysis::new();
//! let file = std::io::BufReader::new(std::fs::File::open("run.gputrace")?);
//! for error in analysis.read(0, file) {
//!     eprintln!("{error}");
//! }
//! write_tables(&analysis.reports(), Format::Text, &mut std::io::stdout())?;
//! # Ok(()) }
//! ```
//!
//! Held in memory: a duration per kernel, copy, set, API call and NVTX range (for medians), and for the GPU
//! projection the thread and time of every API call and the span of every device operation. About 40 bytes per
//! record: 200,000 launches with 7 API calls each take some 60 MB. For the counters per kernel, each kernel's span
//! (about 40 bytes more) and every counter sample and gap are kept too.
//!
//! A counter stream ([`counters`](crate::counters)) is not a traced process: it has no row in `processes`.
//!
//! The job-wide report `stragglers` ([`Job`]: per rank its steps, NCCL time and waits, and the rank the others wait
//! for, on hosts aligned by their NCCL collectives) is made only when asked for, with
//! [`Analysis::for_reports`]; asked alone, it holds a summary of each rank rather than the records' durations, so
//! that a job of hundreds of ranks fits in memory.

mod align;
mod counters;
mod job;
mod stats;
mod table;

use std::collections::{BTreeMap, HashMap};
use std::io::Read;
use std::sync::Arc;

pub use align::{Alignment, ClockDomain};
pub use job::{
    CollectiveAlignment, DuplicateRank, HostAlignment, Job, STRAGGLERS, collective_name,
};
pub(crate) use table::json_string;
pub use table::{Cell, Format, Table, csv_field, write_tables};

use self::stats::Values;
use super::file::{TraceFileError, TraceItem, TraceReader};
use super::record::*;
use super::{CounterGap, CounterSample};

/// A stream of the analysis: file number (order given) and stream number in that file.
pub type StreamKey = (u32, u32);

/// A device operation of a stream, for the GPU projection.
#[derive(Debug, Clone, Copy)]
struct DeviceOp {
    correlation: u32,
    start: u64,
    end: u64,
}

/// An NVTX range, paired from its start and end markers.
#[derive(Debug, Clone)]
struct Range {
    thread: u32,
    start: u64,
    end: u64,
    name: Arc<str>,
}

/// A kernel's span, for the counters per kernel (times as the stream has them).
#[derive(Debug, Clone)]
struct KernelSpan {
    start: u64,
    end: u64,
    device: u32,
    name: Arc<str>,
}

/// What is known of one stream.
#[derive(Debug, Default)]
struct StreamInfo {
    pid: u32,
    /// The pid of the stream's header, where it was read.
    header_pid: Option<u32>,
    /// A process start was read.
    started: bool,
    command: String,
    info: Option<ProcessInfo>,
    records: u64,
    ended: Option<ProcessEnd>,
    dropped: u64,
    /// API calls by correlation id: (thread, start).
    calls: HashMap<u32, (u32, u64)>,
    ops: Vec<DeviceOp>,
    /// Open NVTX ranges by marker id: (thread, start, name).
    open: HashMap<u32, (u32, u64, Arc<str>)>,
    ranges: Vec<Range>,
    marks: u64,
    unpaired_ends: u64,
    /// Why the rest of the stream could not be read (the file cut short or damaged), where that happened.
    unread: Option<&'static str>,
    /// The file says the stream's connection closed: all of it was read.
    closed: bool,
    kernels: Vec<KernelSpan>,
    samples: Vec<CounterSample>,
    gaps: Vec<CounterGap>,
    /// It holds counter records (kept in `samples` and `gaps` unless only job-wide reports are collected).
    counter_records: bool,
}

impl StreamInfo {
    /// Whether the stream is a counter stream, not a traced process's: its header says so, or (read without a
    /// header) it holds counter records and no process start.
    fn is_counters(&self) -> bool {
        !self.started
            && (self.header_pid == Some(crate::counters::COUNTER_STREAM_PID)
                || self.counter_records)
    }
}

/// Collects the records of one or more traces and computes the reports.
#[derive(Debug, Default)]
pub struct Analysis {
    streams: BTreeMap<StreamKey, StreamInfo>,
    kernels: HashMap<Arc<str>, Values>,
    api: HashMap<Arc<str>, Values>,
    copy_time: BTreeMap<String, Values>,
    copy_size: BTreeMap<String, Values>,
    graphs: BTreeMap<u32, Values>,
    graph_nodes: HashMap<u32, u32>,
    graph_kernels: u64,
    names: HashMap<String, Arc<str>>,
    alignment: Alignment,
    errors: u64,
    /// The format version of each file read (not of a single stream).
    versions: BTreeMap<u32, u16>,
    /// The job-wide collector, where a job-wide report was asked for.
    job: Option<Job>,
    /// Only the job-wide reports (and `processes`) were asked for: nothing else of a record is kept.
    job_only: bool,
}

/// `n` and the noun (with its verb) that goes with it: "1 error", "2 errors".
fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Nsight Systems' name of a copy direction.
fn copy_operation(kind: CopyKind) -> String {
    let what = match kind {
        CopyKind::HtoD => "Host-to-Device",
        CopyKind::DtoH => "Device-to-Host",
        CopyKind::DtoD => "Device-to-Device",
        CopyKind::HtoH => "Host-to-Host",
        CopyKind::PtoP => "Peer-to-Peer",
        CopyKind::HtoA => "Host-to-Array",
        CopyKind::AtoH => "Array-to-Host",
        CopyKind::AtoA => "Array-to-Array",
        CopyKind::AtoD => "Array-to-Device",
        CopyKind::DtoA => "Device-to-Array",
        _ => "unknown",
    };
    format!("[CUDA memcpy {what}]")
}

impl Analysis {
    /// Nothing read yet; collects what every report of [`reports`](Self::reports) needs (not the job-wide
    /// [`STRAGGLERS`], which only [`for_reports`](Self::for_reports) collects).
    pub fn new() -> Self {
        Self::default()
    }

    /// Nothing read yet; collects only what the reports named (of [`REPORT_NAMES`](Self::REPORT_NAMES)) need, so
    /// that a job-wide report of many ranks holds no more than its own summary of each (see [`Job`]). Every other
    /// report is then `None` from [`report`](Self::report), but `processes`, which is always kept.
    pub fn for_reports<S: AsRef<str>>(names: &[S]) -> Self {
        let job = names.iter().any(|n| n.as_ref() == STRAGGLERS);
        let others = names
            .iter()
            .any(|n| n.as_ref() != STRAGGLERS && n.as_ref() != "processes");
        Analysis {
            job: job.then(Job::new),
            job_only: !others,
            ..Self::default()
        }
    }

    /// The job-wide collector, where [`for_reports`](Self::for_reports) asked for a job-wide report: check it
    /// ([`Job::check`]) before its report.
    pub fn job(&self) -> Option<&Job> {
        self.job.as_ref()
    }

    fn intern(&mut self, s: &str) -> Arc<str> {
        if let Some(n) = self.names.get(s) {
            return Arc::clone(n);
        }
        let n: Arc<str> = Arc::from(s);
        self.names.insert(s.to_string(), Arc::clone(&n));
        n
    }

    /// Reads a whole trace file or stream as file number `file`, returning the errors met (in order). A fatal
    /// error ends the reading of that input; the records before it are kept.
    pub fn read(&mut self, file: u32, source: impl Read) -> Vec<TraceFileError> {
        let mut errors = Vec::new();
        let mut reader = TraceReader::new(source);
        for item in reader.by_ref() {
            match item {
                Ok(item) => self.add_item(file, &item),
                Err(e) => {
                    self.errors += 1;
                    self.note_unread(file, &e);
                    errors.push(e);
                }
            }
        }
        if let Some(version) = reader.file_version() {
            self.versions.insert(file, version);
        }
        errors
    }

    /// The format version of file number `file`, once read; `None` for a single stream (or an input whose header
    /// could not be read). [`format_limits`](crate::file::format_limits) says what an older version cannot show.
    pub fn file_version(&self, file: u32) -> Option<u16> {
        self.versions.get(&file).copied()
    }

    /// Notes which streams of file `file` an error left unread to their end: a stream without its end record is
    /// then the file's fault, not the traced program's.
    fn note_unread(&mut self, file: u32, e: &TraceFileError) {
        let (stream, why) = match e {
            TraceFileError::Truncated { .. } => (None, "the file is cut short"),
            TraceFileError::Unfinished { .. } => (None, "the file was not finished by its writer"),
            // Everything up to the final chunk was read.
            TraceFileError::AfterFinalChunk { .. } => return,
            TraceFileError::Stream { stream, error } if error.is_fatal() => {
                let why = match error {
                    super::WireError::TruncatedStream { .. } => "the stream is cut short",
                    _ => "the stream is corrupt",
                };
                (Some(*stream), why)
            }
            TraceFileError::Stream { .. } => return,
            TraceFileError::BadPackedChunk { stream, .. } => {
                (Some(*stream), "the stream is corrupt")
            }
            TraceFileError::Io(_) => (None, "reading the file failed"),
            _ => (None, "the file is corrupt"),
        };
        for (key, s) in self.streams.iter_mut() {
            // A stream the file says was closed was read to its end, unless its own bytes were damaged.
            let whole = s.closed && stream.is_none();
            if key.0 == file && stream.is_none_or(|n| n == key.1) && s.ended.is_none() && !whole {
                s.unread.get_or_insert(why);
            }
        }
    }

    /// The records read so far of file number `file`, over its streams: 0 for a file that holds none (or none
    /// before an error that ended its reading).
    pub fn records(&self, file: u32) -> u64 {
        self.streams
            .iter()
            .filter(|(key, _)| key.0 == file)
            .map(|(_, s)| s.records)
            .sum()
    }

    /// Takes one item of a [`TraceReader`] of file number `file`.
    pub fn add_item(&mut self, file: u32, item: &TraceItem) {
        match item {
            TraceItem::Header { stream, header } => {
                if let Some(job) = &mut self.job {
                    job.add_item(file, item);
                }
                let s = self.streams.entry((file, *stream)).or_default();
                s.pid = header.pid;
                s.header_pid = Some(header.pid);
            }
            TraceItem::Record { stream, record } => self.add((file, *stream), record),
            TraceItem::Closed { stream } => {
                self.streams.entry((file, *stream)).or_default().closed = true
            }
        }
    }

    /// Takes one record of stream `key`.
    pub fn add(&mut self, key: StreamKey, record: &Record) {
        if let Some(job) = &mut self.job {
            job.add(key, record);
        }
        self.streams.entry(key).or_default().records += 1;
        if self.job_only {
            self.add_for_processes(key, record);
        } else {
            self.add_for_reports(key, record);
        }
    }

    /// What `processes` needs alone (`job_only`).
    fn add_for_processes(&mut self, key: StreamKey, record: &Record) {
        let s = self.streams.entry(key).or_default();
        match record {
            Record::ProcessStart(p) => {
                s.pid = p.pid;
                s.command = p.command.clone();
                s.started = true;
            }
            Record::ProcessEnd(e) => s.ended = Some(e.clone()),
            Record::CounterSample(_) | Record::CounterGap(_) => s.counter_records = true,
            Record::ProcessInfo(i) => {
                s.info = Some(i.clone());
                self.alignment.process_info(key.0, key.1, i);
            }
            Record::ClockAnchor(a) => self.alignment.anchor(key.0, key.1, a),
            Record::Dropped(d) => s.dropped += d.count,
            _ => {}
        }
    }

    /// Every report's share of a record.
    fn add_for_reports(&mut self, key: StreamKey, record: &Record) {
        let s = self.streams.entry(key).or_default();
        match record {
            Record::ProcessStart(p) => {
                s.pid = p.pid;
                s.command = p.command.clone();
                s.started = true;
            }
            Record::ProcessEnd(e) => s.ended = Some(e.clone()),
            Record::CounterSample(c) => {
                s.counter_records = true;
                s.samples.push(c.clone())
            }
            Record::CounterGap(g) => {
                s.counter_records = true;
                s.gaps.push(*g)
            }
            Record::ProcessInfo(i) => {
                s.info = Some(i.clone());
                self.alignment.process_info(key.0, key.1, i);
            }
            Record::ClockAnchor(a) => self.alignment.anchor(key.0, key.1, a),
            Record::Dropped(d) => s.dropped += d.count,
            Record::Kernel(k) => {
                s.kernels.push(KernelSpan {
                    start: k.start,
                    end: k.end,
                    device: k.device,
                    name: Arc::clone(&k.name),
                });
                s.ops.push(DeviceOp {
                    correlation: k.correlation,
                    start: k.start,
                    end: k.end,
                });
                if k.graph_id != 0 {
                    self.graph_kernels += 1;
                }
                self.kernels
                    .entry(Arc::clone(&k.name))
                    .or_default()
                    .push(k.duration());
            }
            Record::Memcpy(m) => {
                s.ops.push(DeviceOp {
                    correlation: m.correlation,
                    start: m.start,
                    end: m.end,
                });
                let op = copy_operation(m.kind);
                self.copy_time
                    .entry(op.clone())
                    .or_default()
                    .push(m.duration());
                self.copy_size.entry(op).or_default().push(m.bytes);
            }
            Record::Memset(m) => {
                s.ops.push(DeviceOp {
                    correlation: m.correlation,
                    start: m.start,
                    end: m.end,
                });
                let op = "[CUDA memset]".to_string();
                self.copy_time
                    .entry(op.clone())
                    .or_default()
                    .push(m.duration());
                self.copy_size.entry(op).or_default().push(m.bytes);
            }
            Record::GraphLaunch(g) => {
                s.ops.push(DeviceOp {
                    correlation: g.correlation,
                    start: g.start,
                    end: g.end,
                });
                self.graphs
                    .entry(g.graph_id)
                    .or_default()
                    .push(g.duration());
            }
            Record::Graph(g) => {
                for id in [g.graph_id, g.exec_id] {
                    if id != 0 && g.node_count != u32::MAX {
                        self.graph_nodes.insert(id, g.node_count);
                    }
                }
            }
            Record::Api(a) => {
                s.calls.insert(a.correlation, (a.thread, a.start));
                let name = if a.name.is_empty() {
                    let n = format!("{} cbid {}", a.domain.name(), a.cbid);
                    self.intern(&n)
                } else {
                    Arc::clone(&a.name)
                };
                self.api
                    .entry(name)
                    .or_default()
                    .push(a.end.saturating_sub(a.start));
            }
            Record::Marker(m) => self.add_marker(key, m),
            _ => {}
        }
    }

    /// An NVTX mark, or a range's start or end: ranges are paired by id.
    fn add_marker(&mut self, key: StreamKey, m: &MarkerRecord) {
        let s = self.streams.entry(key).or_default();
        let full = if m.domain.is_empty() {
            m.name.clone()
        } else {
            format!("{}:{}", m.domain, m.name)
        };
        match m.kind {
            MarkerKind::Start => {
                let name = self.intern(&full);
                let s = self.streams.entry(key).or_default();
                s.open.insert(m.id, (m.thread, m.time, name));
            }
            MarkerKind::End => match s.open.remove(&m.id) {
                Some((thread, start, name)) => s.ranges.push(Range {
                    thread,
                    start,
                    end: m.time,
                    name,
                }),
                None => s.unpaired_ends += 1,
            },
            MarkerKind::Instant => s.marks += 1,
            _ => {}
        }
    }

    /// The clock alignment of the streams read (see [`Alignment`]).
    pub fn alignment(&self) -> &Alignment {
        &self.alignment
    }

    /// Every report collected, in the order `nsys stats` prints them, then the graph and process tables; the
    /// counters per kernel (`cuda_gpu_kern_counters_sum`) after the kernels where the trace holds counter samples;
    /// `stragglers` last where [`for_reports`](Self::for_reports) asked for it.
    pub fn reports(&self) -> Vec<Table> {
        Self::REPORT_NAMES
            .iter()
            .filter(|name| **name != counters::REPORT || self.has_counter_samples())
            .filter_map(|name| self.report(name))
            .collect()
    }

    /// One report by its name (one of [`REPORT_NAMES`](Self::REPORT_NAMES)), whatever the trace holds (a report of
    /// nothing has no rows); `None` for a name not known, or a report this analysis did not collect
    /// ([`for_reports`](Self::for_reports): `stragglers` only when asked for, the others not when it was asked
    /// for alone).
    pub fn report(&self, name: &str) -> Option<Table> {
        if name == STRAGGLERS {
            return self.job.as_ref().map(Job::stragglers);
        }
        if self.job_only && name != "processes" {
            return None;
        }
        Some(match name {
            "nvtx_sum" => self.nvtx_sum(),
            "nvtx_gpu_proj_sum" => self.nvtx_gpu_proj_sum(),
            "cuda_api_sum" => self.api_sum(),
            "cuda_gpu_kern_sum" => self.kernel_sum(),
            counters::REPORT => self.kernel_counters_sum(),
            "cuda_gpu_graph_sum" => self.graph_sum(),
            "cuda_gpu_mem_time_sum" => self.mem_time_sum(),
            "cuda_gpu_mem_size_sum" => self.mem_size_sum(),
            "processes" => self.processes(),
            _ => return None,
        })
    }

    /// The names of the reports, in the order [`reports`](Self::reports) returns them.
    pub const REPORT_NAMES: [&'static str; 10] = [
        "nvtx_sum",
        "nvtx_gpu_proj_sum",
        "cuda_api_sum",
        "cuda_gpu_kern_sum",
        counters::REPORT,
        "cuda_gpu_graph_sum",
        "cuda_gpu_mem_time_sum",
        "cuda_gpu_mem_size_sum",
        "processes",
        STRAGGLERS,
    ];

    /// `Time (%)` and the time columns of a summary by name, rows sorted by total time.
    fn time_table<K: AsRef<str>>(
        name: &'static str,
        title: &str,
        last: &'static str,
        rows: impl Iterator<Item = (K, Vec<Cell>, stats::Summary)>,
    ) -> Table {
        let mut t = Table::new(
            name,
            title,
            vec![
                "Time (%)",
                "Total Time (ns)",
                "Instances",
                "Avg (ns)",
                "Med (ns)",
                "Min (ns)",
                "Max (ns)",
                "StdDev (ns)",
                last,
            ],
        );
        let mut rows: Vec<(K, Vec<Cell>, stats::Summary)> = rows.collect();
        let all: u64 = rows.iter().map(|r| r.2.total).sum();
        rows.sort_by(|a, b| {
            b.2.total
                .cmp(&a.2.total)
                .then_with(|| a.0.as_ref().cmp(b.0.as_ref()))
        });
        for (key, extra, s) in rows {
            let pct = if all == 0 {
                0.0
            } else {
                100.0 * s.total as f64 / all as f64
            };
            let mut row = vec![
                Cell::Float(pct),
                Cell::Int(s.total),
                Cell::Int(s.count),
                Cell::Float(s.mean),
                Cell::Float(s.median),
                Cell::Int(s.min),
                Cell::Int(s.max),
                Cell::Float(s.stddev),
            ];
            if extra.is_empty() {
                row.push(Cell::Text(key.as_ref().to_string()));
            } else {
                row.extend(extra);
            }
            t.rows.push(row);
        }
        t
    }

    /// `cuda_gpu_kern_sum`: kernels by name.
    pub fn kernel_sum(&self) -> Table {
        let mut t = Self::time_table(
            "cuda_gpu_kern_sum",
            "CUDA GPU Kernel Summary",
            "Name",
            self.kernels.iter().map(|(n, v)| (n, vec![], v.summary())),
        );
        if self.graph_kernels > 0 {
            t.notes.push(format!(
                "{} of the kernels ran as nodes of CUDA graphs (node mode)",
                self.graph_kernels
            ));
        }
        if !self.graphs.is_empty() {
            t.notes.push(
                "CUDA graphs were traced as whole launches (graph mode): their kernels are in cuda_gpu_graph_sum, \
                 not here"
                    .into(),
            );
        }
        t
    }

    /// `cuda_api_sum`: API calls by function.
    pub fn api_sum(&self) -> Table {
        Self::time_table(
            "cuda_api_sum",
            "CUDA API Summary",
            "Name",
            self.api.iter().map(|(n, v)| (n, vec![], v.summary())),
        )
    }

    /// `cuda_gpu_graph_sum`: graph launches (graph mode) by graph id, with the node count where known.
    pub fn graph_sum(&self) -> Table {
        let mut t = Self::time_table(
            "cuda_gpu_graph_sum",
            "CUDA Graph Launch Summary",
            "Graph",
            self.graphs.iter().map(|(id, v)| {
                let nodes = self
                    .graph_nodes
                    .get(id)
                    .map_or_else(|| "?".to_string(), |n| n.to_string());
                let key = format!("{id:>10}");
                (
                    key,
                    vec![Cell::Text(format!("graph {id} ({nodes} nodes)"))],
                    v.summary(),
                )
            }),
        );
        if self
            .graphs
            .keys()
            .any(|id| !self.graph_nodes.contains_key(id))
        {
            t.notes.push(
                "node counts are known for graphs instantiated while tracing ran (\"?\" otherwise)"
                    .into(),
            );
        }
        t
    }

    /// `cuda_gpu_mem_time_sum`: copies and sets by operation, time.
    pub fn mem_time_sum(&self) -> Table {
        Self::time_table(
            "cuda_gpu_mem_time_sum",
            "CUDA GPU MemOps Summary (by Time)",
            "Operation",
            self.copy_time.iter().map(|(n, v)| (n, vec![], v.summary())),
        )
    }

    /// `cuda_gpu_mem_size_sum`: copies and sets by operation, bytes (in MB of 10^6 bytes, as nsys).
    pub fn mem_size_sum(&self) -> Table {
        let mut t = Table::new(
            "cuda_gpu_mem_size_sum",
            "CUDA GPU MemOps Summary (by Size)",
            vec![
                "Total (MB)",
                "Count",
                "Avg (MB)",
                "Med (MB)",
                "Min (MB)",
                "Max (MB)",
                "StdDev (MB)",
                "Operation",
            ],
        );
        let mb = |b: f64| b / 1e6;
        let mut rows: Vec<(&String, stats::Summary)> = self
            .copy_size
            .iter()
            .map(|(n, v)| (n, v.summary()))
            .collect();
        rows.sort_by(|a, b| b.1.total.cmp(&a.1.total).then_with(|| a.0.cmp(b.0)));
        for (name, s) in rows {
            t.rows.push(vec![
                Cell::Float(mb(s.total as f64)),
                Cell::Int(s.count),
                Cell::Float(mb(s.mean)),
                Cell::Float(mb(s.median)),
                Cell::Float(mb(s.min as f64)),
                Cell::Float(mb(s.max as f64)),
                Cell::Float(mb(s.stddev)),
                Cell::Text(name.clone()),
            ]);
        }
        t
    }

    /// Ranges of every stream with their style, nesting level and direct children.
    fn ranges_with_levels(&self) -> Vec<(StreamKey, &Range, &'static str, u32, u32)> {
        let mut out = Vec::new();
        for (key, s) in &self.streams {
            let mut by_thread: BTreeMap<u32, Vec<&Range>> = BTreeMap::new();
            for r in &s.ranges {
                by_thread.entry(r.thread).or_default().push(r);
            }
            for (_, mut rs) in by_thread {
                // Outer ranges first at equal starts.
                rs.sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
                let mut stack: Vec<usize> = Vec::new();
                let mut level = vec![0u32; rs.len()];
                let mut children = vec![0u32; rs.len()];
                let mut nested = vec![true; rs.len()];
                for i in 0..rs.len() {
                    while let Some(&top) = stack.last() {
                        if rs[top].end <= rs[i].start {
                            stack.pop();
                        } else {
                            break;
                        }
                    }
                    if let Some(&top) = stack.last() {
                        if rs[i].end <= rs[top].end {
                            children[top] += 1;
                            level[i] = level[top] + 1;
                        } else {
                            // Overlaps its neighbour without nesting: a start/end range.
                            nested[i] = false;
                            nested[top] = false;
                        }
                    }
                    stack.push(i);
                }
                for i in 0..rs.len() {
                    // NVTX records do not say which API made a range; one that nests on its thread is shown as
                    // push/pop, one that overlaps another as start/end.
                    let style = if nested[i] { "PushPop" } else { "StartEnd" };
                    out.push((*key, rs[i], style, level[i], children[i]));
                }
            }
        }
        out
    }

    /// `nvtx_sum`: NVTX ranges by name.
    pub fn nvtx_sum(&self) -> Table {
        let mut groups: BTreeMap<(Arc<str>, &'static str), Values> = BTreeMap::new();
        for (_, r, style, _, _) in self.ranges_with_levels() {
            groups
                .entry((Arc::clone(&r.name), style))
                .or_default()
                .push(r.end.saturating_sub(r.start));
        }
        let mut t = Table::new(
            "nvtx_sum",
            "NVTX Range Summary",
            vec![
                "Time (%)",
                "Total Time (ns)",
                "Instances",
                "Avg (ns)",
                "Med (ns)",
                "Min (ns)",
                "Max (ns)",
                "StdDev (ns)",
                "Style",
                "Range",
            ],
        );
        let inner = Self::time_table(
            "nvtx_sum",
            "",
            "Range",
            groups.iter().map(|((name, style), v)| {
                (
                    format!("{name}\u{0}{style}"),
                    vec![Cell::Text(style.to_string()), Cell::Text(name.to_string())],
                    v.summary(),
                )
            }),
        );
        t.rows = inner.rows;
        let (open, unpaired, marks) = self.streams.values().fold((0, 0, 0), |a, s| {
            (a.0 + s.open.len(), a.1 + s.unpaired_ends, a.2 + s.marks)
        });
        if open > 0 {
            t.notes.push(format!(
                "{} still open when {} stream ended (not shown)",
                count(open as u64, "range was", "ranges were"),
                if open == 1 { "its" } else { "their" }
            ));
        }
        if unpaired > 0 {
            t.notes.push(format!(
                "{} no start in the trace (not shown)",
                count(unpaired, "range end had", "range ends had")
            ));
        }
        if marks > 0 {
            t.notes.push(format!(
                "{} ({})",
                count(marks, "NVTX mark", "NVTX marks"),
                if marks == 1 { "an instant" } else { "instants" }
            ));
        }
        t
    }

    /// `nvtx_gpu_proj_sum`: for each NVTX range, the device work launched from its thread while it was open:
    /// from the start of the first operation to the end of the last (the projection), and how many.
    pub fn nvtx_gpu_proj_sum(&self) -> Table {
        // Per stream and thread: device operations by the start of the call that launched them.
        // (call start, operation start, operation end) per (stream, thread).
        type Launches = Vec<(u64, u64, u64)>;
        let mut launched: HashMap<(StreamKey, u32), Launches> = HashMap::new();
        let mut unattributed = 0u64;
        let has_ranges = self.streams.values().any(|s| !s.ranges.is_empty());
        if has_ranges {
            for (key, s) in &self.streams {
                for op in &s.ops {
                    match s.calls.get(&op.correlation) {
                        Some(&(thread, call)) => launched
                            .entry((*key, thread))
                            .or_default()
                            .push((call, op.start, op.end)),
                        None => unattributed += 1,
                    }
                }
            }
            for v in launched.values_mut() {
                v.sort_unstable();
            }
        }
        #[derive(Default)]
        struct Group {
            proj: Values,
            range_total: u64,
            instances: u64,
            ops: u64,
            levels: u64,
            children: u64,
        }
        let mut groups: BTreeMap<(Arc<str>, &'static str), Group> = BTreeMap::new();
        for (key, r, style, level, children) in self.ranges_with_levels() {
            let Some(ops) = launched.get(&(key, r.thread)) else {
                continue;
            };
            let from = ops.partition_point(|o| o.0 < r.start);
            let to = ops.partition_point(|o| o.0 <= r.end);
            if from >= to {
                continue;
            }
            let inside = &ops[from..to];
            let first = inside.iter().map(|o| o.1).min().unwrap_or(0);
            let last = inside.iter().map(|o| o.2).max().unwrap_or(0);
            let g = groups.entry((Arc::clone(&r.name), style)).or_default();
            g.proj.push(last.saturating_sub(first));
            g.range_total += r.end.saturating_sub(r.start);
            g.instances += 1;
            g.ops += inside.len() as u64;
            g.levels += u64::from(level);
            g.children += u64::from(children);
        }
        let mut t = Table::new(
            "nvtx_gpu_proj_sum",
            "NVTX GPU Projection Summary",
            vec![
                "Range",
                "Style",
                "Total Proj Time (ns)",
                "Total Range Time (ns)",
                "Range Instances",
                "Proj Avg (ns)",
                "Proj Med (ns)",
                "Proj Min (ns)",
                "Proj Max (ns)",
                "Proj StdDev (ns)",
                "Total GPU Ops",
                "Avg GPU Ops",
                "Avg Range Lvl",
                "Avg Num Child",
            ],
        );
        let mut rows: Vec<_> = groups.into_iter().collect();
        rows.sort_by(|a, b| b.1.proj.total().cmp(&a.1.proj.total()).then(a.0.cmp(&b.0)));
        for ((name, style), g) in rows {
            let s = g.proj.summary();
            let n = g.instances.max(1) as f64;
            t.rows.push(vec![
                Cell::Text(name.to_string()),
                Cell::Text(style.to_string()),
                Cell::Int(s.total),
                Cell::Int(g.range_total),
                Cell::Int(g.instances),
                Cell::Float(s.mean),
                Cell::Float(s.median),
                Cell::Int(s.min),
                Cell::Int(s.max),
                Cell::Float(s.stddev),
                Cell::Int(g.ops),
                Cell::Float(g.ops as f64 / n),
                Cell::Float(g.levels as f64 / n),
                Cell::Float(g.children as f64 / n),
            ]);
        }
        if has_ranges && self.streams.values().all(|s| s.calls.is_empty()) {
            t.notes.push(
                "no API records in the trace: device work cannot be tied to the ranges that launched it (record \
                 with API records on)"
                    .into(),
            );
        } else if unattributed > 0 {
            t.notes.push(format!(
                "{} no API record (left out of the projection)",
                count(
                    unattributed,
                    "device operation had",
                    "device operations had"
                )
            ));
        }
        t
    }

    /// `processes`: every traced process with its host, rank and whether its stream is complete.
    pub fn processes(&self) -> Table {
        let mut t = Table::new(
            "processes",
            "Traced Processes",
            vec![
                "File", "Stream", "PID", "Host", "Rank", "Records", "Dropped", "Complete",
                "Command",
            ],
        );
        let mut counter_streams = 0u64;
        for (key, s) in &self.streams {
            if s.is_counters() {
                counter_streams += 1;
                continue;
            }
            let (host, rank) = s.info.as_ref().map_or((String::new(), String::new()), |i| {
                (i.host.clone(), i.rank_label())
            });
            let complete = match &s.ended {
                Some(e) if e.records + 1 == s.records => "yes".to_string(),
                Some(e) => format!("{} of {} records", s.records.saturating_sub(1), e.records),
                None => match s.unread {
                    // The trace file ends early: the process may well have finished.
                    Some(why) => format!("unknown ({why}: its end was not read)"),
                    None => "no (no end record: crashed or killed?)".to_string(),
                },
            };
            t.rows.push(vec![
                Cell::Int(u64::from(key.0)),
                Cell::Int(u64::from(key.1)),
                Cell::Int(u64::from(s.pid)),
                Cell::Text(host),
                Cell::Text(rank),
                Cell::Int(s.records),
                Cell::Int(s.dropped),
                Cell::Text(complete),
                Cell::Text(s.command.clone()),
            ]);
        }
        if counter_streams > 0 {
            t.notes.push(format!(
                "{} the tracer's device counters, not {} (see {})",
                count(counter_streams, "stream holds", "streams hold"),
                if counter_streams == 1 {
                    "a traced process"
                } else {
                    "traced processes"
                },
                counters::REPORT
            ));
        }
        let domains = self.alignment.domains();
        // Processes of one host boot share one clock: only other hosts (or boots) are moved, and said so.
        if let Some((reference, others)) = domains.split_first() {
            for d in others {
                t.notes.push(d.note(reference));
            }
        }
        if self.errors > 0 {
            t.notes.push(format!(
                "{} while reading (reported on stderr)",
                count(self.errors, "error", "errors")
            ));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn marker(kind: MarkerKind, id: u32, time: u64) -> Record {
        Record::Marker(MarkerRecord {
            time,
            kind,
            id,
            process: 1,
            thread: 1,
            domain: Arc::from(""),
            name: "step".into(),
        })
    }

    fn kernel(correlation: u32) -> Record {
        Record::Kernel(KernelRecord {
            start: 10,
            end: 20,
            device: 0,
            context: 1,
            stream: 7,
            correlation,
            grid_id: 1,
            grid: [1, 1, 1],
            block: [1, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 8,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::from("k"),
        })
    }

    fn notes_of(a: &Analysis) -> Vec<String> {
        a.reports().into_iter().flat_map(|t| t.notes).collect()
    }

    #[test]
    fn notes_count_one_in_the_singular() {
        let mut a = Analysis::new();
        a.add((0, 0), &marker(MarkerKind::Start, 1, 0));
        a.add((0, 0), &marker(MarkerKind::End, 1, 100));
        a.add((0, 0), &marker(MarkerKind::Start, 2, 0));
        a.add((0, 0), &marker(MarkerKind::End, 3, 100));
        a.add((0, 0), &marker(MarkerKind::Instant, 4, 50));
        a.add(
            (0, 0),
            &Record::Api(ApiRecord {
                start: 5,
                end: 6,
                domain: ApiDomain::Runtime,
                cbid: 1,
                name: Arc::from("cudaLaunchKernel"),
                correlation: 1,
                process: 1,
                thread: 1,
                return_value: 0,
            }),
        );
        a.add((0, 0), &kernel(1));
        a.add((0, 0), &kernel(2));
        a.errors = 1;
        let notes = notes_of(&a);
        for note in [
            "1 range was still open when its stream ended (not shown)",
            "1 range end had no start in the trace (not shown)",
            "1 NVTX mark (an instant)",
            "1 device operation had no API record (left out of the projection)",
            "1 error while reading (reported on stderr)",
        ] {
            assert!(notes.iter().any(|n| n == note), "{note:?} in {notes:#?}");
        }

        a.add((0, 0), &marker(MarkerKind::Start, 5, 0));
        a.add((0, 0), &marker(MarkerKind::End, 6, 100));
        a.add((0, 0), &marker(MarkerKind::Instant, 7, 50));
        a.add((0, 0), &kernel(3));
        a.errors = 2;
        let notes = notes_of(&a);
        for note in [
            "2 ranges were still open when their stream ended (not shown)",
            "2 range ends had no start in the trace (not shown)",
            "2 NVTX marks (instants)",
            "2 device operations had no API record (left out of the projection)",
            "2 errors while reading (reported on stderr)",
        ] {
            assert!(notes.iter().any(|n| n == note), "{note:?} in {notes:#?}");
        }
    }
}
