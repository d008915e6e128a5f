//! `gpu-tools top --prometheus ADDR`: the view's latest values served at `GET /metrics` in Prometheus' text
//! exposition format (version 0.0.4), under dcgm-exporter's names where DCGM has a counterpart.
//!
//! The sampling loop ([`Exporter::update`]) and the HTTP thread share a [`State`]; a scrape formats it
//! ([`exposition`], a pure function) and never waits for the GPUs. A GPU whose last read failed, or that
//! delivered no sample for [`State::stale_after`], is *stale*: its gauges are left out of the scrape (Prometheus
//! then marks those series stale, as for a target that stopped reporting them), `gpu_tools_gpu_up` is 0 for it
//! and `gpu_tools_stale_scrapes_total` counts the scrape; its counters stay. The server goes on serving whatever
//! the GPUs do.

use std::fmt::Write as _;
use std::io::ErrorKind;
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_tools::counters::top::{TopColumn, TopGpu, TopRow, TopTotals};

use crate::failure::Failure;

/// The exposition format's content type.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// `--prometheus`'s value: `PORT` (on 127.0.0.1) or `ADDRESS:PORT` (`127.0.0.1:9400`, `[::1]:9400`,
/// `0.0.0.0:9400` to serve other hosts).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port));
    }
    s.parse::<SocketAddr>().map_err(|_| {
        format!(
            "{s:?} is neither a port (9400) nor an IP address and port (127.0.0.1:9400, [::1]:9400)"
        )
    })
}

/// Binds the exporter's address (before any sampling starts), or says why it cannot.
pub fn bind(addr: SocketAddr) -> Result<TcpListener, Failure> {
    TcpListener::bind(addr).map_err(|e| {
        let why = match e.kind() {
            ErrorKind::AddrInUse => format!(
                "the port is in use by another program ({e}); dcgm-exporter's default is 9400, choose another \
                 with --prometheus PORT"
            ),
            ErrorKind::AddrNotAvailable => {
                format!("no interface of this machine has that address ({e})")
            }
            ErrorKind::PermissionDenied => format!("not allowed ({e}); ports below 1024 need privileges"),
            _ => e.to_string(),
        };
        Failure::new(1, format!("cannot serve Prometheus metrics on {addr}: {why}"))
    })
}

/// This machine's host name (the `Hostname` label), or `"unknown"`.
pub fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: a writable buffer of the length passed; gethostname writes at most that many bytes.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    if rc != 0 || end == 0 {
        return "unknown".to_string();
    }
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// A gauge of the exposition: the column it reads (by the vendor's metric name) and its unit.
struct Gauge {
    name: &'static str,
    help: &'static str,
    metric: &'static str,
    /// What the column's value is divided by (100 for a percentage exported as a ratio).
    per: f64,
}

