//! A small CUDA program for the debugger tests and benchmark: it runs hand-written PTX kernels through the crate's
//! own driver wrappers.
//!
//! Modes:
//! - `launch N`: N launches of `add_one` (grid 2, block 32), each followed by a synchronize; prints `loop_ms`.
//! - `launch-raw N`: the same steps with the context made current once and the driver called directly, as a
//!   runtime-API program does (no context push/pop per call); also prints the time spent in the launch and in the
//!   synchronize calls and this thread's context switches during the loop.
//! - `memory`: fills a buffer, prints its device address, runs `add_one` once and prints the result.
//! - `fault`: runs a kernel whose 4-byte store is misaligned (a warp exception).
//! - `fault-at [BLOCK] [THREAD]` (default 2 37): kernel `fault_at`, grid 4, block 64. Every thread writes
//!   `0x5000 + 0x100 * blockIdx.x + threadIdx.x` into shared word `threadIdx.x` and that value plus 0..16 into a
//!   16-word array in its local memory; then only thread THREAD of block BLOCK does a misaligned 4-byte store,
//!   while the others wait 2 s on the global timer (so that they are still resident when the fault is caught).
//! - `abort`: runs `add_one` once, then aborts (SIGABRT) with its context alive.
//! - `nocuda [SECONDS]`: never touches CUDA (sleeps that long first, for attach refusals).
//! - `loaded SECONDS`: loads the driver library but never initialises it (`cuInit`), then sleeps.
//! - `wait SECONDS`: sleeps, then runs one launch (for handshake timeouts).
//! - `loop N PAUSE_MS`: N rounds of (print `ITER i VALUE v ADDR a`, launch `add_one`, synchronize, sleep), where v is
//!   the value the buffer's first word holds before that launch; then checks the whole buffer and prints
//!   `ok N RESULT r`, or exits 1. For attaching to a program mid-loop.
//! - `spin SECONDS`: prints `SPIN FLAG a`, then runs `spin_wait` (grid 2, block 64; its name is the mangled
//!   `_Z9spin_waitPjy`), which spins until the flag word is set or SECONDS pass: a hung job.
//! - `two-gpus SECONDS`: on devices 0 and 1 at once (a thread and a context each) fills a buffer with a
//!   per-device pattern, prints `DEV d ADDR a PATTERN p`, runs `spin_wait` for SECONDS, then checks the buffer
//!   and prints `DEV d ok`; with fewer than two devices prints `needs 2 GPUs, found N` and exits 3.
//! - `streams N`: the tracer workload. Two threads, each with its own stream, each: one memset of the whole device
//!   buffer, then N times (copy host to device, `add_one`, copy device to host), all asynchronous from pinned
//!   memory, with sizes that differ per thread; then, on the main thread, one `final_step` kernel and one
//!   synchronous device-to-host copy of 4100 bytes right before exit. Prints one line per thread and a `final`
//!   line with every id and size, for a test to compare with a trace.
//! - `fork N`: N launches, then a child forked without exec that exits (running its exit handlers) without using
//!   CUDA, then N more launches.
//! - `fork-exec N`: N launches, then this program run again as a child (`launch N`), then N more launches.
//! - `crash N MS`: N launches, a pause of MS milliseconds, then an abort (SIGABRT).
//!
//! With `GPU_TOOLS_DEBUGGEE_SEGV_REPORT` set, dying from SIGSEGV it first writes where to stderr
//! (`support/segv_report.rs`); with `GPU_TOOLS_DEBUGGEE_STATE` set, `loop` ends with a `DEBUGGER STATE` line (the
//! driver's debugger variables as the program sees them).

use std::ffi::c_void;
use std::io::Write;
use std::time::{Duration, Instant};

use gpu_tools::cuda::Context;

const PTX: &std::ffi::CStr = c"
.version 7.0
.target sm_70
.address_size 64

.visible .entry add_one(.param .u64 p, .param .u32 n)
{
    .reg .pred %p<2>;
    .reg .b32 %r<8>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [p];
    ld.param.u32 %r1, [n];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd2, %rd1;
    mul.wide.u32 %rd3, %r5, 4;
    add.s64 %rd2, %rd2, %rd3;
    ld.global.u32 %r6, [%rd2];
    add.s32 %r7, %r6, 1;
    st.global.u32 [%rd2], %r7;
DONE:
    ret;
}

