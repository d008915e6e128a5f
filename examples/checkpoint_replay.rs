//! A checkpoint replay loop with CUPTI Checkpoint: the autotuner pattern (formerly `gpu-tools replay`).
//!
//! An in-place kernel (it reads and writes the same buffer) runs N times; the context's device memory is saved
//! once with [`Checkpoint::save`] and restored before each run, so every replay starts from the same input.
//! Prints the save, restore and kernel times and each replay's checksum. Exits 0 when every replay gave the same
//! checksum, 3 when they differed, 1 when the replays could not run (no GPU, no CUPTI; the error is printed).
//!
//! On a host with an NVIDIA GPU (compute capability 8.0+; the kernel is PTX, compiled by the driver):
//!
//! ```text
//! cargo run --release --example checkpoint_replay -- --bytes 268435456 --replays 10
//! bash .gpu/run.sh example checkpoint_replay --replays 10    # staged by scripts/gpu-stage
//! ```

use std::ffi::{CStr, c_void};
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use gpu_tools::cuda::{Context, DeviceBuffer, Function};
use gpu_tools::cupti::Checkpoint;

/// `step(u32* buf, u64 n)`: `x[i] = x[i] * 1664525 + 1013904223 + i` for every word, in place.
const STEP_PTX: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../gpu-host/kernels/step.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("step.ptx holds a NUL byte"),
};

/// Save a context's device memory once with CUPTI Checkpoint, then replay an in-place kernel from that state.
#[derive(Parser)]
struct Args {
    /// Size of the device buffer the kernel updates in place: bytes, or with K, M or G (binary), as `gpu-tools
    /// trace --buffer-size` takes sizes; at least 4.
    #[arg(long, default_value = "256M", value_parser = size)]
    bytes: u64,
    /// Number of restore + kernel replays.
    #[arg(long, default_value_t = 10)]
    replays: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
}

/// `4096`, `64K`, `4M`, `1G` (powers of 1024), at least 4 bytes.
fn size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let (number, shift) = match t.chars().last().map(|c| c.to_ascii_uppercase()) {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        _ => (t, 0),
    };
    let n: u64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a size (4096, 64K, 4M, 1G)"))?;
    let bytes = n
        .checked_mul(1 << shift)
        .ok_or_else(|| format!("{text} is too large"))?;
    if bytes < 4 {
        return Err(format!("{text} is less than 4 bytes"));
    }
    Ok(bytes)
}

fn main() -> ExitCode {
    let args = Args::parse();
    match replay(&args) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!("checkpoint_replay: the replays did not start from the saved state");
            ExitCode::from(3)
        }
        Err(e) => {
            eprintln!("checkpoint_replay: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Runs the replays; returns whether each one started from the saved state.
fn replay(args: &Args) -> Result<bool, Box<dyn std::error::Error>> {
    let bytes = usize::try_from(args.bytes)?;
    let ctx = Context::primary(args.device)?;
    let name = ctx.driver().device_info(args.device)?.name;
    println!("device {}: {name}, state {} MiB", args.device, bytes >> 20);
    let module = ctx.load_module(STEP_PTX)?;
    let step = module.function(c"step")?;
    let mut buf = ctx.alloc(bytes)?;
    buf.fill_u32(0x0123_4567)?;
    launch(&ctx, &step, &buf)?; // a position-dependent starting state

    let mut checkpoint = Checkpoint::new(&ctx)?;
    let t = Instant::now();
    checkpoint.save()?;
    println!("save: {:.3} ms", t.elapsed().as_secs_f64() * 1e3);

    let mut host = vec![0u8; bytes];
    let mut sums = Vec::with_capacity(args.replays);
    for i in 0..args.replays {
        let t0 = Instant::now();
        checkpoint.restore()?;
        let t1 = Instant::now();
        launch(&ctx, &step, &buf)?;
        let t2 = Instant::now();
        let sum = checksum(&buf, &mut host)?;
        println!(
            "replay {i:3}: restore {:8.3} ms  kernel {:8.3} ms  checksum {sum:016x}",
            (t1 - t0).as_secs_f64() * 1e3,
            (t2 - t1).as_secs_f64() * 1e3
        );
        sums.push(sum);
    }
    // Without a restore, the next run starts from the previous result.
    launch(&ctx, &step, &buf)?;
    let drifted = checksum(&buf, &mut host)?;
    checkpoint.free()?;
    println!("one more run without restore: checksum {drifted:016x}");
    let identical = sums.windows(2).all(|w| w[0] == w[1]);
    println!("all replays identical: {identical}");
    Ok(identical && sums.first().is_none_or(|s| *s != drifted))
}

fn launch(ctx: &Context, step: &Function<'_>, buf: &DeviceBuffer<'_>) -> gpu_tools::Result<()> {
    let mut ptr = buf.device_ptr();
    let mut words = (buf.len() / 4) as u64;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut words).cast::<c_void>(),
    ];
    // SAFETY: `step` takes a u64 device pointer and a u64 word count; the pointer addresses that many words.
    unsafe { step.launch((4 * 132, 1, 1), (256, 1, 1), &mut params) }?;
    ctx.synchronize()?;
    Ok(())
}

fn checksum(buf: &DeviceBuffer<'_>, host: &mut [u8]) -> gpu_tools::Result<u64> {
    buf.copy_to_host(host)?;
    Ok(host.chunks(8).fold(0xCBF2_9CE4_8422_2325u64, |h, c| {
        let mut w = [0u8; 8];
        w[..c.len()].copy_from_slice(c);
        (h ^ u64::from_le_bytes(w))
            .wrapping_mul(0x100_0000_01B3)
            .rotate_left(17)
    }))
}
