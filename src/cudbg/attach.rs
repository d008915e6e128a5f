//! Route 1 of the driver: attaching to a CUDA process that already runs, as cuda-gdb does.
//!
//! The steps, in the order cuda-gdb 13 takes them (`gdb/cuda/cuda-linux-nat.c`, `cuda_nat_attach`, and
//! `gdb/cuda/cuda-tdep.c`, `cuda_initialize_target`): stop every thread under ptrace; write this client into the
//! process's libcuda (`cudbgApiClientPid`, `cudbgApiClientRevision`, `cudbgSessionId`,
//! `cudbgEnableLaunchBlocking`, `cudbgDebuggerCapabilities`, which must include
//! [`ATTACH_CAPABILITIES`](super::ATTACH_CAPABILITIES); cuda-gdb also sets `cudbgRpcEnabled`, which this crate
//! leaves at 0: see `prepare_and_call`); call `cudbgApiAttach()` inside the process; read
//! `cudbgReportedDriverInternalErrorCode` (`CUDBG_ERROR_ATTACH_NOT_POSSIBLE` there means "busy, let it run and
//! try again", for up to 5 s); then, if `cudbgResumeForAttachDetach` is set, let the process run until the
//! driver reports `ATTACH_COMPLETE` (its replay of contexts and modules comes first), otherwise set
//! `cudbgIpcFlag`. Drivers from CUDA 13.1 on offer a safer start of their debugger back end than the call: a file
//! descriptor in `cudbgInitiateDebuggerAttachProcedureFd` to write one byte to, after which the driver starts the
//! back end itself and calls `cudbgReportAttachProcedureFinished()`, where the session holds the process again
//! ([`AttachProtocol`]). Detaching (`cuda_do_detach`): call `cudbgApiDetach()` inside the process, ask the driver to
//! clean up with `cudbgResumeForAttachDetach`, clear `cudbgDebuggerCapabilities` and `cudbgDebuggerInitialized`,
//! let the process run until `DETACH_COMPLETE`, clear `cudbgIpcFlag`.
//!
//! Everything that can refuse the attach is checked from `/proc` and with reads of the process's memory before
//! anything in it changes; a failure after the first change puts the variables back and lets the process go.

use std::ffi::c_void;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use super::event::Event;
use super::handshake::{ClientInfo, DebuggeeLink, EndWatch, Handshake, client_variable};
use super::library::DebuggerLibrary;
use crate::linux::exit_watch::ChildState;
use crate::linux::memory;
use crate::linux::procfs::{Mapping, Process};
use crate::linux::ptrace::{TraceError, Tracer};

/// `CUDBG_ERROR_ATTACH_NOT_POSSIBLE`: reported in `cudbgReportedDriverInternalErrorCode` when the driver's critical
/// section is taken (attaching then would deadlock); cuda-gdb lets the process run 100 ms and tries again.
const ATTACH_NOT_POSSIBLE: u64 = 0x28;
/// How long retries after `ATTACH_NOT_POSSIBLE` go on (cuda-gdb's `app_init_timeout`).
const RETRY_FOR: Duration = Duration::from_secs(5);
/// How long the process runs between two tries.
const RETRY_DELAY: Duration = Duration::from_millis(100);
/// The process's file descriptor that starts the driver's attach procedure (-1 until the driver is initialised).
const ATTACH_FD: &str = "cudbgInitiateDebuggerAttachProcedureFd";
/// The function the driver calls when the attach procedure has finished.
const ATTACH_FINISHED: &str = "cudbgReportAttachProcedureFinished";

/// How a session asks the driver inside a running process to start its debugger back end.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum AttachProtocol {
    /// [`Descriptor`](Self::Descriptor) where the process's driver offers it, else
    /// [`InferiorCall`](Self::InferiorCall).
    #[default]
    Auto,
    /// Call `cudbgApiAttach()` on a thread of the stopped process, retrying while the driver answers
    /// `CUDBG_ERROR_ATTACH_NOT_POSSIBLE`. Every driver that can be attached to has it; NVIDIA's documentation
    /// calls it the legacy initialisation, since the call can land where the driver is not ready for it.
    InferiorCall,
    /// Write one byte to the file descriptor named by the process's `cudbgInitiateDebuggerAttachProcedureFd`, let
    /// the process run, and hold it again when its driver calls `cudbgReportAttachProcedureFinished()`: the
    /// driver starts its back end itself, where it knows that to be safe. Drivers of CUDA 13.1 and later; with an
    /// older one the attach fails with [`AttachError::Unsupported`].
    Descriptor,
}

impl AttachProtocol {
    /// The names [`FromStr`](std::str::FromStr) takes and [`Display`](std::fmt::Display) writes, for command
    /// lines and configuration: `auto`, `call`, `descriptor`.
    pub const NAMES: [&'static str; 3] = ["auto", "call", "descriptor"];

    /// The protocol's name (one of [`Self::NAMES`]).
    pub fn name(self) -> &'static str {
        match self {
            AttachProtocol::Auto => "auto",
            AttachProtocol::InferiorCall => "call",
            AttachProtocol::Descriptor => "descriptor",
        }
    }
}