.visible .entry _Z9spin_waitPjy(.param .u64 flag, .param .u64 limit)
{
    .reg .pred %p<3>;
    .reg .b32 %r<2>;
    .reg .b64 %rd<7>;
    ld.param.u64 %rd1, [flag];
    ld.param.u64 %rd2, [limit];
    cvta.to.global.u64 %rd3, %rd1;
    mov.u64 %rd4, %globaltimer;
SPIN:
    ld.volatile.global.u32 %r1, [%rd3];
    setp.ne.u32 %p1, %r1, 0;
    @%p1 bra OUT;
    mov.u64 %rd5, %globaltimer;
    sub.u64 %rd6, %rd5, %rd4;
    setp.lt.u64 %p2, %rd6, %rd2;
    @%p2 bra SPIN;
OUT:
    ret;
}

.visible .entry fault(.param .u64 p)
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<3>;
    ld.param.u64 %rd1, [p];
    add.s64 %rd2, %rd1, 2;
    mov.u32 %r1, 7;
    st.global.u32 [%rd2], %r1;
    ret;
}

.visible .entry fault_at(.param .u64 p, .param .u64 q, .param .u32 block, .param .u32 thread)
{
    .reg .pred %p<6>;
    .reg .b32 %r<24>;
    .reg .b64 %rd<24>;
    .shared .align 4 .b8 tile[256];
    .local .align 4 .b8 scratch[64];
    ld.param.u64 %rd1, [p];
    ld.param.u64 %rd2, [q];
    ld.param.u32 %r1, [block];
    ld.param.u32 %r2, [thread];
    mov.u32 %r3, %ctaid.x;
    mov.u32 %r4, %tid.x;
    mov.u32 %r5, %ntid.x;
    shl.b32 %r6, %r3, 8;
    add.u32 %r6, %r6, %r4;
    add.u32 %r6, %r6, 20480;
    and.b32 %r7, %r4, 63;
    shl.b32 %r7, %r7, 2;
    mov.u32 %r8, tile;
    add.u32 %r9, %r8, %r7;
    st.volatile.shared.u32 [%r9], %r6;
    // Volatile stores through a generic pointer keep the array in local memory.
    mov.u64 %rd3, scratch;
    cvta.local.u64 %rd4, %rd3;
    mov.u32 %r10, 0;
FILL:
    mul.wide.u32 %rd5, %r10, 4;
    add.u64 %rd6, %rd4, %rd5;
    add.u32 %r11, %r6, %r10;
    st.volatile.u32 [%rd6], %r11;
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p1, %r10, 16;
    @%p1 bra FILL;
    bar.sync 0;
    setp.eq.u32 %p2, %r3, %r1;
    setp.eq.u32 %p3, %r4, %r2;
    and.pred %p4, %p2, %p3;
    @!%p4 bra WAIT;
    add.s64 %rd7, %rd1, 2;
    st.global.u32 [%rd7], %r6;
    ret;
WAIT:
    mov.u64 %rd8, %globaltimer;
    add.u64 %rd9, %rd8, 2000000000;
SPIN:
    mov.u64 %rd10, %globaltimer;
    setp.lt.u64 %p5, %rd10, %rd9;
    @%p5 bra SPIN;
    mul.lo.u32 %r12, %r4, 7;
    add.u32 %r12, %r12, 3;
    and.b32 %r12, %r12, 15;
    mul.wide.u32 %rd11, %r12, 4;
    add.u64 %rd12, %rd4, %rd11;
    ld.volatile.u32 %r13, [%rd12];
    xor.b32 %r14, %r7, 4;
    add.u32 %r15, %r8, %r14;
    ld.volatile.shared.u32 %r16, [%r15];
    add.u32 %r17, %r13, %r16;
    mad.lo.u32 %r18, %r3, %r5, %r4;
    mul.wide.u32 %rd13, %r18, 4;
    add.u64 %rd14, %rd2, %rd13;
    st.global.u32 [%rd14], %r17;
    ret;
}

