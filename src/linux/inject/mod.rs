//! Loading a shared library into a running process and calling a function of it, without restarting the process
//! and leaving it as it was: what `gpu-tools trace --pid` uses to start tracing a job that already runs.
//!
//! [`Injection::run`] checks the process first (it exists, is not this process, is not traced already, maps a
//! dynamic loader, maps a library the caller requires), then holds it under ptrace, waits for a thread at a safe
//! point (`safe_point`: never inside `malloc` or the loader), and on that thread calls the process's own `dlopen`
//! (found in its C library's dynamic symbols, read through `/proc/<pid>/root`, so a container's own C library is
//! used) and then the library's entry point, `int entry(const char *argument)`. Every other thread runs during
//! each call. Afterwards the calling thread's registers (vector state included), the stack bytes the call's data
//! overwrote and its pending signals are put back, and the process is detached. A failure on the way does the
//! same. What stays is the library itself, loaded (its entry point decides what else it starts).
//!
//! A process in another mount namespace (a container) cannot open a file of this one: the library is copied into
//! its `/tmp` through `/proc/<pid>/root` first ([`TargetFilesystem`] names paths both sides can use).
//!
//! ```no_run
//! use gpu_tools::linux::inject::Injection;
//!
//! let done = Injection::new(4242, "/opt/tool/libagent.so", "agent_start")
//!     .argument("socket=/tmp/agent.sock")
//!     .require_library("libcuda.so")
//!     .run()?;
//! println!("entry returned {} on thread {}", done.entry_result, done.thread);
//! # Ok::<(), gpu_tools::linux::inject::InjectError>(())
//! ```
//!
//! Requires permission to ptrace the process (the same user and `kernel.yama.ptrace_scope` 0, or
//! `CAP_SYS_PTRACE`), an x86-64 process, and glibc (2.34 and later export `dlopen` from `libc.so.6`; earlier ones
//! from `libdl.so.2` when the program maps it, else `__libc_dlopen_mode`) or musl.

mod error;
mod safe_point;
pub(crate) mod symbols;

use std::ffi::OsString;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use error::InjectError;
pub(crate) use error::why_not_traceable;
use safe_point::{Places, Verdict, classify};
use symbols::LoadedLibrary;

use crate::linux::memory;
use crate::linux::procfs::{Mapping, Process};
use crate::linux::ptrace::{Arg, CallSpec, TraceError, Tracer};

/// `RTLD_NOW`.
const RTLD_NOW: u64 = 2;
/// glibc's `__RTLD_DLOPEN`, which `__libc_dlopen_mode` callers add to the mode.
const RTLD_DLOPEN_FLAG: u64 = 0x8000_0000;
/// How much of a `dlerror` text is read.
const DLERROR_LIMIT: usize = 4096;

/// A library to load into process `pid` and the function of it to call. See the [module](self) documentation.
#[derive(Debug, Clone)]
pub struct Injection {
    pid: u32,
    library: PathBuf,
    entry: String,
    argument: Vec<u8>,
    require: Vec<String>,
    safe_point_timeout: Duration,
    call_timeout: Duration,
}

/// What an injection did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Injected {
    /// The process.
    pub pid: u32,
    /// The library's path as the process opened it.
    pub library: PathBuf,
    /// Whether the process had the library loaded already (an earlier injection): `dlopen` found it.
    pub already_loaded: bool,
    /// The entry point's return value.
    pub entry_result: i32,
    /// The thread that made the calls.
    pub thread: u32,
    /// How many times every thread was stopped and looked at before one was at a safe point.
    pub looks: u32,
    /// From the first check to the detach.
    pub elapsed: Duration,
}

impl Injection {
    /// Loads `library` (a path on this machine) into process `pid` and calls its exported function `entry`,
    /// `int entry(const char *argument)`.
    pub fn new(pid: u32, library: impl Into<PathBuf>, entry: impl Into<String>) -> Self {
        Injection {
            pid,
            library: library.into(),
            entry: entry.into(),
            argument: Vec::new(),
            require: Vec::new(),
            safe_point_timeout: Duration::from_secs(10),
            call_timeout: Duration::from_secs(30),
        }
    }