/// The gauges with a name of their own, dcgm-exporter's first. Columns named otherwise (`--metrics`,
/// `--counters`) go to `gpu_tools_device_metric`.
const GAUGES: [Gauge; 7] = [
    Gauge {
        name: "DCGM_FI_PROF_SM_ACTIVE",
        help: "Ratio of cycles an SM has at least one warp assigned, averaged over all SMs (PM sampling: \
               sm__cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        help: "Ratio of cycles the tensor pipe is active (PM sampling: \
               sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_DRAM_ACTIVE",
        help: "Ratio of cycles the device memory interface is active (PM sampling: \
               dram__cycles_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "dram__cycles_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "DCGM_FI_PROF_SM_OCCUPANCY",
        help: "Ratio of resident warps to the maximum per elapsed cycle, averaged over all SMs (PM sampling: \
               sm__warps_active.avg.pct_of_peak_sustained_elapsed / 100).",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_elapsed",
        per: 100.0,
    },
    Gauge {
        name: "gpu_tools_sm_achieved_occupancy_ratio",
        help: "Ratio of resident warps to the maximum per active SM cycle, Nsight Compute's achieved occupancy \
               and the table's OCCUP% (PM sampling: sm__warps_active.avg.pct_of_peak_sustained_active / 100).",
        metric: "sm__warps_active.avg.pct_of_peak_sustained_active",
        per: 100.0,
    },
    Gauge {
        name: "gpu_tools_dram_read_bytes_per_second",
        help: "Bytes read from device memory per second (PM sampling: dram__bytes_read.sum.per_second).",
        metric: "dram__bytes_read.sum.per_second",
        per: 1.0,
    },
    Gauge {
        name: "gpu_tools_dram_write_bytes_per_second",
        help: "Bytes written to device memory per second (PM sampling: dram__bytes_write.sum.per_second).",
        metric: "dram__bytes_write.sum.per_second",
        per: 1.0,
    },
];

/// A counter of the exposition: a count of each GPU.
struct Counter {
    name: &'static str,
    help: &'static str,
    get: fn(&ExportGpu) -> u64,
}

/// The counters, every GPU's, stale or not.
const COUNTERS: [Counter; 5] = [
    Counter {
        name: "gpu_tools_samples_total",
        help: "Samples read from the GPU's counters.",
        get: |g| g.totals.samples,
    },
    Counter {
        name: "gpu_tools_samples_lost_total",
        help: "Samples lost, as the vendor reports it (NVIDIA: sampling periods missing next to a hardware-buffer \
               overflow).",
        get: |g| g.totals.lost,
    },
    Counter {
        name: "gpu_tools_sampling_gaps_total",
        help: "Sampling periods that passed without a sample while nothing reported a loss (an idle GPU shows \
               some); not losses.",
        get: |g| g.totals.gaps,
    },
    Counter {
        name: "gpu_tools_read_errors_total",
        help: "Refreshes whose read of the GPU's counters failed.",
        get: |g| g.totals.read_errors,
    },
    Counter {
        name: "gpu_tools_stale_scrapes_total",
        help: "Scrapes that left the GPU's gauges out because they were stale.",
        get: |g| g.stale_scrapes,
    },
];

/// One GPU as a scrape shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct ExportGpu {
    /// Its labels.
    pub gpu: TopGpu,
    /// One mean per column over its latest refresh with samples; `None` while it is stale.
    pub values: Option<Vec<f64>>,
    /// Its counts since the start.
    pub totals: TopTotals,
    /// Scrapes that found it stale, this one included.
    pub stale_scrapes: u64,
}

/// Escapes a label value (backslash, double quote, line feed).
fn label_value(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The labels of a GPU: `gpu`, `UUID` (where known), `model_name`, `Hostname`: dcgm-exporter's names, but for
/// its `modelName`, which promtool's lint refuses (label names in snake case).
fn labels(gpu: &TopGpu, hostname: &str) -> String {
    let mut l = format!("gpu=\"{}\"", gpu.index);
    if let Some(uuid) = &gpu.uuid {
        let _ = write!(l, ",UUID=\"{}\"", label_value(uuid));
    }
    let _ = write!(
        l,
        ",model_name=\"{}\",Hostname=\"{}\"",
        label_value(&gpu.name),
        label_value(hostname)
    );
    l
}

/// A sample value: integers without a fraction, other numbers as Rust writes them (shortest round trip).
fn number(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "+Inf".into()
        } else {
            "-Inf".into()
        }
    } else {
        format!("{v}")
    }
}

