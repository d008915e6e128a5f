//! `gpu-tools top`: a live per-GPU view of device-wide counters, read through the library's vendor-neutral
//! [`DeviceCounters`]: NVIDIA's PM sampling (SM active, tensor pipe active, DRAM read and write bandwidth,
//! achieved occupancy), or, where no CUDA driver is found, rocprofiler v2's device profiling session on AMD GPUs
//! (the counters named with `--counters`). It sees every process on the GPU.

use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::ValueEnum;
use gpu_tools::counters::{DeviceCounters, DeviceSample, host_monotonic_ns, mean_values};
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};
use gpu_tools::cupti::top::TOP_METRICS;
use gpu_tools::profile::{json_num, json_str};
use gpu_tools::rocprofiler::{DeviceProfilingSession, Rocprofiler, RocprofilerLibrary};

use crate::failure::{Failure, Outcome};

/// Live per-GPU counters: SM, tensor pipe, DRAM bandwidth and occupancy (NVIDIA PM sampling), or AMD device
/// counters (rocprofiler).
///
/// Prints one row per GPU every `--interval` milliseconds, each the mean of the samples taken in it, until
/// Ctrl-C or `--duration`. Only one PM-sampling client per GPU can run at a time (another `top`, `ncu`, Nsight
/// Systems' GPU metrics): while one does, `top` fails and says so. Exit code: 0; 1 when the counters cannot be
/// read (no driver, counters busy or restricted to administrators); 2 for a usage error; 3 when samples were lost.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// GPUs to watch (CUDA device ordinals, or AMD GPU agent indices), comma-separated or repeated.
    #[arg(
        long,
        short,
        value_delimiter = ',',
        default_value = "0",
        value_name = "N"
    )]
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
}

/// Where `top` reads counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum Source {
    Auto,
    Cupti,
    Rocprofiler,
}

/// Width of a counter's column.
const COLUMN: usize = 10;

/// The column header of metric `name` (`sm__throughput.avg.pct_of_peak_sustained_elapsed`): its base name, cut to
/// the column's width with `…` marking the cut.
fn header(name: &str) -> String {
    let base = name.split('.').next().unwrap_or(name);
    if base.chars().count() <= COLUMN {
        return base.to_string();
    }
    let mut cut: String = base.chars().take(COLUMN - 1).collect();
    cut.push('…');
    cut
}

fn parse_seconds(s: &str) -> Result<f64, String> {
    match s.parse::<f64>() {
        Ok(v) if v.is_finite() && v >= 0.0 => Ok(v),
        _ => Err(format!("{s:?} is not a number of seconds")),
    }
}

/// A column of the view: its JSON key, its header, whether it is a bandwidth (shown in GB/s).
struct Column {
    key: String,
    header: String,
    bandwidth: bool,
}

/// The NVIDIA sources: one PM sampler per device with the view's metrics.
fn nvidia(args: &Args) -> Result<Vec<Box<dyn DeviceCounters>>, Failure> {
    let driver = gpu_tools::cuda::Driver::load()?;
    let sample = Duration::from_millis(args.sample_ms);
    let mut sources: Vec<Box<dyn DeviceCounters>> = Vec::new();
    for &d in &args.device {
        let cc = driver
            .device_info(d)
            .map(|i| i.compute_capability)
            .unwrap_or((0, 0));
        // Time-based sampling from GA10x on; before it, clocks at about 1 GHz.
        let interval = if cc >= (8, 6) {
            Interval::Time(sample)
        } else {
            Interval::Clocks(u64::try_from(sample.as_nanos()).unwrap_or(u64::MAX).max(1))
        };
        let metrics: Vec<&str> = if args.metrics.is_empty() {
            TOP_METRICS.iter().map(|m| m.metric).collect()
        } else {
            args.metrics.iter().map(String::as_str).collect()
        };
        let sampler = PmSampler::builder(d)
            .metrics(metrics)
            .interval(interval)
            .start()?;
        sources.push(Box::new(sampler));
    }
    Ok(sources)
}

/// The AMD sources: one rocprofiler v2 device profiling session per GPU, borrowing the initialised library.
fn amd<'r>(
    args: &Args,
    rocprofiler: &'r Rocprofiler,
) -> Result<Vec<Box<dyn DeviceCounters + 'r>>, Failure> {
    let mut sources: Vec<Box<dyn DeviceCounters + 'r>> = Vec::new();
    for &d in &args.device {
        let gpu = u32::try_from(d).map_err(|_| Failure::new(1, format!("no GPU {d}")))?;
        let mut session = DeviceProfilingSession::new(rocprofiler, &args.counters, 0, gpu)?;
        session.start()?;
        sources.push(Box::new(session));
    }
    Ok(sources)
}