    /// The text the entry point receives (copied onto the calling thread's stack for the call: the entry point
    /// must copy what it keeps). A NUL in it ends it there.
    pub fn argument(mut self, argument: impl AsRef<[u8]>) -> Self {
        let bytes = argument.as_ref();
        let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
        self.argument = bytes[..end].to_vec();
        self
    }

    /// Refuses a process that maps no library whose file name starts with `prefix` (`"libcuda.so"`: a process
    /// that does not use CUDA), before anything is changed.
    pub fn require_library(mut self, prefix: impl Into<String>) -> Self {
        self.require.push(prefix.into());
        self
    }

    /// How long to wait for a thread at a safe point (default 10 s).
    pub fn safe_point_timeout(mut self, timeout: Duration) -> Self {
        self.safe_point_timeout = timeout;
        self
    }

    /// How long `dlopen` and the entry point may each run (default 30 s). Past it the calling thread is
    /// interrupted and put back, which can leave a lock the function took held: a last resort.
    pub fn call_timeout(mut self, timeout: Duration) -> Self {
        self.call_timeout = timeout;
        self
    }

    /// Checks the process, loads the library and calls its entry point, then detaches.
    pub fn run(self) -> Result<Injected, InjectError> {
        let started = Instant::now();
        let pid = self.pid;
        self.preflight()?;
        let fs = TargetFilesystem::for_process(pid)?;
        let library_in_target = fs.place(&self.library, pid)?;
        let host_library = fs.host_path(&library_in_target);
        // The entry point must exist before the process is touched.
        let bytes = std::fs::read(&host_library).map_err(|e| InjectError::BadLibrary {
            library: self.library.clone(),
            detail: format!("cannot read it: {e}"),
        })?;
        let unplaced = Mapping::file_at_zero();
        if LoadedLibrary::parse(&bytes, &[&unplaced])
            .map_err(|detail| InjectError::BadLibrary {
                library: self.library.clone(),
                detail,
            })?
            .function(&self.entry)
            .is_none()
        {
            return Err(InjectError::BadLibrary {
                library: self.library.clone(),
                detail: format!("exports no function `{}`", self.entry),
            });
        }
        let loader = Loader::find(pid, &fs)?;
        let already_loaded = self.find_mapped(&fs, &library_in_target)?.is_some();

        let (tracer, _threads) = Tracer::attach(pid).map_err(|e| self.trace_error(e, "attach"))?;
        let result = self.inject(&tracer, &loader, &fs, &library_in_target);
        // Whatever happened, the process runs on untraced.
        let detached = tracer.detach();
        let (thread, looks, entry_result) = result?;
        detached.map_err(|e| self.trace_error(e, "detach"))?;
        Ok(Injected {
            pid,
            library: library_in_target,
            already_loaded,
            entry_result,
            thread,
            looks,
            elapsed: started.elapsed(),
        })
    }

