//! The variables through which a tracer configures the injection libraries (`gpu-tools-inject`, loaded into a CUDA
//! program through `CUDA_INJECTION64_PATH`; `gpu-tools-inject-rocm`, through `ROCP_TOOL_LIBRARIES`) and the words
//! their values take (the record kinds, the graph, API and stage modes); the typed settings they carry, with their
//! encoding and decoding, are [`settings`](crate::settings)'. And the protocol of an attached session: the attach
//! entry's name and status (the control bytes are [`control`](crate::control)'s, the messages the tool acts on
//! [`message`](crate::message)'s). Defined once here, for both sides.

/// Unix socket path to connect to and stream records over (the tracer listens there).
pub const SOCKET: &str = "GPU_TOOLS_TRACE_SOCKET";
/// File to write the stream to instead of a socket; `%p` in it becomes the process id, `%h` the host name, `%r`
/// the process's rank (where its launcher set one).
pub const FILE: &str = "GPU_TOOLS_TRACE_FILE";
/// Which records to collect: a comma-separated list of `kernel`, `memcpy`, `memset`, `sync`, `driver`, `runtime`,
/// `overhead`, or `all` ([`TraceKind`]). Default: `kernel,memcpy,memset,driver,runtime` ([`TraceKind::DEFAULT`]).
pub const KINDS: &str = "GPU_TOOLS_TRACE_KINDS";
/// Bytes of each vendor record buffer (suffixes `k`, `M` allowed). Default 4M.
pub const BUFFER_SIZE: &str = "GPU_TOOLS_TRACE_BUFFER_SIZE";
/// Most vendor buffers in use at once; past it the vendor drops records (and reports how many). Default 64.
pub const MAX_BUFFERS: &str = "GPU_TOOLS_TRACE_MAX_BUFFERS";
/// Milliseconds between flushes of completed buffers (0: no periodic flush). Default 200.
pub const FLUSH_MS: &str = "GPU_TOOLS_TRACE_FLUSH_MS";
/// Log level of the injection library's diagnostics on stderr (`error`, `warn`, `info`, `debug`, `trace`).
/// Unset: it prints nothing.
pub const LOG: &str = "GPU_TOOLS_TRACE_LOG";
/// Metrics to collect per kernel launch with CUPTI's range profiler (one range per kernel, kernel replay): full
/// metric names separated by commas, or a set name (`basic`; see `gpu_tools::profile`). Unset or empty: none. Each
/// launch then yields a kernel-metrics record.
pub const PROFILE_METRICS: &str = "GPU_TOOLS_PROFILE_METRICS";
/// `1`: also sample PCs and stall reasons (CUPTI's PC sampling), reported per function and PC offset when a context
/// ends or the program exits.
pub const PROFILE_PC_SAMPLING: &str = "GPU_TOOLS_PROFILE_PC_SAMPLING";
/// Kernel launches profiled between two decodes of the range profiler's counter data (default 2048).
pub const PROFILE_MAX_RANGES: &str = "GPU_TOOLS_PROFILE_MAX_RANGES";
/// Profile at most this many launches of each kernel name in a context; later launches of that name run
/// unprofiled, without replay (unset or `0`: every launch).
pub const PROFILE_LAUNCHES_PER_KERNEL: &str = "GPU_TOOLS_PROFILE_LAUNCHES_PER_KERNEL";
/// What a CUDA graph launch yields in kernel-metrics records (as ncu's `--graph-profiling`): `node` (one per kernel
/// node, named after its kernel; the default) or `graph` (one per graph launch, named after the graph, its kernels'
/// values combined).
pub const PROFILE_GRAPH: &str = "GPU_TOOLS_PROFILE_GRAPH";
/// `1`: PC sampling before a process's first trace (`trace --pid`'s, for the sake of later PC sampling windows): the
/// attach refuses it where the program's own profiler ever registered with CUPTI, recording or not, since one of its
/// sessions may start during the window (a profile asked for by name is refused only beside a recording one).
pub const PROFILE_PRIMER: &str = "GPU_TOOLS_PROFILE_PRIMER";
/// The variable CUDA reads at `cuInit` to load an injection library (an absolute path).
pub const CUDA_INJECTION: &str = "CUDA_INJECTION64_PATH";
/// The variable rocprofiler-sdk reads to load tool libraries into a HIP program (`gpu-tools-inject-rocm`).
pub const ROCM_TOOL_LIBRARIES: &str = "ROCP_TOOL_LIBRARIES";
/// The variable NVTX reads at a program's first NVTX call to load the library that implements NVTX (an absolute
/// path). Pointing it at the injection library routes NVTX to CUPTI, which records markers and ranges; the
/// injection library enables NVTX records when it is set. A program that makes no NVTX call never loads it.
pub const NVTX_INJECTION: &str = "NVTX_INJECTION64_PATH";
/// How CUDA graphs are traced: `graph` (one record per graph launch, CUPTI's graph-level tracing; kernels of
/// graphs are then not recorded; the default) or `node` (every kernel of a graph, with graph and node id). A CUPTI
/// without graph-level tracing falls back to `node` and says so in a notice.
pub const CUDA_GRAPH: &str = "GPU_TOOLS_TRACE_CUDA_GRAPH";
/// Which API calls are recorded when `driver` or `runtime` is among the kinds: `essential` (default: every call
/// but host-side bookkeeping, such as getters, error checks and the current device or context), `all`, or
/// `launches` (only calls that launch device work or move data: `cuLaunch*`, `cuGraphLaunch*`, `cuMemcpy*`,
/// `cuMemset*` and their runtime counterparts). `essential` and `launches` are filtered by CUPTI itself
/// (per-function API records) where it can, otherwise when records are converted.
pub const API: &str = "GPU_TOOLS_TRACE_API";
/// API functions never recorded, comma-separated (`cudaGetLastError,cuDevicePrimaryCtxGetState`): noisy calls
/// of a framework. Filtered by CUPTI where it can (per-function API records), otherwise when records are converted.
pub const API_SKIP: &str = "GPU_TOOLS_TRACE_API_SKIP";
/// For measuring where tracing time goes: how far records travel. `full` (default), `no-send` (encoded, not
/// written), `no-encode` (converted, not encoded), `no-convert` (walked, not converted), `no-decode` (buffers handed
/// back unread). Anything but `full` produces a trace without records, only its start and end.
pub const STAGE: &str = "GPU_TOOLS_TRACE_STAGE";
/// The CUPTI library to load when the process maps none (an attach names the one the tracer's own search found);
/// the variable the library's loader reads too (`gpu_tools::cupti`), so a launched program's own search honours it.
pub const CUPTI_LIBRARY: &str = "GPU_TOOLS_CUPTI_LIB";
/// `0` leaves the program's fatal signals alone; by default (`1`) the library flushes and ends its stream on
/// SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGTERM and SIGINT before the program's own handling runs.
pub const SIGNALS: &str = "GPU_TOOLS_TRACE_SIGNALS";
/// `0` leaves no flight recorder in an attached process; by default (`1`) an attach leaves one, which `where`
/// reads once CUPTI has run there and the driver refuses the debugger (`flight`).
pub const FLIGHT_RECORDER: &str = "GPU_TOOLS_FLIGHT_RECORDER";
/// Attached: the process's pid and its parent's as the tool sees them, `PID,PARENT`, which its stream carries
/// instead of its own where a PID namespace of its own (a container's) makes them differ.
pub const PIDS: &str = "GPU_TOOLS_TRACE_PIDS";

