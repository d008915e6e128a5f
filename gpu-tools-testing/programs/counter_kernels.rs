//! `counter_kernels`: kernels whose counters are known, for the counter APIs' hardware tests, benchmarks and
//! comparisons with Nsight Compute (`ncu --metrics ... counter_kernels copy`):
//!
//!     counter_kernels copy --bytes 268435456 [--repeat N]   copies N times; reads and writes `bytes` each time
//!     counter_kernels chase --steps 4096 [--threads 65536] [--mib 256]
//!                                                           a dependent-load chase over a random cycle
//!
//! Prints `counter_kernels <what> elapsed_ms T` (host time from the first launch to the final synchronize).

use std::ffi::{CStr, c_void};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};
use gpu_tools::cuda::Context;

#[derive(Parser, Debug)]
#[command(about = "Kernels with known counter values (copy, pointer chase)")]
struct Cli {
    /// CUDA device.
    #[arg(long, default_value_t = 0)]
    device: usize,
    #[command(subcommand)]
    what: What,
}

#[derive(Subcommand, Debug)]
enum What {
    /// Copy `bytes` (a multiple of 16) from one buffer to another, `repeat` times.
    Copy {
        #[arg(long, default_value_t = 256 << 20)]
        bytes: u64,
        #[arg(long, default_value_t = 1)]
        repeat: u32,
    },
    /// Each thread follows `steps` links of a random cycle over `mib` MiB of 4-byte indices.
    Chase {
        #[arg(long, default_value_t = 4096)]
        steps: u32,
        #[arg(long, default_value_t = 65536)]
        threads: u32,
        #[arg(long, default_value_t = 256)]
        mib: u64,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("counter_kernels: {e}");
            ExitCode::FAILURE
        }
    }
}

fn ptx() -> &'static CStr {
    match CStr::from_bytes_with_nul(
        concat!(include_str!("../../gpu-host/kernels/counters.ptx"), "\0").as_bytes(),
    ) {
        Ok(c) => c,
        Err(_) => c"",
    }
}

fn param<T>(v: &mut T) -> *mut c_void {
    (v as *mut T).cast()
}

fn run(cli: &Cli) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::primary(cli.device)?;
    let module = ctx.load_module(ptx())?;
    match cli.what {
        What::Copy { bytes, repeat } => {
            let bytes = bytes / 16 * 16;
            let f = module.function(c"copy16")?;
            let src = ctx.alloc(bytes as usize)?;
            let mut dst = ctx.alloc(bytes as usize)?;
            dst.fill_u32(0)?;
            ctx.synchronize()?;
            let t0 = Instant::now();
            for _ in 0..repeat {
                let (mut s, mut d, mut n) = (src.device_ptr(), dst.device_ptr(), bytes / 16);
                let mut params = [param(&mut s), param(&mut d), param(&mut n)];
                // SAFETY: copy16 takes (u64 src, u64 dst, u64 n); both buffers hold n * 16 bytes.
                unsafe { f.launch((1024, 1, 1), (256, 1, 1), &mut params) }?;
            }
            ctx.synchronize()?;
            println!(
                "counter_kernels copy bytes {bytes} repeat {repeat} elapsed_ms {:.3}",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
        What::Chase {
            steps,
            threads,
            mib,
        } => {
            let n = (mib << 20) / 4;
            let n32 = u32::try_from(n).map_err(|_| "--mib too large")?;
            // A single random cycle (Sattolo's shuffle), so every chase wanders the whole buffer.
            let mut next: Vec<u32> = (0..n32).collect();
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            for i in (1..next.len()).rev() {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let j = (x % i as u64) as usize;
                next.swap(i, j);
            }
            let bytes: Vec<u8> = next.iter().flat_map(|v| v.to_le_bytes()).collect();
            let mut dev_next = ctx.alloc(bytes.len())?;
            dev_next.copy_from_host(&bytes)?;
            if threads == 0 || u64::from(threads.div_ceil(256) * 256) > n {
                return Err("--threads must be 1 to the chain's length".into());
            }
            // One u32 per launched thread: the grid rounds the threads up to whole blocks.
            let out = ctx.alloc(threads.div_ceil(256) as usize * 256 * 4)?;
            let f = module.function(c"chase")?;
            let t0 = Instant::now();
            let (mut p, mut s, mut o) = (dev_next.device_ptr(), steps, out.device_ptr());
            let mut params = [param(&mut p), param(&mut s), param(&mut o)];
            // SAFETY: chase takes (u64 next, u32 steps, u64 out); every start and every index is below n, and `out`
            // holds one u32 per launched thread.
            unsafe { f.launch((threads.div_ceil(256), 1, 1), (256, 1, 1), &mut params) }?;
            ctx.synchronize()?;
            println!(
                "counter_kernels chase steps {steps} threads {threads} elapsed_ms {:.3}",
                t0.elapsed().as_secs_f64() * 1e3
            );
        }
    }
    Ok(())
}