    /// The checks that need no ptrace: nothing is changed by them.
    fn preflight(&self) -> Result<(), InjectError> {
        let pid = self.pid;
        let process = Process::new(pid);
        if pid == std::process::id() {
            return Err(InjectError::OwnProcess(pid));
        }
        if pid == 0 || !process.exists() {
            return Err(InjectError::NoSuchProcess(pid));
        }
        match process.stat() {
            Ok(s) if s.state == 'Z' => {
                return Err(InjectError::Zombie {
                    pid,
                    parent: s.parent,
                });
            }
            Ok(s) if s.has_ended() => return Err(InjectError::NoSuchProcess(pid)),
            // Stopped by a signal ('T'); 't' (stopped by a tracer) is refused below, naming the tracer.
            Ok(s) if s.state == 'T' => return Err(InjectError::Stopped(pid)),
            _ => {}
        }
        // A thread id is not a process: the caller means the process it belongs to.
        if process.thread_group().is_ok_and(|g| g != pid) {
            return Err(InjectError::NoSuchProcess(pid));
        }
        if let Some(tracer) = process.tracer().map_err(|e| self.io_error(e))? {
            return Err(InjectError::AlreadyTraced {
                pid,
                tracer,
                tracer_command: Process::new(tracer)
                    .command_line_text()
                    .unwrap_or_else(|_| "?".into()),
            });
        }
        if let Some(detail) = error::permission_refusal(pid) {
            return Err(InjectError::PermissionDenied { pid, detail });
        }
        let maps = process.maps().map_err(|e| self.io_error(e))?;
        if maps.is_empty() {
            // A kernel thread, or a process that is exiting.
            return Err(InjectError::NoSuchProcess(pid));
        }
        // A static binary maps no C library: say that, rather than that it lacks a required library.
        let has_loader = maps.iter().any(|m| {
            m.file_name().is_some_and(|n| {
                let n = n.to_string_lossy();
                ["libc.so", "libc-", "ld-musl"]
                    .iter()
                    .any(|p| n.starts_with(p))
            })
        });
        if !has_loader {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            return Err(InjectError::NoDynamicLoader {
                pid,
                detail: format!("{} maps no C library", exe.display()),
            });
        }
        for prefix in &self.require {
            let mapped = maps.iter().any(|m| {
                m.file_name()
                    .is_some_and(|n| n.as_bytes().starts_with(prefix.as_bytes()))
            });
            if !mapped {
                return Err(InjectError::LibraryNotMapped {
                    pid,
                    library: prefix.clone(),
                });
            }
        }
        Ok(())
    }

    /// Under ptrace: waits for a safe point, loads the library, calls the entry point. Returns the thread, the
    /// looks taken and the entry's result.
    fn inject(
        &self,
        tracer: &Tracer,
        loader: &Loader,
        fs: &TargetFilesystem,
        library: &Path,
    ) -> Result<(u32, u32, i32), InjectError> {
        let (thread, looks) = self.safe_thread(tracer, loader)?;
        let mut path = library.as_os_str().as_bytes().to_vec();
        path.push(0);
        let (entry, mode) = match loader.dlopen {
            DlopenKind::Dlopen(addr) => (addr, RTLD_NOW),
            DlopenKind::LibcDlopenMode(addr) => (addr, RTLD_NOW | RTLD_DLOPEN_FLAG),
        };
        let handle = tracer
            .call_with(CallSpec {
                entry,
                args: vec![Arg::Data(0), Arg::Int(mode)],
                data: path,
                thread: Some(thread),
                timeout: self.call_timeout,
            })
            .map_err(|e| self.trace_error(e, "dlopen"))?;
        if handle == 0 {
            return Err(InjectError::LoadFailed {
                pid: self.pid,
                library: library.to_path_buf(),
                message: self.dlerror(tracer, loader, thread),
            });
        }
        let mapped = self
            .find_mapped(fs, library)?
            .ok_or_else(|| InjectError::Trace {
                pid: self.pid,
                detail: format!(
                    "dlopen returned a handle but {} is not in the memory map",
                    library.display()
                ),
            })?;
        let entry = mapped
            .function(&self.entry)
            .ok_or_else(|| InjectError::BadLibrary {
                library: self.library.clone(),
                detail: format!("exports no function `{}`", self.entry),
            })?;
        let mut argument = self.argument.clone();
        argument.push(0);
        let result = tracer
            .call_with(CallSpec {
                entry,
                args: vec![Arg::Data(0)],
                data: argument,
                thread: Some(thread),
                timeout: self.call_timeout,
            })
            .map_err(|e| self.trace_error(e, &self.entry))?;
        // The entry returns a C int: the low 32 bits of rax.
        Ok((thread, looks, result as u32 as i32))
    }