/// A kind of record the injection library collects: the names [`KINDS`] takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TraceKind {
    /// Kernels (CUPTI's concurrent kernel records).
    Kernel,
    /// Memory copies.
    Memcpy,
    /// Memory sets.
    Memset,
    /// Synchronizations.
    Sync,
    /// Driver API calls.
    Driver,
    /// Runtime API calls.
    Runtime,
    /// CUPTI's own overhead.
    Overhead,
    /// NVTX markers and ranges (also enabled whenever [`NVTX_INJECTION`] is set).
    Nvtx,
}

impl TraceKind {
    /// Every kind, in the order `all` stands for.
    pub const ALL: [TraceKind; 8] = [
        TraceKind::Kernel,
        TraceKind::Memcpy,
        TraceKind::Memset,
        TraceKind::Sync,
        TraceKind::Driver,
        TraceKind::Runtime,
        TraceKind::Overhead,
        TraceKind::Nvtx,
    ];

    /// The kinds collected when [`KINDS`] is not set.
    pub const DEFAULT: [TraceKind; 5] = [
        TraceKind::Kernel,
        TraceKind::Memcpy,
        TraceKind::Memset,
        TraceKind::Driver,
        TraceKind::Runtime,
    ];

    /// The kind's name in [`KINDS`].
    pub fn name(self) -> &'static str {
        match self {
            TraceKind::Kernel => "kernel",
            TraceKind::Memcpy => "memcpy",
            TraceKind::Memset => "memset",
            TraceKind::Sync => "sync",
            TraceKind::Driver => "driver",
            TraceKind::Runtime => "runtime",
            TraceKind::Overhead => "overhead",
            TraceKind::Nvtx => "nvtx",
        }
    }

    /// Whether the kind records API calls (driver or runtime).
    pub fn is_api(self) -> bool {
        matches!(self, TraceKind::Driver | TraceKind::Runtime)
    }

    /// Reads a value of [`KINDS`]: names separated by commas, `all` for every kind; each kind once, in the order
    /// first named.
    pub fn parse_list(value: &str) -> Result<Vec<TraceKind>, String> {
        let mut out = Vec::new();
        for word in value.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let named: &[TraceKind] = if word == "all" {
                &TraceKind::ALL
            } else {
                &[word.parse()?]
            };
            for &k in named {
                if !out.contains(&k) {
                    out.push(k);
                }
            }
        }
        if out.is_empty() {
            return Err("no kind named".into());
        }
        Ok(out)
    }

    /// The value of [`KINDS`] that names `kinds`.
    pub fn list_value(kinds: &[TraceKind]) -> String {
        let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
        names.join(",")
    }
}

