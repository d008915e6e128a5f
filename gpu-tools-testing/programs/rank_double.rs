//! One rank of a data-parallel training job, without a GPU: each step a compute kernel, then an all-reduce that
//! waits for every rank, as NCCL's does. The "kernels" are records the CUPTI double writes (while a tracer has
//! kernel records enabled, i.e. while `gpu-tools trace --pid` is attached), with the real durations of the
//! rank's work and waits. `.ci/slurm` runs several of these as the tasks of a Slurm job on several "hosts" and
//! traces them with `gpu-tools trace --job`.
//!
//! Each kernel is launched and waited for as a program does through the driver: the CUPTI double fires the
//! callbacks of `cuLaunchKernel` (on a stream of the driver double's primary context) and of
//! `cuStreamSynchronize` for a subscriber that enabled them, so the flight recorder an attach leaves behind keeps
//! account of the rank's launches, as it would of a real program's.
//!
//! The process looks like a CUDA process to `/proc`: it maps the CUDA driver double and the CUPTI double under
//! the names of the real libraries (`libcuda.so.1`, `libcupti.so.13`, copies in `WORKDIR/libs-PID/`), which the
//! injection library then uses as the program's own. The ranks meet at a barrier of files in `WORKDIR/barrier/`
//! (a shared folder: every host sees it), one file per rank holding the last step it finished.
//!
//!     rank_double --workdir DIR [--step-ms 20] [--seconds 120] [--slow-rank R] [--slow-factor 3]
//!     rank_double --doubles-dir
//!
//! The rank and the number of ranks come from the launcher (`SLURM_PROCID`/`SLURM_NTASKS`, or
//! `RANK`/`WORLD_SIZE`). It ends after `--seconds`, or once `WORKDIR/stop` exists.

use std::ffi::CStr;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::Parser;
use gpu_tools_testing::cupti_double::Controls;

/// `CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`.
const CONCURRENT_KERNEL: u32 = 10;
/// `CUPTI_CB_DOMAIN_DRIVER_API`, and the driver callback ids of `cuLaunchKernel` and `cuStreamSynchronize`
/// (cupti_driver_cbid.h).
const DRIVER_DOMAIN: u32 = 1;
const CBID_LAUNCH_KERNEL: u32 = 307;
const CBID_STREAM_SYNCHRONIZE: u32 = 126;
const COMPUTE: &CStr = c"_Z7computePfi";
const ALL_REDUCE: &CStr = c"ncclDevKernel_AllReduce_Sum_f32_RING_LL";

#[derive(Parser, Debug)]
#[command(about = "One rank of a training job on the CUDA and CUPTI doubles (for .ci/slurm)")]
struct Cli {
    /// A folder every rank sees: the barrier, the libraries' copies, the stop file.
    #[arg(long, required_unless_present = "doubles_dir")]
    workdir: Option<PathBuf>,
    /// Print the folder of the doubles this program loads, and exit (for the tracer's settings).
    #[arg(long)]
    doubles_dir: bool,
    /// Compute time of a step, milliseconds.
    #[arg(long, default_value_t = 20)]
    step_ms: u64,
    /// How long to run, seconds.
    #[arg(long, default_value_t = 120)]
    seconds: u64,
    /// The rank made slow on purpose.
    #[arg(long)]
    slow_rank: Option<u32>,
    /// How many times longer its compute takes.
    #[arg(long, default_value_t = 3)]
    slow_factor: u64,
}

fn variable(names: &[&str]) -> Option<u32> {
    names
        .iter()
        .find_map(|n| std::env::var(n).ok()?.trim().parse().ok())
}

/// `CLOCK_MONOTONIC` in nanoseconds: the clock of the injection library's stream.
fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: a valid out-pointer; CLOCK_MONOTONIC exists on every Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    u64::try_from(ts.tv_sec).unwrap_or(0) * 1_000_000_000 + u64::try_from(ts.tv_nsec).unwrap_or(0)
}

/// Copies a double to `dir/name` (a real file: `/proc/PID/maps` names the file, not a link).
fn copy(double: &str, dir: &Path, name: &str) -> PathBuf {
    let to = dir.join(name);
    std::fs::copy(gpu_tools_testing::double_path(double), &to)
        .unwrap_or_else(|e| panic!("copy the {double} double to {}: {e}", to.display()));
    to
}

