//! The receiving end of the injected tool libraries' streams, shared by the cupti and rocm backends (and, through
//! `Collector`, by `attach`; the socket and the reading threads are `gpu_tools_injection::collect`'s): run the program
//! with a tool library that streams the crate's trace records over a Unix socket to this process: the CUDA
//! injection library (`CUDA_INJECTION64_PATH`, CUPTI activity records) or the AMD tool library
//! (`ROCP_TOOL_LIBRARIES`, rocprofiler-sdk records). Every process of the program that loads it (an exec'd child
//! too) connects on its own; each connection is read by its own thread. What arrives is also streamed, as it
//! arrives, into the trace file (`-o`) and the Chrome trace (`--chrome-trace`).

use std::collections::HashMap;
use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_tools::trace::export::{ChromeWriter, Timeline};
use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::{ApiDomain, EndReason, MarkerKind, NoticeLevel, Record, WireError};
use gpu_tools_injection::collect::{AcceptOptions, Delivery};
use gpu_tools_injection::env;
use gpu_tools_injection::env::TraceKind;
use gpu_tools_injection::launch::{LaunchError, Launcher};
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Library, Settings};

use super::cli::Args;
use super::counters::{Opened, Sampling};
pub(super) use super::message::Msg;
use super::model::{ApiCall, Demangler, Kernel, Process, Trace, Transfer, TransferKind};
use super::{Traced, spawn_failure};
use crate::failure::Failure;
use crate::progress::{self, Progress};

/// Grace period after the program's exit for connections still in the listen queue.
const LATE_CONNECT: Duration = Duration::from_millis(150);
/// Per-stream error messages shown; more are only counted.
const MAX_ERROR_MESSAGES: usize = 10;

/// The tool library the program runs with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    /// The CUDA injection library.
    Cuda,
    /// The rocprofiler-sdk tool library.
    Rocm,
}

/// Where records go besides the listing, as they arrive.
pub struct Sinks<'a> {
    /// The compact trace file (`-o`).
    pub file: Option<TraceFileWriter<Box<dyn Write + 'a>>>,
    /// The Chrome trace (`--chrome-trace`).
    pub chrome: Option<Timeline<ChromeWriter<Box<dyn Write + 'a>>>>,
}

pub fn run(
    cli: &Args,
    demangler: &mut Demangler,
    tool: Tool,
    lib: &Path,
    sinks: &mut Sinks<'_>,
    counters: Option<Opened>,
) -> Result<Traced, Failure> {
    // A private folder for the socket (mode 0700), removed when the trace ends.
    let launcher = Launcher::new("gpu-tools-trace-").map_err(|e| Failure::new(1, e.to_string()))?;
    let destination = Destination::Socket(launcher.socket().to_path_buf());
    let settings = super::settings::injection_settings(cli, destination, None)?;

    let mut cmd = Command::new(&cli.program[0]);
    cmd.args(&cli.program[1..])
        .stdin(Stdio::inherit())
        .stdout(crate::stdout::for_child());
    configure(&mut cmd, &settings, tool, lib);
    // Ctrl-C in the terminal reaches the program; the tracer stays, to show what it received until then.
    // SAFETY: setting a signal's disposition to "ignore" is async-signal-safe and affects only this process; the
    // child gets the default back before exec (ignored signals would stay ignored across exec).
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        std::os::unix::process::CommandExt::pre_exec(&mut cmd, || {
            libc::signal(libc::SIGINT, libc::SIG_DFL);
            Ok(())
        });
    }
    let (tx, rx) = mpsc::channel::<Msg>();
    // The trace's span starts here, with the counters' reading (the samplers were opened before).
    let sampling = counters
        .map(|c| Sampling::start(c, tx.clone()))
        .transpose()?;
    let options = AcceptOptions {
        tee: sinks.file.is_some(),
        ..AcceptOptions::default()
    };
    let mut launched = launcher
        .launch(&mut cmd, options, tx)
        .map_err(|e| match e {
            LaunchError::Spawn(e) => spawn_failure(&cli.program[0], &e),
            other => Failure::new(1, other.to_string()),
        })?;

    let progress = Progress::new(cli.progress.enabled(cli.quiet));
    let mut collector = Collector::new(demangler, cli.effective_kinds(), sinks, progress);
    let drain = Duration::from_millis(cli.drain_timeout_ms.unwrap_or(5000));
    let mut status = None;
    let mut exited_at: Option<Instant> = None;
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(msg) => {
                collector.take(msg);
                // Take everything queued before looking at the program again.
                while let Ok(msg) = rx.try_recv() {
                    collector.take(msg);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        collector.show_progress();
        if status.is_none() {
            match launched.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    exited_at = Some(Instant::now());
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::new(1, format!("cannot wait for the program: {e}"))),
            }
        }
        if let Some(t) = exited_at {
            let connections = launched.accepted();
            let all_known = connections == collector.streams.len();
            if t.elapsed() >= LATE_CONNECT && all_known && collector.all_finished() {
                break;
            }
            if t.elapsed() >= drain {
                collector.give_up(drain);
                collector.give_up_unheard(connections, drain);
                break;
            }
        }
    }
    launched.stop_accepting();
    end_counters(sampling, &rx, &mut collector);
    let mut trace = collector.finish()?;
    if trace.processes.is_empty() {
        let (runtime, loader) = match tool {
            Tool::Cuda => ("CUDA", "CUDA"),
            Tool::Rocm => ("HIP", "rocprofiler-sdk"),
        };
        trace.warnings.push(format!(
            "no traced process connected: {} did not initialise {runtime}, or {loader} could not load {} (set {}=debug \
             to see the library's messages)",
            cli.program[0],
            lib.display(),
            env::LOG
        ));
    }
    Ok(Traced {
        trace,
        status,
        empty_windows: Vec::new(),
    })
}