impl std::fmt::Display for AttachProtocol {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for AttachProtocol {
    type Err = String;
    fn from_str(name: &str) -> Result<Self, String> {
        [
            AttachProtocol::Auto,
            AttachProtocol::InferiorCall,
            AttachProtocol::Descriptor,
        ]
        .into_iter()
        .find(|p| p.name() == name)
        .ok_or_else(|| {
            format!(
                "unknown attach protocol {name:?}; known: {}",
                Self::NAMES.join(", ")
            )
        })
    }
}

/// Why a session could not attach to a running process. Every refusal before the first change leaves the process
/// exactly as it was; a failure later puts back what was changed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// No such process (or it has already ended).
    #[error("no process {0}")]
    NoSuchProcess(u32),
    /// A session cannot debug the process it runs in.
    #[error("a session cannot attach to its own process")]
    OwnProcess,
    /// The process is a child of this one: while attached, this process's own waits for the child would take the
    /// ptrace stops meant for the session. Start it under the session instead ([`super::DebugSession::builder`]).
    #[error(
        "process {0} is a child of this process; start it with DebugSession::builder instead of attaching to it"
    )]
    OwnChild(u32),
    /// The process does not run CUDA (yet).
    #[error("process {pid} does not use CUDA: {why}")]
    NoCuda {
        /// The process.
        pid: u32,
        /// What is missing.
        why: NoCudaReason,
    },
    /// Another process traces it (a debugger, strace, or another session).
    #[error("process {pid} is already traced by process {tracer}")]
    AlreadyTraced {
        /// The process.
        pid: u32,
        /// Its tracer.
        tracer: u32,
    },
    /// Its CUDA driver already serves a debugger client (a program started under cuda-gdb or under a session).
    #[error("process {pid} already has a CUDA debugger client (process {client})")]
    AlreadyDebugged {
        /// The process.
        pid: u32,
        /// The client's process id, as the process's driver records it.
        client: u32,
    },
    /// The system refused to let this process trace or read it: another user's process, or
    /// `kernel.yama.ptrace_scope` limits tracing to descendants.
    #[error("not permitted to debug process {pid}: {detail}")]
    PermissionDenied {
        /// The process.
        pid: u32,
        /// What was refused, and why it may have been.
        detail: String,
    },
    /// The process ended while the session attached.
    #[error("process {pid} ended during the attach ({})", describe_end(.status))]
    Exited {
        /// The process.
        pid: u32,
        /// How it ended, when known.
        status: Option<ExitStatus>,
    },
    /// The process's driver refused: the code it left in `cudbgReportedDriverInternalErrorCode`.
    #[error(
        "the CUDA driver in process {pid} refused the attach (cudbgReportedDriverInternalErrorCode {code:#x}: {})",
        super::CudbgError::from_code(*code as u32)
    )]
    DriverRefused {
        /// The process.
        pid: u32,
        /// The driver's code (a `CUDBGResult`).
        code: u64,
    },
    /// The driver kept answering `CUDBG_ERROR_ATTACH_NOT_POSSIBLE` (software preemption on, or the MPS server
    /// running, according to cuda-gdb).
    #[error(
        "attaching to process {pid} is not possible: its driver refused {attempts} times in {waited:?} \
         (CUDBG_ERROR_ATTACH_NOT_POSSIBLE; software preemption on, or nvidia-cuda-mps-server running?)"
    )]
    NotPossible {
        /// The process.
        pid: u32,
        /// Tries made.
        attempts: u32,
        /// Over how long.
        waited: Duration,
    },
    /// A step did not finish in time.
    #[error("attaching to process {pid}: {what} did not finish within {waited:?}")]
    Timeout {
        /// The process.
        pid: u32,
        /// The step.
        what: &'static str,
        /// How long it was given.
        waited: Duration,
    },
    /// This driver or platform cannot attach (a missing libcuda symbol, or a CPU other than x86-64).
    #[error("attaching is not supported here: {0}")]
    Unsupported(String),
    /// Tracing the process failed in a way the other variants do not name.
    #[error("tracing process {pid}: {detail}")]
    Trace {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
}

/// The likely reasons this process may not trace `pid`, from what `/proc` shows.
fn why_not_traceable(pid: u32) -> String {
    let theirs = Process::new(pid).uid().ok();
    let ours = Process::current().uid().ok();
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .map(|s| s.trim().to_owned());
    let mut why = Vec::new();
    if theirs.is_some() && theirs != ours && ours != Some(0) {
        why.push(format!(
            "it belongs to uid {}, this process runs as uid {}",
            theirs.unwrap_or(0),
            ours.unwrap_or(0)
        ));
    }
    match scope.as_deref() {
        Some("0") | None => {}
        Some(s) => why.push(format!(
            "kernel.yama.ptrace_scope is {s} (1: only descendants may be traced without CAP_SYS_PTRACE; 3: none)"
        )),
    }
    if why.is_empty() {
        why.push(
            "it may not be traced (for example a set-uid program, or a security module forbids it)"
                .into(),
        );
    }
    why.join("; ")
}

/// Whether process `pid` exists and has not ended (a zombie has).
fn is_running(pid: u32) -> bool {
    let p = Process::new(pid);
    p.exists() && !p.stat().is_ok_and(|s| s.has_ended())
}

/// Devices a CUDA driver holds open from `cuInit` on: the NVIDIA control device, or WSL's GPU device.
const DRIVER_DEVICES: &[&str] = &["/dev/nvidiactl", "/dev/dxg"];

/// The CUDA driver libraries a memory map shows. The maps name the file the link resolved to: a driver install's
/// `libcuda.so.1` is a link to `libcuda.so.<driver version>` (`libcuda.so.580.159.04`), which is what they show.
fn libcuda_paths(maps: &[Mapping]) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = maps
        .iter()
        .filter(|m| m.file_name().is_some_and(is_libcuda))
        .filter_map(|m| m.path().map(Path::to_path_buf))
        .collect();
    out.dedup();
    out
}

/// `libcuda.so`, `libcuda.so.1`, `libcuda.so.580.159.04`: not `libcudart.so.13`, `libcudadebugger.so.1` nor
/// `libcuda.so.1.bak`.
fn is_libcuda(file_name: &std::ffi::OsStr) -> bool {
    let name = file_name.to_string_lossy();
    name == "libcuda.so"
        || name.strip_prefix("libcuda.so.").is_some_and(|v| {
            !v.is_empty()
                && v.split('.')
                    .all(|part| !part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
        })
}

fn describe_end(status: &Option<ExitStatus>) -> String {
    match status {
        Some(s) => s.to_string(),
        None => "how is not known".into(),
    }
}

/// What shows that a process does not run CUDA.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NoCudaReason {
    /// It does not map `libcuda.so.1`.
    LibcudaNotMapped,
    /// It maps another `libcuda.so.1` file than this process (another driver install, or a container's copy),
    /// so the driver's variables cannot be found in it.
    OtherLibcuda(PathBuf),
    /// Its driver is loaded but not initialised (`cuInit` not called: neither `/dev/nvidiactl` nor, under WSL,
    /// `/dev/dxg` is open).
    DriverNotInitialised,
}

