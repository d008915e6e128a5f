//! Everything the tool tells an injected library, defined once: one typed value ([`Settings`]), its encoding into
//! a launched program's environment ([`Settings::environment`]) or into an attach argument
//! ([`Settings::attach_argument`]), and its decoding by the library ([`Settings::from_env`],
//! [`Settings::from_attach_argument`]), with the defaults and the checks of each value. Both injection libraries
//! read it (`gpu-tools-inject` all of it; `gpu-tools-inject-rocm` the destination, the kinds and the buffer size),
//! and every launcher and attach of the tool writes it (`gpu-tools trace`, `trace --pid`, `gpu-tools profile`,
//! `profile --pid`).
//!
//! Adding a setting is a field here, its variable in [`env`](mod@crate::env), a line in [`Settings::variables`] and
//! one in the decoder; the round-trip test over every field fails until both lines are there.
//!
//! ```
//! use gpu_tools_injection::env::{GraphMode, TraceKind};
//! use gpu_tools_injection::settings::{Destination, Library, Settings};
//!
//! let settings = Settings {
//!     kinds: vec![TraceKind::Kernel, TraceKind::Nvtx],
//!     graph: GraphMode::Node,
//!     ..Settings::new(Destination::Socket("/tmp/t/s".into()))
//! };
//! let mut cmd = std::process::Command::new("python3");
//! for var in Settings::CLEARED {
//!     cmd.env_remove(var);
//! }
//! cmd.envs(settings.environment(Library::Cuda("/opt/gpu-tools/libgpu_tools_inject.so".as_ref())));
//! // What the library reads back, in the program:
//! let vars: Vec<(&str, std::ffi::OsString)> = settings.environment(Library::Cuda("/l.so".as_ref()));
//! let back = Settings::from_lookup(|k| vars.iter().find(|(n, _)| *n == k).map(|(_, v)| v.clone()));
//! assert_eq!(back, Ok(settings));
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::env::{self, ApiMode, GraphMode, Stage, TraceKind};

pub mod profile_request;

pub use profile_request::ProfileRequest;

/// Where the injection library sends its stream ([`env::SOCKET`] or [`env::FILE`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Destination {
    /// A Unix socket the tracer listens on.
    Socket(PathBuf),
    /// A file per process (`%p`: process id, `%h`: host name, `%r`: rank).
    File(PathBuf),
}

/// The library a launched program loads, and so the variable that names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Library<'a> {
    /// The CUDA injection library ([`env::CUDA_INJECTION`]; [`env::NVTX_INJECTION`] too when NVTX is recorded).
    Cuda(&'a Path),
    /// The rocprofiler-sdk tool library ([`env::ROCM_TOOL_LIBRARIES`]).
    Rocm(&'a Path),
}

/// Bytes of each vendor record buffer unless told ([`env::BUFFER_SIZE`]).
pub const DEFAULT_BUFFER_SIZE: usize = 4 << 20;
/// The smallest buffer accepted: the vendor's smallest useful buffer holds a few records.
pub const MIN_BUFFER_SIZE: usize = 1 << 10;
/// The largest buffer accepted: 1 GiB per buffer is far above any sensible value; above it the value is a mistake.
pub const MAX_BUFFER_SIZE: usize = 1 << 30;
/// Vendor buffers in use at once unless told ([`env::MAX_BUFFERS`]).
pub const DEFAULT_MAX_BUFFERS: usize = 64;
/// The period of the flush of completed buffers unless told ([`env::FLUSH_MS`]).
pub const DEFAULT_FLUSH_INTERVAL: Duration = Duration::from_millis(200);

/// What an injected library does in a traced process: every setting the tool gives it. [`Settings::new`] holds
/// the library's defaults, which are also what it takes for a variable that is not set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// Where records go.
    pub destination: Destination,
    /// Record kinds to collect, each once ([`env::KINDS`]). With [`TraceKind::Nvtx`], a launched program's NVTX
    /// calls are routed to the library ([`env::NVTX_INJECTION`]); a library named there by hand records NVTX too.
    pub kinds: Vec<TraceKind>,
    /// How CUDA graphs are traced ([`env::CUDA_GRAPH`]).
    pub graph: GraphMode,
    /// Which API calls are recorded ([`env::API`]).
    pub api: ApiMode,
    /// API functions never recorded ([`env::API_SKIP`]).
    pub api_skip: Vec<String>,
    /// Bytes of each vendor buffer ([`env::BUFFER_SIZE`]), from [`MIN_BUFFER_SIZE`] to [`MAX_BUFFER_SIZE`].
    pub buffer_size: usize,
    /// Most vendor buffers at once, at least 1 ([`env::MAX_BUFFERS`]).
    pub max_buffers: usize,
    /// The period of the flush of completed buffers, carried in whole milliseconds ([`env::FLUSH_MS`]; a part of
    /// one is rounded up, to 1 ms at least); `None`: no periodic flush (records then arrive at exit only).
    pub flush_interval: Option<Duration>,
    /// Level of the library's diagnostics on the program's stderr ([`env::LOG`]); `None`: silent.
    pub log: Option<log::LevelFilter>,
    /// How far records travel, for measuring what each step costs ([`env::STAGE`]).
    pub stage: Stage,
    /// Flush and end the stream on fatal signals ([`env::SIGNALS`]). A launched program's only: an attached library
    /// changes none of the program's signal handlers, whatever this says.
    pub signals: bool,
    /// Attached: leave a flight recorder in the process after the window ([`env::FLIGHT_RECORDER`]), which
    /// `gpu-tools where` reads where the driver refuses the debugger after CUPTI ran. A launched library keeps none.
    pub flight_recorder: bool,
    /// Per-kernel metrics or PC sampling instead of (launched: beside) a trace (`GPU_TOOLS_PROFILE_*`).
    pub profile: Option<ProfileRequest>,
    /// The CUPTI to load where the process maps none ([`env::CUPTI_LIBRARY`], which the library's loader also
    /// reads in a launched program).
    pub cupti: Option<PathBuf>,
    /// Attached: the process as the tool sees it ([`env::PIDS`]), which names it in the stream; `None`: as it sees
    /// itself.
    pub seen_as: Option<SeenAs>,
}