/// The trace ended: stops the counter sampling, if any, and takes the counter stream's last bytes and the
/// summary of each device.
pub(super) fn end_counters(
    sampling: Option<Sampling>,
    rx: &mpsc::Receiver<Msg>,
    collector: &mut Collector<'_, '_, '_>,
) {
    let Some(sampling) = sampling else {
        return;
    };
    let summaries = sampling.finish();
    // The thread has ended: everything it sent is queued.
    while let Ok(msg) = rx.try_recv() {
        collector.take(msg);
    }
    collector.trace.counters = summaries;
}

/// The child's environment: the tool library and its settings (what it should collect, and where to send it).
fn configure(cmd: &mut Command, settings: &Settings, tool: Tool, lib: &Path) {
    // The tracer's own settings do not leak into the program's.
    for var in Settings::CLEARED {
        cmd.env_remove(var);
    }
    let library = match tool {
        Tool::Rocm => Library::Rocm(lib),
        Tool::Cuda => {
            if let Some(old) = std::env::var_os(env::CUDA_INJECTION) {
                if Path::new(&old) != lib {
                    eprintln!(
                        "gpu-tools trace: replacing {}={} with {}",
                        env::CUDA_INJECTION,
                        Path::new(&old).display(),
                        lib.display()
                    );
                }
            }
            Library::Cuda(lib)
        }
    };
    cmd.envs(settings.environment(library));
}

/// A notice's level as the trace's warnings say it.
fn level_word(level: NoticeLevel) -> &'static str {
    match level {
        NoticeLevel::Error => "error",
        NoticeLevel::Warning => "warning",
        _ => "note",
    }
}

/// One connection's state.
#[derive(Default)]
struct StreamState {
    process: Process,
    /// The end record arrived: everything the process sent is in.
    ended: bool,
    closed: bool,
    /// The drain timeout passed before the stream ended (already reported).
    abandoned: bool,
    errors: usize,
}

pub(super) struct Collector<'d, 's, 'a> {
    demangler: &'d mut Demangler,
    streams: HashMap<usize, StreamState>,
    pub(super) trace: Trace,
    sinks: &'s mut Sinks<'a>,
    /// The trace file's stream number of each connection.
    file_streams: HashMap<usize, u32>,
    /// The first error writing the trace file or the Chrome trace; they are not written to after it.
    sink_error: Option<String>,
    /// The trace file's stream number of the counter stream.
    counter_stream: Option<u32>,
    /// The line on stderr that counts what arrived (`--progress`).
    progress: Progress,
    /// What is said, in order, until the trace's end: of a connection's process (the words after its name, which
    /// [`Trace::who`] gives once every process is known), or of none.
    said: Vec<(Option<usize>, String)>,
}

