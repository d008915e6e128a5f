//! Running a program with per-kernel metrics and PC sampling ([`run`]): the launcher of `gpu-tools profile`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitStatus};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use gpu_tools_trace::profile::{ProfileRun, collect};
use gpu_tools_trace::{Notice, NoticeLevel, Record, StreamReader};

use super::ProfileRequest;
use crate::collect::{AcceptOptions, Delivery};
use crate::launch::{LaunchError, Launcher};
use crate::settings::{Destination, Library, Settings};

/// A profiled program could not be run or gave nothing.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProfileError {
    /// The request cannot be used.
    #[error("{0}")]
    Request(String),
    /// The injection library is not there.
    #[error("the injection library {} does not exist", .0.display())]
    NoInjectionLibrary(PathBuf),
    /// The program could not be started.
    #[error("cannot start {program}: {error}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        error: String,
    },
    /// The program exited without initialising CUDA: the injection library never ran, so there is nothing to
    /// report.
    #[error("{program} never initialised CUDA ({status}): nothing was profiled")]
    NeverUsedCuda {
        /// The program.
        program: String,
        /// How it ended.
        status: ExitStatus,
    },
    /// Reading what the program sent failed.
    #[error("reading the profile stream: {0}")]
    Io(String),
}

/// Runs `command` with the injection library and `request`, waits for it, and collects what each of its CUDA
/// processes sent (each streams to a socket in a private temporary folder, as a trace's processes do). Kernel
/// records are collected too, for their durations, those of CUDA graph nodes included.
///
/// Metrics and PC sampling together take two runs of the program: the first collects the metrics, the second
/// (started only when the first exited with success) samples PCs, with the same program, arguments, environment
/// changes and working folder (a cleared environment and the command's standard-stream settings are not carried
/// over: `Command` does not tell them). CUPTI hands over no PC samples while a context's range profiler is enabled (on an
/// H100 with CUPTI 13.0: none, against some 470,000 for the same kernel sampled alone). The kernel records and
/// process counts are the first run's; stalls, losses and notices come from both ([`ProfileRun::runs`] says how
/// many ran).
pub fn run(
    command: Command,
    inject_lib: &Path,
    request: &ProfileRequest,
) -> Result<ProfileRun, ProfileError> {
    run_watched(command, inject_lib, request, None)
}

/// What a profiled program has sent so far, for a progress display ([`run_with_progress`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ProfileProgress {
    /// Which run of the program this is: 1, or 2 for the PC-sampling run after the metrics run.
    pub run: u32,
    /// Its processes that have sent something.
    pub processes: usize,
    /// Kernel launches whose metrics have arrived.
    pub launches_profiled: u64,
    /// Kernel records that have arrived (kernels run so far, as CUPTI flushed them).
    pub kernels: u64,
}

/// [`run`], calling `progress` about ten times a second while the program runs with what its processes have sent
/// so far (decoded as it arrives; each process's stream is read once more, whole, at the end).
pub fn run_with_progress(
    command: Command,
    inject_lib: &Path,
    request: &ProfileRequest,
    progress: &mut dyn FnMut(&ProfileProgress),
) -> Result<ProfileRun, ProfileError> {
    run_watched(command, inject_lib, request, Some(progress))
}

fn run_watched(
    command: Command,
    inject_lib: &Path,
    request: &ProfileRequest,
    mut progress: Option<&mut dyn FnMut(&ProfileProgress)>,
) -> Result<ProfileRun, ProfileError> {
    if request.metrics.is_empty() || !request.pc_sampling {
        return run_once(command, inject_lib, request, 1, progress);
    }
    let again = same_command(&command);
    let metrics_only = ProfileRequest {
        pc_sampling: false,
        ..request.clone()
    };
    let mut out = run_once(
        command,
        inject_lib,
        &metrics_only,
        1,
        progress
            .as_mut()
            .map(|p| &mut **p as &mut dyn FnMut(&ProfileProgress)),
    )?;
    if !out.status.is_some_and(|s| s.success()) {
        return Ok(out);
    }
    let pc_only = ProfileRequest {
        metrics: Vec::new(),
        ..request.clone()
    };
    let second = run_once(again, inject_lib, &pc_only, 2, progress)?;
    out.runs += 1;
    out.status = second.status;
    out.stalls = second.stalls;
    out.losses.extend(second.losses);
    out.dropped_records += second.dropped_records;
    out.notices.extend(second.notices);
    out.wire_errors += second.wire_errors;
    Ok(out)
}

/// A command that starts the same program again: program, arguments, environment changes, working folder.
fn same_command(command: &Command) -> Command {
    let mut again = Command::new(command.get_program());
    again.args(command.get_args());
    for (key, value) in command.get_envs() {
        match value {
            Some(v) => again.env(key, v),
            None => again.env_remove(key),
        };
    }
    if let Some(dir) = command.get_current_dir() {
        again.current_dir(dir);
    }
    again
}