    /// Stops and looks at every thread until one is at a safe point; between looks the process runs a moment.
    fn safe_thread(&self, tracer: &Tracer, loader: &Loader) -> Result<(u32, u32), InjectError> {
        let deadline = Instant::now() + self.safe_point_timeout;
        let mut pause = Duration::from_millis(1);
        let mut looks = 0;
        loop {
            looks += 1;
            let threads = tracer
                .threads()
                .map_err(|e| self.trace_error(e, "stopping every thread"))?;
            let maps = Process::new(self.pid)
                .maps()
                .map_err(|e| self.io_error(e))?;
            let places = Places {
                maps: &maps,
                libc: (&loader.libc_mapping, &loader.libc),
            };
            let mut seen = Vec::new();
            for t in &threads {
                match classify(t, &places) {
                    Verdict::Safe => {
                        log::debug!(
                            "inject {}: thread {} at pc {:#x} is at a safe point (look {looks})",
                            self.pid,
                            t.tid,
                            t.pc
                        );
                        return Ok((t.tid, looks));
                    }
                    Verdict::NotNow(why) => seen.push(format!("thread {}: {why}", t.tid)),
                }
            }
            if Instant::now() >= deadline {
                return Err(InjectError::NoSafePoint {
                    pid: self.pid,
                    waited: self.safe_point_timeout,
                    tries: looks,
                    last: seen.join("; "),
                });
            }
            tracer
                .resume()
                .map_err(|e| self.trace_error(e, "resuming"))?;
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
            tracer
                .stop()
                .map_err(|e| self.trace_error(e, "stopping every thread"))?;
        }
    }

    /// The process's `dlerror()` text after a failed `dlopen`.
    fn dlerror(&self, tracer: &Tracer, loader: &Loader, thread: u32) -> String {
        let Some(dlerror) = loader.dlerror else {
            return "dlopen returned NULL (the process has no dlerror to say why)".into();
        };
        let text = tracer.call_with(CallSpec {
            entry: dlerror,
            args: Vec::new(),
            data: Vec::new(),
            thread: Some(thread),
            timeout: self.call_timeout,
        });
        match text {
            Ok(0) => "dlopen returned NULL and dlerror nothing".into(),
            Ok(addr) => match memory::read_c_string(self.pid, addr, DLERROR_LIMIT) {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) => format!("dlopen returned NULL; its dlerror text could not be read: {e}"),
            },
            Err(e) => format!("dlopen returned NULL; dlerror failed: {e}"),
        }
    }

    /// The library's symbols as the process maps it, if it does.
    fn find_mapped(
        &self,
        fs: &TargetFilesystem,
        library: &Path,
    ) -> Result<Option<LoadedLibrary>, InjectError> {
        let maps = Process::new(self.pid)
            .maps()
            .map_err(|e| self.io_error(e))?;
        let host = fs.host_path(library);
        let Ok(meta) = std::fs::metadata(&host) else {
            return Ok(None);
        };
        // The path the process opened, or (through a link, or as the kernel names an overlay's file) the same
        // inode under the same file name.
        let ours: Vec<&Mapping> = maps
            .iter()
            .filter(|m| {
                m.path() == Some(library)
                    || (m.inode == meta.ino() && m.file_name() == library.file_name())
            })
            .collect();
        if ours.is_empty() {
            return Ok(None);
        }
        LoadedLibrary::read(&host, &ours)
            .map(Some)
            .map_err(|detail| InjectError::BadLibrary {
                library: self.library.clone(),
                detail,
            })
    }

    fn io_error(&self, e: std::io::Error) -> InjectError {
        match e.kind() {
            std::io::ErrorKind::NotFound => InjectError::NoSuchProcess(self.pid),
            std::io::ErrorKind::PermissionDenied => InjectError::PermissionDenied {
                pid: self.pid,
                detail: format!("{e}; {}", why_not_traceable(self.pid)),
            },
            _ => InjectError::Trace {
                pid: self.pid,
                detail: e.to_string(),
            },
        }
    }

    fn trace_error(&self, e: TraceError, step: &str) -> InjectError {
        let pid = self.pid;
        match e {
            TraceError::Ptrace {
                errno: nix::errno::Errno::EPERM,
                ..
            } => InjectError::PermissionDenied {
                pid,
                detail: format!("{step}: {e}; {}", why_not_traceable(pid)),
            },
            TraceError::Ptrace {
                errno: nix::errno::Errno::ESRCH,
                ..
            } => InjectError::Exited { pid },
            TraceError::Ended(_) => InjectError::Exited { pid },
            TraceError::Timeout { what, waited } => InjectError::Timeout {
                pid,
                what: format!("{step} ({what})"),
                waited,
            },
            TraceError::CallFaulted { signal, .. } => InjectError::CallFaulted {
                pid,
                function: step.to_owned(),
                signal,
            },
            TraceError::Unsupported => InjectError::Unsupported,
            other => InjectError::Trace {
                pid,
                detail: format!("{step}: {other}"),
            },
        }
    }
}