/// The Chrome trace's key of the counter stream: after every connection's.
const COUNTER_KEY: usize = u32::MAX as usize;

impl<'d, 's, 'a> Collector<'d, 's, 'a> {
    pub(super) fn new(
        demangler: &'d mut Demangler,
        kinds: Vec<TraceKind>,
        sinks: &'s mut Sinks<'a>,
        progress: Progress,
    ) -> Self {
        let trace = Trace {
            kernel_times: true,
            sees_transfers: kinds.contains(&TraceKind::Memcpy)
                || kinds.contains(&TraceKind::Memset),
            sees_api: kinds.iter().any(|k| k.is_api()),
            ..Trace::default()
        };
        Collector {
            demangler,
            streams: HashMap::new(),
            trace,
            sinks,
            file_streams: HashMap::new(),
            sink_error: None,
            counter_stream: None,
            progress,
            said: Vec::new(),
        }
    }

    /// Redraws the progress line (at most a few times a second): records and processes so far, and the size of
    /// the trace file.
    pub(super) fn show_progress(&mut self) {
        let (streams, file) = (&self.streams, &self.sinks.file);
        let elapsed = self.progress.elapsed();
        self.progress.update(|| {
            let records: u64 = streams.values().map(|s| s.process.received).sum();
            let processes = streams.len();
            let written = file
                .as_ref()
                .map(|f| format!(", {} written", progress::size(f.bytes_written())))
                .unwrap_or_default();
            format!(
                "gpu-tools trace: {} records from {processes} {}{written}, {:.0} s",
                progress::thousands(records),
                if processes == 1 {
                    "process"
                } else {
                    "processes"
                },
                elapsed.as_secs_f64()
            )
        });
    }

    /// Bytes of connection `id` into the trace file.
    fn bytes(&mut self, id: usize, bytes: &[u8]) {
        let Some(file) = self
            .sinks
            .file
            .as_mut()
            .filter(|_| self.sink_error.is_none())
        else {
            return;
        };
        let stream = *self
            .file_streams
            .entry(id)
            .or_insert_with(|| file.add_stream());
        if let Err(e) = file.write(stream, bytes) {
            self.sink_error = Some(format!("cannot write the trace file: {e}"));
        }
    }

    /// Bytes and records of the counter stream into the trace file and the Chrome trace.
    fn counters(&mut self, bytes: &[u8], records: &[Record]) {
        if let Some(file) = self
            .sinks
            .file
            .as_mut()
            .filter(|_| self.sink_error.is_none())
        {
            let stream = *self.counter_stream.get_or_insert_with(|| file.add_stream());
            if let Err(e) = file.write(stream, bytes) {
                self.sink_error = Some(format!("cannot write the trace file: {e}"));
            }
        }
        for r in records {
            self.timeline(COUNTER_KEY, r);
        }
    }

    /// A record of connection `id` into the Chrome trace.
    fn timeline(&mut self, id: usize, record: &Record) {
        let Some(timeline) = self
            .sinks
            .chrome
            .as_mut()
            .filter(|_| self.sink_error.is_none())
        else {
            return;
        };
        let key = (0, u32::try_from(id).unwrap_or(u32::MAX));
        // Kernel names as the listing shows them (demangled unless --raw-names).
        let written = match record {
            Record::Kernel(k) => {
                let mut k = k.clone();
                k.name = self.demangler.name(&k.name);
                timeline.add(key, &Record::Kernel(k))
            }
            _ => timeline.add(key, record),
        };
        if let Err(e) = written {
            self.sink_error = Some(format!("cannot write the Chrome trace: {e}"));
        }
    }

    pub(super) fn all_finished(&self) -> bool {
        self.streams.values().all(|s| s.ended || s.closed)
    }

