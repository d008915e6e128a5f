//! Why an injection was refused or failed. Every refusal before the process was stopped leaves it untouched; a
//! failure after that leaves its registers, stack and signals as they were (the called functions' own effects
//! aside: a library that loaded stays loaded, and the error says so).

use std::path::PathBuf;
use std::time::Duration;

/// Why a library could not be loaded into a running process, or its entry point not called.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum InjectError {
    /// No such process (or it has already ended).
    #[error("no process {0}")]
    NoSuchProcess(u32),
    /// The process is stopped (`SIGSTOP`, `SIGTSTP`, a job-control stop): it would run none of the injected code
    /// until continued, so the injection would wait for nothing.
    #[error(
        "process {0} is stopped (state T): continue it with SIGCONT first (kill -CONT {0}), or attach when it \
         runs"
    )]
    Stopped(u32),
    /// The process has ended and waits for its parent to collect its exit status.
    #[error(
        "process {pid} has ended: it is a zombie, waiting for its parent (process {parent}) to collect its exit \
         status; nothing of it is left to attach to"
    )]
    Zombie {
        /// The process.
        pid: u32,
        /// Its parent.
        parent: u32,
    },
    /// A process cannot inject into itself: its own threads would be stopped.
    #[error(
        "cannot inject into this process itself (pid {0}); load the library with dlopen instead"
    )]
    OwnProcess(u32),
    /// The process does not map a library the caller requires (`libcuda.so`: not a CUDA process, or CUDA is not
    /// initialised yet).
    #[error("process {pid} does not map {library}{}", hint_for(library))]
    LibraryNotMapped {
        /// The process.
        pid: u32,
        /// The file-name prefix that was looked for.
        library: String,
    },
    /// Another process traces it (a debugger, strace, `gpu-tools where`, or another injection).
    #[error(
        "process {pid} is already traced by process {tracer} ({tracer_command}); detach that tracer first"
    )]
    AlreadyTraced {
        /// The process.
        pid: u32,
        /// Its tracer.
        tracer: u32,
        /// The tracer's command line, as far as it could be read.
        tracer_command: String,
    },
    /// The system refused to let this process trace it.
    #[error("not permitted to trace process {pid}: {detail}")]
    PermissionDenied {
        /// The process.
        pid: u32,
        /// What was refused, why it may have been, and the fix.
        detail: String,
    },
    /// No loader function to call: a static binary, or a C library this crate does not know.
    #[error(
        "process {pid} has no dynamic loader to call ({detail}): a statically linked program cannot load a \
         library at run time; start it under the tool instead"
    )]
    NoDynamicLoader {
        /// The process.
        pid: u32,
        /// What was looked for.
        detail: String,
    },
    /// The library could not be made visible inside the process's mount namespace (a container).
    #[error("cannot place {} where process {pid} can open it ({target}): {source}", library.display())]
    Placement {
        /// The process.
        pid: u32,
        /// The library.
        library: PathBuf,
        /// Where it was to go, as the process sees it.
        target: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// The library file cannot be read, or its entry symbol is not in it.
    #[error("{}: {detail}", library.display())]
    BadLibrary {
        /// The library.
        library: PathBuf,
        /// What is wrong.
        detail: String,
    },
    /// The process's `dlopen` returned NULL; its `dlerror` text.
    #[error("process {pid} could not load {}: {message}", library.display())]
    LoadFailed {
        /// The process.
        pid: u32,
        /// The library, as the process named it.
        library: PathBuf,
        /// `dlerror()` in the process.
        message: String,
    },
    /// No thread reached a moment where calling the loader cannot deadlock (inside `malloc` or the loader
    /// itself) within the time given.
    #[error(
        "process {pid}: no thread reached a safe point to call the loader within {waited:?} ({tries} looks; \
         last seen: {last})"
    )]
    NoSafePoint {
        /// The process.
        pid: u32,
        /// How long it was given.
        waited: Duration,
        /// How many times every thread was stopped and looked at.
        tries: u32,
        /// What the threads were doing at the last look.
        last: String,
    },
    /// A step did not finish in time (stopping the threads, or a called function).
    #[error("process {pid}: {what} did not finish within {waited:?}")]
    Timeout {
        /// The process.
        pid: u32,
        /// The step.
        what: String,
        /// How long it was given.
        waited: Duration,
    },
    /// The process ended during the injection.
    #[error("process {pid} ended during the injection")]
    Exited {
        /// The process.
        pid: u32,
    },
    /// A called function faulted; the thread was put back where it was.
    #[error(
        "process {pid}: {function} raised signal {signal} (the thread was put back where it was)"
    )]
    CallFaulted {
        /// The process.
        pid: u32,
        /// The function.
        function: String,
        /// The signal.
        signal: i32,
    },
    /// Injecting is implemented for x86-64 only.
    #[error("injecting into a process is not supported on this architecture")]
    Unsupported,
    /// Tracing the process failed in a way the other variants do not name.
    #[error("tracing process {pid}: {detail}")]
    Trace {
        /// The process.
        pid: u32,
        /// What failed.
        detail: String,
    },
}