impl std::fmt::Display for NoCudaReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            NoCudaReason::LibcudaNotMapped => write!(f, "it does not load libcuda.so.1"),
            NoCudaReason::OtherLibcuda(p) => write!(
                f,
                "it loads {}, another libcuda.so.1 file than this process does",
                p.display()
            ),
            NoCudaReason::DriverNotInitialised => {
                write!(
                    f,
                    "its CUDA driver is loaded but not initialised (no cuInit)"
                )
            }
        }
    }
}

/// One step of an attach or detach, as [`PtraceHandshake::progress`] reports it (and the `log` facade at debug
/// level).
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum AttachStep {
    /// The process found, before anything was changed.
    Target {
        /// Its id.
        pid: u32,
        /// Its command line.
        command: String,
        /// The `libcuda.so.1` it maps.
        libcuda: PathBuf,
    },
    /// The driver's variables in the process, as read (name, value).
    Variables(Vec<(&'static str, u64)>),
    /// Every thread of the process is stopped.
    Stopped {
        /// How many threads it has.
        threads: usize,
    },
    /// A driver variable in the process was written.
    Wrote {
        /// The variable.
        name: &'static str,
        /// Its value before.
        old: u64,
        /// The value written.
        new: u64,
    },
    /// `cudbgApiAttach()` ran in the process; `cudbgReportedDriverInternalErrorCode` after it.
    AttachCalled {
        /// The try (from 1).
        attempt: u32,
        /// The driver's code (0: none).
        internal_error: u64,
    },
    /// The driver's critical section was busy: the process runs for a moment before the next try.
    Retrying {
        /// The try that was refused.
        attempt: u32,
    },
    /// The driver's attach procedure was asked for through its file descriptor ([`AttachProtocol::Descriptor`]).
    AttachRequested {
        /// The descriptor, in the process.
        fd: i32,
    },
    /// The driver called `cudbgReportAttachProcedureFinished()`: its debugger back end runs.
    AttachProcedureFinished {
        /// The thread that called it.
        thread: u32,
        /// How long after the request.
        waited: Duration,
        /// `cudbgReportedDriverInternalErrorCode` then (0: none).
        internal_error: u64,
    },
    /// The driver's debugger back end was already started in the process: nothing to ask for.
    BackEndRunning,
    /// `cudbgResumeForAttachDetach` after the attach call: set when the driver reports its state first.
    ResumeFlag(u64),
    /// The process runs again.
    Resumed,
    /// Events the driver reported while the attach completed.
    Events(Vec<Event>),
    /// Attached.
    Attached {
        /// Time from the first check to here.
        elapsed: Duration,
    },
    /// `cudbgApiDetach()` ran in the process.
    DetachCalled {
        /// `cudbgReportedDriverInternalErrorCode` after it.
        internal_error: u64,
        /// `cudbgResumeForAttachDetach` after it.
        resume_flag: u64,
    },
    /// Detached: the process runs on without a debugger.
    Detached,
    /// A failed attach put the variables it had written back.
    Undone {
        /// How many.
        variables: usize,
    },
}

impl std::fmt::Display for AttachStep {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            AttachStep::Target {
                pid,
                command,
                libcuda,
            } => write!(f, "process {pid} ({command}) maps {}", libcuda.display()),
            AttachStep::Variables(vars) => {
                write!(f, "read")?;
                for (name, value) in vars {
                    write!(f, " {name}={value:#x}")?;
                }
                Ok(())
            }
            AttachStep::Stopped { threads } => write!(f, "stopped {threads} threads"),
            AttachStep::Wrote { name, old, new } => write!(f, "wrote {name}: {old:#x} -> {new:#x}"),
            AttachStep::AttachCalled {
                attempt,
                internal_error,
            } => write!(
                f,
                "called cudbgApiAttach() (try {attempt}): cudbgReportedDriverInternalErrorCode={internal_error:#x}"
            ),
            AttachStep::Retrying { attempt } => write!(
                f,
                "try {attempt}: CUDBG_ERROR_ATTACH_NOT_POSSIBLE, running the process {RETRY_DELAY:?} before the next"
            ),
            AttachStep::AttachRequested { fd } => {
                write!(
                    f,
                    "wrote a byte to {ATTACH_FD} (fd {fd}) to start the attach procedure"
                )
            }
            AttachStep::AttachProcedureFinished {
                thread,
                waited,
                internal_error,
            } => write!(
                f,
                "thread {thread} reached {ATTACH_FINISHED}() after {waited:?}: \
                 cudbgReportedDriverInternalErrorCode={internal_error:#x}"
            ),
            AttachStep::BackEndRunning => {
                write!(
                    f,
                    "the driver's debugger back end already runs (cudbgDebuggerInitialized)"
                )
            }
            AttachStep::ResumeFlag(v) => write!(f, "cudbgResumeForAttachDetach={v:#x}"),
            AttachStep::Resumed => write!(f, "resumed every thread"),
            AttachStep::Events(events) => {
                write!(f, "{} events during the attach:", events.len())?;
                for e in events {
                    write!(f, " {}", e.name())?;
                }
                Ok(())
            }
            AttachStep::Attached { elapsed } => write!(f, "attached in {elapsed:?}"),
            AttachStep::DetachCalled {
                internal_error,
                resume_flag,
            } => write!(
                f,
                "called cudbgApiDetach(): cudbgReportedDriverInternalErrorCode={internal_error:#x} \
                 cudbgResumeForAttachDetach={resume_flag:#x}"
            ),
            AttachStep::Detached => write!(f, "detached; the process runs on"),
            AttachStep::Undone { variables } => {
                write!(f, "attach failed: put {variables} variables back")
            }
        }
    }
}