.visible .entry final_step(.param .u64 p)
{
    .reg .b32 %r<3>;
    .reg .b64 %rd<2>;
    ld.param.u64 %rd1, [p];
    cvta.to.global.u64 %rd1, %rd1;
    ld.global.u32 %r1, [%rd1];
    add.s32 %r2, %r1, 1;
    st.global.u32 [%rd1], %r2;
    ret;
}
";

const WORDS: usize = 64;
/// Blocks and threads per block of `fault-at`.
const FAULT_AT_GRID: usize = 4;
const FAULT_AT_BLOCK: usize = 64;

/// A small CUDA program for the debugger and tracer tests (modes: see the module documentation).
#[derive(clap::Parser)]
struct Args {
    /// What to run.
    #[arg(default_value = "launch", value_parser = clap::builder::PossibleValuesParser::new([
        "launch", "launch-raw", "memory", "fault", "fault-at", "abort", "nocuda", "wait", "streams", "fork", "fork-exec",
        "crash", "loaded", "loop", "spin", "two-gpus",
    ]))]
    mode: String,
    /// The mode's numbers: launches (`launch`, `launch-raw`, `streams`, `fork`, `fork-exec`, `crash`) or rounds
    /// (`loop`), seconds (`wait`, `nocuda`, `loaded`, `spin`, `two-gpus`), then the pause in ms (`crash`, `loop`);
    /// the faulting block and thread (`fault-at`).
    numbers: Vec<u64>,
}

#[path = "support/segv_report.rs"]
mod segv_report;