fn hint_for(library: &str) -> &'static str {
    if library.starts_with("libcuda") {
        ": it is not a CUDA process, or it has not initialised CUDA yet"
    } else {
        ""
    }
}

/// The likely reasons this process may not trace `pid`, and the fixes (for the debugger's attach too).
pub(crate) fn why_not_traceable(pid: u32) -> String {
    use crate::linux::procfs::Process;
    let theirs = Process::new(pid).uid().ok();
    let ours = Process::current().uid().ok();
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .map(|s| s.trim().to_owned());
    let mut why = Vec::new();
    if let (Some(t), Some(o)) = (theirs, ours) {
        if t != o && !has_sys_ptrace() {
            why.push(format!(
                "it belongs to uid {t} and this process runs as uid {o} without CAP_SYS_PTRACE (run as that user, \
                 or as root, or with CAP_SYS_PTRACE: in a container, --cap-add=SYS_PTRACE)"
            ));
        }
    }
    match scope.as_deref() {
        Some("1") => why.push(
            "kernel.yama.ptrace_scope is 1: only descendants may be traced (run with CAP_SYS_PTRACE, e.g. sudo, \
             or set it to 0: sysctl kernel.yama.ptrace_scope=0)"
                .into(),
        ),
        Some("2") => why.push(
            "kernel.yama.ptrace_scope is 2: only processes with CAP_SYS_PTRACE may trace (run as root)".into(),
        ),
        Some("3") => why.push(
            "kernel.yama.ptrace_scope is 3: no process may trace another until the next boot".into(),
        ),
        _ => {}
    }
    if why.is_empty() {
        why.push(
            "it may not be traced (a set-uid program, a container without CAP_SYS_PTRACE, or a security module \
             forbids it)"
                .into(),
        );
    }
    why.join("; ")
}

/// Whether this process holds `CAP_SYS_PTRACE` in its effective set (`CapEff` of `/proc/self/status`).
pub(crate) fn has_sys_ptrace() -> bool {
    const CAP_SYS_PTRACE: u32 = 19;
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("CapEff:"))
                .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
        })
        .is_some_and(|caps| caps >> CAP_SYS_PTRACE & 1 == 1)
}

/// A refusal that needs no ptrace: another user's process without the rights, or a `ptrace_scope` that forbids
/// every attach (3), or every attach without `CAP_SYS_PTRACE` (2). Scope 1 is left to the attach itself: the target
/// may have named this process its tracer (`PR_SET_PTRACER`), which cannot be read.
pub(crate) fn permission_refusal(pid: u32) -> Option<String> {
    use crate::linux::procfs::Process;
    let cap = has_sys_ptrace();
    let scope = std::fs::read_to_string("/proc/sys/kernel/yama/ptrace_scope")
        .ok()
        .map(|s| s.trim().to_owned());
    match scope.as_deref() {
        Some("3") => return Some(why_not_traceable(pid)),
        Some("2") if !cap => return Some(why_not_traceable(pid)),
        _ => {}
    }
    let theirs = Process::new(pid).uid().ok()?;
    let ours = Process::current().uid().ok()?;
    (theirs != ours && !cap).then(|| why_not_traceable(pid))
}