fn run_once(
    mut command: Command,
    inject_lib: &Path,
    request: &ProfileRequest,
    run: u32,
    mut progress: Option<&mut dyn FnMut(&ProfileProgress)>,
) -> Result<ProfileRun, ProfileError> {
    if !inject_lib.is_file() {
        return Err(ProfileError::NoInjectionLibrary(inject_lib.to_path_buf()));
    }
    let inject_lib =
        std::fs::canonicalize(inject_lib).map_err(|e| ProfileError::Io(e.to_string()))?;
    // Each process of the program streams to this socket, as a trace's do (`crate::collect`).
    let launcher = Launcher::new("gpu-tools-profile-").map_err(|e| match e {
        LaunchError::Folder(e) => ProfileError::Io(format!("a temporary folder: {e}")),
        other => ProfileError::Io(other.to_string()),
    })?;
    let settings = super::settings(
        Destination::Socket(launcher.socket().to_path_buf()),
        request,
    );
    for var in Settings::CLEARED {
        command.env_remove(var);
    }
    command.envs(settings.environment(Library::Cuda(&inject_lib)));
    let program = command.get_program().to_string_lossy().into_owned();
    let mut streams = Streams::new(run);
    let (tx, rx) = mpsc::channel();
    let options = AcceptOptions {
        tee: true,
        controls: None,
        most: None,
    };
    let mut launched = launcher
        .launch(&mut command, options, tx)
        .map_err(|e| match e {
            LaunchError::Spawn(e) => ProfileError::Spawn {
                program: program.clone(),
                error: e.to_string(),
            },
            other => ProfileError::Io(other.to_string()),
        })?;
    let status = loop {
        streams.take(&rx, Duration::from_millis(100));
        if let Some(report) = progress.as_mut() {
            report(&streams.seen);
        }
        match launched.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => return Err(ProfileError::Io(format!("waiting for {program}: {e}"))),
        }
    };
    // A process that connected just before the program exited is accepted a moment later; then every stream
    // closes with its process. One kept open past the drain time (a child the program left running) is counted
    // with what it sent by then, and said.
    let exited = Instant::now();
    loop {
        streams.take(&rx, Duration::from_millis(20));
        let settled = exited.elapsed() >= LATE_CONNECT && streams.closed() == launched.accepted();
        if settled || exited.elapsed() >= DRAIN {
            break;
        }
    }
    launched.stop_accepting();
    let mut out = ProfileRun {
        status: Some(status),
        runs: 1,
        ..ProfileRun::default()
    };
    if streams.bytes.is_empty() {
        return Err(ProfileError::NeverUsedCuda { program, status });
    }
    for (id, bytes) in &streams.bytes {
        out.processes += 1;
        collect(StreamReader::new(&bytes[..]), &mut out);
        if !streams.closed.contains(id) {
            out.notices.push(Notice {
                level: NoticeLevel::Warning,
                text: format!(
                    "a process of the program kept its stream open {} s after the program exited: what it sent \
                     by then is counted",
                    DRAIN.as_secs()
                ),
            });
        }
    }
    Ok(out)
}

/// How long after the program's exit a connection made just before it is waited for.
const LATE_CONNECT: Duration = Duration::from_millis(100);
/// How long after the program's exit its processes' streams are waited for.
const DRAIN: Duration = Duration::from_secs(10);

/// Each connection's bytes (one process's stream, read again whole at the end), which have closed, and the
/// progress counts so far.
struct Streams {
    bytes: std::collections::BTreeMap<usize, Vec<u8>>,
    closed: std::collections::BTreeSet<usize>,
    seen: ProfileProgress,
}

impl Streams {
    fn new(run: u32) -> Streams {
        Streams {
            bytes: Default::default(),
            closed: Default::default(),
            seen: ProfileProgress {
                run,
                ..ProfileProgress::default()
            },
        }
    }

    /// Takes what arrives within `wait`, and everything queued by then.
    fn take(&mut self, rx: &mpsc::Receiver<Delivery>, wait: Duration) {
        let mut next = rx.recv_timeout(wait).ok();
        while let Some(d) = next {
            match d {
                Delivery::Bytes(id, b) => self.bytes.entry(id).or_default().extend_from_slice(&b),
                Delivery::Header(id, _) => {
                    self.bytes.entry(id).or_default();
                }
                Delivery::Item(_, Ok(Record::KernelMetrics(_))) => self.seen.launches_profiled += 1,
                Delivery::Item(_, Ok(Record::Kernel(_))) => self.seen.kernels += 1,
                Delivery::Item(..) => {}
                Delivery::Closed(id) => {
                    self.closed.insert(id);
                }
            }
            next = rx.try_recv().ok();
        }
        self.seen.processes = self.bytes.len();
    }

    fn closed(&self) -> usize {
        self.closed.len()
    }
}
