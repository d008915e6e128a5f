//! `gpu-tools trace --pid PID[,PID...]` and `--pid-tree PID`: tracing processes that already run. The attach is
//! `gpu_tools_injection::attach`'s (the sockets, one per mount namespace; the injection library loaded into each
//! process and its attach entry started; the connections accepted); each process then connects to this one and
//! streams its records, as in a launched trace, until `--duration` passes, Ctrl-C or SIGTERM arrives, or every
//! process has ended. Then each gets the stop byte: it disables what it enabled, delivers every record and ends its
//! stream, and runs on as before. This file holds the trace's side: the targets, the window and what it got.
//!
//! Ctrl-C during an injection does not cut it short: the injection finishes (a process left half-way would be
//! left broken), and the trace then stops at once.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_tools::linux::inject::InjectError;
use gpu_tools::linux::procfs::Process;
use gpu_tools_injection::attach::{
    AfterStop, AttachError, Attached, Listening, Placement, SetupError, Sockets,
};
use gpu_tools_injection::collect::AcceptOptions;
use gpu_tools_injection::env;
use gpu_tools_injection::settings::{Destination, Settings};

use super::Traced;
use super::cli::Args;
use super::counters::{Opened, Sampling};
use super::model::Demangler;
use super::receiver::{Collector, Msg, Sinks, end_counters};
use super::settings::injection_settings;
use crate::failure::Failure;
use crate::progress::Progress;

/// How long the attached processes get to deliver their records after the stop byte (unless
/// `--drain-timeout-ms` says otherwise).
const DRAIN: Duration = Duration::from_secs(10);

/// The processes to attach to: those given, or the CUDA processes of a tree.
pub fn targets(cli: &Args) -> Result<Vec<u32>, Failure> {
    let mut pids: Vec<u32> = cli.pid.clone();
    if let Some(root) = cli.pid_tree {
        crate::pid::check(root)?;
        let tree = crate::pid::tree(root);
        let cuda = crate::pid::cuda_processes(&tree);
        if cuda.is_empty() {
            return Err(Failure::new(
                1,
                format!(
                    "no process of the {} in the tree of process {root} uses CUDA (yet)",
                    tree.len()
                ),
            ));
        }
        eprintln!(
            "gpu-tools trace: {} of the {} processes under {root} use CUDA: {}",
            cuda.len(),
            tree.len(),
            cuda.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
        pids.extend(cuda);
    }
    let mut seen = std::collections::HashSet::new();
    pids.retain(|p| seen.insert(*p));
    for &p in &pids {
        crate::pid::check(p)?;
    }
    Ok(pids)
}

pub fn run(
    cli: &Args,
    demangler: &mut Demangler,
    lib: &Path,
    sinks: &mut Sinks<'_>,
    pids: &[u32],
    cupti: Option<&Path>,
    counters: Option<Opened>,
) -> Result<Traced, Failure> {
    // The destination is each process's socket, written by the attach.
    let settings = injection_settings(cli, Destination::Socket(PathBuf::new()), cupti)?;
    // Ctrl-C and SIGTERM end the trace, never the tracer mid-injection.
    let stop = crate::interrupt::stop_flag();
    // One socket for the processes that see this one's files; one in each other mount namespace's /tmp.
    let sockets = Sockets {
        prefix: "gpu-tools-trace-",
        name: "trace.sock",
        placement: Placement::PerMountNamespace,
    };
    let listening = Listening::new(pids, &sockets).map_err(|e| setup_failure(&e))?;
    let (tx, rx) = mpsc::channel::<Msg>();
    let options = AcceptOptions {
        tee: sinks.file.is_some(),
        ..AcceptOptions::default()
    };
    // The trace's span starts here, with the counters' reading (the samplers were opened before).
    let sampling = counters
        .map(|c| Sampling::start(c, tx.clone()))
        .transpose()?;

    let progress = Progress::new(cli.progress.enabled(cli.quiet));
    let mut collector = Collector::new(demangler, cli.effective_kinds(), sinks, progress);
    let attach = Attach {
        listening,
        lib,
        settings: &settings,
        options,
        tx,
    };
    let (mut session, windows) = attach_each(attach, &rx, &mut collector)?;
    let attached = session.started();
    if let Some(note) = copy_kinds_note(cli) {
        eprintln!("gpu-tools trace: {note}");
    }
    if !cli.quiet {
        eprintln!(
            "gpu-tools trace: tracing {} (Ctrl-C to stop{})",
            attached
                .iter()
                .map(|p| format!("process {p}"))
                .collect::<Vec<_>>()
                .join(", "),
            cli.duration
                .map(|d| format!(", or after {d} s"))
                .unwrap_or_default()
        );
    }
    trace_window(cli, &stop, &attached, &rx, &mut collector);
    let window_end = Instant::now();
    let cpu_at_end: Vec<Option<Duration>> = windows.iter().map(|w| cpu_time(w.pid)).collect();
    // The stop byte to every connection; each process delivers what CUPTI holds and ends its stream.
    session.stop(AfterStop::KeepOpen);
    drain(cli, &session, attached.len(), &rx, &mut collector);
    session.stop_accepting();
    end_counters(sampling, &rx, &mut collector);
    let connections = session.accepted();
    let mut trace = collector.finish()?;
    // The sockets placed in processes' /tmp are removed.
    drop(session);
    let ends = WindowEnds {
        at: window_end,
        cpu: &cpu_at_end,
    };
    let empty = judge_windows(cli, &windows, &ends, &mut trace);
    if connections < attached.len() {
        trace.warnings.push(format!(
            "{} of the {} attached processes never connected (set {}=debug in the tracer's environment, or see \
             the processes' stderr)",
            attached.len() - connections,
            attached.len(),
            env::LOG
        ));
    }
    Ok(Traced {
        trace,
        status: None,
        empty_windows: empty,
    })
}

/// What [`attach_each`] attaches with.
struct Attach<'a> {
    listening: Listening,
    lib: &'a Path,
    settings: &'a Settings,
    options: AcceptOptions,
    tx: mpsc::Sender<Msg>,
}

