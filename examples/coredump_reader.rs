//! A CUDA core-dump reader: [`gpu_tools::coredump`] parses the dump the driver writes when a kernel faults, in
//! safe Rust, with no NVIDIA library and no GPU, so it runs anywhere the file is.
//!
//! Prints the dump's devices, then each faulting lane: the exception, the kernel, the PC and its offset in the
//! function, the block and thread, and where on the GPU it ran. A file that is not a CUDA core dump, or a damaged
//! one, is an error naming what did not fit; it is printed and the exit status is 1.
//!
//! Make a dump on a host with an NVIDIA GPU (`tests/fixtures/coredump/make.sh` makes the repository's ones), then
//! read it there or anywhere:
//!
//! ```text
//! CUDA_ENABLE_COREDUMP_ON_EXCEPTION=1 CUDA_COREDUMP_FILE=core.cudacore ./a-program-whose-kernel-faults
//! cargo run --release --example coredump_reader -- core.cudacore
//! ```

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use gpu_tools::coredump::CoreDump;

/// Read a CUDA core dump and print its devices and faulting lanes.
#[derive(Parser)]
struct Args {
    /// The core dump (`CUDA_COREDUMP_FILE`).
    dump: PathBuf,
}

fn main() -> ExitCode {
    let args = Args::parse();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("coredump_reader: {}: {e}", args.dump.display());
            ExitCode::FAILURE
        }
    }
}

fn run(args: &Args) -> Result<(), Box<dyn std::error::Error>> {
    // Written with `?`: a closed pipe (`| head`) ends the run instead of panicking as `println!` would.
    let mut out = std::io::stdout().lock();
    let dump = CoreDump::open(&args.dump)?; // only reads the file
    for d in dump.devices() {
        writeln!(out, "device {}: {}", d.index, d.name)?;
    }
    let mut faulting = 0;
    for l in dump.faulting_lanes() {
        faulting += 1;
        let kernel = l
            .grid()
            .and_then(|g| g.kernel_name.as_deref())
            .unwrap_or("?");
        writeln!(
            out,
            "{} in {kernel} at {:#x} (+{:#x}), block {} thread {}, device {} sm {} warp {} lane {}",
            l.lane.exception.description(),
            l.lane.pc,
            l.lane.function_offset,
            l.block.block_idx,
            l.lane.thread_idx,
            l.device.index,
            l.sm.id,
            l.warp.id,
            l.lane.id
        )?;
    }
    writeln!(out, "{faulting} faulting lanes")?;
    Ok(())
}