pub fn run(args: Args) -> Outcome {
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
    let (sources, columns) = if use_nvidia {
        let columns: Vec<Column> = if args.metrics.is_empty() {
            TOP_METRICS
                .iter()
                .map(|m| Column {
                    key: m.key.to_string(),
                    header: m.header.to_string(),
                    bandwidth: m.key.ends_with("bytes_per_s"),
                })
                .collect()
        } else {
            args.metrics
                .iter()
                .map(|m| Column {
                    key: m.clone(),
                    header: header(m),
                    bandwidth: m.ends_with(".per_second") && m.contains("bytes"),
                })
                .collect()
        };
        (nvidia(&args)?, columns)
    } else {
        rocprofiler = Rocprofiler::initialize(RocprofilerLibrary::load()?)?;
        let columns: Vec<Column> = args
            .counters
            .iter()
            .map(|c| Column {
                key: c.clone(),
                header: c.clone(),
                bandwidth: false,
            })
            .collect();
        (amd(&args, &rocprofiler)?, columns)
    };
    view(&args, &stop, sources, &columns)
}

fn view(
    args: &Args,
    stop: &AtomicBool,
    mut sources: Vec<Box<dyn DeviceCounters + '_>>,
    columns: &[Column],
) -> Outcome {
    let end = args
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d));
    let every = Duration::from_millis(args.interval);
    let mut out = std::io::stdout().lock();
    if !args.json {
        let mut h = format!("{:>3} {:>7}", "GPU", "SAMPLES");
        for c in columns {
            h.push_str(&format!(" {:>COLUMN$}", c.header));
        }
        h.push_str("  NAME");
        writeln!(out, "{h}").map_err(Failure::stdout)?;
    }
    let mut totals = vec![(0usize, 0u64); sources.len()];
    let mut next = Instant::now();
    while !stop.load(Ordering::SeqCst) && end.is_none_or(|e| Instant::now() < e) {
        next += every;
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            // Fell behind (a slow terminal): start the cadence again from now.
            next = now;
        }
        for (source, total) in sources.iter_mut().zip(&mut totals) {
            let mut samples = Vec::new();
            let status = source.read(Duration::ZERO, &mut samples)?;
            total.0 += samples.len();
            total.1 += status.dropped;
            let line = row(
                source.as_ref(),
                &samples,
                status.dropped,
                columns,
                args.json,
            );
            writeln!(out, "{line}").map_err(Failure::stdout)?;
        }
        out.flush().map_err(Failure::stdout)?;
    }
    let mut lost = false;
    for (source, (samples, dropped)) in sources.iter().zip(totals) {
        eprintln!(
            "gpu-tools top: device {} ({}): {samples} samples, {dropped} lost",
            source.device().index,
            source.device().name
        );
        lost |= dropped > 0;
    }
    Ok(if lost { crate::failure::INCOMPLETE } else { 0 })
}

/// One GPU over one refresh, as text or a JSON line.
fn row(
    source: &dyn DeviceCounters,
    samples: &[DeviceSample],
    dropped: u64,
    columns: &[Column],
    json: bool,
) -> String {
    let device = source.device();
    let values = mean_values(samples, columns.len());
    if json {
        let mut j = format!(
            "{{\"host_ns\":{},\"gpu_end_ns\":{},\"device\":{},\"name\":{},\"samples\":{},\"dropped\":{}",
            host_monotonic_ns(),
            samples.last().map_or(0, |s| s.end_ns),
            device.index,
            json_str(&device.name),
            samples.len(),
            dropped
        );
        for (c, v) in columns.iter().zip(&values) {
            j.push_str(&format!(",{}:{}", json_str(&c.key), json_num(*v)));
        }
        j.push('}');
        return j;
    }
    let mut t = format!("{:>3} {:>7}", device.index, samples.len());
    for (c, v) in columns.iter().zip(&values) {
        let cell = if v.is_nan() {
            "-".to_string()
        } else if c.bandwidth {
            format!("{:.1}G", v / 1e9)
        } else {
            format!("{v:.1}")
        };
        t.push_str(&format!(" {cell:>COLUMN$}"));
    }
    t.push_str("  ");
    t.push_str(&device.name);
    if dropped > 0 {
        t.push_str(&format!(" (dropped {dropped})"));
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_metric_names_are_cut_with_an_ellipsis() {
        assert_eq!(header("sm__cycles_active.avg"), "sm__cycle…");
        assert_eq!(
            header("sm__throughput.avg.pct_of_peak_sustained_elapsed")
                .chars()
                .count(),
            COLUMN
        );
        assert_eq!(header("dram__read.sum"), "dram__read");
        assert_eq!(header("gpu__time"), "gpu__time");
    }
}