impl std::fmt::Display for TraceKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for TraceKind {
    type Err = String;
    fn from_str(word: &str) -> Result<Self, String> {
        TraceKind::ALL
            .into_iter()
            .find(|k| k.name() == word)
            .ok_or_else(|| {
                let names: Vec<&str> = TraceKind::ALL.iter().map(|k| k.name()).collect();
                format!("unknown kind {word:?}; known: {}, all", names.join(", "))
            })
    }
}

/// How CUDA graphs are traced ([`CUDA_GRAPH`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum GraphMode {
    /// Every node of a graph as its own record, carrying graph and node id.
    Node,
    /// One record per graph launch (CUPTI's `GRAPH_TRACE`); the graph's kernels are not recorded. The default:
    /// a PyTorch step captured in a CUDA graph and replayed 200 times took 12.7 ms traced this way against 12.4 ms
    /// native, and 16.4 ms traced node by node (H100, CUPTI 13.0).
    #[default]
    Graph,
}

/// Which API calls are recorded ([`API`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum ApiMode {
    /// Every call but the host-side bookkeeping (getters, error checks, the current device or context:
    /// `ApiCbid::is_bookkeeping`), as Nsight Systems' CUDA trace leaves out calls not critical for performance
    /// analysis by default. The default: frameworks make such calls at every launch (PyTorch 2.11: two driver
    /// getters per kernel launch). The injection library's writer leaves them out; CUPTI still records them, as its
    /// per-function choice is process-wide and would take them from the program's own profiler too.
    #[default]
    Essential,
    /// Every call.
    All,
    /// Only calls that launch device work or move data.
    Launches,
}

/// How far records travel in the injection library ([`STAGE`]), for measuring what each step costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Stage {
    /// Everything: walked, converted, encoded, written.
    #[default]
    Full,
    /// Encoded, not written.
    NoSend,
    /// Converted, not encoded.
    NoEncode,
    /// Walked, not converted.
    NoConvert,
    /// Buffers handed back unread.
    NoDecode,
}

macro_rules! named {
    ($T:ty, $var:expr, [$($v:ident = $n:literal),*]) => {
        impl $T {
            /// The names the variable takes.
            pub const NAMES: &'static [&'static str] = &[$($n),*];

            /// The value's name.
            pub fn name(self) -> &'static str {
                match self { $(Self::$v => $n),* }
            }
        }

        impl std::str::FromStr for $T {
            type Err = String;
            fn from_str(s: &str) -> Result<Self, String> {
                match s.trim() {
                    $($n => Ok(Self::$v),)*
                    other => Err(format!("{other:?} is not one of {}", Self::NAMES.join(", "))),
                }
            }
        }

        impl std::fmt::Display for $T {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

named!(GraphMode, CUDA_GRAPH, [Node = "node", Graph = "graph"]);
named!(
    ApiMode,
    API,
    [Essential = "essential", All = "all", Launches = "launches"]
);
named!(
    Stage,
    STAGE,
    [
        Full = "full",
        NoSend = "no-send",
        NoEncode = "no-encode",
        NoConvert = "no-convert",
        NoDecode = "no-decode"
    ]
);

/// The injection library's entry point for a process that already runs (`gpu_tools::linux::inject` calls it with
/// [`Settings::attach_argument`](crate::settings::Settings::attach_argument)).
pub const ATTACH_ENTRY: &str = "gpu_tools_inject_attach";

/// What [`ATTACH_ENTRY`] returns: the injection library returns [`AttachStatus::code`], the tracer reads it back
/// with [`AttachStatus::from_code`]. One type for both sides, so that a code cannot mean two things.
#[repr(i32)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AttachStatus {
    /// The attach thread started.
    Started = 0,
    /// A session already runs in this process (a launched trace, or an attach not yet detached).
    Busy = 1,
    /// The argument is not a valid configuration.
    BadArgument = 2,
    /// No thread could be started.
    NoThread = 3,
    /// A panic was caught.
    Panicked = 4,
}

impl AttachStatus {
    /// Every status, in code order.
    pub const ALL: [AttachStatus; 5] = [
        AttachStatus::Started,
        AttachStatus::Busy,
        AttachStatus::BadArgument,
        AttachStatus::NoThread,
        AttachStatus::Panicked,
    ];

