//! `gpu-tools top`: a live per-GPU view of device-wide counters, built on the library's view
//! ([`gpu_tools::counters::top::Top`]): NVIDIA's PM sampling (SM active, tensor pipe active, DRAM read and write
//! bandwidth, achieved occupancy; [`gpu_tools::cupti::top`]), or, where no CUDA driver is found, rocprofiler v2's
//! device profiling session on AMD GPUs (the counters named with `--counters`). It sees every process on the GPU.
//! With `--prometheus`, the latest values are also served to Prometheus (`crate::prometheus`).

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use gpu_tools::counters::top::{Top, TopColumn};
use gpu_tools::cupti::top::TopBuilder;
use gpu_tools::rocprofiler::{DeviceProfilingSession, Rocprofiler, RocprofilerLibrary};

use crate::failure::{Failure, Outcome};
use crate::prometheus;

/// Live per-GPU counters: SM, tensor pipe, DRAM bandwidth and occupancy (NVIDIA PM sampling), or AMD device
/// counters (rocprofiler).
///
/// Watches every GPU the driver reports (as nvidia-smi does; `--device` names some), one PM sampler each, and
/// prints one row per GPU every `--interval` milliseconds, each the mean of the samples taken in it, until Ctrl-C
/// or `--duration`; then a line per GPU with its samples, the samples lost and the gaps. A gap is a sampling
/// period that passed without a sample while nothing reported a loss (an idle GPU shows some): it is not a loss.
/// Only one PM-sampling client per GPU can run at a time (another `top`, `ncu`, DCGM, Nsight Systems' GPU
/// metrics): a GPU another client holds is left out with a note, or, named with `--device`, makes `top` fail.
/// `--prometheus PORT` serves the latest values at http://127.0.0.1:PORT/metrics under dcgm-exporter's names.
/// Exit code: 0 (gaps included); 1 when the counters cannot be read (no driver, counters busy or restricted to
/// administrators, a GPU whose reads failed) or the exporter's address cannot be bound; 2 for a usage error; 3 when
/// samples were lost.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPUs to watch (CUDA device ordinals, or AMD GPU agent indices), comma-separated or repeated [default: every
    /// GPU].
    #[arg(long, short, value_delimiter = ',', value_name = "N")]
    device: Vec<usize>,
    /// Refresh period, milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    interval: u64,
    /// Sampling period of the hardware, milliseconds (NVIDIA; rocprofiler samples once per refresh). 1 ms is
    /// what was seen to work on an H100 with CUPTI 13.0: at 10 ms the evaluation of derived metrics (percentages,
    /// rates) crashed inside CUPTI.
    #[arg(long, default_value_t = 1, value_name = "MS", value_parser = clap::value_parser!(u64).range(1..))]
    sample_ms: u64,
    /// Stop after this many seconds [default: until Ctrl-C].
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    duration: Option<f64>,
    /// One JSON object per GPU and refresh, one per line.
    #[arg(long)]
    json: bool,
    /// Where the counters come from: `auto` (NVIDIA PM sampling where the CUDA driver is found, else AMD),
    /// `cupti`, `rocprofiler`.
    #[arg(long, value_enum, default_value_t = Source::Auto)]
    source: Source,
    /// NVIDIA: the metrics to show instead of the default columns, comma-separated full names that PM sampling
    /// collects (see `gpu-tools metrics --method pm`).
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    metrics: Vec<String>,
    /// rocprofiler: the counters to read, comma-separated.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "GRBM_COUNT,GRBM_GUI_ACTIVE",
        value_name = "NAMES"
    )]
    counters: Vec<String>,
    /// Serve the latest values to Prometheus at `GET /metrics`: PORT (on 127.0.0.1) or ADDRESS:PORT
    /// (`0.0.0.0:9400` serves other hosts). Gauges under dcgm-exporter's names (`DCGM_FI_PROF_SM_ACTIVE`, ...) as
    /// ratios, DRAM bytes per second, and counters of samples, losses, gaps and failed reads per GPU.
    #[arg(long, value_name = "ADDR", value_parser = prometheus::parse_listen)]
    prometheus: Option<SocketAddr>,
}

/// Where `top` reads counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Source {
    Auto,
    Cupti,
    Rocprofiler,
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds")),
    }
}

/// The NVIDIA view: one PM sampler per GPU.
fn nvidia(args: &Args) -> Result<Top<'static>, Failure> {
    let mut b = TopBuilder::new()
        .sample(Duration::from_millis(args.sample_ms))
        .metrics(&args.metrics)
        .exporter_metrics(args.prometheus.is_some());
    if !args.device.is_empty() {
        b = b.devices(args.device.iter().copied());
    }
    Ok(b.start()?)
}