/// Variables read for the report, in this order.
const REPORTED: &[&str] = &[
    "cudbgAttachHandlerAvailable",
    "cudbgDebuggerInitialized",
    "cudbgIpcFlag",
    "cudbgRpcEnabled",
    "cudbgApiClientPid",
    "cudbgApiClientRevision",
    "cudbgSessionId",
    "cudbgDebuggerCapabilities",
    "cudbgEnableLaunchBlocking",
    "cudbgResumeForAttachDetach",
    "cudbgReportedDriverInternalErrorCode",
    ATTACH_FD,
];

/// The one 64-bit variable among those the crate touches.
const WIDE: &str = "cudbgReportedDriverInternalErrorCode";

type Progress = Box<dyn FnMut(&AttachStep) + Send>;

/// The documented route (route 1): ptrace the running process and call the driver's attach entry point in it, as
/// cuda-gdb does. Used by [`DebugSession::attach`](super::DebugSession::attach).
///
/// The process stays traced while the session lasts: its signals are handed back to it at once, other tracers are
/// kept out, and its exit status (including death by a signal) is seen exactly. Detaching calls
/// `cudbgApiDetach()` in it and lets it run on; the session never kills a process it attached to. Only x86-64
/// processes can be attached to.
pub struct PtraceHandshake {
    tracer: Option<Tracer>,
    progress: Option<Progress>,
    call_timeout: Duration,
    complete_timeout: Duration,
    protocol: AttachProtocol,
    /// Variables written into the process and their values before, to put back if the attach fails.
    written: Vec<(&'static str, u64)>,
    connected: bool,
    pid: u32,
    /// The process [`Self::check`] last passed.
    checked: Option<u32>,
}

impl std::fmt::Debug for PtraceHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PtraceHandshake")
            .field("pid", &self.pid)
            .field("traced", &self.tracer.is_some())
            .field("connected", &self.connected)
            .field("call_timeout", &self.call_timeout)
            .field("complete_timeout", &self.complete_timeout)
            .field("protocol", &self.protocol)
            .finish_non_exhaustive()
    }
}

impl Default for PtraceHandshake {
    fn default() -> Self {
        Self::new()
    }
}

impl PtraceHandshake {
    /// The route with default timeouts (30 s for the attach call, 30 s for the driver's `ATTACH_COMPLETE`).
    pub fn new() -> Self {
        PtraceHandshake {
            tracer: None,
            progress: None,
            call_timeout: Duration::from_secs(30),
            complete_timeout: Duration::from_secs(30),
            protocol: AttachProtocol::Auto,
            written: Vec::new(),
            connected: false,
            pid: 0,
            checked: None,
        }
    }

    /// Calls `report` with each step of the attach and of the detach (variables read and written, calls made,
    /// events seen), for tools that show what attaching did.
    pub fn progress(mut self, report: impl FnMut(&AttachStep) + Send + 'static) -> Self {
        self.progress = Some(Box::new(report));
        self
    }

    /// How long `cudbgApiAttach()` and `cudbgApiDetach()` may take inside the process, and how long the driver's
    /// attach procedure may take with [`AttachProtocol::Descriptor`].
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// How the driver is asked to start its debugger back end. Default: [`AttachProtocol::Auto`].
    pub fn protocol(mut self, protocol: AttachProtocol) -> Self {
        self.protocol = protocol;
        self
    }

    /// How long to wait for the driver's `ATTACH_COMPLETE` once the process runs again.
    pub fn complete_timeout(mut self, timeout: Duration) -> Self {
        self.complete_timeout = timeout;
        self
    }

    fn step(&mut self, step: AttachStep) {
        log::debug!("attach {}: {step}", self.pid);
        if let Some(report) = self.progress.as_mut() {
            report(&step);
        }
    }

