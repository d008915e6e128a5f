//! Measures, on a GPU host, the sampling periods that PM sampling leaves without a sample: samples one GPU for a
//! while, then prints the steps between consecutive sample ends in sampling periods (1 where nothing is missing),
//! the GPU's activity next to each hole, and the sampler's counts: lost (an overflow CUPTI reported), gaps (no loss
//! reported), gaps just after a restart of the counter-data image, samples CUPTI had begun but not completed when
//! an image was started afresh. Run it on an idle GPU, then under load, then with another image size: which of
//! these moves with the gaps tells why an idle GPU has them (docs/driver-notes.md).
//!
//!     pm_gaps [--device 0] [--seconds 5] [--sample-ms 1] [--samples-per-decode N]

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_tools::counters::{DeviceCounters, DeviceSample};
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};

#[derive(Parser, Debug)]
#[command(about = "Measure the sampling periods PM sampling leaves without a sample on one GPU")]
struct Cli {
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// How long to sample, seconds.
    #[arg(long, default_value_t = 5)]
    seconds: u64,
    /// Sampling period, milliseconds (time-based: Ampere GA10x and later).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..))]
    sample_ms: u64,
    /// Samples per counter-data image [default: the sampler's, four decode periods' worth]: a larger image is
    /// started afresh less often.
    #[arg(long)]
    samples_per_decode: Option<usize>,
}

const METRICS: [&str; 2] = [
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum.per_second",
];

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pm_gaps: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> gpu_tools::Result<()> {
    let period = Duration::from_millis(cli.sample_ms);
    let mut b = PmSampler::builder(cli.device)
        .metrics(METRICS)
        .interval(Interval::Time(period));
    if let Some(n) = cli.samples_per_decode {
        b = b.samples_per_decode(n);
    }
    let mut sampler = b.start()?;
    println!("device {}: {:?}", cli.device, sampler.layout());
    let mut samples: Vec<DeviceSample> = Vec::new();
    let (mut lost, mut gaps) = (0u64, 0u64);
    let end = Instant::now() + Duration::from_secs(cli.seconds);
    while Instant::now() < end {
        let status = sampler.read(Duration::from_millis(200), &mut samples)?;
        lost += status.dropped;
        gaps += status.gaps;
    }
    let report = sampler.stop()?;
    println!("{:?}", report.stats);
    println!(
        "{} samples read, {lost} lost and {gaps} gaps reported by the reads",
        samples.len()
    );
    if samples.len() < 2 {
        return Ok(());
    }
    let period_ns = period.as_nanos() as f64;
    let mut steps: BTreeMap<String, u64> = BTreeMap::new();
    let (mut holes, mut idle_holes, mut shown) = (0u64, 0u64, 0);
    for w in samples.windows(2) {
        let step = w[1].end_ns.saturating_sub(w[0].end_ns) as f64 / period_ns;
        let whole = step.round();
        let key = if (step - whole).abs() <= 0.1 {
            format!("{whole:>3} periods")
        } else {
            format!("off the grid ({:.1})", step)
        };
        *steps.entry(key).or_default() += 1;
        if whole >= 2.0 {
            holes += 1;
            let idle = w[0].values[0] < 1.0 && w[1].values[0] < 1.0;
            idle_holes += u64::from(idle);
            if shown < 20 {
                shown += 1;
                println!(
                    "hole of {:.2} periods after the sample ending at {} ns; SM active before {:.2}%, after {:.2}%",
                    step - 1.0,
                    w[0].end_ns,
                    w[0].values[0],
                    w[1].values[0]
                );
            }
        }
    }
    println!("steps between consecutive sample ends:");
    for (k, n) in &steps {
        println!("  {k}: {n}");
    }
    let active = samples.iter().map(|s| s.values[0]).sum::<f64>() / samples.len() as f64;
    println!(
        "{holes} holes, {idle_holes} between two samples with SM active below 1%; mean SM active {active:.2}%; {} \
         image restarts ({:.1} gaps each)",
        report.stats.image_full,
        report.stats.gaps as f64 / report.stats.image_full.max(1) as f64
    );
    Ok(())
}
