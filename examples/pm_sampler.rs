//! A PM sampler: device-wide performance counters over time with CUPTI's PM sampling ([`PmSampler`]).
//!
//! The sampler needs no CUDA context of its own and sees every process on the GPU: start it, run a workload in
//! another process (or leave the GPU idle), and it prints one line per sample (its start on the GPU's timer and
//! one value per metric), then how many samples it took and how many the hardware buffer lost. One PM client per
//! GPU: with ncu, DCGM or Nsight Systems' GPU metrics running, starting fails with a "counters busy" error. Errors
//! are printed; exit status 1.
//!
//! On a host with an NVIDIA GPU (Turing or later; CUPTI 12.6+), while something runs on GPU 0:
//!
//! ```text
//! cargo run --release --example pm_sampler -- --seconds 2 --interval-ms 10
//! bash .gpu/run.sh example pm_sampler --seconds 2    # staged by scripts/gpu-stage
//! ```

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use gpu_tools::counters::DeviceCounters;
use gpu_tools::cupti::pm_sampling::{Interval, PmSampler};

/// The metrics sampled: SM activity and DRAM read bandwidth.
const METRICS: [&str; 2] = [
    "sm__cycles_active.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum.per_second",
];

/// Sample a GPU's SM activity and DRAM read bandwidth over time with CUPTI PM sampling.
#[derive(Parser)]
struct Args {
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// How long to sample, in seconds.
    #[arg(long, default_value_t = 1)]
    seconds: u64,
    /// Sampling interval, in milliseconds.
    #[arg(long, default_value_t = 10)]
    interval_ms: u64,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("pm_sampler: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> gpu_tools::Result<()> {
    let mut sampler = PmSampler::builder(args.device)
        .metrics(METRICS)
        .interval(Interval::Time(Duration::from_millis(args.interval_ms)))
        .start()?;
    let mut samples = Vec::new();
    // Stops the sampler (releasing the counters) also when reading failed.
    let read = sampler.read(Duration::from_secs(args.seconds), &mut samples);
    let report = sampler.stop()?;
    read?;
    for s in &samples {
        println!(
            "{} ns: SM active {:5.1}%, DRAM read {:.3e} B/s",
            s.start_ns, s.values[0], s.values[1]
        );
    }
    println!(
        "{} samples, {} lost to overflow",
        report.stats.samples, report.stats.dropped
    );
    Ok(())
}