    pub(super) fn give_up(&mut self, waited: Duration) {
        let mut ids: Vec<usize> = self.streams.keys().copied().collect();
        ids.sort_unstable();
        for id in ids {
            let Some(s) = self.streams.get_mut(&id).filter(|s| !s.ended && !s.closed) else {
                continue;
            };
            s.abandoned = true;
            self.said.push((
                Some(id),
                format!(
                    " had not finished its stream {:.1} s after the program exited (still running?); what it sent \
                     so far is shown",
                    waited.as_secs_f64()
                ),
            ));
        }
    }

    /// Connections `0..connections` that delivered nothing (not even a header) by the drain timeout: processes
    /// that loaded the library, stopped or hung before they sent anything, would otherwise leave no trace of
    /// themselves in the summary or the exit code.
    pub(super) fn give_up_unheard(&mut self, connections: usize, waited: Duration) {
        for id in 0..connections {
            if self.streams.contains_key(&id) {
                continue;
            }
            self.streams.insert(
                id,
                StreamState {
                    abandoned: true,
                    ..StreamState::default()
                },
            );
            self.said.push((
                None,
                format!(
                    "a process connected and had sent nothing {:.1} s after the program exited (stopped or \
                     hung?): it is not in the trace",
                    waited.as_secs_f64()
                ),
            ));
        }
    }

