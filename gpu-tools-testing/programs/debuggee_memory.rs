//! A CUDA program that holds device memory and keeps checking it: the target of the process-checkpoint tests,
//! benchmark and `gpu-tools freeze`.
//!
//! It fills `--gib` GiB on each of `--devices` with a position-dependent pattern (a kernel), proves its checker
//! finds a planted difference, prints `ready`, then checks every word on the GPU every `--interval-ms` and
//! prints `check K ok T ms` (T shows how long a check was blocked, e.g. while the process was locked). A line on
//! stdin, or `--seconds`, stops it: it checks everything once more, compares samples with the pattern computed on
//! the host, prints `final check: intact, ...` and exits 0; any difference exits 1.
//!
//! ```text
//! cargo run --release --example debuggee_memory -- --gib 2 --devices 0,1
//! ```
//! `--hold-ms N` first spends N ms inside one CUDA call (a spinning kernel, then a synchronize), for lock
//! timeouts; `--exit-after-ms N` makes a CPU thread end the process (exit code 3) N ms after `ready`.

use std::ffi::{CStr, c_void};
use std::io::{BufRead, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_tools::cuda::{Context, DeviceBuffer, Function, Module};

const PTX: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../../gpu-host/kernels/pattern.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("pattern.ptx holds a NUL byte"),
};

const GIB: f64 = (1u64 << 30) as f64;
/// Words compared on the host at each end of a buffer, at the start and at the end.
const SAMPLE_WORDS: usize = 1 << 18;

#[derive(Parser)]
#[command(about = "Holds device memory filled with a pattern and checks it until told to stop")]
struct Args {
    /// GiB of device memory to fill on each device (fractions allowed).
    #[arg(long, default_value_t = 1.0)]
    gib: f64,
    /// Device ordinals, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "0")]
    devices: Vec<usize>,
    /// Pause between two checks, in ms.
    #[arg(long, default_value_t = 20)]
    interval_ms: u64,
    /// After `ready`, spend this many ms inside one CUDA call (a spinning kernel and a synchronize).
    #[arg(long)]
    hold_ms: Option<u64>,
    /// A CPU thread ends the process (exit code 3) this many ms after `ready`.
    #[arg(long)]
    exit_after_ms: Option<u64>,
    /// Stop by itself after this many seconds (the final check, then exit 0 if intact).
    #[arg(long, default_value_t = 900)]
    seconds: u64,
}

/// The pattern of word `i` (the host copy of the kernels' formula in `kernels/pattern.ptx`).
fn pattern(i: u64, seed: u32) -> u32 {
    let mut x = (i as u32)
        .wrapping_mul(0x9E37_79B1)
        .wrapping_add(((i >> 32) as u32).wrapping_mul(0x85EB_CA77))
        .wrapping_add(seed);
    x ^= x >> 15;
    x = x.wrapping_mul(0x2C1B_3C6D);
    x ^= x >> 12;
    x = x.wrapping_mul(0x297A_2D39);
    x ^ (x >> 15)
}

fn seed_of(ordinal: usize) -> u32 {
    0x00C0_FFEE ^ (ordinal as u32).wrapping_mul(0x0100_0193)
}

struct Kernels<'m> {
    fill: Function<'m>,
    check: Function<'m>,
    spin: Function<'m>,
}

/// One device's context, memory and kernels.
struct Held<'c> {
    ordinal: usize,
    ctx: &'c Context,
    buf: DeviceBuffer<'c>,
    bad: DeviceBuffer<'c>,
    first: DeviceBuffer<'c>,
    seed: u32,
}

const GRID: (u32, u32, u32) = (1024, 1, 1);
const BLOCK: (u32, u32, u32) = (256, 1, 1);

