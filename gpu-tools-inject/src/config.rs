//! The library's configuration, read from the environment (`gpu_tools_injection::env` names the variables).

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use gpu_tools_injection::env::{self, ApiMode, GraphMode, Stage};

/// Where records go.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Output {
    /// A Unix socket a tracer listens on.
    Socket(PathBuf),
    /// A file; `%p` in the name is replaced by the process id.
    File(PathBuf),
}

/// A kind of record to collect (the names of `GPU_TOOLS_TRACE_KINDS`, shared with the tracer).
pub use gpu_tools_injection::env::TraceKind as Kind;

/// What the library does in a traced process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Where records go.
    pub output: Output,
    /// Record kinds to collect (no duplicates).
    pub kinds: Vec<Kind>,
    /// Bytes of each vendor buffer.
    pub buffer_size: usize,
    /// Most vendor buffers at once.
    pub max_buffers: usize,
    /// Interval of the periodic flush of completed buffers; `None`: no periodic flush.
    pub flush_interval: Option<Duration>,
    /// Level of diagnostics on stderr; `None`: silent.
    pub log: Option<log::LevelFilter>,
    /// NVTX markers and ranges (the `nvtx` kind, or `NVTX_INJECTION64_PATH` set).
    pub nvtx: bool,
    /// How CUDA graphs are traced.
    pub graph: GraphMode,
    /// Which API calls are recorded.
    pub api: ApiMode,
    /// API functions never recorded.
    pub api_skip: Vec<String>,
    /// How far records travel (measurement).
    pub stage: Stage,
    /// Flush and end the stream on fatal signals.
    pub signals: bool,
    /// Attached: leave a flight recorder in the process (`crate::flight`).
    pub flight: bool,
}

/// Default kinds: what `cuda_trace` shows.
pub const DEFAULT_KINDS: [Kind; 5] = Kind::DEFAULT;
const DEFAULT_BUFFER_SIZE: usize = 4 << 20;
const DEFAULT_MAX_BUFFERS: usize = 64;
const DEFAULT_FLUSH_MS: u64 = 200;
/// The vendor's smallest useful buffer holds a few records; below this a buffer is refused.
const MIN_BUFFER_SIZE: usize = 1 << 10;
/// 1 GiB per buffer is far above any sensible value; above it the value is a mistake.
const MAX_BUFFER_SIZE: usize = 1 << 30;

/// A variable holds a value the library cannot use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The variable.
    pub var: &'static str,
    /// Its value.
    pub value: String,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for ConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={:?}: {}", self.var, self.value, self.reason)
    }
}

impl std::error::Error for ConfigError {}