/// A process's pid and its parent's in the tool's PID namespace. A process in a PID namespace of its own (a
/// container's) has other numbers there (pid 1, often, in each container), under which the streams of two
/// containers could not be told apart, nor matched to the processes the tool attached to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeenAs {
    /// The process's pid.
    pub pid: u32,
    /// Its parent's (0: not known).
    pub parent: u32,
}

impl SeenAs {
    /// `PID,PARENT`.
    fn value(self) -> String {
        format!("{},{}", self.pid, self.parent)
    }

    fn parse(v: &str) -> Result<SeenAs, &'static str> {
        let reason = "not two whole numbers PID,PARENT with a PID of at least 1";
        let (pid, parent) = v.trim().split_once(',').ok_or(reason)?;
        match (pid.trim().parse::<u32>(), parent.trim().parse::<u32>()) {
            (Ok(pid), Ok(parent)) if pid >= 1 => Ok(SeenAs { pid, parent }),
            _ => Err(reason),
        }
    }
}

/// A variable holds a value the library cannot use, or a value an encoding cannot carry.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{var}={value:?}: {reason}")]
pub struct SettingError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

impl SettingError {
    pub(crate) fn new(var: &'static str, value: &str, reason: impl Into<String>) -> SettingError {
        SettingError {
            var,
            value: value.to_string(),
            reason: reason.into(),
        }
    }
}

impl Settings {
    /// Every variable the settings are written as, in the order [`Settings::variables`] writes them.
    pub const VARIABLES: [&'static str; 21] = [
        env::SOCKET,
        env::FILE,
        env::KINDS,
        env::CUDA_GRAPH,
        env::API,
        env::API_SKIP,
        env::BUFFER_SIZE,
        env::MAX_BUFFERS,
        env::FLUSH_MS,
        env::STAGE,
        env::SIGNALS,
        env::FLIGHT_RECORDER,
        env::LOG,
        env::PROFILE_METRICS,
        env::PROFILE_PC_SAMPLING,
        env::PROFILE_MAX_RANGES,
        env::PROFILE_LAUNCHES_PER_KERNEL,
        env::PROFILE_GRAPH,
        env::PROFILE_PRIMER,
        env::CUPTI_LIBRARY,
        env::PIDS,
    ];