/// Attaches to every process, logging each outcome as it comes (and taking what arrived meanwhile); returns the
/// session and each started process's window. The processes refused are said after the others were attached;
/// none started is the error.
fn attach_each(
    attach: Attach<'_>,
    rx: &mpsc::Receiver<Msg>,
    collector: &mut Collector<'_, '_, '_>,
) -> Result<(Attached, Vec<Window>), Failure> {
    // When each attach returned, and the CPU time the process had used by then: a window that got no record of a
    // process that ran is an error, not an empty trace.
    let mut windows: Vec<Window> = Vec::new();
    let mut failures: Vec<String> = Vec::new();
    let Attach {
        listening,
        lib,
        settings,
        options,
        tx,
    } = attach;
    let session = listening
        .attach(lib, settings, options, tx, |outcome| {
            let pid = outcome.pid;
            match &outcome.result {
                Ok(d) => {
                    log::info!(
                        "attached to process {pid} in {:.0} ms (thread {}, {} looks{})",
                        outcome.took.as_secs_f64() * 1e3,
                        d.thread,
                        d.looks,
                        if d.already_loaded {
                            ", library loaded by an earlier attach"
                        } else {
                            ""
                        }
                    );
                    windows.push(Window {
                        pid,
                        attached_at: Instant::now(),
                        cpu_at_attach: cpu_time(pid),
                    });
                }
                Err(AttachError::Inject(e)) => failures.push(describe(pid, e)),
                Err(refused) => failures.push(format!("process {pid}: not traced: {refused}")),
            }
            // Messages that arrived meanwhile.
            while let Ok(msg) = rx.try_recv() {
                collector.take(msg);
            }
        })
        .map_err(|e| setup_failure(&e))?;
    if session.started().is_empty() {
        // The session's end stops accepting and removes the sockets.
        drop(session);
        let message = failures.join("\n");
        return Err(Failure::new(1, message));
    }
    for f in &failures {
        eprintln!("gpu-tools trace: {f}");
    }
    Ok((session, windows))
}

