//! `gpu_top`: a live per-GPU view of SM active %, tensor-pipe active %, DRAM read and write bandwidth and achieved
//! occupancy, from device-wide PM sampling, as `gpu-tools top` prints it. It sees every process on the GPU.
//!
//!     gpu_top [--devices 0,1] [--every-ms 1000] [--sample-ms 10] [--duration SECS] [--json]

use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_tools::cupti::top::{Top, TopRow};

#[derive(Parser, Debug)]
#[command(
    about = "Live per-GPU counters from PM sampling (SM, tensor pipe, DRAM bandwidth, occupancy)"
)]
struct Cli {
    /// CUDA devices to watch.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    devices: Vec<usize>,
    /// Refresh period, milliseconds.
    #[arg(long, default_value_t = 1000)]
    every_ms: u64,
    /// Sampling interval, milliseconds.
    #[arg(long, default_value_t = 10)]
    sample_ms: u64,
    /// Stop after this many seconds (default: until Ctrl-C).
    #[arg(long)]
    duration: Option<f64>,
    /// One JSON object per GPU and refresh, one per line.
    #[arg(long)]
    json: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("gpu_top: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: &Cli) -> gpu_tools::Result<()> {
    let stop = Arc::new(AtomicBool::new(false));
    let s = Arc::clone(&stop);
    // Without a handler the counters would still be released by the driver at exit; with it the report is printed.
    let _ = ctrlc::set_handler(move || s.store(true, Ordering::SeqCst));
    let mut top = Top::start(&cli.devices, Duration::from_millis(cli.sample_ms.max(1)))?;
    let end = cli
        .duration
        .map(|d| Instant::now() + Duration::from_secs_f64(d.max(0.0)));
    let every = Duration::from_millis(cli.every_ms.max(1));
    if !cli.json {
        println!("{}", TopRow::text_header());
    }
    while !stop.load(Ordering::SeqCst) && end.is_none_or(|e| Instant::now() < e) {
        for row in top.rows(every)? {
            if cli.json {
                println!("{}", row.to_json());
            } else {
                println!("{}", row.to_text());
            }
        }
    }
    for (d, r) in cli.devices.iter().zip(top.stop()?) {
        let s = r.stats;
        eprintln!(
            "gpu_top: device {d}: {} samples, {} decodes, {} overflows, {} samples lost",
            s.samples, s.decodes, s.overflows, s.dropped
        );
    }
    Ok(())
}