impl Held<'_> {
    fn words(&self) -> u64 {
        (self.buf.len() / 4) as u64
    }

    fn fill(&self, k: &Kernels<'_>) -> gpu_tools::Result<()> {
        let (mut ptr, mut n, mut seed) = (self.buf.device_ptr(), self.words(), self.seed);
        let mut params = [
            (&raw mut ptr).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut seed).cast::<c_void>(),
        ];
        // SAFETY: fill(u64 buffer, u64 words, u32 seed); the buffer holds `n` words.
        unsafe { k.fill.launch(GRID, BLOCK, &mut params) }?;
        self.ctx.synchronize()?;
        Ok(())
    }

    /// Words that differ from the pattern, and the first of them.
    fn check(&mut self, k: &Kernels<'_>) -> gpu_tools::Result<(u64, u64)> {
        self.bad.fill_u32(0)?;
        self.first.fill_u32(u32::MAX)?;
        let (mut ptr, mut n, mut seed) = (self.buf.device_ptr(), self.words(), self.seed);
        let (mut bad, mut first) = (self.bad.device_ptr(), self.first.device_ptr());
        let mut params = [
            (&raw mut ptr).cast::<c_void>(),
            (&raw mut n).cast::<c_void>(),
            (&raw mut seed).cast::<c_void>(),
            (&raw mut bad).cast::<c_void>(),
            (&raw mut first).cast::<c_void>(),
        ];
        // SAFETY: check(u64 buffer, u64 words, u32 seed, u64 *bad, u64 *first); the buffer holds `n` words and
        // the two counters one u64 each.
        unsafe { k.check.launch(GRID, BLOCK, &mut params) }?;
        self.ctx.synchronize()?;
        let (mut b, mut f) = ([0u8; 8], [0u8; 8]);
        self.bad.copy_to_host(&mut b)?;
        self.first.copy_to_host(&mut f)?;
        Ok((u64::from_le_bytes(b), u64::from_le_bytes(f)))
    }

    /// Reads `count` words from word `start` on.
    fn read_words(&self, start: usize, count: usize) -> Result<Vec<u32>, String> {
        let mut bytes = vec![0u8; count * 4];
        let _current = self.ctx.make_current().map_err(|e| e.to_string())?;
        let api = self.ctx.driver().api();
        let src = self.buf.device_ptr() + (start * 4) as u64;
        // SAFETY: the context is current; words start..start+count lie inside the buffer (callers keep them
        // there) and the host buffer holds count words.
        let code = unsafe { (api.cu_memcpy_dtoh)(bytes.as_mut_ptr().cast(), src, bytes.len()) };
        if code != 0 {
            return Err(format!("cuMemcpyDtoH returned {code}"));
        }
        Ok(bytes
            .chunks_exact(4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .collect())
    }

    /// Writes one word.
    fn write_word(&self, at: usize, value: u32) -> Result<(), String> {
        let _current = self.ctx.make_current().map_err(|e| e.to_string())?;
        let api = self.ctx.driver().api();
        let bytes = value.to_le_bytes();
        // SAFETY: the context is current; word `at` lies inside the buffer.
        let code = unsafe {
            (api.cu_memcpy_htod)(
                self.buf.device_ptr() + (at * 4) as u64,
                bytes.as_ptr().cast(),
                4,
            )
        };
        if code != 0 {
            return Err(format!("cuMemcpyHtoD returned {code}"));
        }
        Ok(())
    }

    /// Compares the first and last words of the buffer with the pattern computed here; the first mismatch.
    fn host_sample(&self) -> Result<Option<u64>, String> {
        let words = self.words() as usize;
        let take = SAMPLE_WORDS.min(words);
        for start in [0, words - take] {
            let got = self.read_words(start, take)?;
            let bad = (0..take).find(|&i| got[i] != pattern((start + i) as u64, self.seed));
            if let Some(i) = bad {
                return Ok(Some((start + i) as u64));
            }
        }
        Ok(None)
    }

    /// Plants one wrong word, checks that the device check finds exactly it, and repairs it.
    fn self_test(&mut self, k: &Kernels<'_>) -> Result<(), String> {
        let at = self.words() as usize / 2 + 1;
        let good = pattern(at as u64, self.seed);
        self.write_word(at, !good)?;
        let found = self.check(k).map_err(|e| e.to_string())?;
        self.write_word(at, good)?;
        if found != (1, at as u64) {
            return Err(format!(
                "device {}: the checker found {found:?} for one planted difference at word {at}",
                self.ordinal
            ));
        }
        Ok(())
    }
}

fn spin(ctx: &Context, k: &Kernels<'_>, ms: u64) -> gpu_tools::Result<()> {
    let mut ns = ms.saturating_mul(1_000_000);
    let mut params = [(&raw mut ns).cast::<c_void>()];
    // SAFETY: spin(u64 ns) takes no pointer.
    unsafe { k.spin.launch((1, 1, 1), (1, 1, 1), &mut params) }?;
    ctx.synchronize()?;
    Ok(())
}

