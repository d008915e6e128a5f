//! The environment variables through which a tracer configures the injection library (`gpu-tools-inject`, loaded
//! into a CUDA program through `CUDA_INJECTION64_PATH`). Defined once here, for both sides.

/// Unix socket path to connect to and stream records over (the tracer listens there).
pub const SOCKET: &str = "GPU_TOOLS_TRACE_SOCKET";
/// File to write the stream to instead of a socket; `%p` in it becomes the process id.
pub const FILE: &str = "GPU_TOOLS_TRACE_FILE";
/// Which records to collect: a comma-separated list of `kernel`, `memcpy`, `memset`, `sync`, `driver`, `runtime`,
/// `overhead`, or `all`. Default: `kernel,memcpy,memset,driver,runtime`.
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
/// The variable CUDA reads at `cuInit` to load an injection library (an absolute path).
pub const CUDA_INJECTION: &str = "CUDA_INJECTION64_PATH";

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