/// The last step each rank finished, from the barrier's files.
fn finished(barrier: &Path, rank: u32) -> Option<u64> {
    std::fs::read_to_string(barrier.join(format!("rank-{rank}")))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The driver double's primary context, current on this thread, and two streams in it (the compute stream and
/// the all-reduce's), as a program sets them up.
fn primary_context_and_streams(driver: &libloading::Library) -> (usize, [usize; 2]) {
    type Init = unsafe extern "C" fn(u32) -> i32;
    type Retain = unsafe extern "C" fn(*mut usize, i32) -> i32;
    type Push = unsafe extern "C" fn(usize) -> i32;
    type StreamCreate = unsafe extern "C" fn(*mut usize, u32) -> i32;
    // SAFETY: the driver double's functions, of these C signatures (cuda.h); the library stays loaded.
    let (init, retain, push, create) = unsafe {
        (
            *driver.get::<Init>(b"cuInit\0").expect("cuInit"),
            *driver
                .get::<Retain>(b"cuDevicePrimaryCtxRetain\0")
                .expect("cuDevicePrimaryCtxRetain"),
            *driver
                .get::<Push>(b"cuCtxPushCurrent_v2\0")
                .expect("cuCtxPushCurrent_v2"),
            *driver
                .get::<StreamCreate>(b"cuStreamCreate\0")
                .expect("cuStreamCreate"),
        )
    };
    let mut context = 0usize;
    let mut streams = [0usize; 2];
    // SAFETY: each call gets live out-pointers; the context is the one the driver gave.
    let codes = unsafe {
        [
            init(0),
            retain(&mut context, 0),
            push(context),
            create(&mut streams[0], 0),
            create(&mut streams[1], 0),
        ]
    };
    assert_eq!(codes, [0; 5], "the driver double's context and streams");
    (context, streams)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.doubles_dir {
        println!("{}", gpu_tools_testing::doubles_dir().display());
        return ExitCode::SUCCESS;
    }
    let Some(workdir) = cli.workdir.clone() else {
        return ExitCode::from(2);
    };
    let (Some(rank), Some(ranks)) = (
        variable(&["SLURM_PROCID", "RANK"]),
        variable(&["SLURM_NTASKS", "WORLD_SIZE"]),
    ) else {
        eprintln!(
            "rank_double: no rank (SLURM_PROCID or RANK) or no size (SLURM_NTASKS or WORLD_SIZE)"
        );
        return ExitCode::from(2);
    };
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    let host = host.trim();
    let libs = workdir.join(format!("libs-{host}-{}", std::process::id()));
    let barrier = workdir.join("barrier");
    std::fs::create_dir_all(&libs).expect("create the libraries' folder");
    std::fs::create_dir_all(&barrier).expect("create the barrier's folder");
    let driver_path = copy("cuda_driver", &libs, "libcuda.so.1");
    let cupti_path = copy("cupti_activity", &libs, "libcupti.so.13");
    // SAFETY: the driver double has no initialisers; it stays loaded (and mapped) until the process ends.
    let driver = unsafe { libloading::Library::new(&driver_path) }.expect("load the driver double");
    let cupti = Controls::open(&cupti_path).expect("load the CUPTI double");
    let (context, streams) = primary_context_and_streams(&driver);
    let compute = Duration::from_millis(if cli.slow_rank == Some(rank) {
        cli.step_ms * cli.slow_factor
    } else {
        cli.step_ms
    });
    println!(
        "rank {rank} of {ranks} on {host}: ready (pid {}, compute {} ms a step)",
        std::process::id(),
        compute.as_millis()
    );
    let _ = std::io::stdout().flush();
    let started = Instant::now();
    let stop = workdir.join("stop");
    let mut step: u64 = 0;
    let mut correlation: u32 = 0;
    let mut recorded = 0u64;
    let mut kernel = |name: &'static CStr, start: u64, end: u64, stream: u32| {
        correlation = correlation.wrapping_add(1);
        let handle = streams[usize::from(stream != 7)];
        // cuLaunchKernel_params: the function, six 32-bit dimensions, the shared memory bytes, then the stream
        // (the sixth 64-bit word); the launch is reported at its end, when the record is written too.
        let mut launch = [0u64; 8];
        launch[5] = handle as u64;
        // SAFETY: the array lives to the end of the call and has cuLaunchKernel's layout; the name is static.
        unsafe {
            cupti.api_callback_params(
                DRIVER_DOMAIN,
                CBID_LAUNCH_KERNEL,
                c"cuLaunchKernel",
                Some(name),
                launch.as_ptr().cast(),
                context,
                correlation,
            )
        };
        let sync = [handle as u64];
        // SAFETY: cuStreamSynchronize_params is the stream alone; the array lives to the end of the call.
        unsafe {
            cupti.api_callback_params(
                DRIVER_DOMAIN,
                CBID_STREAM_SYNCHRONIZE,
                c"cuStreamSynchronize",
                None,
                sync.as_ptr().cast(),
                context,
                correlation,
            )
        };
        // 1 written, -1 while no tracer has kernels enabled.
        if cupti.kernel(
            CONCURRENT_KERNEL,
            start,
            end,
            (0, 1, stream),
            correlation,
            name,
            (1024, 1, 1),
            (256, 1, 1),
        ) == 1
        {
            recorded += 1;
        }
    };
    'steps: while started.elapsed() < Duration::from_secs(cli.seconds) && !stop.exists() {
        step += 1;
        let start = now_ns();
        std::thread::sleep(compute);
        kernel(COMPUTE, start, now_ns(), 7);
        // The all-reduce: this rank's part is done; it ends when every rank's is.
        let entered = now_ns();
        let mine = barrier.join(format!("rank-{rank}"));
        let tmp = barrier.join(format!(".rank-{rank}.tmp"));
        std::fs::write(&tmp, step.to_string()).expect("write the barrier file");
        std::fs::rename(&tmp, &mine).expect("publish the barrier file");
        while !(0..ranks).all(|r| finished(&barrier, r).is_some_and(|s| s >= step)) {
            if stop.exists() || started.elapsed() > Duration::from_secs(cli.seconds + 30) {
                break 'steps;
            }
            std::thread::sleep(Duration::from_micros(200));
        }
        kernel(ALL_REDUCE, entered, now_ns(), 13);
    }
    println!("rank {rank} on {host}: {step} steps, {recorded} kernel records written while traced");
    let _ = std::fs::remove_dir_all(&libs);
    ExitCode::SUCCESS
}