impl Config {
    /// Reads the process environment.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::from_lookup(|k| std::env::var_os(k))
    }

    /// Reads the variables through `get` (for tests).
    pub fn from_lookup(get: impl Fn(&str) -> Option<OsString>) -> Result<Config, ConfigError> {
        let text = |var: &'static str| -> Result<Option<String>, ConfigError> {
            match get(var) {
                None => Ok(None),
                Some(v) => v.into_string().map(Some).map_err(|v| ConfigError {
                    var,
                    value: v.to_string_lossy().into_owned(),
                    reason: "not valid UTF-8".into(),
                }),
            }
        };
        let err = |var: &'static str, value: &str, reason: &str| ConfigError {
            var,
            value: value.to_string(),
            reason: reason.to_string(),
        };
        let output = match (
            get(env::SOCKET).filter(|v| !v.is_empty()),
            get(env::FILE).filter(|v| !v.is_empty()),
        ) {
            (Some(_), Some(_)) => {
                return Err(err(
                    env::SOCKET,
                    &text(env::SOCKET)?.unwrap_or_default(),
                    &format!("set only one of {} and {}", env::SOCKET, env::FILE),
                ));
            }
            (Some(s), None) => Output::Socket(PathBuf::from(s)),
            (None, Some(f)) => Output::File(PathBuf::from(f)),
            (None, None) => {
                return Err(err(
                    env::SOCKET,
                    "",
                    &format!(
                        "neither {} nor {} is set: nowhere to send records",
                        env::SOCKET,
                        env::FILE
                    ),
                ));
            }
        };
        let kinds = match text(env::KINDS)? {
            None => DEFAULT_KINDS.to_vec(),
            Some(v) => Kind::parse_list(&v).map_err(|r| err(env::KINDS, &v, &r))?,
        };
        let buffer_size = match text(env::BUFFER_SIZE)? {
            None => DEFAULT_BUFFER_SIZE,
            Some(v) => {
                let n = env::parse_size(&v).map_err(|r| err(env::BUFFER_SIZE, &v, &r))?;
                if !(MIN_BUFFER_SIZE..=MAX_BUFFER_SIZE).contains(&n) {
                    return Err(err(
                        env::BUFFER_SIZE,
                        &v,
                        &format!("must lie between {MIN_BUFFER_SIZE} and {MAX_BUFFER_SIZE} bytes"),
                    ));
                }
                n
            }
        };
        let max_buffers = match text(env::MAX_BUFFERS)? {
            None => DEFAULT_MAX_BUFFERS,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n >= 1 => n,
                _ => {
                    return Err(err(
                        env::MAX_BUFFERS,
                        &v,
                        "not a whole number of at least 1",
                    ));
                }
            },
        };
        let flush_interval = match text(env::FLUSH_MS)? {
            None => Some(Duration::from_millis(DEFAULT_FLUSH_MS)),
            Some(v) => match v.trim().parse::<u64>() {
                Ok(0) => None,
                Ok(ms) => Some(Duration::from_millis(ms)),
                Err(_) => return Err(err(env::FLUSH_MS, &v, "not a whole number of milliseconds")),
            },
        };
        let log = match text(env::LOG)? {
            None => None,
            Some(v) if v.trim().is_empty() => None,
            Some(v) => Some(v.trim().parse::<log::LevelFilter>().map_err(|_| {
                err(
                    env::LOG,
                    &v,
                    "not one of off, error, warn, info, debug, trace",
                )
            })?),
        };
        let parsed = |var: &'static str| -> Result<Option<String>, ConfigError> {
            Ok(text(var)?.filter(|v| !v.trim().is_empty()))
        };
        let graph = match parsed(env::CUDA_GRAPH)? {
            None => GraphMode::default(),
            Some(v) => v
                .parse()
                .map_err(|r: String| err(env::CUDA_GRAPH, &v, &r))?,
        };
        let api = match parsed(env::API)? {
            None => ApiMode::default(),
            Some(v) => v.parse().map_err(|r: String| err(env::API, &v, &r))?,
        };
        let stage = match parsed(env::STAGE)? {
            None => Stage::default(),
            Some(v) => v.parse().map_err(|r: String| err(env::STAGE, &v, &r))?,
        };
        let api_skip = parsed(env::API_SKIP)?
            .map(|v| {
                v.split(',')
                    .map(str::trim)
                    .filter(|w| !w.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default();
        let signals = match parsed(env::SIGNALS)? {
            None => true,
            Some(v) => match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(err(env::SIGNALS, &v, "not 0 or 1")),
            },
        };
        let flight = match parsed(env::FLIGHT_RECORDER)? {
            None => true,
            Some(v) => match v.trim() {
                "1" | "on" | "yes" => true,
                "0" | "off" | "no" => false,
                _ => return Err(err(env::FLIGHT_RECORDER, &v, "not 0 or 1")),
            },
        };
        let nvtx =
            kinds.contains(&Kind::Nvtx) || get(env::NVTX_INJECTION).is_some_and(|v| !v.is_empty());
        Ok(Config {
            output,
            kinds,
            buffer_size,
            max_buffers,
            flush_interval,
            log,
            nvtx,
            graph,
            api,
            api_skip,
            stage,
            signals,
            flight,
        })
    }
}