    fn lib() -> Result<&'static DebuggerLibrary, AttachError> {
        DebuggerLibrary::get()
            .ok_or_else(|| AttachError::Unsupported("libcuda.so.1 is not loaded".into()))
    }

    /// Where this process's libcuda variable `name` lies in the process.
    fn address(&self, name: &'static str) -> Result<u64, AttachError> {
        let local = client_variable(Self::lib()?, name).map_err(|_| {
            AttachError::Unsupported(format!("libcuda.so.1 does not export `{name}`"))
        })?;
        self.remote(local.cast_const().cast())
    }

    /// Where this process's libcuda function `name` lies in the process.
    fn function(&self, name: &'static str) -> Result<u64, AttachError> {
        let mut symbol = name.as_bytes().to_vec();
        symbol.push(0);
        // SAFETY: only the symbol's address is taken; the function is never called in this process.
        let local = unsafe { Self::lib()?.lib.get::<*const c_void>(&symbol) }
            .map(|s| *s)
            .map_err(|_| {
                AttachError::Unsupported(format!("libcuda.so.1 does not export `{name}`"))
            })?;
        self.remote(local.cast())
    }

    fn remote(&self, local: *const u32) -> Result<u64, AttachError> {
        let pid = self.pid;
        let ended = || {
            !is_running(pid)
                || self
                    .tracer
                    .as_ref()
                    .is_some_and(|t| t.watch().state() != ChildState::Running)
        };
        match memory::remote_address(pid, local) {
            Ok(Some(addr)) => Ok(addr),
            // A process that ended maps nothing any more. One killed during the attach has an empty memory map
            // for a moment before it is seen to have ended (seen on an H100): give it that moment.
            Ok(None) => {
                let deadline = Instant::now() + Duration::from_secs(1);
                while !ended() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(2));
                }
                if ended() {
                    Err(self.gone())
                } else {
                    Err(AttachError::NoCuda {
                        pid,
                        why: NoCudaReason::LibcudaNotMapped,
                    })
                }
            }
            Err(e) => Err(self.io_error("read its memory map", e)),
        }
    }

    fn io_error(&self, what: &str, e: std::io::Error) -> AttachError {
        let pid = self.pid;
        match e.raw_os_error() {
            Some(libc::EPERM | libc::EACCES) => AttachError::PermissionDenied {
                pid,
                detail: format!("cannot {what}: {e}"),
            },
            Some(libc::ESRCH | libc::ENOENT) => self.gone(),
            _ => AttachError::Trace {
                pid,
                detail: format!("cannot {what}: {e}"),
            },
        }
    }

    /// The error for a process that is no longer there, with its status when the tracer saw it end.
    fn gone(&self) -> AttachError {
        // The tracer publishes the end within a poll or two of it.
        let deadline = Instant::now() + Duration::from_secs(1);
        let status = loop {
            let status = self
                .tracer
                .as_ref()
                .and_then(|t| t.watch().state().raw_status());
            if status.is_some() || self.tracer.is_none() || Instant::now() >= deadline {
                break status;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        .map(std::os::unix::process::ExitStatusExt::from_raw);
        if self.tracer.is_some() || status.is_some() {
            AttachError::Exited {
                pid: self.pid,
                status,
            }
        } else {
            AttachError::NoSuchProcess(self.pid)
        }
    }

    fn read(&self, name: &'static str) -> Result<u64, AttachError> {
        let addr = self.address(name)?;
        let r = if name == WIDE {
            memory::read_u64(self.pid, addr)
        } else {
            memory::read_u32(self.pid, addr).map(u64::from)
        };
        r.map_err(|e| self.io_error(&format!("read {name}"), e))
    }

    fn write(&mut self, name: &'static str, value: u64) -> Result<(), AttachError> {
        let old = self.read(name)?;
        let addr = self.address(name)?;
        let r = if name == WIDE {
            memory::write_u64(self.pid, addr, value)
        } else {
            memory::write_u32(self.pid, addr, value as u32)
        };
        r.map_err(|e| self.io_error(&format!("write {name}"), e))?;
        if !self.written.iter().any(|(n, _)| *n == name) {
            self.written.push((name, old));
        }
        self.step(AttachStep::Wrote {
            name,
            old,
            new: value,
        });
        Ok(())
    }

    fn trace_error(&self, e: TraceError) -> AttachError {
        let pid = self.pid;
        match e {
            TraceError::Ended(_) => self.gone(),
            TraceError::Ptrace {
                call: "PTRACE_SEIZE",
                errno: errno @ nix::errno::Errno::EPERM,
                ..
            } => AttachError::PermissionDenied {
                pid,
                detail: format!("ptrace refused ({errno}): {}", why_not_traceable(pid)),
            },
            TraceError::Ptrace {
                errno: nix::errno::Errno::ESRCH,
                ..
            } => self.gone(),
            TraceError::Timeout { what, waited } => AttachError::Timeout { pid, what, waited },
            TraceError::Unsupported => AttachError::Unsupported(e.to_string()),
            other => AttachError::Trace {
                pid,
                detail: other.to_string(),
            },
        }
    }

    /// The checks that need neither the target's memory nor this process's driver library: the process exists,
    /// is another one and not a child, is not traced, and maps a `libcuda.so.1`. Returns that file.
    pub(crate) fn check_process(&mut self, pid: u32) -> Result<PathBuf, AttachError> {
        self.pid = pid;
        let me = std::process::id();
        if pid == me {
            return Err(AttachError::OwnProcess);
        }
        let target = Process::new(pid);
        if !is_running(pid) {
            return Err(AttachError::NoSuchProcess(pid));
        }
        if target.stat().is_ok_and(|s| s.parent == me) {
            return Err(AttachError::OwnChild(pid));
        }
        if let Ok(Some(tracer)) = target.tracer() {
            return Err(AttachError::AlreadyTraced { pid, tracer });
        }
        if !cfg!(target_arch = "x86_64") {
            return Err(AttachError::Unsupported(
                "calling the driver's attach entry point is implemented for x86-64 only".into(),
            ));
        }
        let maps = target
            .maps()
            .map_err(|e| self.io_error("read its memory map", e))?;
        libcuda_paths(&maps)
            .first()
            .cloned()
            .ok_or(AttachError::NoCuda {
                pid,
                why: NoCudaReason::LibcudaNotMapped,
            })
    }

    /// Checks everything that can be checked without changing the process (once per process: a session checks
    /// before it initialises the debugger API, and `connect` then skips it).
    pub(crate) fn check(&mut self, pid: u32) -> Result<(), AttachError> {
        if self.checked == Some(pid) {
            return Ok(());
        }
        let libcuda = self.check_process(pid)?;
        let me = std::process::id();
        // The variables are found by their offset in this process's libcuda: the file must be the same.
        if let Err(AttachError::NoCuda { .. }) = self.address("cudbgIpcFlag") {
            return Err(AttachError::NoCuda {
                pid,
                why: NoCudaReason::OtherLibcuda(libcuda),
            });
        }
        self.function("cudbgApiAttach")?;
        self.function("cudbgApiDetach")?;
        let open = Process::new(pid)
            .open_files()
            .map_err(|e| self.io_error("list its open files", e))?;
        if !open
            .iter()
            .any(|f| DRIVER_DEVICES.iter().any(|d| f == Path::new(d)))
        {
            return Err(AttachError::NoCuda {
                pid,
                why: NoCudaReason::DriverNotInitialised,
            });
        }
        let command = Process::new(pid).command_line_text().unwrap_or_default();
        self.step(AttachStep::Target {
            pid,
            command,
            libcuda,
        });
        let mut vars = Vec::new();
        for &name in REPORTED {
            match self.read(name) {
                Ok(v) => vars.push((name, v)),
                // A variable this driver does not have is left out of the report.
                Err(AttachError::Unsupported(_)) => {}
                Err(e) => return Err(e),
            }
        }
        let value = |n: &str| vars.iter().find(|(v, _)| *v == n).map_or(0, |(_, x)| *x);
        let flagged = value("cudbgDebuggerInitialized") != 0 || value("cudbgIpcFlag") != 0;
        let recorded = u32::try_from(value("cudbgApiClientPid")).unwrap_or(0);
        self.step(AttachStep::Variables(vars));
        // A program started under a debugger through the environment (route 2) names its client there.
        let env = |name| Process::new(pid).environment_variable(name).ok().flatten();
        let from_env = env("CUDBG_GET_SESSION_FROM_ENV").is_some_and(|v| v == "1");
        let env_client = env("CUDBG_APICLIENT_PID")
            .and_then(|v| v.to_str()?.trim().parse::<u32>().ok())
            .unwrap_or(0);
        let client = if recorded != 0 { recorded } else { env_client };
        // A client that is gone left its marks behind; one that is alive still debugs the process.
        let alive = client != 0 && client != me && Process::new(client).exists();
        if alive && (flagged || from_env) {
            return Err(AttachError::AlreadyDebugged { pid, client });
        }
        self.checked = Some(pid);
        Ok(())
    }

    /// Puts back what was written and lets the process go (before it was connected).
    fn undo(&mut self) {
        let written = std::mem::take(&mut self.written);
        let n = written.len();
        for (name, old) in written.into_iter().rev() {
            if let Ok(addr) = self.address(name) {
                let _ = if name == WIDE {
                    memory::write_u64(self.pid, addr, old)
                } else {
                    memory::write_u32(self.pid, addr, old as u32)
                };
            }
        }
        if n > 0 {
            self.step(AttachStep::Undone { variables: n });
        }
        if let Some(tracer) = self.tracer.take() {
            let _ = tracer.detach();
        }
    }

    /// Calls `cudbgApiAttach()` until the driver accepts (retrying while it answers "not possible").
    fn call_attach(&mut self) -> Result<(), AttachError> {
        let entry = self.function("cudbgApiAttach")?;
        let start = Instant::now();
        let mut attempt = 0;
        loop {
            attempt += 1;
            self.write(WIDE, 0)?;
            let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
            tracer
                .call(entry, [0; 6], self.call_timeout)
                .map_err(|e| self.trace_error(e))?;
            let code = self.read(WIDE)?;
            self.step(AttachStep::AttachCalled {
                attempt,
                internal_error: code,
            });
            match code {
                0 => return Ok(()),
                ATTACH_NOT_POSSIBLE if start.elapsed() < RETRY_FOR => {
                    self.step(AttachStep::Retrying { attempt });
                    let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
                    tracer.resume().map_err(|e| self.trace_error(e))?;
                    std::thread::sleep(RETRY_DELAY);
                    let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
                    tracer.stop().map_err(|e| self.trace_error(e))?;
                }
                ATTACH_NOT_POSSIBLE => {
                    return Err(AttachError::NotPossible {
                        pid: self.pid,
                        attempts: attempt,
                        waited: start.elapsed(),
                    });
                }
                code => {
                    return Err(AttachError::DriverRefused {
                        pid: self.pid,
                        code,
                    });
                }
            }
        }
    }

    /// The steps up to the attach call; on failure the caller undoes them.
    fn prepare_and_call(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), AttachError> {
        let (tracer, threads) = Tracer::attach(self.pid).map_err(|e| self.trace_error(e))?;
        link.watch_end(EndWatch(tracer.watch()));
        self.tracer = Some(tracer);
        self.step(AttachStep::Stopped { threads });
        let descriptor = self.attach_descriptor()?;
        self.write("cudbgApiClientPid", u64::from(info.debugger_pid))?;
        self.write("cudbgApiClientRevision", u64::from(info.revision))?;
        self.write("cudbgSessionId", u64::from(info.session_id))?;
        // cuda-gdb also sets `cudbgRpcEnabled`; this crate's debugger side is not an RPC client, and with the flag
        // set driver 580 accepted the attach but never reported its completion (seen on an H100). The session then
        // runs as a launched one does, whose debuggee has the flag at 0.
        self.write(
            "cudbgEnableLaunchBlocking",
            u64::from(info.blocking_launches),
        )?;
        self.write("cudbgDebuggerCapabilities", u64::from(info.capabilities))?;
        match descriptor {
            Some(fd) => self.request_attach(fd),
            None => self.call_attach(),
        }
    }

    /// The driver's attach-procedure descriptor, if the protocol is to use it (`None`: call `cudbgApiAttach()`).
    /// A driver that offers it but has not set it up yet (-1) is let run until it has, for up to [`RETRY_FOR`].
    fn attach_descriptor(&mut self) -> Result<Option<i32>, AttachError> {
        if self.protocol == AttachProtocol::InferiorCall {
            return Ok(None);
        }
        let fd = match self.read(ATTACH_FD) {
            Ok(v) => v as u32 as i32,
            Err(AttachError::Unsupported(_)) if self.protocol == AttachProtocol::Auto => {
                return Ok(None);
            }
            Err(e) => return Err(e),
        };
        if fd >= 0 {
            return Ok(Some(fd));
        }
        let start = Instant::now();
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.resume().map_err(|e| self.trace_error(e))?;
        let fd = loop {
            std::thread::sleep(Duration::from_millis(10));
            let fd = self.read(ATTACH_FD)? as u32 as i32;
            if fd >= 0 || start.elapsed() >= RETRY_FOR {
                break fd;
            }
        };
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.stop().map_err(|e| self.trace_error(e))?;
        if fd < 0 {
            return Err(AttachError::NoCuda {
                pid: self.pid,
                why: NoCudaReason::DriverNotInitialised,
            });
        }
        Ok(Some(fd))
    }

    /// Starts the driver's attach procedure through its descriptor `fd` and runs the process until the driver
    /// reports it finished.
    fn request_attach(&mut self, fd: i32) -> Result<(), AttachError> {
        let finished = self.function(ATTACH_FINISHED)?;
        if self.read("cudbgDebuggerInitialized")? != 0 {
            self.step(AttachStep::BackEndRunning);
            return Ok(());
        }
        self.write(WIDE, 0)?;
        let path = format!("/proc/{}/fd/{fd}", self.pid);
        let sent = std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &[0]));
        if let Err(e) = sent {
            return Err(match e.raw_os_error() {
                // A descriptor the process does not have, while the process itself is still there.
                Some(libc::ENOENT) if Process::new(self.pid).exists() => AttachError::Trace {
                    pid: self.pid,
                    detail: format!("cannot write to {path} ({ATTACH_FD}): {e}"),
                },
                _ => self.io_error(&format!("write to {path}"), e),
            });
        }
        self.step(AttachStep::AttachRequested { fd });
        let start = Instant::now();
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        let thread = tracer
            .run_to(finished, self.call_timeout)
            .map_err(|e| match e {
                TraceError::Timeout { .. } => AttachError::Timeout {
                    pid: self.pid,
                    what: "the driver's attach procedure (cudbgReportAttachProcedureFinished)",
                    waited: self.call_timeout,
                },
                e => self.trace_error(e),
            })?;
        let code = self.read(WIDE)?;
        self.step(AttachStep::AttachProcedureFinished {
            thread,
            waited: start.elapsed(),
            internal_error: code,
        });
        if code != 0 {
            return Err(AttachError::DriverRefused {
                pid: self.pid,
                code,
            });
        }
        Ok(())
    }

    /// The steps after the driver accepted: the process runs again and the driver reports its state.
    fn complete(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), AttachError> {
        // cuda-gdb writes the capabilities once more after the call.
        self.write("cudbgDebuggerCapabilities", u64::from(info.capabilities))?;
        let resume = self.read("cudbgResumeForAttachDetach")?;
        self.step(AttachStep::ResumeFlag(resume));
        let tracer = self.tracer.as_ref().ok_or_else(|| self.gone())?;
        tracer.resume().map_err(|e| self.trace_error(e))?;
        self.step(AttachStep::Resumed);
        if resume == 0 {
            // No state to report first: switch the driver's callbacks on directly.
            return self.write("cudbgIpcFlag", 1);
        }
        let seen = std::cell::RefCell::new(Vec::new());
        let found = link
            .await_event(
                &|e| {
                    seen.borrow_mut().push(*e);
                    matches!(e, Event::AttachComplete)
                },
                self.complete_timeout,
            )
            .map_err(|e| AttachError::Trace {
                pid: self.pid,
                detail: format!("while waiting for ATTACH_COMPLETE: {e}"),
            })?;
        self.step(AttachStep::Events(seen.into_inner()));
        if found {
            Ok(())
        } else if self
            .tracer
            .as_ref()
            .is_some_and(|t| t.watch().state() != ChildState::Running)
        {
            Err(self.gone())
        } else {
            Err(AttachError::Timeout {
                pid: self.pid,
                what: "the driver's ATTACH_COMPLETE event",
                waited: self.complete_timeout,
            })
        }
    }
}