    /// Variables a launcher removes from the program's environment before setting the settings' own, so that the
    /// tracer's own environment does not leak into the program's configuration: every variable of the settings
    /// and the loaders', but [`env::LOG`] and [`env::CUPTI_LIBRARY`], which reach a launched program as the user
    /// set them where the settings leave them unset (diagnostics asked for on the tool's command line,
    /// `GPU_TOOLS_TRACE_LOG=debug gpu-tools profile ...`; the CUPTI the user named, which the library's loader reads).
    pub const CLEARED: [&'static str; 22] = [
        env::SOCKET,
        env::FILE,
        env::KINDS,
        env::CUDA_GRAPH,
        env::API,
        env::API_SKIP,
        env::BUFFER_SIZE,
        env::MAX_BUFFERS,
        env::FLUSH_MS,
        env::STAGE,
        env::SIGNALS,
        env::FLIGHT_RECORDER,
        env::PROFILE_METRICS,
        env::PROFILE_PC_SAMPLING,
        env::PROFILE_MAX_RANGES,
        env::PROFILE_LAUNCHES_PER_KERNEL,
        env::PROFILE_GRAPH,
        env::PROFILE_PRIMER,
        env::PIDS,
        env::CUDA_INJECTION,
        env::NVTX_INJECTION,
        env::ROCM_TOOL_LIBRARIES,
    ];

    /// The library's defaults, sending to `destination`: the default kinds ([`TraceKind::DEFAULT`]), graphs traced
    /// as one record per launch, every API call, 4 MiB buffers, 64 at once, a flush every 200 ms, no log, every
    /// stage, fatal signals flushed, no profile, CUPTI as the process finds it.
    pub fn new(destination: Destination) -> Settings {
        Settings {
            destination,
            kinds: TraceKind::DEFAULT.to_vec(),
            graph: GraphMode::default(),
            api: ApiMode::default(),
            api_skip: Vec::new(),
            buffer_size: DEFAULT_BUFFER_SIZE,
            max_buffers: DEFAULT_MAX_BUFFERS,
            flush_interval: Some(DEFAULT_FLUSH_INTERVAL),
            log: None,
            stage: Stage::default(),
            signals: true,
            flight_recorder: true,
            profile: None,
            cupti: None,
            seen_as: None,
        }
    }

    /// Whether NVTX markers and ranges are recorded (the [`TraceKind::Nvtx`] kind).
    pub fn nvtx(&self) -> bool {
        self.kinds.contains(&TraceKind::Nvtx)
    }

    /// The same settings, sending to `destination` (an attach names each process's socket).
    pub fn with_destination(self, destination: Destination) -> Settings {
        Settings {
            destination,
            ..self
        }
    }

    /// Every setting as its variable and value, in the order of [`Settings::VARIABLES`]; those that are unset
    /// ([`Settings::log`], [`Settings::profile`], [`Settings::cupti`], [`Settings::seen_as`] when `None`) are left
    /// out.
    pub fn variables(&self) -> Vec<(&'static str, OsString)> {
        let mut v: Vec<(&'static str, OsString)> = match &self.destination {
            Destination::Socket(p) => vec![(env::SOCKET, p.clone().into_os_string())],
            Destination::File(p) => vec![(env::FILE, p.clone().into_os_string())],
        };
        let text = |s: String| OsString::from(s);
        v.push((env::KINDS, text(TraceKind::list_value(&self.kinds))));
        v.push((env::CUDA_GRAPH, self.graph.name().into()));
        v.push((env::API, self.api.name().into()));
        v.push((env::API_SKIP, text(self.api_skip.join(","))));
        v.push((env::BUFFER_SIZE, text(self.buffer_size.to_string())));
        v.push((env::MAX_BUFFERS, text(self.max_buffers.to_string())));
        // Whole milliseconds, rounded up: a period under one would be written as 0, read as no flush at all.
        let flush_ms = self
            .flush_interval
            .map_or(0, |d| d.as_nanos().div_ceil(1_000_000).max(1));
        v.push((env::FLUSH_MS, text(flush_ms.to_string())));
        v.push((env::STAGE, self.stage.name().into()));
        v.push((env::SIGNALS, if self.signals { "1" } else { "0" }.into()));
        v.push((
            env::FLIGHT_RECORDER,
            if self.flight_recorder { "1" } else { "0" }.into(),
        ));
        if let Some(level) = self.log {
            v.push((env::LOG, text(level.as_str().to_ascii_lowercase())));
        }
        if let Some(request) = &self.profile {
            v.extend(request.variables().into_iter().map(|(k, s)| (k, text(s))));
        }
        if let Some(p) = &self.cupti {
            v.push((env::CUPTI_LIBRARY, p.clone().into_os_string()));
        }
        if let Some(seen) = self.seen_as {
            v.push((env::PIDS, text(seen.value())));
        }
        v
    }

