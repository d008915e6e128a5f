//! A rocprofiler-sdk tool inside a program: [`force_configure`] registers a [`Tool`] before the program's first
//! HIP call; its one initialisation creates a context, a buffer and kernel-dispatch tracing, and the buffer hands
//! its records to a closure as they complete.
//!
//! The program then opens the HIP runtime (only now: the SDK must be registered first) and runs `hipMemset`
//! calls, each a fill kernel, and [`finalize`] flushes: each dispatch is printed with its duration, then the
//! count. The same `Tool` in a cdylib loaded through `ROCP_TOOL_LIBRARIES` is
//! `gpu_tools::rocprofiler_sdk_tool!(KernelTimer);`. Errors (no SDK, no HIP runtime, no GPU) are printed; exit
//! status 1.
//!
//! On a host with an AMD GPU and ROCm 7.0+:
//!
//! ```text
//! cargo run --release --example rocprofiler_sdk_tool -- --iterations 8
//! ```

use std::ffi::c_void;
use std::process::ExitCode;
use std::sync::atomic::{AtomicU64, Ordering};

use clap::Parser;
use gpu_tools::rocprofiler_sdk::{
    Buffer, BufferOptions, Context, Record, SdkLibrary, Setup, Tool, TraceKind, finalize,
    force_configure,
};

/// Kernel dispatches the buffer's closure saw.
static KERNELS: AtomicU64 = AtomicU64::new(0);

/// Time this program's own kernel dispatches on an AMD GPU with a rocprofiler-sdk tool registered in-process.
#[derive(Parser)]
struct Args {
    /// Number of hipMemset calls (each runs one fill kernel).
    #[arg(long, default_value_t = 8)]
    iterations: usize,
}

/// The tool: what it configured lives as long as the registration.
struct KernelTimer {
    _context: Context,
    _buffer: Buffer,
}

impl Tool for KernelTimer {
    const NAME: &'static str = "kernel-timer";

    fn initialize(setup: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        let context = setup.create_context()?;
        let buffer = setup.create_buffer(&context, BufferOptions::new(1 << 20), |batch| {
            for record in batch.records() {
                match record {
                    Ok(Record::KernelDispatch(k)) => {
                        KERNELS.fetch_add(1, Ordering::Relaxed);
                        println!("kernel {} ran {} ns", k.kernel_id(), k.time().duration_ns());
                    }
                    Ok(_) => {}
                    Err(e) => eprintln!("a record that did not decode: {e}"),
                }
            }
        })?;
        setup.trace(&context, &[TraceKind::KernelDispatch], &buffer)?;
        context.start()?;
        Ok(KernelTimer {
            _context: context,
            _buffer: buffer,
        })
    }
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("rocprofiler_sdk_tool: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    force_configure::<KernelTimer>(SdkLibrary::load()?)?;
    let rocm = std::env::var("ROCM_PATH").unwrap_or_else(|_| "/opt/rocm".into());
    // SAFETY: opening the HIP runtime runs its initialisers; the SDK is registered, as it must be first.
    let hip = unsafe { libloading::Library::new(format!("{rocm}/lib/libamdhip64.so")) }
        .or_else(|_| {
            // SAFETY: the same library found by the system loader instead; the SDK is registered already.
            unsafe { libloading::Library::new("libamdhip64.so") }
        })
        .map_err(|e| format!("no HIP runtime: {e}"))?;
    type Malloc = unsafe extern "C" fn(*mut *mut c_void, usize) -> i32;
    type Memset = unsafe extern "C" fn(*mut c_void, i32, usize) -> i32;
    type NoArgs = unsafe extern "C" fn() -> i32;
    type Free = unsafe extern "C" fn(*mut c_void) -> i32;
    // SAFETY: each symbol has this C signature in the HIP runtime (hip_runtime_api.h); `hip` outlives them.
    let (malloc, memset, synchronize, free) = unsafe {
        (
            hip.get::<Malloc>(b"hipMalloc\0")?,
            hip.get::<Memset>(b"hipMemset\0")?,
            hip.get::<NoArgs>(b"hipDeviceSynchronize\0")?,
            hip.get::<Free>(b"hipFree\0")?,
        )
    };
    let check = |what: &str, status: i32| match status {
        0 => Ok(()),
        s => Err(format!("{what} failed with hipError {s}")),
    };
    let mut dev: *mut c_void = std::ptr::null_mut();
    // SAFETY: `dev` is a valid place for the new allocation's address.
    check("hipMalloc", unsafe { malloc(&mut dev, 1 << 20) })?;
    let work = || -> Result<(), String> {
        for i in 0..args.iterations {
            // SAFETY: `dev` holds 1 MiB allocated above and not yet freed.
            check("hipMemset", unsafe { memset(dev, i as i32, 1 << 20) })?;
        }
        // SAFETY: no arguments.
        check("hipDeviceSynchronize", unsafe { synchronize() })
    };
    let worked = work();
    // SAFETY: `dev` was allocated above and is freed once, on every path.
    let freed = check("hipFree", unsafe { free(dev) });
    worked?;
    freed?;
    finalize()?; // flushes the buffer: every record has reached the closure
    println!("{} kernel dispatches", KERNELS.load(Ordering::Relaxed));
    Ok(())
}