fn main() -> std::process::ExitCode {
    let args = <Args as clap::Parser>::parse();
    // A crash where no debugger watches (at exit, after a detach) can say where it happened. Only on request: the
    // driver's debugger back end may take faults of its own that a handler here would turn into a crash (a
    // detach of a launched program died in it with the handler installed, on an H100).
    if std::env::var_os("GPU_TOOLS_DEBUGGEE_SEGV_REPORT").is_some() {
        segv_report::install();
    }
    match run(&args) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("debuggee_kernels: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    let mode = args.mode.as_str();
    let number =
        |i: usize, default: u64| -> u64 { args.numbers.get(i - 1).copied().unwrap_or(default) };
    match mode {
        "nocuda" => {
            println!("no cuda");
            std::io::stdout().flush()?;
            std::thread::sleep(Duration::from_secs(number(1, 0)));
            return Ok(());
        }
        "loaded" => {
            let driver = gpu_tools::cuda::Driver::load()?;
            let path = driver.path().map(|p| p.display().to_string());
            println!("loaded {}", path.unwrap_or_default());
            std::io::stdout().flush()?;
            std::thread::sleep(Duration::from_secs(number(1, 30)));
            return Ok(());
        }
        "two-gpus" => return two_gpus(Duration::from_secs(number(1, 10))),
        "wait" => std::thread::sleep(Duration::from_secs(number(1, 30))),
        _ => {}
    }
    let ctx = Context::primary(0)?;
    let module = ctx.load_module(PTX)?;
    let add_one = module.function(c"add_one")?;
    let mut buf = ctx.alloc(WORDS * 4)?;
    let init: Vec<u8> = (0..WORDS as u32)
        .flat_map(|i| (0x1000 + i).to_le_bytes())
        .collect();
    buf.copy_from_host(&init)?;
    let mut ptr = buf.device_ptr();
    let mut n = WORDS as u32;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut n).cast::<c_void>(),
    ];
    let read_back =
        |buf: &gpu_tools::cuda::DeviceBuffer<'_>| -> Result<Vec<u32>, gpu_tools::cuda::CudaError> {
            let mut out = vec![0u8; WORDS * 4];
            buf.copy_to_host(&mut out)?;
            Ok(out
                .chunks(4)
                .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                .collect())
        };
    match mode {
        "streams" => streams(&ctx, &module, number(1, 100))?,
        "fork" | "fork-exec" | "crash" => {
            let n = number(1, 10);
            let mut step = || -> Result<(), gpu_tools::cuda::CudaError> {
                // SAFETY: add_one takes (u32*, u32); the buffer holds n words.
                unsafe { add_one.launch((2, 1, 1), (32, 1, 1), &mut params) }?;
                ctx.synchronize()
            };
            for _ in 0..n {
                step()?;
            }
            match mode {
                "crash" => {
                    let pause = number(2, 1000);
                    println!("crash launches {n} pause_ms {pause}");
                    std::io::stdout().flush()?;
                    std::thread::sleep(Duration::from_millis(pause));
                    std::process::abort();
                }
                "fork" => {
                    std::io::stdout().flush()?;
                    // SAFETY: the child only prints and exits; it calls no CUDA function.
                    let child = unsafe { libc::fork() };
                    if child == 0 {
                        println!("child {} exits without CUDA", std::process::id());
                        // exit() runs the exit handlers, a tracer's included.
                        std::process::exit(0);
                    }
                    if child < 0 {
                        return Err("fork failed".into());
                    }
                    let mut status = 0;
                    // SAFETY: waits for the child forked above.
                    unsafe { libc::waitpid(child, &mut status, 0) };
                    for _ in 0..n {
                        step()?;
                    }
                    println!(
                        "fork parent {} child {child} child_status {status} launches {}",
                        std::process::id(),
                        2 * n
                    );
                }
                _ => {
                    let exe = std::env::current_exe()?;
                    let out = std::process::Command::new(exe)
                        .args(["launch", &n.to_string()])
                        .output()?;
                    if !out.status.success() {
                        return Err(format!("child failed: {}", out.status).into());
                    }
                    for _ in 0..n {
                        step()?;
                    }
                    println!(
                        "fork-exec parent {} launches {} child_launches {n} child_said {}",
                        std::process::id(),
                        2 * n,
                        String::from_utf8_lossy(&out.stdout).trim()
                    );
                }
            }
        }
        "memory" => {
            println!("ADDR {:#x} WORDS {WORDS}", buf.device_ptr());
            std::io::stdout().flush()?;
            // SAFETY: add_one takes (u32*, u32); the buffer holds n words.
            unsafe { add_one.launch((2, 1, 1), (32, 1, 1), &mut params) }?;
            ctx.synchronize()?;
            let v = read_back(&buf)?;
            let text: Vec<String> = v.iter().map(|x| format!("{x:#x}")).collect();
            println!("RESULT {}", text.join(" "));
        }
        "loop" => {
            let rounds = number(1, 100);
            let pause = Duration::from_millis(number(2, 50));
            for i in 0..rounds {
                println!(
                    "ITER {i} VALUE {:#x} ADDR {:#x}",
                    0x1000 + i,
                    buf.device_ptr()
                );
                std::io::stdout().flush()?;
                // SAFETY: add_one takes (u32*, u32); the buffer holds n words.
                unsafe { add_one.launch((2, 1, 1), (32, 1, 1), &mut params) }?;
                ctx.synchronize()?;
                std::thread::sleep(pause);
            }
            let v = read_back(&buf)?;
            let want: Vec<u32> = (0..WORDS as u32)
                .map(|w| 0x1000 + w + rounds as u32)
                .collect();
            if v != want {
                return Err(format!("buffer {v:x?}, expected {want:x?}").into());
            }
            println!("ok {rounds} RESULT {:#x}", v[0]);
            if std::env::var_os("GPU_TOOLS_DEBUGGEE_STATE").is_some() {
                print_debugger_state();
            }
        }
        "spin" => {
            let spin = module.function(c"_Z9spin_waitPjy")?;
            let mut flag = ctx.alloc(4)?;
            flag.copy_from_host(&[0; 4])?;
            println!("SPIN FLAG {:#x}", flag.device_ptr());
            std::io::stdout().flush()?;
            let mut flag_ptr = flag.device_ptr();
            let mut limit = Duration::from_secs(number(1, 20)).as_nanos() as u64;
            let mut args = [
                (&raw mut flag_ptr).cast::<c_void>(),
                (&raw mut limit).cast::<c_void>(),
            ];
            // SAFETY: spin_wait takes (u32*, u64); the flag buffer holds one word.
            unsafe { spin.launch((2, 1, 1), (64, 1, 1), &mut args) }?;
            ctx.synchronize()?;
            println!("ok spin");
        }
        "abort" => {
            // SAFETY: add_one takes (u32*, u32); the buffer holds n words.
            unsafe { add_one.launch((2, 1, 1), (32, 1, 1), &mut params) }?;
            ctx.synchronize()?;
            println!("aborting with a live context");
            std::io::stdout().flush()?;
            std::process::abort();
        }
        "fault" => {
            let fault = module.function(c"fault")?;
            let mut one = [(&raw mut ptr).cast::<c_void>()];
            // SAFETY: fault takes one pointer; its misaligned store is the point of this mode.
            unsafe { fault.launch((1, 1, 1), (32, 1, 1), &mut one) }?;
            match ctx.synchronize() {
                Ok(()) => println!("fault: no error"),
                Err(e) => {
                    println!("fault: {e}");
                    std::process::exit(3);
                }
            }
        }
        "fault-at" => {
            let (block, thread) = (number(1, 2) as u32, number(2, 37) as u32);
            let fault_at = module.function(c"fault_at")?;
            let out = ctx.alloc(FAULT_AT_GRID * FAULT_AT_BLOCK * 4)?;
            let mut q = out.device_ptr();
            let (mut b, mut t) = (block, thread);
            let mut four = [
                (&raw mut ptr).cast::<c_void>(),
                (&raw mut q).cast::<c_void>(),
                (&raw mut b).cast::<c_void>(),
                (&raw mut t).cast::<c_void>(),
            ];
            println!("fault-at: block {block} thread {thread}");
            std::io::stdout().flush()?;
            let grid = (FAULT_AT_GRID as u32, 1, 1);
            let threads = (FAULT_AT_BLOCK as u32, 1, 1);
            // SAFETY: fault_at takes (u32*, u32*, u32, u32); q holds one word per thread of the grid; the one
            // misaligned store is the point of this mode.
            unsafe { fault_at.launch(grid, threads, &mut four) }?;
            match ctx.synchronize() {
                Ok(()) => println!("fault-at: no error"),
                Err(e) => {
                    println!("fault-at: {e}");
                    std::process::exit(3);
                }
            }
        }
        "launch-raw" => {
            let launches = number(1, 1);
            let _current = ctx.make_current()?;
            let api = ctx.driver().api();
            let switches0 = context_switches();
            let (mut in_launch, mut in_sync) = (Duration::ZERO, Duration::ZERO);
            let t0 = Instant::now();
            for _ in 0..launches {
                let a = Instant::now();
                // SAFETY: the context is current; add_one takes (u32*, u32) and the buffer holds n words.
                let rc = unsafe {
                    (api.cu_launch_kernel)(
                        add_one.as_raw(),
                        2,
                        1,
                        1,
                        32,
                        1,
                        1,
                        0,
                        std::ptr::null_mut(),
                        params.as_mut_ptr(),
                        std::ptr::null_mut(),
                    )
                };
                let b = Instant::now();
                // SAFETY: the context is current.
                let sync = unsafe { (api.cu_ctx_synchronize)() };
                in_sync += b.elapsed();
                in_launch += b - a;
                if rc != 0 || sync != 0 {
                    return Err(format!("launch {rc}, synchronize {sync}").into());
                }
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let switches = context_switches()
                .zip(switches0)
                .map(|(e, s)| (e.0 - s.0, e.1 - s.1));
            println!(
                "ok {launches} loop_ms {ms:.2} launch_ms {:.2} sync_ms {:.2} voluntary_switches {} involuntary_switches {}",
                in_launch.as_secs_f64() * 1e3,
                in_sync.as_secs_f64() * 1e3,
                switches.map_or_else(|| "?".into(), |s| s.0.to_string()),
                switches.map_or_else(|| "?".into(), |s| s.1.to_string()),
            );
        }
        _ => {
            let launches = if mode == "wait" { 1 } else { number(1, 1) };
            let t0 = Instant::now();
            for _ in 0..launches {
                // SAFETY: add_one takes (u32*, u32); the buffer holds n words.
                unsafe { add_one.launch((2, 1, 1), (32, 1, 1), &mut params) }?;
                ctx.synchronize()?;
            }
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            let v = read_back(&buf)?;
            let expect = 0x1000 + launches as u32;
            if v[0] != expect {
                return Err(format!("buffer[0] = {:#x}, expected {expect:#x}", v[0]).into());
            }
            println!("ok {launches} loop_ms {ms:.2}");
        }
    }
    Ok(())
}