    /// The code the entry point returns.
    pub fn code(self) -> i32 {
        self as i32
    }

    /// The status of a code the entry point returned (`None`: a code this crate does not know, from another
    /// version of the library).
    pub fn from_code(code: i32) -> Option<AttachStatus> {
        Self::ALL.into_iter().find(|s| s.code() == code)
    }

    /// What the status means for whoever attached, in words.
    pub fn meaning(self) -> &'static str {
        match self {
            AttachStatus::Started => "the injection library started tracing",
            AttachStatus::Busy => {
                "it is already traced by gpu-tools (started under `gpu-tools trace`, or another `trace --pid` is \
                 attached)"
            }
            AttachStatus::BadArgument => "the injection library refused its settings",
            AttachStatus::NoThread => "the injection library could not start its thread",
            AttachStatus::Panicked => "the injection library failed (a panic was caught)",
        }
    }
}

/// [`AttachStatus::meaning`] of a code the entry point returned, or the code itself where it is unknown.
pub fn attach_status_meaning(code: i32) -> String {
    match AttachStatus::from_code(code) {
        Some(s) => s.meaning().into(),
        None => format!("the injection library's entry point returned {code}"),
    }
}

/// Reads a byte count as [`BUFFER_SIZE`] takes it: digits with an optional `k`/`K` (KiB), `m`/`M` (MiB) or
/// `g`/`G` (GiB) suffix.
pub fn parse_size(value: &str) -> Result<usize, String> {
    let t = value.trim();
    let (digits, shift) = match t.char_indices().last() {
        Some((i, 'k' | 'K')) => (&t[..i], 10),
        Some((i, 'm' | 'M')) => (&t[..i], 20),
        Some((i, 'g' | 'G')) => (&t[..i], 30),
        _ => (t, 0),
    };
    let n: usize = digits
        .trim()
        .parse()
        .map_err(|_| "not a byte count (e.g. 4194304, 4096k, 4M)".to_string())?;
    n.checked_mul(1 << shift)
        .ok_or_else(|| "too large".to_string())
}

#[cfg(test)]
mod tests {
    use super::{AttachStatus, TraceKind, attach_status_meaning};

    #[test]
    fn attach_status_codes_read_back_and_unknown_ones_are_named() {
        for s in AttachStatus::ALL {
            assert_eq!(AttachStatus::from_code(s.code()), Some(s));
        }
        assert_eq!(AttachStatus::Busy.code(), 1);
        assert_eq!(AttachStatus::from_code(9), None);
        assert!(attach_status_meaning(1).contains("already traced"));
        assert_eq!(
            attach_status_meaning(9),
            "the injection library's entry point returned 9"
        );
    }

    #[test]
    fn kind_lists_read_and_write_back() {
        assert_eq!(
            TraceKind::parse_list("kernel, sync,kernel,overhead"),
            Ok(vec![
                TraceKind::Kernel,
                TraceKind::Sync,
                TraceKind::Overhead
            ])
        );
        assert_eq!(
            TraceKind::parse_list("all,kernel"),
            Ok(TraceKind::ALL.to_vec())
        );
        assert_eq!(
            TraceKind::parse_list("sync,all"),
            Ok(vec![
                TraceKind::Sync,
                TraceKind::Kernel,
                TraceKind::Memcpy,
                TraceKind::Memset,
                TraceKind::Driver,
                TraceKind::Runtime,
                TraceKind::Overhead,
                TraceKind::Nvtx
            ])
        );
        let e = TraceKind::parse_list("kernel,bogus").unwrap_err();
        assert!(e.contains("\"bogus\"") && e.contains("nvtx, all"), "{e}");
        assert!(TraceKind::parse_list(" , ").is_err());
        let value = TraceKind::list_value(&TraceKind::DEFAULT);
        assert_eq!(value, "kernel,memcpy,memset,driver,runtime");
        assert_eq!(
            TraceKind::parse_list(&value),
            Ok(TraceKind::DEFAULT.to_vec())
        );
        for k in TraceKind::ALL {
            assert_eq!(k.to_string().parse::<TraceKind>(), Ok(k));
        }
        assert!(TraceKind::Driver.is_api() && !TraceKind::Kernel.is_api());
    }
    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(super::parse_size("4096"), Ok(4096));
        assert_eq!(super::parse_size(" 64k"), Ok(64 << 10));
        assert_eq!(super::parse_size("4M"), Ok(4 << 20));
        assert_eq!(super::parse_size("1g"), Ok(1 << 30));
        assert!(super::parse_size("M").is_err());
        assert!(super::parse_size("-1").is_err());
        assert!(super::parse_size("99999999999999G").is_err());
    }
}