fn say(line: std::fmt::Arguments<'_>) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Checks every device; `Err` names the first difference.
fn check_all(held: &mut [Held<'_>], k: &[Kernels<'_>]) -> Result<(), String> {
    for (h, k) in held.iter_mut().zip(k) {
        let (bad, first) = h.check(k).map_err(|e| e.to_string())?;
        if bad != 0 {
            return Err(format!(
                "{bad} words differ on device {} (first at word {first})",
                h.ordinal
            ));
        }
    }
    Ok(())
}

fn run(args: &Args) -> Result<i32, String> {
    if args.gib.is_nan() || args.gib <= 0.0 || args.devices.is_empty() {
        return Err("--gib must be positive and --devices name at least one device".into());
    }
    let bytes = ((args.gib * GIB) as usize / 4 * 4).max(8 * SAMPLE_WORDS);
    say(format_args!("pid {}", std::process::id()));
    let contexts: Vec<Context> = args
        .devices
        .iter()
        .map(|&d| Context::primary(d))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let modules: Vec<Module<'_>> = contexts
        .iter()
        .map(|c| c.load_module(PTX))
        .collect::<Result<_, _>>()
        .map_err(|e| e.to_string())?;
    let kernels: Vec<Kernels<'_>> = modules
        .iter()
        .map(|m| {
            Ok(Kernels {
                fill: m.function(c"fill")?,
                check: m.function(c"check")?,
                spin: m.function(c"spin")?,
            })
        })
        .collect::<Result<_, gpu_tools::cuda::CudaError>>()
        .map_err(|e| e.to_string())?;
    let mut held = Vec::new();
    for (ctx, &ordinal) in contexts.iter().zip(&args.devices) {
        let info = ctx
            .driver()
            .device_info(ordinal)
            .map_err(|e| e.to_string())?;
        let uuid = ctx
            .driver()
            .device_uuid(ordinal)
            .map_err(|e| e.to_string())?;
        let buf = ctx.alloc(bytes).map_err(|e| e.to_string())?;
        let h = Held {
            ordinal,
            ctx,
            bad: ctx.alloc(8).map_err(|e| e.to_string())?,
            first: ctx.alloc(8).map_err(|e| e.to_string())?,
            buf,
            seed: seed_of(ordinal),
        };
        say(format_args!(
            "device {ordinal} {} {uuid} allocated {bytes} at {:#x}",
            info.name,
            h.buf.device_ptr()
        ));
        held.push(h);
    }
    for (h, k) in held.iter_mut().zip(&kernels) {
        h.fill(k).map_err(|e| e.to_string())?;
        h.self_test(k)?;
        if let Some(i) = h.host_sample()? {
            return Err(format!(
                "device {}: word {i} differs from the host's pattern after the fill",
                h.ordinal
            ));
        }
    }
    say(format_args!(
        "self-test: the checker found each planted difference"
    ));
    check_all(&mut held, &kernels)?;

    let (stop_tx, stop_rx) = mpsc::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        // End of input (stdin closed or /dev/null, as in a background job) is not a request to stop.
        if matches!(std::io::stdin().lock().read_line(&mut line), Ok(n) if n > 0) {
            let _ = stop_tx.send(());
        }
        // Keep the sender alive, so the loop below never sees the channel disconnected.
        std::mem::forget(stop_tx);
    });
    say(format_args!("ready {}", bytes * held.len()));
    if let Some(ms) = args.exit_after_ms {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            say(format_args!("exiting"));
            std::process::exit(3);
        });
    }
    if let Some(ms) = args.hold_ms {
        say(format_args!("hold {ms}"));
        let t = Instant::now();
        spin(held[0].ctx, &kernels[0], ms).map_err(|e| e.to_string())?;
        say(format_args!(
            "held {:.0} ms",
            t.elapsed().as_secs_f64() * 1e3
        ));
    }

    let started = Instant::now();
    for k in 1u64.. {
        let t = Instant::now();
        check_all(&mut held, &kernels).map_err(|e| format!("check {k}: {e}"))?;
        say(format_args!(
            "check {k} ok {:.1} ms",
            t.elapsed().as_secs_f64() * 1e3
        ));
        match stop_rx.recv_timeout(Duration::from_millis(args.interval_ms)) {
            Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
        if started.elapsed() > Duration::from_secs(args.seconds) {
            break;
        }
    }
    check_all(&mut held, &kernels).map_err(|e| format!("final check: {e}"))?;
    for h in &held {
        if let Some(i) = h.host_sample()? {
            return Err(format!(
                "final check: word {i} of device {} differs from the host's pattern",
                h.ordinal
            ));
        }
    }
    say(format_args!(
        "final check: intact, {} bytes on {} devices",
        bytes * held.len(),
        held.len()
    ));
    Ok(0)
}

fn main() {
    let args = Args::parse();
    match run(&args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            say(format_args!("error: {e}"));
            std::process::exit(1);
        }
    }
}
