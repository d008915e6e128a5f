//! How an [`Analysis`] takes the records of a trace: reading files and streams, and each record's share for the
//! reports (kept per stream, per name and per copy direction).

use std::io::Read;
use std::sync::Arc;

use crate::file::{TraceFileError, TraceItem, TraceReader};
use crate::record::{CopyKind, MarkerKind, MarkerRecord, Record};

use super::stream::{DeviceOp, KernelSpan, Range};
use super::{Alignment, Analysis, Job, STRAGGLERS, StreamKey};

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

/// A timed record whose end came before its start: a vendor's fault or damage, said rather than summed.
fn ends_before_start(record: &Record) -> bool {
    let (start, end) = match record {
        Record::Kernel(k) => (k.start, k.end),
        Record::Memcpy(m) => (m.start, m.end),
        Record::Memset(m) => (m.start, m.end),
        Record::Api(a) => (a.start, a.end),
        Record::Synchronization(s) => (s.start, s.end),
        Record::GraphLaunch(g) => (g.start, g.end),
        _ => return false,
    };
    end < start
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
                    crate::WireError::TruncatedStream { .. } => "the stream is cut short",
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
        if ends_before_start(record) {
            self.inverted += 1;
        }
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
            Record::ProcessEnd(e) => s.end(e),
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
            Record::ProcessEnd(e) => s.end(e),
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
                        self.graph_nodes.entry(id).or_default().insert(g.node_count);
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
}