fn family(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(
        out,
        "# HELP {name} {}",
        help.replace('\\', "\\\\").replace('\n', "\\n")
    );
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

/// The exposition of `gpus`, whose values follow `columns`: a `# HELP` and `# TYPE` line and a sample per GPU for
/// each family. Gauges of a stale GPU, and values that are not numbers, are left out; a family none of whose
/// columns the view samples is left out whole.
pub fn exposition(hostname: &str, columns: &[TopColumn], gpus: &[ExportGpu]) -> String {
    let mut out = String::new();
    let value = |g: &ExportGpu, column: usize, per: f64| -> Option<f64> {
        let v = g.values.as_ref()?.get(column)? / per;
        v.is_finite().then_some(v)
    };
    for gauge in &GAUGES {
        let Some(column) = columns.iter().position(|c| c.counter == gauge.metric) else {
            continue;
        };
        family(&mut out, gauge.name, "gauge", gauge.help);
        for g in gpus {
            if let Some(v) = value(g, column, gauge.per) {
                let _ = writeln!(
                    out,
                    "{}{{{}}} {}",
                    gauge.name,
                    labels(&g.gpu, hostname),
                    number(v)
                );
            }
        }
    }
    let others: Vec<(usize, &TopColumn)> = columns
        .iter()
        .enumerate()
        .filter(|(_, c)| !GAUGES.iter().any(|g| g.metric == c.counter))
        .collect();
    if !others.is_empty() {
        family(
            &mut out,
            "gpu_tools_device_metric",
            "gauge",
            "A metric or counter named with --metrics or --counters, its mean over the latest refresh, in the \
             vendor's unit.",
        );
        for g in gpus {
            for (column, c) in &others {
                if let Some(v) = value(g, *column, 1.0) {
                    let _ = writeln!(
                        out,
                        "gpu_tools_device_metric{{{},metric=\"{}\"}} {}",
                        labels(&g.gpu, hostname),
                        label_value(&c.counter),
                        number(v)
                    );
                }
            }
        }
    }
    family(
        &mut out,
        "gpu_tools_gpu_up",
        "gauge",
        "1 while the GPU's gauges are current, 0 while they are left out (its last read failed, or no sample came \
         lately).",
    );
    for g in gpus {
        let up = u8::from(g.values.is_some());
        let _ = writeln!(out, "gpu_tools_gpu_up{{{}}} {up}", labels(&g.gpu, hostname));
    }
    for c in &COUNTERS {
        family(&mut out, c.name, "counter", c.help);
        for g in gpus {
            let _ = writeln!(
                out,
                "{}{{{}}} {}",
                c.name,
                labels(&g.gpu, hostname),
                (c.get)(g)
            );
        }
    }
    out
}

/// A GPU's state between the sampling loop and the scrapes.
#[derive(Debug, Clone)]
struct GpuState {
    gpu: TopGpu,
    totals: TopTotals,
    /// Means of its latest refresh with samples, and when it ended.
    latest: Option<(Vec<f64>, Instant)>,
    /// Its latest read failed.
    failed: bool,
    stale_scrapes: u64,
}

/// What the sampling loop hands the scrapes.
#[derive(Debug, Clone)]
pub struct State {
    hostname: String,
    columns: Vec<TopColumn>,
    gpus: Vec<GpuState>,
    /// How long a GPU's gauges stay current without a new sample.
    pub stale_after: Duration,
}

impl State {
    /// The state of a view of `columns` over `gpus`, no refresh yet (every GPU stale until its first samples).
    pub fn new(
        hostname: String,
        columns: Vec<TopColumn>,
        gpus: Vec<TopGpu>,
        stale_after: Duration,
    ) -> Self {
        State {
            hostname,
            columns,
            gpus: gpus
                .into_iter()
                .map(|gpu| GpuState {
                    gpu,
                    totals: TopTotals::default(),
                    latest: None,
                    failed: false,
                    stale_scrapes: 0,
                })
                .collect(),
            stale_after,
        }
    }

    /// Takes one refresh: the rows and the totals, in the order of the GPUs, at `now`.
    pub fn update(&mut self, rows: &[TopRow], totals: &[(TopGpu, TopTotals)], now: Instant) {
        for ((g, row), (_, t)) in self.gpus.iter_mut().zip(rows).zip(totals) {
            g.totals = *t;
            g.failed = row.error.is_some();
            if !g.failed && row.samples > 0 {
                g.latest = Some((row.values.clone(), now));
            }
        }
    }

    /// The GPUs as a scrape at `now` shows them; counts the scrape for each stale one.
    pub fn scrape(&mut self, now: Instant) -> Vec<ExportGpu> {
        let stale_after = self.stale_after;
        self.gpus
            .iter_mut()
            .map(|g| {
                let values = match &g.latest {
                    Some((v, at))
                        if !g.failed && now.saturating_duration_since(*at) <= stale_after =>
                    {
                        Some(v.clone())
                    }
                    _ => None,
                };
                if values.is_none() {
                    g.stale_scrapes += 1;
                }
                ExportGpu {
                    gpu: g.gpu.clone(),
                    values,
                    totals: g.totals,
                    stale_scrapes: g.stale_scrapes,
                }
            })
            .collect()
    }

    /// A scrape's body at `now`.
    pub fn body(&mut self, now: Instant) -> String {
        let gpus = self.scrape(now);
        exposition(&self.hostname, &self.columns, &gpus)
    }
}

/// The HTTP server: a thread answering `GET /metrics` from the shared [`State`] until [`stop`](Self::stop).
pub struct Exporter {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Exporter {
    /// Serves `state` on `listener` (already bound: see [`bind`]).
    pub fn start(listener: TcpListener, state: State) -> Result<Exporter, Failure> {
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::new(1, format!("the exporter's socket: {e}")))?;
        let server = tiny_http::Server::from_listener(listener, None).map_err(|e| {
            Failure::new(1, format!("cannot serve Prometheus metrics on {addr}: {e}"))
        })?;
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&state), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("gpu-tools-prometheus".into())
            .spawn(move || serve(&server, &s, &st))
            .map_err(|e| Failure::new(1, format!("cannot start the exporter's thread: {e}")))?;
        Ok(Exporter {
            state,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The address served (with the port chosen where 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes one refresh of the view.
    pub fn update(&self, rows: &[TopRow], totals: &[(TopGpu, TopTotals)]) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .update(rows, totals, Instant::now());
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The server's loop: answers requests until `stop` (checked every 100 ms).
fn serve(server: &tiny_http::Server, state: &Mutex<State>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let request = match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("Prometheus exporter: {e}");
                continue;
            }
        };
        let path = request.url().split('?').next().unwrap_or("").to_string();
        let get = matches!(
            request.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let (code, body, content_type) = match (get, path.as_str()) {
            (true, "/metrics") => {
                let body = state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .body(Instant::now());
                (200, body, CONTENT_TYPE)
            }
            (true, "/") => (
                200,
                "gpu-tools top: Prometheus metrics at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            (true, _) => (
                404,
                "not found: the metrics are at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            (false, _) => (
                405,
                "only GET and HEAD\n".to_string(),
                "text/plain; charset=utf-8",
            ),
        };
        let mut response = tiny_http::Response::from_string(body).with_status_code(code);
        if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        {
            response = response.with_header(h);
        }
        if let Err(e) = request.respond(response) {
            log::debug!("Prometheus exporter: a scrape's answer: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpStream;

    use gpu_tools::counters::top::Top;
    use gpu_tools::counters::{
        CounterDevice, CounterInfo, DeviceCounters, DeviceSample, ReadStatus, SampleClock,
    };
    use gpu_tools::cupti::top::TopBuilder;

    fn columns() -> Vec<TopColumn> {
        TopBuilder::new().exporter_metrics(true).columns()
    }

    fn h100(index: u32) -> TopGpu {
        TopGpu {
            index,
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: Some(format!("GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e7{index}")),
        }
    }

    /// What a busy and an idle H100 gave over one refresh (means of the columns of [`columns`]).
    fn busy_and_idle() -> Vec<ExportGpu> {
        vec![
            ExportGpu {
                gpu: h100(0),
                values: Some(vec![96.4, 41.2, 1.32e12, 6.6e11, 38.5, 62.5, 37.1]),
                totals: TopTotals {
                    samples: 2923,
                    lost: 0,
                    gaps: 0,
                    read_errors: 0,
                    refreshes_with_samples: 3,
                },
                stale_scrapes: 0,
            },
            ExportGpu {
                gpu: h100(1),
                values: Some(vec![0.0, 0.0, 1.6e6, 2.0e5, f64::NAN, 0.01, 0.0]),
                totals: TopTotals {
                    samples: 2707,
                    lost: 0,
                    gaps: 272,
                    read_errors: 0,
                    refreshes_with_samples: 3,
                },
                stale_scrapes: 0,
            },
        ]
    }

    #[test]
    fn the_exposition_has_dcgm_names_ratios_labels_and_counters() {
        let text = exposition("node-7", &columns(), &busy_and_idle());
        let line = |prefix: &str| {
            text.lines()
                .find(|l| l.starts_with(prefix))
                .unwrap_or_else(|| panic!("no {prefix}:\n{text}"))
                .to_string()
        };
        let labels0 = "gpu=\"0\",UUID=\"GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e70\",model_name=\"NVIDIA H100 80GB HBM3\",\
                       Hostname=\"node-7\"";
        assert_eq!(
            line("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""),
            format!("DCGM_FI_PROF_SM_ACTIVE{{{labels0}}} 0.9640000000000001")
        );
        assert!(
            line("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE{gpu=\"0\"").ends_with(" 0.41200000000000003")
        );
        assert!(line("DCGM_FI_PROF_DRAM_ACTIVE{gpu=\"0\"").ends_with(" 0.625"));
        assert!(line("DCGM_FI_PROF_SM_OCCUPANCY{gpu=\"0\"").ends_with(" 0.371"));
        assert!(line("gpu_tools_dram_read_bytes_per_second{gpu=\"0\"").ends_with(" 1320000000000"));
        assert!(line("gpu_tools_sampling_gaps_total{gpu=\"1\"").ends_with(" 272"));
        assert!(line("gpu_tools_samples_lost_total{gpu=\"1\"").ends_with(" 0"));
        assert!(line("gpu_tools_gpu_up{gpu=\"1\"").ends_with(" 1"));
        // A value that is not a number is left out, the GPU's other gauges stay.
        assert!(
            !text.contains("gpu_tools_sm_achieved_occupancy_ratio{gpu=\"1\""),
            "{text}"
        );
        assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""));
        // Every family has its HELP and TYPE once, before its samples, counters end in _total.
        for l in text.lines().filter(|l| l.starts_with("# TYPE ")) {
            let name = l.split_whitespace().nth(2).unwrap();
            assert_eq!(
                text.matches(&format!("# TYPE {name} ")).count(),
                1,
                "{name}"
            );
            assert_eq!(
                text.matches(&format!("# HELP {name} ")).count(),
                1,
                "{name}"
            );
            if l.ends_with(" counter") {
                assert!(name.ends_with("_total"), "{name}");
            }
        }
        assert!(
            !text.contains("gpu_tools_device_metric"),
            "no user column: {text}"
        );
    }

    #[test]
    fn a_stale_gpu_keeps_its_counters_and_loses_its_gauges() {
        let gpus = vec![h100(0), h100(1)];
        let mut state = State::new("h".into(), columns(), gpus.clone(), Duration::from_secs(3));
        let t0 = Instant::now();
        // Nothing read yet: both stale.
        let first = state.scrape(t0);
        assert!(
            first
                .iter()
                .all(|g| g.values.is_none() && g.stale_scrapes == 1)
        );
        let row = |index: u32, samples: usize, error: Option<&str>| TopRow {
            host_ns: 0,
            gpu_end_ns: 0,
            device: index,
            name: "NVIDIA H100 80GB HBM3".into(),
            samples,
            dropped: 0,
            gaps: 0,
            values: vec![50.0; 7],
            error: error.map(str::to_string),
        };
        let totals = |errors: u64| {
            vec![
                (
                    gpus[0].clone(),
                    TopTotals {
                        samples: 10,
                        ..TopTotals::default()
                    },
                ),
                (
                    gpus[1].clone(),
                    TopTotals {
                        samples: 10,
                        read_errors: errors,
                        ..TopTotals::default()
                    },
                ),
            ]
        };
        state.update(&[row(0, 10, None), row(1, 10, None)], &totals(0), t0);
        let text = state.body(t0 + Duration::from_secs(1));
        assert_eq!(text.matches("DCGM_FI_PROF_SM_ACTIVE{").count(), 2, "{text}");
        assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\",UUID=\"GPU-5c4b1a0e-7d2f-4e61-9a83-0f6b2d1c9e71\",model_name=\"NVIDIA H100 80GB HBM3\",Hostname=\"h\"} 0.5"));
        // GPU 1 stops answering: its read fails. Its gauges are left out, its counters stay and count.
        state.update(
            &[row(0, 10, None), row(1, 0, Some("decode failed"))],
            &totals(1),
            t0 + Duration::from_secs(2),
        );
        let text = state.body(t0 + Duration::from_secs(2));
        assert!(!text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""), "{text}");
        assert!(text.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""));
        assert!(
            text.contains("gpu_tools_gpu_up{gpu=\"1\",") && text.contains("Hostname=\"h\"} 0\n")
        );
        assert!(text.contains("gpu_tools_read_errors_total{gpu=\"1\""));
        assert!(
            text.lines()
                .any(|l| l.starts_with("gpu_tools_stale_scrapes_total{gpu=\"1\"")
                    && l.ends_with(" 2"))
        );
        // GPU 0 without a new sample for longer than stale_after: stale too.
        let late = state.scrape(t0 + Duration::from_secs(10));
        assert!(late[0].values.is_none());
        // Refreshes without samples but no error keep the last values while they are recent.
        state.update(
            &[row(0, 0, None), row(1, 10, None)],
            &totals(1),
            t0 + Duration::from_secs(11),
        );
        let now = state.scrape(t0 + Duration::from_secs(12));
        assert!(now[0].values.is_none() && now[1].values.is_some());
    }

    #[test]
    fn user_columns_and_odd_names_are_exported_safely() {
        let columns = vec![
            TopColumn::for_counter("GRBM_COUNT"),
            TopColumn::for_counter("SQ_WAVES"),
        ];
        let gpus = vec![ExportGpu {
            gpu: TopGpu {
                index: 3,
                name: "AMD \"Instinct\"\nMI300X".into(),
                uuid: None,
            },
            values: Some(vec![1.5e9, 12.0]),
            totals: TopTotals::default(),
            stale_scrapes: 0,
        }];
        let text = exposition("a\\b", &columns, &gpus);
        assert!(
            text.contains(
                "gpu_tools_device_metric{gpu=\"3\",model_name=\"AMD \\\"Instinct\\\"\\nMI300X\",Hostname=\"a\\\\b\",metric=\"GRBM_COUNT\"} 1500000000\n"
            ),
            "{text}"
        );
        assert!(!text.contains("DCGM_"), "no DCGM counterpart: {text}");
        assert!(!text.contains("UUID"), "no UUID known: {text}");
    }

    #[test]
    fn addresses_default_to_loopback() {
        assert_eq!(
            parse_listen("9400").unwrap(),
            "127.0.0.1:9400".parse().unwrap()
        );
        assert_eq!(
            parse_listen("0.0.0.0:9400").unwrap(),
            "0.0.0.0:9400".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:9400").unwrap(),
            "[::1]:9400".parse().unwrap()
        );
        assert!(parse_listen(":9400").is_err());
        assert!(parse_listen("localhost:9400").is_err());
        assert!(parse_listen("70000").is_err());
    }

    #[test]
    fn a_port_in_use_is_refused_clearly() {
        let taken = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = taken.local_addr().unwrap();
        let Err(Failure::Message { code, message }) = bind(addr) else {
            panic!("bound a port in use")
        };
        assert_eq!(code, 1);
        assert!(
            message.contains(&addr.to_string()) && message.contains("in use"),
            "{message}"
        );
    }

    /// A sampler that answers twice, then fails: a GPU that stops answering.
    struct Flaky {
        device: CounterDevice,
        counters: Vec<CounterInfo>,
        reads: u32,
    }

    impl DeviceCounters for Flaky {
        fn device(&self) -> &CounterDevice {
            &self.device
        }
        fn counters(&self) -> &[CounterInfo] {
            &self.counters
        }
        fn clock(&self) -> SampleClock {
            SampleClock::HostMonotonic
        }
        fn read(
            &mut self,
            _: Duration,
            out: &mut Vec<DeviceSample>,
        ) -> gpu_tools::Result<ReadStatus> {
            self.reads += 1;
            if self.device.index == 1 && self.reads > 2 {
                return Err(gpu_tools::LoadError::AlreadyLoaded {
                    library: "the GPU's sampler",
                    loaded: "/stopped".into(),
                    requested: "/answering".into(),
                }
                .into());
            }
            let busy = if self.device.index == 0 { 96.0 } else { 0.0 };
            for i in 0..10 {
                out.push(DeviceSample {
                    start_ns: i,
                    end_ns: i + 1,
                    values: vec![busy, busy / 2.0, 1e12, 5e11, 40.0, 60.0, 35.0],
                });
            }
            Ok(ReadStatus {
                samples: 10,
                dropped: 0,
                gaps: if self.device.index == 1 { 1 } else { 0 },
            })
        }
    }

    /// `GET path` over loopback; the status line and the body.
    fn get(addr: SocketAddr, path: &str) -> (String, String) {
        let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut response = String::new();
        s.read_to_string(&mut response).unwrap();
        let (head, body) = response.split_once("\r\n\r\n").unwrap_or((&response, ""));
        let status = head.lines().next().unwrap_or("").to_string();
        if path == "/metrics" && status.contains(" 200 ") {
            assert!(
                head.to_ascii_lowercase()
                    .contains("content-type: text/plain; version=0.0.4"),
                "{head}"
            );
        }
        (status, body.to_string())
    }

    /// The exporter over a view of two fake GPUs, scraped over loopback while one stops answering. With
    /// `GPU_TOOLS_PROMETHEUS_SAMPLE` set, writes the scraped exposition there (CI checks it with promtool).
    #[test]
    fn the_exporter_serves_scrapes_while_a_gpu_stops_answering() {
        let columns = columns();
        let mut top = Top::new(columns.clone());
        for index in 0..2 {
            top.watch(
                Box::new(Flaky {
                    device: CounterDevice {
                        index,
                        name: "NVIDIA H100 80GB HBM3".into(),
                    },
                    counters: Vec::new(),
                    reads: 0,
                }),
                Some(format!("GPU-00000000-0000-0000-0000-00000000000{index}")),
            );
        }
        let gpus = top.gpus().into_iter().cloned().collect();
        let state = State::new("test-host".into(), columns, gpus, Duration::from_secs(60));
        let exporter =
            Exporter::start(bind("127.0.0.1:0".parse().unwrap()).unwrap(), state).unwrap();
        let addr = exporter.addr();
        assert!(addr.ip().is_loopback() && addr.port() != 0);
        let (status, before) = get(addr, "/metrics");
        assert!(status.contains(" 200 "), "{status}");
        assert!(
            before.contains("gpu_tools_gpu_up{gpu=\"0\"")
                && !before.contains("DCGM_FI_PROF_SM_ACTIVE{"),
            "{before}"
        );
        for _ in 0..2 {
            let rows = top.read();
            exporter.update(&rows, &top.totals());
        }
        let (_, both) = get(addr, "/metrics");
        assert_eq!(both.matches("DCGM_FI_PROF_SM_ACTIVE{").count(), 2, "{both}");
        // GPU 1 stops answering.
        let rows = top.read();
        assert!(rows[1].error.is_some());
        exporter.update(&rows, &top.totals());
        let (status, after) = get(addr, "/metrics");
        assert!(status.contains(" 200 "), "{status}");
        assert!(
            after.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"0\""),
            "{after}"
        );
        assert!(
            !after.contains("DCGM_FI_PROF_SM_ACTIVE{gpu=\"1\""),
            "{after}"
        );
        assert!(
            after.lines().any(
                |l| l.starts_with("gpu_tools_read_errors_total{gpu=\"1\"") && l.ends_with(" 1")
            )
        );
        assert!(
            after
                .lines()
                .any(|l| l.starts_with("gpu_tools_sampling_gaps_total{gpu=\"1\"")
                    && l.ends_with(" 2"))
        );
        let (status, _) = get(addr, "/elsewhere");
        assert!(status.contains(" 404 "), "{status}");
        let (status, _) = get(addr, "/");
        assert!(status.contains(" 200 "), "{status}");
        if let Some(path) = std::env::var_os("GPU_TOOLS_PROMETHEUS_SAMPLE") {
            std::fs::write(path, &after).unwrap();
        }
        exporter.stop();
        // The listener closes once the server's accept thread has seen the stop.
        let mut closed = false;
        for _ in 0..40 {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(100)).is_err() {
                closed = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(closed, "stopped serving");
    }
}
