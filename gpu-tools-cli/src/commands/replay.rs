//! `gpu-tools replay`: the autotuner pattern with CUPTI Checkpoint.

use std::ffi::{CStr, c_void};
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gpu_tools::cuda::{Context, DeviceBuffer, Function};
use gpu_tools::cupti::Checkpoint;
use serde::Serialize;

use crate::failure::{Failure, INCOMPLETE, Outcome};
use crate::output::OutputFile;
use crate::stdout::outln;

/// `step(u32* buf, u64 n)`: `x[i] = x[i] * 1664525 + 1013904223 + i` for every word, in place.
const STEP_PTX: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../../kernels/step.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("step.ptx holds a NUL byte"),
};

/// Save a context's device memory once with CUPTI Checkpoint, then replay an in-place kernel from that state.
///
/// The autotuner pattern: an in-place kernel (it reads and writes the same buffer) runs N times, and the saved
/// state is restored before each run, so that every replay starts from the same input. Prints the timings and
/// checksums. Exits 0 when every replay gave the same checksum, 3 when they differed, 1 when the replays could not
/// run (no GPU, no CUPTI). Needs an NVIDIA GPU of compute capability 8.0 or later (the kernel is PTX, compiled by
/// the driver).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Size of the device buffer the kernel updates in place, in bytes (at least 4); suffix k, M or G allowed, as
    /// `trace --buffer-size` takes it [default: 256M].
    #[arg(long, default_value = "256M", hide_default_value = true, value_parser = parse_bytes)]
    bytes: u64,
    /// Number of restore + kernel replays.
    #[arg(long, default_value_t = 10)]
    replays: usize,
    /// CUDA device ordinal.
    #[arg(long, default_value_t = 0)]
    device: usize,
    /// Print one line per replay.
    #[arg(long)]
    each: bool,
    /// Also write the results as JSON to this file (checked before the GPU is used).
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
}

/// A byte count as `trace --buffer-size` takes it (`268435456`, `262144k`, `256M`), at least 4.
fn parse_bytes(s: &str) -> Result<u64, String> {
    let n = gpu_tools::trace::env::parse_size(s)?;
    let n = u64::try_from(n).map_err(|_| "too large".to_string())?;
    if n < 4 {
        return Err("at least 4 bytes".to_string());
    }
    Ok(n)
}

/// What the run measured, for `--json`.
#[derive(Serialize)]
struct Report {
    device: usize,
    device_name: String,
    bytes: u64,
    save_ms: f64,
    replays: Vec<Replay>,
    drifted_checksum: String,
    identical: bool,
}

#[derive(Serialize)]
struct Replay {
    restore_ms: f64,
    kernel_ms: f64,
    checksum: String,
}

pub fn run(args: Args) -> Outcome {
    let json = args
        .json
        .as_deref()
        .map(|path| OutputFile::create(path, "the results"))
        .transpose()?;
    let (identical, report) = replay(&args).map_err(Failure::error)?;
    if let Some(file) = json {
        let path = file.path().to_path_buf();
        file.write_with(|w| {
            serde_json::to_writer_pretty(&mut *w, &report)?;
            w.write_all(b"\n")
        })?;
        outln!("results written to {}", path.display())?;
    }
    if !identical {
        eprintln!("gpu-tools replay: the replays did not start from the saved state");
        return Ok(INCOMPLETE);
    }
    Ok(0)
}