/// The AMD view: one rocprofiler v2 device profiling session per GPU, borrowing the initialised library. Every
/// GPU the driver lists unless `--device` names some; one that cannot be sampled is then left out.
fn amd<'r>(args: &Args, rocprofiler: &'r Rocprofiler) -> Result<Top<'r>, Failure> {
    let columns: Vec<TopColumn> = args
        .counters
        .iter()
        .map(|c| TopColumn::for_counter(c))
        .collect();
    let mut top = Top::new(columns);
    let named = !args.device.is_empty();
    let devices: Vec<usize> = if named {
        args.device.clone()
    } else {
        (0..gpu_tools::rocprofiler::amd_gpus()
            .map_err(Failure::error)?
            .len())
            .collect()
    };
    let mut first_error = None;
    for d in devices {
        let gpu = u32::try_from(d).map_err(|_| Failure::new(1, format!("no GPU {d}")))?;
        let started = DeviceProfilingSession::new(rocprofiler, &args.counters, 0, gpu)
            .and_then(|mut s| s.start().map(|()| s));
        match started {
            Ok(session) => top.watch(Box::new(session), None),
            Err(e) if !named => {
                top.skip(gpu, e.to_string());
                first_error.get_or_insert(e);
            }
            Err(e) => return Err(e.into()),
        }
    }
    match first_error {
        Some(e) if top.is_empty() => Err(e.into()),
        _ => Ok(top),
    }
}

pub fn run(args: Args) -> Outcome {
    // The exporter's address is bound first: a port in use or an address this machine lacks ends `top` before
    // any GPU is touched.
    let listener = match args.prometheus {
        Some(addr) => Some(prometheus::bind(addr)?),
        None => None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    // Without a handler the counters would still be released at exit; with it the last lines are printed.
    let _ = ctrlc::set_handler(move || s.store(true, Ordering::SeqCst));
    let use_nvidia = match args.source {
        Source::Cupti => true,
        Source::Rocprofiler => false,
        Source::Auto => {
            gpu_tools::cuda::Driver::load().is_ok() || gpu_tools::rocprofiler::amd_gpus().is_err()
        }
    };
    let rocprofiler;
    let top = if use_nvidia {
        nvidia(&args)?
    } else {
        rocprofiler = Rocprofiler::initialize(RocprofilerLibrary::load()?)?;
        amd(&args, &rocprofiler)?
    };
    for (index, why) in top.skipped() {
        eprintln!("gpu-tools top: device {index} is left out: {why}");
    }
    let exporter = match listener {
        Some(listener) => {
            let gpus = top.gpus().into_iter().cloned().collect();
            // Samples reach the view every refresh (PM sampling decodes every 50 ms): a GPU without one for
            // three refreshes, and two seconds at least, has stopped answering.
            let stale_after =
                Duration::from_millis(args.interval.saturating_mul(3)).max(Duration::from_secs(2));
            let state = prometheus::State::new(
                prometheus::hostname(),
                top.columns().to_vec(),
                gpus,
                stale_after,
            );
            let exporter = prometheus::Exporter::start(listener, state)?;
            eprintln!(
                "gpu-tools top: serving Prometheus metrics on http://{}/metrics",
                exporter.addr()
            );
            Some(exporter)
        }
        None => None,
    };
    let outcome = view(&args, &stop, top, exporter.as_ref());
    if let Some(exporter) = exporter {
        exporter.stop();
    }
    outcome
}

fn view(
    args: &Args,
    stop: &AtomicBool,
    mut top: Top<'_>,
    exporter: Option<&prometheus::Exporter>,
) -> Outcome {
    let end = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let every = Duration::from_millis(args.interval);
    let mut out = std::io::stdout().lock();
    if !args.json {
        writeln!(out, "{}", top.text_header()).map_err(Failure::stdout)?;
    }
    while !stop.load(Ordering::SeqCst) && end.is_none_or(|e| Instant::now() < e) {
        let rows = top.rows(every);
        if let Some(exporter) = exporter {
            exporter.update(&rows, &top.totals());
        }
        for row in &rows {
            if let (Some(e), None) = (&row.error, exporter) {
                // Without an exporter to keep serving, a GPU that cannot be read ends the view.
                return Err(Failure::new(1, format!("device {}: {e}", row.device)));
            }
            let line = if args.json {
                row.to_json(top.columns())
            } else {
                row.to_text(top.columns())
            };
            writeln!(out, "{line}").map_err(Failure::stdout)?;
        }
        out.flush().map_err(Failure::stdout)?;
    }
    let (mut lost, mut failed) = (false, false);
    for (gpu, t) in top.totals() {
        let mut line = format!(
            "gpu-tools top: device {} ({}): {} samples, {} lost, {} gaps",
            gpu.index, gpu.name, t.samples, t.lost, t.gaps
        );
        if t.gaps > 0 {
            line.push_str(" (sampling periods without a sample, none reported lost)");
        }
        if t.read_errors > 0 {
            line.push_str(&format!(", {} failed reads", t.read_errors));
        }
        eprintln!("{line}");
        lost |= t.lost > 0;
        failed |= t.read_errors > 0;
    }
    Ok(if failed {
        1
    } else if lost {
        crate::failure::INCOMPLETE
    } else {
        0
    })
}
