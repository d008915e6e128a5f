//! The cupti backend: runs the program with the injection library (`CUDA_INJECTION64_PATH`), which streams the
//! program's CUPTI activity records over a Unix socket to this process. Every process of the program that uses
//! CUDA (an exec'd child too) connects on its own; each connection is read by its own thread.

use std::collections::HashMap;
use std::io::ErrorKind;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_tools::trace::{
    ApiDomain, NoticeLevel, Record, StreamHeader, StreamReader, WireError, env, env::TraceKind,
};

use super::cli::Args;
use super::model::{ApiCall, Demangler, Kernel, Process, Trace, Transfer, TransferKind};
use super::{Traced, spawn_failure};
use crate::failure::Failure;
use crate::inject_lib;

/// Grace period after the program's exit for connections still in the listen queue.
const LATE_CONNECT: Duration = Duration::from_millis(150);
/// Per-stream error messages shown; more are only counted.
const MAX_ERROR_MESSAGES: usize = 10;

enum Msg {
    Header(usize, StreamHeader),
    Item(usize, Result<Record, WireError>),
    Closed(usize),
}

pub fn run(cli: &Args, demangler: &mut Demangler) -> Result<Traced, Failure> {
    let (lib, origin) =
        inject_lib::find(cli.inject_lib.as_deref()).map_err(|m| Failure::new(1, m))?;
    log::debug!("injection library {} ({origin})", lib.display());
    // A private folder for the socket (mode 0700), removed when the trace ends.
    let dir = tempfile::Builder::new()
        .prefix("gpu-tools-trace-")
        .tempdir()
        .map_err(|e| Failure::new(1, format!("cannot make a socket folder: {e}")))?;
    let socket = dir.path().join("trace.sock");
    let listener = UnixListener::bind(&socket)
        .and_then(|l| l.set_nonblocking(true).map(|()| l))
        .map_err(|e| Failure::new(1, format!("cannot listen on {}: {e}", socket.display())))?;

    let mut cmd = Command::new(&cli.program[0]);
    cmd.args(&cli.program[1..]).stdin(Stdio::inherit());
    configure(&mut cmd, cli, &lib, &socket);
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
    let mut child = cmd
        .spawn()
        .map_err(|e| spawn_failure(&cli.program[0], &e))?;

    let (tx, rx) = mpsc::channel::<Msg>();
    let stop = Arc::new(AtomicBool::new(false));
    let accepted = Arc::new(AtomicUsize::new(0));
    {
        let (tx, stop, accepted) = (tx.clone(), Arc::clone(&stop), Arc::clone(&accepted));
        std::thread::spawn(move || accept_loop(listener, tx, stop, accepted));
    }
    drop(tx);

    let mut collector = Collector::new(demangler, cli.effective_kinds());
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
        if status.is_none() {
            match child.try_wait() {
                Ok(Some(s)) => {
                    status = Some(s);
                    exited_at = Some(Instant::now());
                }
                Ok(None) => {}
                Err(e) => return Err(Failure::new(1, format!("cannot wait for the program: {e}"))),
            }
        }
        if let Some(t) = exited_at {
            let connections = accepted.load(Ordering::SeqCst);
            let all_known = connections == collector.streams.len();
            if t.elapsed() >= LATE_CONNECT && all_known && collector.all_finished() {
                break;
            }
            if t.elapsed() >= drain {
                collector.give_up(drain);
                break;
            }
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut trace = collector.finish();
    if trace.processes.is_empty() {
        trace.warnings.push(format!(
            "no traced process connected: {} did not initialise CUDA, or CUDA could not load {} (set {}=debug to \
             see the library's messages)",
            cli.program[0],
            lib.display(),
            env::LOG
        ));
    }
    Ok(Traced { trace, status })
}

/// The child's environment: the injection library and what it should collect, and where to send it.
fn configure(cmd: &mut Command, cli: &Args, lib: &Path, socket: &Path) {
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
    let kinds = TraceKind::list_value(&cli.effective_kinds());
    cmd.env(env::CUDA_INJECTION, lib)
        .env(env::SOCKET, socket)
        .env_remove(env::FILE)
        .env(env::KINDS, kinds);
    if let Some(v) = &cli.buffer_size {
        cmd.env(env::BUFFER_SIZE, v);
    }
    if let Some(v) = cli.max_buffers {
        cmd.env(env::MAX_BUFFERS, v.to_string());
    }
    if let Some(v) = cli.flush_ms {
        cmd.env(env::FLUSH_MS, v.to_string());
    }
}

fn accept_loop(
    listener: UnixListener,
    tx: mpsc::Sender<Msg>,
    stop: Arc<AtomicBool>,
    accepted: Arc<AtomicUsize>,
) {
    let mut next = 0usize;
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, _)) => {
                let id = next;
                next += 1;
                accepted.store(next, Ordering::SeqCst);
                let tx = tx.clone();
                std::thread::spawn(move || read_stream(id, stream, tx));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

fn read_stream(id: usize, stream: UnixStream, tx: mpsc::Sender<Msg>) {
    // The listener is non-blocking; the accepted stream must block.
    let _ = stream.set_nonblocking(false);
    let mut reader = StreamReader::new(stream);
    let mut header_sent = false;
    while let Some(item) = reader.next() {
        if !header_sent {
            if let Some(h) = reader.header() {
                header_sent = true;
                if tx.send(Msg::Header(id, *h)).is_err() {
                    return;
                }
            }
        }
        if tx.send(Msg::Item(id, item)).is_err() {
            return;
        }
    }
    let _ = tx.send(Msg::Closed(id));
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

struct Collector<'d> {
    demangler: &'d mut Demangler,
    streams: HashMap<usize, StreamState>,
    trace: Trace,
}

impl<'d> Collector<'d> {
    fn new(demangler: &'d mut Demangler, kinds: Vec<TraceKind>) -> Self {
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
        }
    }

    fn all_finished(&self) -> bool {
        self.streams.values().all(|s| s.ended || s.closed)
    }

    fn give_up(&mut self, waited: Duration) {
        for s in self.streams.values_mut().filter(|s| !s.ended && !s.closed) {
            s.abandoned = true;
            self.trace.warnings.push(format!(
                "process {} had not finished its stream {:.1} s after the program exited (still running?); what \
                 it sent so far is shown",
                s.process.pid,
                waited.as_secs_f64()
            ));
        }
    }

    fn take(&mut self, msg: Msg) {
        match msg {
            Msg::Header(id, h) => {
                let s = self.streams.entry(id).or_default();
                s.process.pid = h.pid;
                if h.clock != gpu_tools::trace::TimestampClock::Monotonic {
                    self.trace.warnings.push(format!(
                        "process {}: timestamps are on the vendor's clock ({:?}), not CLOCK_MONOTONIC",
                        h.pid, h.clock
                    ));
                }
            }
            Msg::Closed(id) => self.streams.entry(id).or_default().closed = true,
            Msg::Item(id, item) => self.item(id, item),
        }
    }

    fn item(&mut self, id: usize, item: Result<Record, WireError>) {
        let s = self.streams.entry(id).or_default();
        let pid = s.process.pid;
        let record = match item {
            Ok(r) => r,
            Err(e) => {
                s.process.stream_errors += 1;
                s.errors += 1;
                if s.errors <= MAX_ERROR_MESSAGES {
                    self.trace.warnings.push(format!("process {pid}: {e}"));
                }
                return;
            }
        };
        if !s.ended {
            s.process.received += 1;
        }
        let d = &mut *self.demangler;
        let t = &mut self.trace;
        match record {
            Record::ProcessStart(p) => {
                s.process.pid = p.pid;
                s.process.command = p.command;
            }
            Record::Kernel(k) => t.kernels.push(Kernel {
                pid,
                name: d.name(&k.name),
                start: Some(k.start),
                end: Some(k.end),
                device: k.device,
                context: u64::from(k.context),
                stream: Some(u64::from(k.stream)),
                thread: None,
                grid: k.grid,
                block: k.block,
                correlation: Some(k.correlation),
                registers: Some(k.registers),
                shared_memory: Some(k.static_shared.saturating_add(k.dynamic_shared)),
            }),
            Record::Memcpy(m) => t.transfers.push(Transfer {
                pid,
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
            Record::Memset(m) => t.transfers.push(Transfer {
                pid,
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
            Record::Api(a) => t.api.push(ApiCall {
                pid,
                thread: a.thread,
                name: if a.name.is_empty() {
                    Arc::from(format!("{} cbid {}", a.domain.name(), a.cbid))
                } else {
                    a.name
                },
                category: match a.domain {
                    ApiDomain::Runtime => "cuda_runtime",
                    _ => "cuda_driver",
                },
                start: a.start,
                end: a.end,
                correlation: a.correlation,
                return_value: a.return_value,
            }),
            Record::Dropped(r) => t.dropped.push((pid, r.context, r.stream, r.count)),
            Record::Notice(n) => {
                let level = match n.level {
                    NoticeLevel::Error => "error",
                    NoticeLevel::Warning => "warning",
                    _ => "note",
                };
                t.warnings
                    .push(format!("process {pid} ({level}): {}", n.text));
            }
            Record::ProcessEnd(e) => {
                s.ended = true;
                s.process.ended = true;
                s.process.sent = Some(e.records);
                s.process.dropped = e.dropped;
                if e.callback_panics > 0 {
                    t.warnings.push(format!(
                        "process {pid}: {} record batches were lost to a panic in the injection library",
                        e.callback_panics
                    ));
                }
                if e.skipped > 0 {
                    t.warnings.push(format!(
                        "process {pid}: {} CUPTI records could not be decoded or are of a kind not shown",
                        e.skipped
                    ));
                }
            }
            // Synchronization and overhead records are counted, not shown.
            _ => {}
        }
    }

    fn finish(mut self) -> Trace {
        let mut streams: Vec<(usize, StreamState)> = self.streams.into_iter().collect();
        streams.sort_by_key(|(id, _)| *id);
        for (_, s) in streams {
            let p = s.process;
            if !p.ended && !s.abandoned {
                self.trace.warnings.push(format!(
                    "process {} ended without finishing its stream (crashed or killed?): records it had not \
                     flushed yet are lost; the {} received are shown",
                    p.pid, p.received
                ));
            } else if let Some(sent) = p.sent {
                // The end record itself is not counted by the sender.
                if sent + 1 != p.received {
                    self.trace.warnings.push(format!(
                        "process {}: sent {sent} records, {} arrived",
                        p.pid,
                        p.received.saturating_sub(1)
                    ));
                }
            }
            self.trace.processes.push(p);
        }
        self.trace
    }
}