/// Errors of a replay, shown with their `Display` text.
#[derive(Debug, thiserror::Error)]
enum ReplayError {
    #[error(transparent)]
    Gpu(#[from] gpu_tools::Error),
    #[error(transparent)]
    Cuda(#[from] gpu_tools::cuda::CudaError),
    #[error("--bytes {0} does not fit in this machine's address space")]
    TooLarge(u64),
}

/// Replays; returns whether every replay started from the saved state, and the figures.
fn replay(args: &Args) -> Result<(bool, Report), ReplayError> {
    let bytes = usize::try_from(args.bytes).map_err(|_| ReplayError::TooLarge(args.bytes))?;
    let ctx = Context::primary(args.device)?;
    let info = ctx.driver().device_info(args.device)?;
    let _ = outln!(
        "device {}: {} (sm_{}{}), state {} MiB, {} replays",
        args.device,
        info.name,
        info.compute_capability.0,
        info.compute_capability.1,
        bytes >> 20,
        args.replays
    );
    let module = ctx.load_module(STEP_PTX)?;
    let step = module.function(c"step")?;
    let mut buf = ctx.alloc(bytes)?;
    buf.fill_u32(0x0123_4567)?;
    launch(&ctx, &step, &buf)?; // a position-dependent starting state

    let mut cp = Checkpoint::new(&ctx)?;
    let t = Instant::now();
    cp.save()?;
    let save_ms = ms(t.elapsed());
    let _ = outln!("save: {save_ms:.3} ms");

    let mut host = vec![0u8; bytes];
    let mut replays = Vec::with_capacity(args.replays);
    let mut progress = Progress::new(args.replays);
    for i in 0..args.replays {
        let t0 = Instant::now();
        cp.restore()?;
        let t1 = Instant::now();
        launch(&ctx, &step, &buf)?;
        let t2 = Instant::now();
        let sum = checksum(&buf, &mut host)?;
        let replay = Replay {
            restore_ms: ms(t1 - t0),
            kernel_ms: ms(t2 - t1),
            checksum: format!("{sum:016x}"),
        };
        if args.each {
            progress.clear();
            let _ = outln!(
                "replay {i:3}: restore {:8.3} ms  kernel {:8.3} ms  checksum {}",
                replay.restore_ms,
                replay.kernel_ms,
                replay.checksum
            );
        }
        replays.push(replay);
        progress.step(i + 1);
    }
    progress.clear();
    // Without a restore, each run starts from the previous result.
    launch(&ctx, &step, &buf)?;
    let drifted = format!("{:016x}", checksum(&buf, &mut host)?);
    cp.free()?;

    let identical = replays.windows(2).all(|w| w[0].checksum == w[1].checksum);
    let restores: Vec<f64> = replays.iter().map(|r| r.restore_ms).collect();
    let kernels: Vec<f64> = replays.iter().map(|r| r.kernel_ms).collect();
    if let (Some(r), Some(k), Some(first)) = (median(&restores), median(&kernels), replays.first())
    {
        let _ = outln!(
            "restore: median {r:.3} ms; kernel: median {k:.3} ms; checksum {}",
            first.checksum
        );
    }
    let _ = outln!("one more run without restore: checksum {drifted}");
    let _ = outln!("all replays identical: {identical}");
    let ok = identical && replays.first().is_none_or(|r| r.checksum != drifted);
    let report = Report {
        device: args.device,
        device_name: info.name,
        bytes: args.bytes,
        save_ms,
        replays,
        drifted_checksum: drifted,
        identical,
    };
    Ok((ok, report))
}

/// A progress line on stderr: rewritten in place on a terminal, every 10% otherwise.
struct Progress {
    total: usize,
    tty: bool,
    start: Instant,
    last_tenth: usize,
    shown: bool,
}

impl Progress {
    fn new(total: usize) -> Self {
        Progress {
            total,
            tty: std::io::stderr().is_terminal(),
            start: Instant::now(),
            last_tenth: 0,
            shown: false,
        }
    }

    fn step(&mut self, done: usize) {
        let tenth = done * 10 / self.total.max(1);
        if !self.tty && tenth == self.last_tenth {
            return;
        }
        self.last_tenth = tenth;
        let line = format!(
            "replay {done}/{} ({:.1} s)",
            self.total,
            self.start.elapsed().as_secs_f64()
        );
        let mut err = std::io::stderr().lock();
        // Progress is best effort: a closed stderr does not stop the run.
        let _ = if self.tty {
            write!(err, "\r{line}\x1b[K")
        } else {
            writeln!(err, "{line}")
        };
        let _ = err.flush();
        self.shown = true;
    }

    /// Ends the in-place line before something else is printed.
    fn clear(&mut self) {
        if self.tty && self.shown {
            let _ = write!(std::io::stderr(), "\r\x1b[K");
            self.shown = false;
        }
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(values: &[f64]) -> Option<f64> {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
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