    pub(super) fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Stream(Delivery::Header(id, h)) => {
                if let Some(timeline) = self.sinks.chrome.as_mut() {
                    timeline.header((0, u32::try_from(id).unwrap_or(u32::MAX)), &h);
                }
                let s = self.streams.entry(id).or_default();
                s.process.pid = h.pid;
                // rocprofiler-sdk's streams say Unspecified: their clock is the SDK's, consistent within the run.
                if !matches!(
                    h.clock,
                    gpu_tools::trace::TimestampClock::Monotonic
                        | gpu_tools::trace::TimestampClock::Unspecified
                ) {
                    self.said.push((
                        Some(id),
                        format!(
                            ": timestamps are on the vendor's clock ({:?}), not CLOCK_MONOTONIC",
                            h.clock
                        ),
                    ));
                }
            }
            Msg::Stream(Delivery::Bytes(id, bytes)) => self.bytes(id, &bytes),
            Msg::Stream(Delivery::Closed(id)) => {
                self.streams.entry(id).or_default().closed = true;
                if let (Some(file), Some(&stream)) =
                    (self.sinks.file.as_mut(), self.file_streams.get(&id))
                {
                    if let Err(e) = file.close(stream) {
                        self.sink_error
                            .get_or_insert(format!("cannot write the trace file: {e}"));
                    }
                }
            }
            Msg::Stream(Delivery::Item(id, item)) => self.item(id, item),
            Msg::Counters(bytes, records) => self.counters(&bytes, &records),
            Msg::CountersClosed => {
                if let (Some(file), Some(stream)) = (self.sinks.file.as_mut(), self.counter_stream)
                {
                    if let Err(e) = file.close(stream) {
                        self.sink_error
                            .get_or_insert(format!("cannot write the trace file: {e}"));
                    }
                }
            }
        }
    }

    fn item(&mut self, id: usize, item: Result<Record, WireError>) {
        if let Ok(record) = &item {
            self.timeline(id, record);
        }
        let s = self.streams.entry(id).or_default();
        let pid = s.process.pid;
        let record = match item {
            Ok(r) => r,
            Err(e) => {
                s.process.stream_errors += 1;
                s.errors += 1;
                if s.errors <= MAX_ERROR_MESSAGES {
                    self.said.push((Some(id), format!(": {e}")));
                }
                return;
            }
        };
        if s.ended {
            s.process.after_end += 1;
        } else {
            s.process.received += 1;
        }
        if matches!(
            record,
            Record::Kernel(_)
                | Record::Memcpy(_)
                | Record::Memset(_)
                | Record::Api(_)
                | Record::GraphLaunch(_)
                | Record::Synchronization(_)
                | Record::Marker(_)
        ) {
            s.process.activity += 1;
            s.process
                .first_activity
                .get_or_insert_with(std::time::Instant::now);
        }
        let d = &mut *self.demangler;
        let t = &mut self.trace;
        let said = &mut self.said;
        match record {
            Record::ProcessStart(p) => {
                s.process.pid = p.pid;
                s.process.command = p.command;
            }
            Record::ProcessInfo(i) => s.process.label = i.rank_label(),
            Record::Marker(m) if matches!(m.kind, MarkerKind::Start | MarkerKind::Instant) => {
                t.nvtx += 1
            }
            Record::Kernel(k) => t.kernels.push(Kernel {
                process: id,
                name: d.name(&k.name),
                start: Some(k.start),
                end: Some(k.end),
                device: k.device,
                context: u64::from(k.context),
                stream: Some(u64::from(k.stream)),
                grid: k.grid,
                block: k.block,
                correlation: Some(k.correlation),
                registers: Some(k.registers),
                shared_memory: Some(k.static_shared.saturating_add(k.dynamic_shared)),
            }),
            Record::Memcpy(_) | Record::Memset(_) => t.transfers.extend(transfer(id, record)),
            Record::Api(a) => t.api.push(ApiCall {
                process: id,
                pid,
                name: if a.name.is_empty() {
                    Arc::from(format!("{} cbid {}", a.domain.name(), a.cbid))
                } else {
                    a.name
                },
                category: match a.domain {
                    ApiDomain::Runtime => "cuda_runtime",
                    ApiDomain::Driver => "cuda_driver",
                    ApiDomain::Hip => "hip_api",
                    ApiDomain::Hsa => "hsa_api",
                    ApiDomain::Marker => "marker",
                    _ => "api",
                },
                start: a.start,
                end: a.end,
                correlation: a.correlation,
            }),
            Record::Dropped(r) => t.dropped.push((pid, r.context, r.stream, r.count)),
            Record::GraphLaunch(_) => t.graph_launches += 1,
            Record::Notice(n) => {
                said.push((Some(id), format!(" ({}): {}", level_word(n.level), n.text)))
            }
            // A message the trace acts on by what it means; shown by its text, as any notice.
            Record::CodedNotice(n) => {
                if let Some(Message::UnfinishedLeftOut { records }) = Message::read(&n) {
                    s.process.unfinished += records;
                }
                said.push((Some(id), format!(" ({}): {}", level_word(n.level), n.text)));
            }
            Record::ProcessEnd(e) => {
                s.ended = true;
                s.process.ended = true;
                s.process.end = Some(e.reason);
                s.process.sent = Some(e.records);
                s.process.dropped = e.dropped;
                s.process.callback_panics = e.callback_panics;
                if e.callback_panics > 0 {
                    said.push((
                        Some(id),
                        format!(
                            ": {} record batches were lost to a panic in the injection library",
                            e.callback_panics
                        ),
                    ));
                }
                if e.skipped > 0 {
                    said.push((
                        Some(id),
                        format!(
                            ": {} vendor records could not be decoded or are of a kind not shown",
                            e.skipped
                        ),
                    ));
                }
            }
            // Synchronization and overhead records are counted, not shown.
            _ => {}
        }
    }

    pub(super) fn finish(mut self) -> Result<Trace, Failure> {
        self.progress.clear();
        if let Some(e) = self.sink_error.take() {
            return Err(Failure::new(1, e));
        }
        let mut streams: Vec<(usize, StreamState)> = self.streams.into_iter().collect();
        streams.sort_by_key(|(id, _)| *id);
        for (id, s) in streams {
            let p = Process {
                key: id,
                ..s.process
            };
            if !p.ended && !s.abandoned {
                self.said.push((
                    Some(id),
                    format!(
                        " ended without finishing its stream (crashed or killed?): records it had not flushed yet \
                         are lost; the {} received are shown",
                        p.received
                    ),
                ));
            } else if let Some(sent) = p.sent {
                // The end record itself is not counted by the sender.
                if sent + 1 != p.received {
                    self.said.push((
                        Some(id),
                        format!(
                            ": sent {sent} records, {} arrived",
                            p.received.saturating_sub(1)
                        ),
                    ));
                }
            }
            self.trace.warnings.extend(end_warning(&p));
            self.trace.processes.push(p);
        }
        // Every process known: each named so as to be told from another of its pid.
        for (id, words) in std::mem::take(&mut self.said) {
            let line = match id {
                Some(id) => format!("{}{words}", self.trace.who(id)),
                None => words,
            };
            self.trace.warnings.push(line);
        }
        for coverage in self.trace.launches_without_kernels() {
            let who = self.trace.who(coverage.process);
            if let Some(w) = super::model::missing_kernels_warning(&coverage, &who) {
                self.trace.warnings.push(w);
            }
            if let Some(n) = super::model::queued_at_end_note(&coverage, &who) {
                self.trace.warnings.push(n);
            }
        }
        Ok(self.trace)
    }
}