impl Handshake for PtraceHandshake {
    fn attaches(&self) -> bool {
        true
    }

    fn connect(
        &mut self,
        link: &mut dyn DebuggeeLink,
        info: &ClientInfo,
    ) -> Result<(), crate::Error> {
        let start = Instant::now();
        self.check(link.pid())?;
        if let Err(e) = self.prepare_and_call(link, info) {
            self.undo();
            return Err(e.into());
        }
        // The process's side of the driver now talks to this session: from here a failure is undone by the
        // session's detach.
        self.connected = true;
        link.mark_connected();
        self.complete(link, info)?;
        self.step(AttachStep::Attached {
            elapsed: start.elapsed(),
        });
        Ok(())
    }

    fn disconnect(&mut self, link: &mut dyn DebuggeeLink) -> Result<(), crate::Error> {
        if !self.connected {
            return Ok(());
        }
        self.connected = false;
        let Some(tracer) = self.tracer.as_ref() else {
            return Ok(());
        };
        // The order is cuda-gdb's (`cuda_do_detach`); the session removed its breakpoints before this. Taken out
        // of order (the process resumed before the driver was asked to clean up, no `clearAttachState`), driver
        // 580 let the process run on but it died from SIGSEGV at its exit (seen on an H100).
        let state_cleared = link.clear_attach_state();
        match tracer.stop() {
            // Gone already: nothing to detach from.
            Err(TraceError::Ended(_)) => return Ok(()),
            r => r.map_err(|e| self.trace_error(e))?,
        }
        let entry = self.function("cudbgApiDetach")?;
        self.write(WIDE, 0)?;
        let called = self
            .tracer
            .as_ref()
            .ok_or_else(|| self.gone())?
            .call(entry, [0; 6], self.call_timeout)
            .map_err(|e| self.trace_error(e));
        let internal_error = self.read(WIDE).unwrap_or(u64::MAX);
        let resume_flag = self.read("cudbgResumeForAttachDetach").unwrap_or(u64::MAX);
        self.step(AttachStep::DetachCalled {
            internal_error,
            resume_flag,
        });
        let cleanup = resume_flag != 0 && resume_flag != u64::MAX;
        // While the process is still stopped: the driver's side is asked to clean up, then the process's side is
        // told that no debugger is there any more.
        let requested = if cleanup {
            link.request_cleanup_on_detach(u32::try_from(resume_flag).unwrap_or(u32::MAX))
        } else {
            Ok(())
        };
        let wrote = self
            .write("cudbgDebuggerCapabilities", 0)
            .and_then(|()| self.write("cudbgDebuggerInitialized", 0));
        // Whatever the call did, the process must run on; with a clean-up under way, until the driver reports
        // DETACH_COMPLETE.
        let resumed = self
            .tracer
            .as_ref()
            .ok_or_else(|| self.gone())
            .and_then(|t| t.resume().map_err(|e| self.trace_error(e)));
        let completed = if cleanup && requested.is_ok() {
            match link.await_event(
                &|e| matches!(e, Event::DetachComplete),
                self.complete_timeout,
            ) {
                Ok(true) => Ok(()),
                Ok(false) => Err(crate::Error::from(super::SessionError::Attach(
                    AttachError::Timeout {
                        pid: self.pid,
                        what: "the driver's DETACH_COMPLETE event",
                        waited: self.complete_timeout,
                    },
                ))),
                Err(e) => Err(e),
            }
        } else {
            Ok(())
        };
        let cleared = self.write("cudbgIpcFlag", 0);
        self.written.clear();
        state_cleared?;
        called?;
        requested?;
        wrote?;
        resumed?;
        completed?;
        cleared?;
        self.step(AttachStep::Detached);
        Ok(())
    }
}