    /// The environment of a program launched with `library`: the variable that loads it (with NVTX recorded, the
    /// one that routes NVTX calls to it too), then [`Settings::variables`]. Remove [`Settings::CLEARED`] first.
    pub fn environment(&self, library: Library<'_>) -> Vec<(&'static str, OsString)> {
        let mut v = match library {
            Library::Cuda(lib) => {
                let mut v = vec![(env::CUDA_INJECTION, lib.as_os_str().to_owned())];
                // NVTX reads this at the program's first NVTX call: free for a program that makes none.
                if self.nvtx() {
                    v.push((env::NVTX_INJECTION, lib.as_os_str().to_owned()));
                }
                v
            }
            Library::Rocm(lib) => vec![(env::ROCM_TOOL_LIBRARIES, lib.as_os_str().to_owned())],
        };
        v.extend(self.variables());
        v
    }

    /// The settings as the argument of the attach entry ([`env::ATTACH_ENTRY`]): a `NAME=value` line per
    /// variable of [`Settings::variables`]. The library is loaded already, so no loader variable is written; nor
    /// is [`env::NVTX_INJECTION`] (each NVTX module reads it once, at its first call, which a running program has
    /// made or not): with [`TraceKind::Nvtx`] the attached library finds each loaded module's NVTX state and
    /// routes it to CUPTI for the window itself. An error names a value the text cannot carry (not UTF-8, a
    /// newline or a NUL).
    pub fn attach_argument(&self) -> Result<String, SettingError> {
        let mut out = String::new();
        for (k, v) in self.variables() {
            let v = v.into_string().map_err(|v| {
                SettingError::new(
                    k,
                    &v.to_string_lossy(),
                    "not UTF-8, which an attach cannot carry",
                )
            })?;
            if v.contains(['\n', '\0']) {
                return Err(SettingError::new(
                    k,
                    &v,
                    "holds a newline or a NUL, which an attach cannot carry",
                ));
            }
            out.push_str(k);
            out.push('=');
            out.push_str(&v);
            out.push('\n');
        }
        Ok(out)
    }

    /// Reads the process environment (a launched library).
    pub fn from_env() -> Result<Settings, SettingError> {
        Settings::from_lookup(|k| std::env::var_os(k))
    }