/// `kernel,memcpy,...` or `all`.
#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn with(vars: &[(&str, &str)]) -> Result<Config, ConfigError> {
        let map: HashMap<String, OsString> = vars
            .iter()
            .map(|(k, v)| (k.to_string(), OsString::from(v)))
            .collect();
        Config::from_lookup(|k| map.get(k).cloned())
    }

    #[test]
    fn defaults_with_a_socket() {
        let c = with(&[(env::SOCKET, "/tmp/s")]).unwrap();
        assert_eq!(c.output, Output::Socket("/tmp/s".into()));
        assert_eq!(c.kinds, DEFAULT_KINDS);
        assert_eq!(c.buffer_size, 4 << 20);
        assert_eq!(c.max_buffers, 64);
        assert_eq!(c.flush_interval, Some(Duration::from_millis(200)));
        assert_eq!(c.log, None);
        assert_eq!(
            (c.graph, c.api, c.stage, c.signals, c.nvtx),
            (GraphMode::Graph, ApiMode::All, Stage::Full, true, false)
        );
        assert!(c.api_skip.is_empty());
    }

    #[test]
    fn graph_api_stage_and_nvtx_settings_are_read() {
        let c = with(&[
            (env::SOCKET, "s"),
            (env::CUDA_GRAPH, "graph"),
            (env::API, "launches"),
            (env::API_SKIP, "cudaGetLastError, cuKernelGetName,"),
            (env::STAGE, "no-encode"),
            (env::SIGNALS, "0"),
            (env::NVTX_INJECTION, "/lib/inject.so"),
        ])
        .unwrap();
        assert_eq!(
            (c.graph, c.api, c.stage, c.signals, c.nvtx),
            (
                GraphMode::Graph,
                ApiMode::Launches,
                Stage::NoEncode,
                false,
                true
            )
        );
        assert_eq!(c.api_skip, ["cudaGetLastError", "cuKernelGetName"]);
        let e = with(&[(env::SOCKET, "s"), (env::CUDA_GRAPH, "graphs")]).unwrap_err();
        assert_eq!(e.var, env::CUDA_GRAPH);
        assert!(e.to_string().contains("node, graph"), "{e}");
        assert_eq!(
            with(&[(env::SOCKET, "s"), (env::SIGNALS, "maybe")])
                .unwrap_err()
                .var,
            env::SIGNALS
        );
    }

    #[test]
    fn every_variable_is_read() {
        let c = with(&[
            (env::FILE, "/tmp/t-%p.bin"),
            (env::KINDS, " kernel , sync,overhead,kernel"),
            (env::BUFFER_SIZE, "64k"),
            (env::MAX_BUFFERS, "3"),
            (env::FLUSH_MS, "0"),
            (env::LOG, "debug"),
        ])
        .unwrap();
        assert_eq!(c.output, Output::File("/tmp/t-%p.bin".into()));
        assert_eq!(c.kinds, [Kind::Kernel, Kind::Sync, Kind::Overhead]);
        assert_eq!(c.buffer_size, 64 << 10);
        assert_eq!(c.max_buffers, 3);
        assert_eq!(c.flush_interval, None);
        assert_eq!(c.log, Some(log::LevelFilter::Debug));
        assert_eq!(
            with(&[(env::SOCKET, "s"), (env::KINDS, "all")])
                .unwrap()
                .kinds,
            Kind::ALL
        );
        assert_eq!(
            with(&[(env::SOCKET, "s"), (env::BUFFER_SIZE, "2M")])
                .unwrap()
                .buffer_size,
            2 << 20
        );
    }

    #[test]
    fn bad_values_name_the_variable() {
        // (variables, the variable the error names, text the message holds)
        type Case<'a> = (&'a [(&'a str, &'a str)], &'a str, &'a str);
        let cases: &[Case<'_>] = &[
            (&[], env::SOCKET, "nowhere to send"),
            (
                &[(env::SOCKET, "a"), (env::FILE, "b")],
                env::SOCKET,
                "only one",
            ),
            (
                &[(env::SOCKET, "a"), (env::KINDS, "kernel,bogus")],
                env::KINDS,
                "unknown kind \"bogus\"",
            ),
            (
                &[(env::SOCKET, "a"), (env::KINDS, " , ")],
                env::KINDS,
                "no kind",
            ),
            (
                &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "12x")],
                env::BUFFER_SIZE,
                "not a byte count",
            ),
            (
                &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "100")],
                env::BUFFER_SIZE,
                "between",
            ),
            (
                &[
                    (env::SOCKET, "a"),
                    (env::BUFFER_SIZE, "99999999999999999999G"),
                ],
                env::BUFFER_SIZE,
                "byte count",
            ),
            (
                &[(env::SOCKET, "a"), (env::BUFFER_SIZE, "9999999999999G")],
                env::BUFFER_SIZE,
                "too large",
            ),
            (
                &[(env::SOCKET, "a"), (env::MAX_BUFFERS, "0")],
                env::MAX_BUFFERS,
                "at least 1",
            ),
            (
                &[(env::SOCKET, "a"), (env::FLUSH_MS, "-1")],
                env::FLUSH_MS,
                "milliseconds",
            ),
            (
                &[(env::SOCKET, "a"), (env::LOG, "loud")],
                env::LOG,
                "not one of",
            ),
        ];
        for (vars, var, text) in cases {
            let e = with(vars).expect_err(&format!("{vars:?} must fail"));
            assert_eq!(e.var, *var, "{e}");
            assert!(e.to_string().contains(text), "{e} lacks {text:?}");
        }
    }
}