impl Drop for PtraceHandshake {
    fn drop(&mut self) {
        if !self.connected && !self.written.is_empty() {
            self.undo();
        }
        // Dropping the tracer detaches from every thread.
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusals_before_any_change() {
        let mut h = PtraceHandshake::new();
        assert!(matches!(
            h.check(std::process::id()),
            Err(AttachError::OwnProcess)
        ));
        assert!(matches!(
            h.check(u32::MAX / 2),
            Err(AttachError::NoSuchProcess(_))
        ));
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        let r = h.check(child.id());
        assert!(
            matches!(r, Err(AttachError::OwnChild(p)) if p == child.id()),
            "{r:?}"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_process_without_cuda_is_refused_unchanged() {
        // A grandchild (not our child), which maps no libcuda.
        let mut shell = std::process::Command::new("sh")
            .args(["-c", "sleep 5 & echo $!; wait $!"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(shell.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        let pid: u32 = line.trim().parse().unwrap();
        let r = PtraceHandshake::new().check(pid);
        if cfg!(target_arch = "x86_64") {
            assert!(
                matches!(
                    r,
                    Err(AttachError::NoCuda {
                        why: NoCudaReason::LibcudaNotMapped,
                        ..
                    })
                ),
                "{r:?}"
            );
        }
        assert_eq!(Process::new(pid).tracer().unwrap(), None, "never traced");
        let _ = std::process::Command::new("kill")
            .arg(pid.to_string())
            .status();
        let _ = shell.wait();
    }

    #[test]
    fn finds_the_mapped_driver_library_by_name() {
        let maps = b"\
7f00-7f10 r--p 00000000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f10-7f20 r-xp 00010000 08:01 42 /usr/lib/x86_64-linux-gnu/libcuda.so.1
7f20-7f30 rw-p 00000000 00:00 0
7f30-7f40 r--p 00000000 08:01 43 /opt/other/libcuda.so.1.bak
7f40-7f50 r--p 00000000 08:01 44 /usr/lib/libcudart.so.13.0.96
7f50-7f60 r--p 00000000 08:01 45 /usr/lib/libcudadebugger.so.1
";
        let parse =
            |b: &[u8]| libcuda_paths(&crate::linux::procfs::parse_maps(b).collect::<Vec<_>>());
        assert_eq!(
            parse(maps),
            vec![PathBuf::from("/usr/lib/x86_64-linux-gnu/libcuda.so.1")]
        );
        // What a driver install's maps show: the file the libcuda.so.1 link resolves to.
        let installed =
            b"7f00-7f10 r--p 00000000 fd:01 7 /usr/local/nvidia/lib64/libcuda.so.580.159.04\n";
        assert_eq!(
            parse(installed),
            vec![PathBuf::from(
                "/usr/local/nvidia/lib64/libcuda.so.580.159.04"
            )]
        );
        assert!(parse(b"7f00-7f10 r--p 0 08:01 1 /lib/libc.so.6\n").is_empty());
        // A driver folder whose name holds a space.
        assert_eq!(
            parse(b"7f00-7f10 r--p 0 08:01 1 /opt/my driver/libcuda.so.1\n"),
            vec![PathBuf::from("/opt/my driver/libcuda.so.1")]
        );
    }

    #[test]
    fn protocols_have_names() {
        for name in AttachProtocol::NAMES {
            let p: AttachProtocol = name.parse().unwrap();
            assert_eq!(p.to_string(), name);
        }
        assert_eq!("call".parse(), Ok(AttachProtocol::InferiorCall));
        assert!(
            "fd".parse::<AttachProtocol>()
                .unwrap_err()
                .contains("auto, call, descriptor")
        );
        assert_eq!(AttachProtocol::default(), AttachProtocol::Auto);
    }

    #[test]
    fn steps_and_errors_read_well() {
        let s = AttachStep::Wrote {
            name: "cudbgIpcFlag",
            old: 0,
            new: 1,
        };
        assert_eq!(s.to_string(), "wrote cudbgIpcFlag: 0x0 -> 0x1");
        let e = AttachError::DriverRefused { pid: 7, code: 0x28 };
        assert!(e.to_string().contains("0x28"), "{e}");
        assert!(e.to_string().contains("ATTACH_NOT_POSSIBLE"), "{e}");
        let e = AttachError::NoCuda {
            pid: 7,
            why: NoCudaReason::DriverNotInitialised,
        };
        assert_eq!(
            e.to_string(),
            "process 7 does not use CUDA: its CUDA driver is loaded but not initialised (no cuInit)"
        );
    }
}