/// What a process's end record says beyond a normal end: the fatal signal its trace ended at (a crash), or a reason
/// this version does not know. `None` for an exit, a stop, or no end record (said on its own).
fn end_warning(p: &Process) -> Option<String> {
    let pid = p.pid;
    match p.end? {
        reason @ EndReason::Signal(_) if p.after_end == 0 => Some(format!(
            "process {pid}: its trace ended at {reason}, which was ending the process: what it had recorded then \
             was flushed, but work still in flight (kernels queued or running, calls not yet returned) has no \
             record"
        )),
        reason @ EndReason::Signal(_) => Some(format!(
            "process {pid}: its trace ended at {reason}, and the process ran on past it (it handled the signal): \
             the {} that followed {} shown, but nothing counts what it sent after its end record (some may be \
             missing)",
            if p.after_end == 1 {
                "1 record".to_string()
            } else {
                format!("{} records", p.after_end)
            },
            if p.after_end == 1 { "is" } else { "are" }
        )),
        EndReason::Other(code) => Some(format!(
            "process {pid}: its stream ended for a reason this version does not know (code {code})"
        )),
        _ => None,
    }
}

/// A copy's or a set's row of the listing and its tables (`None` for any other record), of the process of stream
/// `process`.
fn transfer(process: usize, record: Record) -> Option<Transfer> {
    match record {
        Record::Memcpy(m) => Some(Transfer {
            process,
            kind: TransferKind::Memcpy(m.kind.name()),
            bytes: m.bytes,
            start: m.start,
            end: m.end,
            device: m.device,
            context: u64::from(m.context),
            stream: u64::from(m.stream),
            correlation: m.correlation,
            detail: format!(
                "{} -> {}{}",
                m.src.name(),
                m.dst.name(),
                if m.is_async { " async" } else { "" }
            ),
        }),
        Record::Memset(m) => Some(Transfer {
            process,
            kind: TransferKind::Memset,
            bytes: m.bytes,
            start: m.start,
            end: m.end,
            device: m.device,
            context: u64::from(m.context),
            stream: u64::from(m.stream),
            correlation: m.correlation,
            detail: format!(
                "value {:#x} {}{}",
                m.value,
                m.memory.name(),
                if m.is_async { " async" } else { "" }
            ),
        }),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::trace::{CodedNotice, Notice, ProcessEnd, ProcessStart};
    use gpu_tools_testing::records::{api, kernel};

    /// A collector that keeps only the model (no trace file, no Chrome trace).
    fn collect(streams: &[Vec<Record>]) -> Trace {
        let mut demangler = Demangler::new(true);
        let mut sinks = Sinks {
            file: None,
            chrome: None,
        };
        let kinds = vec![TraceKind::Kernel, TraceKind::Runtime];
        let mut c = Collector::new(&mut demangler, kinds, &mut sinks, Progress::new(false));
        for (id, records) in streams.iter().enumerate() {
            for r in records {
                c.take(Msg::Stream(Delivery::Item(id, Ok(r.clone()))));
            }
        }
        c.finish().expect("no sink to fail")
    }

    /// The first record of a process `pid`'s stream.
    fn started(pid: u32) -> Record {
        Record::ProcessStart(ProcessStart {
            pid,
            parent_pid: 1,
            time: 0,
            command: format!("program {pid}"),
        })
    }

    /// The end record of a stream that sent `records` records before it, ended for `reason`.
    fn ended(records: u64, reason: EndReason) -> Record {
        Record::ProcessEnd(ProcessEnd {
            time: 1_000,
            reason,
            records,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        })
    }

    #[test]
    fn a_stream_that_ended_at_a_fatal_signal_is_said_with_its_signal_and_is_incomplete() {
        // Process 100 crashed on SIGSEGV: the library's handler flushed and sent the end record (every record it
        // counted arrived). Process 200 exited; process 300's tracing was stopped (an attach's window ended).
        let trace = collect(&[
            vec![
                started(100),
                kernel("k", 10, 20, 1),
                ended(2, EndReason::Signal(11)),
            ],
            vec![started(200), ended(1, EndReason::Exit)],
            vec![started(300), ended(1, EndReason::Stopped)],
        ]);
        let said: Vec<&String> = trace
            .warnings
            .iter()
            .filter(|w| w.contains("signal"))
            .collect();
        assert_eq!(
            said,
            [
                "process 100: its trace ended at signal 11 (SIGSEGV), which was ending the process: what it had \
                 recorded then was flushed, but work still in flight (kernels queued or running, calls not yet \
                 returned) has no record"
            ],
            "{:?}",
            trace.warnings
        );
        assert_eq!(trace.warnings.len(), 1, "{:?}", trace.warnings);
        let ends: Vec<Option<EndReason>> = trace.processes.iter().map(|p| p.end).collect();
        assert_eq!(
            ends,
            [
                Some(EndReason::Signal(11)),
                Some(EndReason::Exit),
                Some(EndReason::Stopped)
            ]
        );
        // The crash makes the trace incomplete (exit 3 where the program's own status is 0), as a crash before the
        // end record could be sent does.
        let incomplete: Vec<bool> = trace.processes.iter().map(Process::incomplete).collect();
        assert_eq!(incomplete, [true, false, false]);
    }

    #[test]
    fn a_fatal_signal_the_program_ran_on_past_says_what_followed_its_end() {
        // The library ends the stream at SIGSEGV whatever the program does with it; this one handled it and went
        // on: two records came after the end record, which does not count them.
        let trace = collect(&[vec![
            started(100),
            ended(1, EndReason::Signal(7)),
            kernel("k", 10, 20, 1),
            kernel("k", 30, 40, 2),
        ]]);
        assert_eq!(
            trace.warnings,
            [
                "process 100: its trace ended at signal 7 (SIGBUS), and the process ran on past it (it handled \
                 the signal): the 2 records that followed are shown, but nothing counts what it sent after its end \
                 record (some may be missing)"
            ]
        );
        assert_eq!(trace.kernels.len(), 2);
        assert_eq!(trace.processes[0].after_end, 2);
        assert!(trace.processes[0].incomplete());
    }

    #[test]
    fn an_end_reason_newer_than_this_version_is_said_as_unknown() {
        let trace = collect(&[vec![started(100), ended(1, EndReason::Other(9))]]);
        assert_eq!(
            trace.warnings,
            ["process 100: its stream ended for a reason this version does not know (code 9)"]
        );
        assert!(!trace.processes[0].incomplete(), "its count checks");
    }

    #[test]
    fn processes_that_share_a_pid_keep_their_own_launch_calls() {
        // Two processes with pid 100 (two PID namespaces, or a pid used again): each launched its own kernel with
        // correlation id 1, by a call of its own name.
        let trace = collect(&[
            vec![
                started(100),
                api("cudaLaunchKernel", 10, 20, 1, 1),
                kernel("alpha", 30, 40, 1),
            ],
            vec![
                started(100),
                api("cudaLaunchCooperativeKernel", 11, 21, 1, 1),
                kernel("beta", 31, 41, 1),
            ],
        ]);
        let mut out = Vec::new();
        super::super::report::listing(&trace, &mut out).expect("written to memory");
        let out = String::from_utf8(out).expect("the listing is text");
        let line = |name: &str| {
            out.lines()
                .find(|l| l.starts_with(&format!("kernel  {name} ")))
                .unwrap_or_else(|| panic!("no line of {name} in:\n{out}"))
                .to_string()
        };
        assert!(
            line("alpha").ends_with("from cudaLaunchKernel"),
            "{}",
            line("alpha")
        );
        assert!(
            line("beta").ends_with("from cudaLaunchCooperativeKernel"),
            "{}",
            line("beta")
        );
    }

    #[test]
    fn kernels_of_one_process_do_not_stand_for_the_lost_kernels_of_another_with_its_pid() {
        // Process A (pid 100) launched 300 kernels and none has a record; process B (pid 100 too, in another PID
        // namespace) ran 300 kernels whose launches it did not record. A's loss must be said.
        let a: Vec<Record> = std::iter::once(started(100))
            .chain((1..=300u32).map(|c| {
                api(
                    "cudaLaunchKernel",
                    10 * u64::from(c),
                    10 * u64::from(c) + 5,
                    c,
                    1,
                )
            }))
            .collect();
        let b: Vec<Record> = std::iter::once(started(100))
            .chain((1..=300u32).map(|c| kernel("k", 10 * u64::from(c), 10 * u64::from(c) + 5, c)))
            .collect();
        let trace = collect(&[a, b]);
        assert!(
            trace.warnings.iter().any(|w| w.starts_with(
                "process 100 [stream 0]: 300 of its 300 kernel launches have no kernel record"
            )),
            "{:?}",
            trace.warnings
        );
    }

    #[test]
    fn what_is_said_of_processes_that_share_a_pid_tells_them_apart() {
        // Pid 100 three times: twice running one command without launcher labels (two containers), once another
        // command (the pid used again); pid 200 once.
        let start = |pid, command: &str| {
            Record::ProcessStart(ProcessStart {
                pid,
                parent_pid: 1,
                time: 0,
                command: command.into(),
            })
        };
        let notice = |text: &str| {
            Record::Notice(Notice {
                level: NoticeLevel::Warning,
                text: text.into(),
            })
        };
        let trace = collect(&[
            vec![start(100, "python train.py"), notice("first")],
            vec![start(100, "python train.py"), notice("second")],
            vec![start(100, "python eval.py"), notice("third")],
            vec![start(200, "python train.py"), notice("fourth")],
        ]);
        for said in [
            "process 100 [stream 0] (warning): first",
            "process 100 [stream 1] (warning): second",
            "process 100 [python eval.py] (warning): third",
            "process 200 (warning): fourth",
        ] {
            assert!(
                trace.warnings.iter().any(|w| w == said),
                "{said}: {:?}",
                trace.warnings
            );
        }
    }

    #[test]
    fn a_message_is_acted_on_by_what_it_means_and_shown_by_its_words() {
        let mut demangler = Demangler::new(true);
        let mut sinks = Sinks {
            file: None,
            chrome: None,
        };
        let kinds = vec![TraceKind::Kernel];
        let mut c = Collector::new(&mut demangler, kinds, &mut sinks, Progress::new(false));
        let unfinished = Message::UnfinishedLeftOut { records: 760 }.record();
        let Record::CodedNotice(coded) = &unfinished else {
            unreachable!()
        };
        // The same message reworded counts; the same words in a plain notice, or under a code of another release,
        // do not.
        let reworded = Record::CodedNotice(CodedNotice {
            values: vec![5],
            text: "five left out".into(),
            ..coded.clone()
        });
        let plain = Record::Notice(Notice {
            level: coded.level,
            text: coded.text.clone(),
        });
        let unknown = Record::CodedNotice(CodedNotice {
            code: 999,
            ..coded.clone()
        });
        let end = Record::ProcessEnd(ProcessEnd {
            time: 1,
            reason: EndReason::Stopped,
            records: 5,
            dropped: 0,
            skipped: 0,
            callback_panics: 0,
        });
        for record in [unfinished.clone(), reworded, plain, unknown, end] {
            c.take(Msg::Stream(Delivery::Item(0, Ok(record))));
        }
        let trace = c.finish().unwrap();
        assert_eq!(trace.processes[0].unfinished, 765);
        let shown = format!(
            "process 0 (note): {}",
            Message::UnfinishedLeftOut { records: 760 }
        );
        assert_eq!(
            trace.warnings.iter().filter(|w| **w == shown).count(),
            3,
            "each shown by its words: {:?}",
            trace.warnings
        );
        assert!(
            trace
                .warnings
                .contains(&"process 0 (note): five left out".to_string())
        );
    }
}