/// Traces until asked to stop (Ctrl-C, SIGTERM), the time is up, or every process has ended.
fn trace_window(
    cli: &Args,
    stop: &AtomicBool,
    attached: &[u32],
    rx: &mpsc::Receiver<Msg>,
    collector: &mut Collector<'_, '_, '_>,
) {
    let deadline = cli
        .duration
        .map(|s| Instant::now() + Duration::from_secs_f64(s.max(0.0)));
    loop {
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(msg) => {
                collector.take(msg);
                while let Ok(msg) = rx.try_recv() {
                    collector.take(msg);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        collector.show_progress();
        if stop.load(Ordering::SeqCst) || deadline.is_some_and(|d| Instant::now() >= d) {
            break;
        }
        if attached.iter().all(|&p| has_ended(p)) {
            break;
        }
    }
}

/// Waits, after the stop byte, for every connection and stream's end (`--drain-timeout-ms`, else [`DRAIN`]),
/// taking what arrives.
fn drain(
    cli: &Args,
    session: &Attached,
    attached: usize,
    rx: &mpsc::Receiver<Msg>,
    collector: &mut Collector<'_, '_, '_>,
) {
    let drain = cli.drain_timeout_ms.map_or(DRAIN, Duration::from_millis);
    let stopped_at = Instant::now();
    loop {
        let connections = session.accepted();
        if connections >= attached && collector.all_finished() {
            break;
        }
        if stopped_at.elapsed() >= drain {
            collector.give_up(drain);
            break;
        }
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(msg) => collector.take(msg),
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    log::info!(
        "stopped: every stream ended {:.1} ms after the stop byte",
        stopped_at.elapsed().as_secs_f64() * 1e3
    );
}

/// When the window ended, and the CPU time each window's process had used by then.
struct WindowEnds<'a> {
    at: Instant,
    cpu: &'a [Option<Duration>],
}

/// Each window's verdict: an empty window of a process that ran is an error (returned), one of an idle process a
/// note (in the trace's warnings).
fn judge_windows(
    cli: &Args,
    windows: &[Window],
    ends: &WindowEnds<'_>,
    trace: &mut super::model::Trace,
) -> Vec<String> {
    let window_end = ends.at;
    let mut empty = Vec::new();
    for (w, cpu_end) in windows.iter().zip(ends.cpu) {
        let Some(p) = trace.processes.iter().find(|p| p.pid == w.pid) else {
            continue;
        };
        match p.first_activity {
            Some(first) => log::info!(
                "process {}: first record {:.1} ms after the attach; {} records of work in the window",
                w.pid,
                first.saturating_duration_since(w.attached_at).as_secs_f64() * 1e3,
                p.activity
            ),
            None => log::info!("process {}: no record of work in the window", w.pid),
        }
        let window = window_end.saturating_duration_since(w.attached_at);
        let ran = match (w.cpu_at_attach, cpu_end) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => Duration::ZERO,
        };
        if let Some(message) = empty_window(w.pid, p, window, ran, &cli.effective_kinds()) {
            empty.push(message);
        } else if p.activity == 0 {
            trace.warnings.push(format!(
                "process {} (note): no record of work in the {:.1} s window; it was nearly idle ({:.0} ms of CPU \
                 time in it): nothing ran to be recorded",
                w.pid,
                window.as_secs_f64(),
                ran.as_secs_f64() * 1e3
            ));
        }
    }
    empty
}

/// One attached process's window.
struct Window {
    pid: u32,
    /// When its attach entry returned: its records start then.
    attached_at: Instant,
    /// The CPU time its threads had used by then.
    cpu_at_attach: Option<Duration>,
}

/// The CPU time (user and system) process `pid`'s threads have used, less that of the injected library's own live
/// threads (`program::LIBRARY_THREADS`).
fn cpu_time(pid: u32) -> Option<Duration> {
    Process::new(pid)
        .cpu_time_less_threads(gpu_tools_injection::program::LIBRARY_THREADS)
        .ok()
}

/// The error for a window without a record of work from a process that ran meanwhile; `None` when records came,
/// or the process did not run (an idle server has nothing to record).
fn empty_window(
    pid: u32,
    p: &super::model::Process,
    window: Duration,
    ran: Duration,
    kinds: &[env::TraceKind],
) -> Option<String> {
    if p.activity > 0 || !gpu_tools_injection::program::ran(ran, window) {
        return None;
    }
    Some(format!(
        "process {pid}: no record of work arrived in the {:.1} s window, although the process ran ({:.0} ms of \
         CPU time in it): enabled {}; seen {} records in all ({}). Most likely the records did not reach the \
         trace (unless the process waited the whole window on one long kernel, or worked on the \
         CPU alone in it: try a longer --duration). Set {}=debug to see the injected library's log in the \
         process's stderr",
        window.as_secs_f64(),
        ran.as_secs_f64() * 1e3,
        kinds
            .iter()
            .map(|k| k.name())
            .collect::<Vec<_>>()
            .join(", "),
        p.received,
        stream_end(p),
        env::LOG
    ))
}

/// How an attached process's stream ended, for [`empty_window`].
fn stream_end(p: &super::model::Process) -> String {
    match (p.ended, p.end) {
        (false, _) => "its stream did not end".to_string(),
        (true, Some(reason @ gpu_tools::trace::EndReason::Signal(_))) => {
            format!("its stream ended at {reason}: the process crashed")
        }
        (true, _) => "its stream ended normally".to_string(),
    }
}

/// What an attach says of copy and set records ([`super::cli::COPY_KINDS`]): left out by default (said unless
/// `--quiet`), or asked for (always said: it may cost later attaches their kernels).
fn copy_kinds_note(cli: &Args) -> Option<String> {
    if cli.attach_records_copies() {
        Some(
            "warning: copy and set records asked for in an attach: with CUPTI 13.0, turning them on and off in a \
             running process was seen to stop kernel records of later attaches to it (the process runs on; its \
             own profiler loses them too)"
                .into(),
        )
    } else if cli.kinds.is_empty() && !cli.quiet {
        Some(
            "note: an attach records kernels, API calls and the NVTX of the modules it can reach (each process's \
             notes name them), not copies and sets (turning those on and off in a running process was seen to stop \
             later attaches' kernel records; `--kinds` with memcpy or memset records them anyway)"
                .into(),
        )
    } else {
        None
    }
}

fn has_ended(pid: u32) -> bool {
    let p = Process::new(pid);
    !p.exists() || p.stat().is_ok_and(|s| s.has_ended())
}

/// A failure to set the attach up (nothing was injected) as the user reads it.
fn setup_failure(e: &SetupError) -> Failure {
    match e {
        SetupError::Target { pid, error } => Failure::new(1, describe(*pid, error)),
        other => Failure::new(1, other.to_string()),
    }
}

/// An injection error as the user reads it (it names the process: no prefix is needed), for a trace's attach and a
/// profile's.
pub(crate) fn describe(pid: u32, e: &InjectError) -> String {
    match e {
        InjectError::LibraryNotMapped { .. } => format!(
            "process {pid} is not a CUDA process (it does not map libcuda.so), or has not initialised CUDA yet"
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_had_for_a_live_process_only() {
        assert!(cpu_time(std::process::id()).is_some());
        assert_eq!(cpu_time(u32::MAX), None, "no such process");
    }

    #[test]
    fn the_injected_librarys_threads_are_not_the_program_running() {
        // A thread named as the library's, busy for 400 ms of its own CPU time (however busy the machine), and
        // alive while the time is read: a thread that ended is part of the process's total, not told apart.
        let (busy_tx, busy_rx) = std::sync::mpsc::channel();
        let (end_tx, end_rx) = std::sync::mpsc::channel::<()>();
        let library = std::thread::Builder::new()
            .name("gpu-tools-attach".to_string())
            .spawn(move || {
                let own = || {
                    let mut t = libc::timespec {
                        tv_sec: 0,
                        tv_nsec: 0,
                    };
                    // SAFETY: `t` is a valid timespec for the call to fill.
                    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
                    Duration::new(t.tv_sec as u64, t.tv_nsec as u32)
                };
                let mut x = 0u64;
                while own() < Duration::from_millis(400) {
                    x = std::hint::black_box(x.wrapping_add(1));
                }
                let _ = busy_tx.send(());
                let _ = end_rx.recv();
                x
            })
            .unwrap();
        busy_rx.recv().unwrap();
        let me = Process::current();
        let whole = me.cpu_time_less_threads(b"\xff").unwrap();
        let counted = whole.saturating_sub(cpu_time(std::process::id()).unwrap());
        drop(end_tx);
        library.join().unwrap();
        assert!(
            counted >= Duration::from_millis(350),
            "the library thread's 400 ms were not told apart: {counted:?}"
        );
    }

    #[test]
    fn an_empty_window_is_an_error_only_when_the_process_ran() {
        let kinds = [env::TraceKind::Kernel, env::TraceKind::Runtime];
        let mut p = super::super::model::Process {
            pid: 7,
            received: 5,
            ended: true,
            ..Default::default()
        };
        let window = Duration::from_secs(3);
        let message = empty_window(7, &p, window, Duration::from_millis(2900), &kinds)
            .expect("a busy process with no record is an error");
        assert!(
            message.contains("no record of work arrived in the 3.0 s window"),
            "{message}"
        );
        assert!(message.contains("2900 ms of CPU time"), "{message}");
        assert!(message.contains("enabled kernel, runtime"), "{message}");
        assert!(message.contains("seen 5 records in all"), "{message}");
        assert!(message.contains("(its stream ended normally)"), "{message}");
        let crashed = super::super::model::Process {
            end: Some(gpu_tools::trace::EndReason::Signal(11)),
            ..p.clone()
        };
        let message = empty_window(7, &crashed, window, Duration::from_millis(2900), &kinds)
            .expect("a busy process with no record is an error");
        assert!(
            message.contains("(its stream ended at signal 11 (SIGSEGV): the process crashed)"),
            "{message}"
        );
        // An idle process: nothing to record, no error; nor one whose background threads used 6% of the window
        // (a PyTorch job waiting for its child), while a fifth of it is a process that ran.
        assert_eq!(
            empty_window(7, &p, window, Duration::from_millis(20), &kinds),
            None
        );
        assert_eq!(
            empty_window(7, &p, window, Duration::from_millis(180), &kinds),
            None
        );
        assert!(empty_window(7, &p, window, Duration::from_millis(700), &kinds).is_some());
        // One record of work is enough.
        p.activity = 1;
        assert_eq!(
            empty_window(7, &p, window, Duration::from_millis(2900), &kinds),
            None
        );
    }
}
