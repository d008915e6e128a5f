//! The environment variables through which a tracer configures the injection library (`gpu-tools-inject`, loaded
//! into a CUDA program through `CUDA_INJECTION64_PATH`). Defined once here, for both sides.

/// Unix socket path to connect to and stream records over (the tracer listens there).
pub const SOCKET: &str = "GPU_TOOLS_TRACE_SOCKET";
/// File to write the stream to instead of a socket; `%p` in it becomes the process id.
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
/// The variable CUDA reads at `cuInit` to load an injection library (an absolute path).
pub const CUDA_INJECTION: &str = "CUDA_INJECTION64_PATH";

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
}

impl TraceKind {
    /// Every kind, in the order `all` stands for.
    pub const ALL: [TraceKind; 7] = [
        TraceKind::Kernel,
        TraceKind::Memcpy,
        TraceKind::Memset,
        TraceKind::Sync,
        TraceKind::Driver,
        TraceKind::Runtime,
        TraceKind::Overhead,
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
    use super::TraceKind;

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
                TraceKind::Overhead
            ])
        );
        let e = TraceKind::parse_list("kernel,bogus").unwrap_err();
        assert!(
            e.contains("\"bogus\"") && e.contains("overhead, all"),
            "{e}"
        );
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