    /// Reads an attach argument ([`Settings::attach_argument`]'s lines; a line without `=` is passed over).
    pub fn from_attach_argument(text: &str) -> Result<Settings, SettingError> {
        // Split at newlines alone: `lines` would also drop a carriage return ending a value (a path's last
        // character, say).
        let vars: Vec<(&str, &str)> = text
            .split('\n')
            .filter_map(|l| l.split_once('='))
            .map(|(k, v)| (k.trim(), v))
            .collect();
        Settings::from_lookup(|name| {
            vars.iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| OsString::from(v))
        })
    }

    /// Reads the variables through `get`: each unset one takes its default ([`Settings::new`]), each set one is
    /// checked, and the first that cannot be used is the error.
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Settings, SettingError> {
        let text = |var: &'static str| -> Result<Option<String>, SettingError> {
            match get(var) {
                None => Ok(None),
                Some(v) => v
                    .into_string()
                    .map(Some)
                    .map_err(|v| SettingError::new(var, &v.to_string_lossy(), "not valid UTF-8")),
            }
        };
        // Unset, empty or blank: the default.
        let given = |var: &'static str| -> Result<Option<String>, SettingError> {
            Ok(text(var)?.filter(|v| !v.trim().is_empty()))
        };
        let mut s = Settings::new(destination(&get, &text)?);
        if let Some(v) = text(env::KINDS)? {
            s.kinds =
                TraceKind::parse_list(&v).map_err(|r| SettingError::new(env::KINDS, &v, r))?;
        }
        // A library named by hand to implement NVTX is asked to record it.
        if get(env::NVTX_INJECTION).is_some_and(|v| !v.is_empty()) && !s.nvtx() {
            s.kinds.push(TraceKind::Nvtx);
        }
        if let Some(v) = text(env::BUFFER_SIZE)? {
            s.buffer_size =
                parse_buffer_size(&v).map_err(|r| SettingError::new(env::BUFFER_SIZE, &v, r))?;
        }
        if let Some(v) = text(env::MAX_BUFFERS)? {
            s.max_buffers = match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    let reason = "not a whole number of at least 1";
                    return Err(SettingError::new(env::MAX_BUFFERS, &v, reason));
                }
            };
        }
        if let Some(v) = text(env::FLUSH_MS)? {
            s.flush_interval = match v.trim().parse::<u64>() {
                Ok(0) => None,
                Ok(ms) => Some(Duration::from_millis(ms)),
                Err(_) => {
                    let reason = "not a whole number of milliseconds";
                    return Err(SettingError::new(env::FLUSH_MS, &v, reason));
                }
            };
        }
        if let Some(v) = given(env::LOG)? {
            s.log = Some(parse_log(&v).map_err(|r| SettingError::new(env::LOG, &v, r))?);
        }
        if let Some(v) = given(env::CUDA_GRAPH)? {
            s.graph = v
                .parse()
                .map_err(|r: String| SettingError::new(env::CUDA_GRAPH, &v, r))?;
        }
        if let Some(v) = given(env::API)? {
            s.api = v
                .parse()
                .map_err(|r: String| SettingError::new(env::API, &v, r))?;
        }
        if let Some(v) = given(env::STAGE)? {
            s.stage = v
                .parse()
                .map_err(|r: String| SettingError::new(env::STAGE, &v, r))?;
        }
        if let Some(v) = given(env::API_SKIP)? {
            s.api_skip = v
                .split(',')
                .map(str::trim)
                .filter(|w| !w.is_empty())
                .map(String::from)
                .collect();
        }
        if let Some(v) = given(env::SIGNALS)? {
            s.signals = match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(SettingError::new(env::SIGNALS, &v, "not 0 or 1")),
            };
        }
        if let Some(v) = given(env::FLIGHT_RECORDER)? {
            s.flight_recorder = match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(SettingError::new(env::FLIGHT_RECORDER, &v, "not 0 or 1")),
            };
        }
        let profile_given = ProfileRequest::VARIABLES.iter().any(|k| get(k).is_some());
        if profile_given {
            s.profile = Some(ProfileRequest::decode(text)?);
        }
        s.cupti = get(env::CUPTI_LIBRARY)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        if let Some(v) = given(env::PIDS)? {
            s.seen_as = Some(SeenAs::parse(&v).map_err(|r| SettingError::new(env::PIDS, &v, r))?);
        }
        Ok(s)
    }
}

/// The destination: exactly one of [`env::SOCKET`] and [`env::FILE`], not empty.
fn destination(
    get: &impl Fn(&str) -> Option<OsString>,
    text: &impl Fn(&'static str) -> Result<Option<String>, SettingError>,
) -> Result<Destination, SettingError> {
    match (
        get(env::SOCKET).filter(|v| !v.is_empty()),
        get(env::FILE).filter(|v| !v.is_empty()),
    ) {
        (Some(_), Some(_)) => Err(SettingError::new(
            env::SOCKET,
            &text(env::SOCKET)?.unwrap_or_default(),
            format!("set only one of {} and {}", env::SOCKET, env::FILE),
        )),
        (Some(s), None) => Ok(Destination::Socket(PathBuf::from(s))),
        (None, Some(f)) => Ok(Destination::File(PathBuf::from(f))),
        (None, None) => Err(SettingError::new(
            env::SOCKET,
            "",
            format!(
                "neither {} nor {} is set: nowhere to send records",
                env::SOCKET,
                env::FILE
            ),
        )),
    }
}

/// Reads a buffer size as [`env::BUFFER_SIZE`] takes it ([`env::parse_size`]) and checks that it lies between
/// [`MIN_BUFFER_SIZE`] and [`MAX_BUFFER_SIZE`].
pub fn parse_buffer_size(value: &str) -> Result<usize, String> {
    let n = env::parse_size(value)?;
    if !(MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&n) {
        return Err(format!(
            "must lie between {MIN_BUFFER_SIZE} and {MAX_BUFFER_SIZE} bytes"
        ));
    }
    Ok(n)
}

/// Reads a log level as [`env::LOG`] takes it: `off`, `error`, `warn`, `info`, `debug` or `trace`.
pub fn parse_log(value: &str) -> Result<log::LevelFilter, String> {
    value
        .trim()
        .parse::<log::LevelFilter>()
        .map_err(|_| "not one of off, error, warn, info, debug, trace".to_string())
}

#[cfg(test)]
mod tests;
