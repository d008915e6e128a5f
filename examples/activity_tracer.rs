//! An in-process activity tracer: the CUPTI Activity API through [`ActivityTracer`], which lends CUPTI its
//! buffers and hands each completed one to a closure, decoded into typed [`Activity`] records.
//!
//! The tracer starts before the program's first CUDA call (CUPTI needs it before `cuInit`), then the program does
//! some CUDA work of its own (copies to and from the device, memsets, a synchronisation) and stops the tracer,
//! which flushes: every record reaches the closure once. Each copy and memset is printed with its duration, then
//! the tracer's counts (records, buffers, drops). Errors (no driver, no CUPTI, no GPU) are printed; exit status 1.
//!
//! On a host with an NVIDIA GPU:
//!
//! ```text
//! cargo run --release --example activity_tracer -- --copies 4
//! bash .gpu/run.sh example activity_tracer --copies 4    # staged by scripts/gpu-stage
//! ```

use std::process::ExitCode;

use clap::Parser;
use gpu_tools::cuda::Context;
use gpu_tools::cupti::activity::{Activity, ActivityBatch, ActivityKinds, ActivityTracer};

/// Trace this process's own CUDA copies and memsets with the CUPTI Activity API and print each record.
#[derive(Parser)]
struct Args {
    /// Host-to-device and device-to-host copies of 1 MiB each.
    #[arg(long, default_value_t = 4)]
    copies: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("activity_tracer: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the copies and memsets of one completed buffer (the closure runs on CUPTI's thread).
fn print_batch(batch: &ActivityBatch<'_>) {
    for record in batch.records() {
        match record {
            Ok(Activity::Memcpy(m)) => println!(
                "memcpy {:?}: {} bytes in {} ns (stream {})",
                m.copy_kind(),
                m.bytes(),
                m.time().duration_ns(),
                m.stream_id()
            ),
            Ok(Activity::Memset(m)) => println!(
                "memset {:#x}: {} bytes in {} ns (stream {})",
                m.value(),
                m.bytes(),
                m.time().duration_ns(),
                m.stream_id()
            ),
            Ok(_) => {}
            Err(e) => eprintln!("a record that did not decode: {e}"),
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // Before the first cuInit: it needs the CUDA driver library, not a context.
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMCPY | ActivityKinds::MEMSET)
        .start(print_batch)?;
    let ctx = Context::primary(args.device)?;
    let mut buf = ctx.alloc(1 << 20)?;
    let mut host = vec![7u8; 1 << 20];
    for _ in 0..args.copies {
        buf.copy_from_host(&host)?;
        buf.fill_u32(0x0102_0304)?;
        buf.copy_to_host(&mut host)?;
    }
    ctx.synchronize()?;
    let report = tracer.stop()?; // disables the kinds and flushes
    if let Some(panic) = report.panic {
        return Err(format!("the closure panicked: {panic}").into());
    }
    println!(
        "{} records in {} buffers, {} dropped",
        report.stats.records, report.stats.batches, report.stats.dropped_records
    );
    Ok(())
}