/// Which loader function the process offers.
#[derive(Debug, Clone, Copy)]
enum DlopenKind {
    /// `dlopen(path, mode)`.
    Dlopen(u64),
    /// glibc's private `__libc_dlopen_mode(path, mode | __RTLD_DLOPEN)` (glibc before 2.34 without libdl).
    LibcDlopenMode(u64),
}

/// The process's loader functions.
/// How the C library's file is named: glibc's, an older glibc's, musl's.
pub(crate) const C_LIBRARY: [&str; 3] = ["libc.so", "libc-", "ld-musl"];

/// The first mapping in `maps` of a file whose name starts with one of `prefixes`.
pub(crate) fn mapping_named<'m>(maps: &'m [Mapping], prefixes: &[&str]) -> Option<&'m Mapping> {
    maps.iter().find(|m| {
        m.file_name().is_some_and(|n| {
            let n = n.to_string_lossy();
            prefixes.iter().any(|p| n.starts_with(p))
        })
    })
}

struct Loader {
    dlopen: DlopenKind,
    dlerror: Option<u64>,
    libc_mapping: Mapping,
    libc: LoadedLibrary,
}

impl Loader {
    fn find(pid: u32, fs: &TargetFilesystem) -> Result<Loader, InjectError> {
        let maps = Process::new(pid).maps().map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => InjectError::NoSuchProcess(pid),
            _ => InjectError::PermissionDenied {
                pid,
                detail: format!("{e}; {}", why_not_traceable(pid)),
            },
        })?;
        let named = |prefixes: &[&str]| mapping_named(&maps, prefixes);
        let read = |m: &Mapping| -> Result<LoadedLibrary, InjectError> {
            let same: Vec<&Mapping> = maps.iter().filter(|x| x.same_file(m)).collect();
            let path = m.path().unwrap_or(Path::new("/"));
            LoadedLibrary::read(&fs.host_path(path), &same).map_err(|detail| {
                InjectError::NoDynamicLoader {
                    pid,
                    detail: format!("its C library {}: {detail}", path.display()),
                }
            })
        };
        let Some(libc_map) = named(&C_LIBRARY) else {
            let exe = std::fs::read_link(format!("/proc/{pid}/exe")).unwrap_or_default();
            return Err(InjectError::NoDynamicLoader {
                pid,
                detail: format!("{} maps no C library", exe.display()),
            });
        };
        let libc = read(libc_map)?;
        let libdl = match named(&["libdl.so", "libdl-"]) {
            Some(m) => Some(read(m)?),
            None => None,
        };
        let from_libdl = |name: &str| libdl.as_ref().and_then(|l| l.function(name));
        let dlopen = if let Some(a) = libc.function("dlopen").or_else(|| from_libdl("dlopen")) {
            DlopenKind::Dlopen(a)
        } else if let Some(a) = libc.function("__libc_dlopen_mode") {
            DlopenKind::LibcDlopenMode(a)
        } else {
            return Err(InjectError::NoDynamicLoader {
                pid,
                detail: format!(
                    "neither dlopen nor __libc_dlopen_mode in {}",
                    libc_map.path().unwrap_or(Path::new("?")).display()
                ),
            });
        };
        let dlerror = libc.function("dlerror").or_else(|| from_libdl("dlerror"));
        Ok(Loader {
            dlopen,
            dlerror,
            libc_mapping: libc_map.clone(),
            libc,
        })
    }
}

