//! The autotuner pattern: save a context's device memory once, then replay an in-place kernel (it reads and
//! writes the same buffer) N times, restoring the saved state before each run, so every replay starts from the
//! same input. Prints per-replay times and checksums; exits with an error if the checksums differ.
//!
//! ```text
//! cargo run --release --example checkpoint_replay -- [--bytes N] [--replays N] [--device N]
//! ```
//! Runs on any CUDA GPU host (compute capability 8.0 or later; the kernel is PTX JIT-compiled by the driver).

use std::ffi::{CStr, c_void};
use std::time::Instant;

use gpu_tools::cuda::{Context, DeviceBuffer, Function};
use gpu_tools::cupti::Checkpoint;

/// `step(u32* buf, u64 n)`: `x[i] = x[i] * 1664525 + 1013904223 + i` for every word, in place.
const STEP_PTX: &CStr =
    match CStr::from_bytes_with_nul(concat!(include_str!("kernels/step.ptx"), "\0").as_bytes()) {
        Ok(ptx) => ptx,
        Err(_) => panic!("step.ptx holds a NUL byte"),
    };

struct Args {
    bytes: usize,
    replays: usize,
    device: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        bytes: 256 << 20,
        replays: 10,
        device: 0,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let value = it.next().ok_or(format!("{flag} needs a value"))?;
        let n: usize = value.parse().map_err(|e| format!("{flag} {value}: {e}"))?;
        match flag.as_str() {
            "--bytes" => args.bytes = n.max(4),
            "--replays" => args.replays = n,
            "--device" => args.device = n,
            _ => {
                return Err(format!(
                    "unknown option {flag}; use --bytes N --replays N --device N"
                ));
            }
        }
    }
    Ok(args)
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

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = parse_args()?;
    let ctx = Context::primary(args.device)?;
    let info = ctx.driver().device_info(args.device)?;
    println!(
        "device {}: {} (sm_{}{}), state {} MiB, {} replays",
        args.device,
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        args.bytes >> 20,
        args.replays
    );
    let module = ctx.load_module(STEP_PTX)?;
    let step = module.function(c"step")?;
    let mut buf = ctx.alloc(args.bytes)?;
    buf.fill_u32(0x0123_4567)?;
    launch(&ctx, &step, &buf)?; // a position-dependent starting state

    let mut cp = Checkpoint::new(&ctx)?;
    let t = Instant::now();
    cp.save()?;
    println!("save: {:.3} ms", t.elapsed().as_secs_f64() * 1e3);

    let mut host = vec![0u8; args.bytes];
    let mut sums = Vec::with_capacity(args.replays);
    for i in 0..args.replays {
        let t0 = Instant::now();
        cp.restore()?;
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
    // Without a restore, each run starts from the previous result.
    launch(&ctx, &step, &buf)?;
    let drifted = checksum(&buf, &mut host)?;
    println!("one more run without restore: checksum {drifted:016x}");
    cp.free()?;

    let same = sums.windows(2).all(|w| w[0] == w[1]);
    println!("all replays identical: {same}");
    if !same || sums.first() == Some(&drifted) {
        return Err("replays did not start from the saved state".into());
    }
    Ok(())
}