/// The `two-gpus` mode: a long kernel on each of two devices at once, one thread and one context each.
fn two_gpus(spin_for: Duration) -> Result<(), Box<dyn std::error::Error>> {
    let found = gpu_tools::cuda::Driver::load()?.device_count()?;
    if found < 2 {
        println!("needs 2 GPUs, found {found}");
        std::process::exit(3);
    }
    let out = std::sync::Mutex::new(());
    let results: Vec<Result<(), String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..2usize)
            .map(|dev| {
                let out = &out;
                scope.spawn(move || {
                    one_gpu(dev, spin_for, out).map_err(|e| format!("device {dev}: {e}"))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    for r in results {
        r?;
    }
    println!("ok two-gpus");
    Ok(())
}

/// Device `dev`'s half of `two-gpus`.
fn one_gpu(
    dev: usize,
    spin_for: Duration,
    out: &std::sync::Mutex<()>,
) -> Result<(), Box<dyn std::error::Error>> {
    let ctx = Context::primary(dev)?;
    let module = ctx.load_module(PTX)?;
    let spin = module.function(c"_Z9spin_waitPjy")?;
    let pattern = (dev as u32 + 1) << 24;
    let mut buf = ctx.alloc(WORDS * 4)?;
    let words: Vec<u8> = (0..WORDS as u32)
        .flat_map(|i| (pattern | i).to_le_bytes())
        .collect();
    buf.copy_from_host(&words)?;
    let mut flag = ctx.alloc(4)?;
    flag.copy_from_host(&[0; 4])?;
    {
        let _line = out.lock().unwrap_or_else(|p| p.into_inner());
        println!(
            "DEV {dev} ADDR {:#x} PATTERN {pattern:#x}",
            buf.device_ptr()
        );
        std::io::stdout().flush()?;
    }
    let mut flag_ptr = flag.device_ptr();
    let mut limit = spin_for.as_nanos() as u64;
    let mut args = [
        (&raw mut flag_ptr).cast::<c_void>(),
        (&raw mut limit).cast::<c_void>(),
    ];
    // SAFETY: spin_wait takes (u32*, u64); the flag buffer holds one word.
    unsafe { spin.launch((2, 1, 1), (64, 1, 1), &mut args) }?;
    ctx.synchronize()?;
    let mut back = vec![0u8; WORDS * 4];
    buf.copy_to_host(&mut back)?;
    if back != words {
        return Err("the buffer changed".into());
    }
    let _line = out.lock().unwrap_or_else(|p| p.into_inner());
    println!("DEV {dev} ok");
    Ok(())
}

/// Bytes of each thread's device buffer, set once per thread.
const STREAM_BUFFER: usize = 1 << 20;
/// Host-to-device copy size of thread `t`.
fn htod_bytes(t: usize) -> usize {
    (64 << 10) * (t + 1)
}
/// Device-to-host copy size of thread `t`.
fn dtoh_bytes(t: usize) -> usize {
    (32 << 10) * (t + 1) + 256
}
/// Size of the last, synchronous copy before exit.
const FINAL_COPY: usize = 4100;

/// The `streams` workload (module documentation).
fn streams(
    ctx: &Context,
    module: &gpu_tools::cuda::Module<'_>,
    launches: u64,
) -> Result<(), Box<dyn std::error::Error>> {
    let lines: Vec<Result<String, String>> = std::thread::scope(|s| {
        let workers: Vec<_> = (0..2)
            .map(|t| {
                s.spawn(move || -> Result<String, String> {
                    let run = || -> Result<String, gpu_tools::cuda::CudaError> {
                        // Modules are not shared between threads: each loads its own copy.
                        let module = ctx.load_module(PTX)?;
                        let add_one = module.function(c"add_one")?;
                        let stream = ctx.create_stream()?;
                        let dev = ctx.alloc(STREAM_BUFFER)?;
                        let mut host = ctx.alloc_pinned(STREAM_BUFFER)?;
                        for (i, b) in host.as_mut_slice().iter_mut().enumerate() {
                            *b = i as u8;
                        }
                        let out = ctx.alloc_pinned(dtoh_bytes(t))?;
                        let up = ctx.alloc_pinned(htod_bytes(t))?;
                        // SAFETY: every buffer outlives the stream synchronize below, and no host buffer is
                        // touched until then.
                        unsafe {
                            stream.set_bytes(&dev, 0x5a, STREAM_BUFFER)?;
                            let mut ptr = dev.device_ptr();
                            let mut n = WORDS as u32;
                            let mut params = [
                                (&raw mut ptr).cast::<c_void>(),
                                (&raw mut n).cast::<c_void>(),
                            ];
                            for _ in 0..launches {
                                stream.copy_to_device(&dev, &up)?;
                                stream.launch(&add_one, (2, 1, 1), (32, 1, 1), &mut params)?;
                                stream.copy_to_host(&out, &dev)?;
                            }
                        }
                        stream.synchronize()?;
                        Ok(format!(
                            "thread {t} stream_id {} kernels {launches} htod {launches} htod_bytes {} dtoh {launches} dtoh_bytes {} memset 1 memset_bytes {STREAM_BUFFER}",
                            stream.id()?,
                            htod_bytes(t),
                            dtoh_bytes(t)
                        ))
                    };
                    run().map_err(|e| format!("thread {t}: {e}"))
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_else(|_| Err("thread panicked".into())))
            .collect()
    });
    println!(
        "workload streams threads 2 context_id {} launches_per_thread {launches}",
        ctx.id()?
    );
    for line in lines {
        println!("{}", line?);
    }
    // The last moments: one kernel and one copy, then exit at once.
    let final_step = module.function(c"final_step")?;
    let buf = ctx.alloc(FINAL_COPY)?;
    let mut ptr = buf.device_ptr();
    let mut params = [(&raw mut ptr).cast::<c_void>()];
    // SAFETY: final_step takes one u32 pointer; the buffer holds more than one word.
    unsafe { final_step.launch((1, 1, 1), (1, 1, 1), &mut params) }?;
    let mut host = vec![0u8; FINAL_COPY];
    buf.copy_to_host(&mut host)?;
    println!("final kernel final_step dtoh_bytes {FINAL_COPY}");
    std::io::stdout().flush()?;
    Ok(())
}

/// This thread's (voluntary, involuntary) context switches so far: a step that waits for another process (the
/// debugger) sleeps at least once; one that spins does not.
fn context_switches() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/status").ok()?;
    let field = |name: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
    };
    Some((
        field("voluntary_ctxt_switches:")?,
        field("nonvoluntary_ctxt_switches:")?,
    ))
}

/// The driver's debugger variables as this process sees them, and whether the debugger back end is mapped (a
/// diagnostic line for attach tests: `DEBUGGER STATE name=value ...`).
fn print_debugger_state() {
    let mut line = String::from("DEBUGGER STATE");
    // SAFETY: dlopen with RTLD_NOLOAD only finds a library that is already loaded; the handle is not closed
    // while in use.
    let handle = unsafe {
        libc::dlopen(
            c"libcuda.so.1".as_ptr(),
            libc::RTLD_LAZY | libc::RTLD_NOLOAD,
        )
    };
    for name in [
        c"cudbgIpcFlag",
        c"cudbgDebuggerInitialized",
        c"cudbgResumeForAttachDetach",
        c"cudbgApiClientPid",
        c"cudbgSessionId",
        c"cudbgDebuggerCapabilities",
        c"cudbgAttachHandlerAvailable",
    ] {
        let value = if handle.is_null() {
            None
        } else {
            // SAFETY: a symbol lookup in a loaded library; the variables are 4-byte integers.
            unsafe {
                let p = libc::dlsym(handle, name.as_ptr()) as *const u32;
                (!p.is_null()).then(|| std::ptr::read_volatile(p))
            }
        };
        line.push_str(&format!(" {}={value:?}", name.to_string_lossy()));
    }
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
    line.push_str(&format!(
        " backend_mapped={}",
        maps.contains("libcudadebugger")
    ));
    println!("{line}");
    let _ = std::io::stdout().flush();
}