/// Paths as a process sees them, and as this process reaches the same files: the same when both share a mount
/// namespace, else through `/proc/<pid>/root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TargetFilesystem {
    /// `/proc/<pid>/root` when the process has a mount namespace of its own.
    root: Option<PathBuf>,
}

impl TargetFilesystem {
    /// Compares the process's mount namespace with this one's (reading it needs the right to trace the process).
    pub fn for_process(pid: u32) -> Result<Self, InjectError> {
        let fail = |e: std::io::Error| match e.kind() {
            std::io::ErrorKind::NotFound => InjectError::NoSuchProcess(pid),
            std::io::ErrorKind::PermissionDenied => InjectError::PermissionDenied {
                pid,
                detail: why_not_traceable(pid),
            },
            _ => InjectError::Trace {
                pid,
                detail: format!("/proc/{pid}/ns/mnt: {e}"),
            },
        };
        let ours = std::fs::read_link("/proc/self/ns/mnt").map_err(|e| InjectError::Trace {
            pid,
            detail: format!("/proc/self/ns/mnt: {e}"),
        })?;
        let theirs = std::fs::read_link(format!("/proc/{pid}/ns/mnt")).map_err(fail)?;
        Ok(TargetFilesystem {
            root: (ours != theirs).then(|| PathBuf::from(format!("/proc/{pid}/root"))),
        })
    }

    /// Whether the process sees this process's files at the same paths.
    pub fn is_shared(&self) -> bool {
        self.root.is_none()
    }

    /// Where this process reaches the file the process names `path` (absolute).
    pub fn host_path(&self, path: &Path) -> PathBuf {
        match &self.root {
            None => path.to_path_buf(),
            Some(root) => root.join(path.strip_prefix("/").unwrap_or(path)),
        }
    }

    /// The path under which the process can open `library`: its own path when the namespace is shared, else a
    /// copy in the process's `/tmp`, named by the library's contents (a second injection reuses it).
    fn place(&self, library: &Path, pid: u32) -> Result<PathBuf, InjectError> {
        let absolute = std::fs::canonicalize(library).map_err(|e| InjectError::BadLibrary {
            library: library.to_path_buf(),
            detail: format!("cannot open it: {e}"),
        })?;
        if self.is_shared() {
            return Ok(absolute);
        }
        let bytes = std::fs::read(&absolute).map_err(|e| InjectError::BadLibrary {
            library: library.to_path_buf(),
            detail: format!("cannot read it: {e}"),
        })?;
        let stem = absolute
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "library".into());
        let mut name = OsString::from(format!("{stem}-{:016x}.so", content_hash(&bytes)));
        name = OsString::from(name.to_string_lossy().replace('/', "_"));
        let target = Path::new("/tmp").join(name);
        let host = self.host_path(&target);
        let fail = |source| InjectError::Placement {
            pid,
            library: library.to_path_buf(),
            target: target.clone(),
            source,
        };
        if std::fs::metadata(&host).is_ok_and(|m| m.len() == bytes.len() as u64) {
            return Ok(target);
        }
        // Written under a temporary name, then renamed: the process never sees half a library.
        let partial = host.with_extension(format!("partial{}", std::process::id()));
        std::fs::write(&partial, &bytes).map_err(fail)?;
        std::fs::rename(&partial, &host).map_err(|e| {
            let _ = std::fs::remove_file(&partial);
            fail(e)
        })?;
        Ok(target)
    }
}

/// FNV-1a over the bytes: a name for a copy, not a security check.
fn content_hash(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}
