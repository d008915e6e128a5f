//! The gpu-tools injection library. CUDA loads it into any program started with
//! `CUDA_INJECTION64_PATH=/abs/path/libgpu_tools_inject.so` and calls its `InitializeInjection` from inside the
//! program's first `cuInit`. It then collects the program's CUPTI activity records through gpu-tools' safe layer
//! and streams them, in the format of `gpu_tools::trace`, to the tracer named by the environment
//! (`gpu_tools_injection::env`): a Unix socket, or a file.
//!
//! It flushes periodically (so a crash loses at most the last interval), when a context is destroyed, and at
//! process exit (so nothing is lost at a normal exit). A forked child does not write into its parent's stream; an
//! exec'd child that uses CUDA connects anew. On a fatal signal it flushes and ends the stream before the
//! program's own handling runs (see `signals`). Named by `NVTX_INJECTION64_PATH` too, it hands the program's NVTX
//! calls to CUPTI, which records them as markers and ranges. Nothing is printed to the program's stdout; diagnostics go to
//! stderr only when `GPU_TOOLS_TRACE_LOG` asks for them. No panic crosses into the program.
//!
//! Loaded into a program that already runs (`gpu-tools trace --pid`, through `gpu_tools::linux::inject`), its
//! [`gpu_tools_inject_attach`] entry point starts the same tracing from a thread of its own and stops it when the
//! tracer says so (`attach` module). NVTX, which a running program initialised without a tool, is routed to CUPTI
//! for the attached window and back (`nvtx_attach` module).
//!
//! With `GPU_TOOLS_PROFILE_METRICS` (and `GPU_TOOLS_PROFILE_PC_SAMPLING`) it also collects per-kernel metrics with
//! CUPTI's range profiler (and PC samples) and sends them as counter records (`profiling` module).

// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

use std::ffi::c_int;

mod attach;
mod coexist;
pub mod convert;
mod first_attach;
mod flight;
mod graph_fold;
mod imports;
mod loaded_modules;
mod logger;
mod mapped_library;
mod nvtx;
mod nvtx_attach;
mod pc_attach;
mod profiling;
mod program_cpu;
mod session;
mod signals;
use gpu_tools_injection::sink;
/// The record path's writer, public only for the crate's benchmark of it (`benches/record_path.rs`, which CI
/// runs against a baseline): not an API.
#[doc(hidden)]
pub mod writer;

pub use attach::gpu_tools_inject_attach;
pub use gpu_tools_injection::env::AttachStatus;
pub use nvtx::{InitializeInjectionNvtx2, InitializeInjectionNvtxExtension};

/// Called by CUDA once per process, from inside the program's first `cuInit` (so it never calls `cuInit`
/// itself). Returns 1 when tracing runs, 0 when it does not (the reason is logged, and sent to the tracer where
/// the stream could be opened). The program runs on either way.
#[unsafe(no_mangle)]
pub extern "C" fn InitializeInjection() -> c_int {
    match std::panic::catch_unwind(session::initialize) {
        Ok(true) => 1,
        Ok(false) => 0,
        Err(payload) => {
            // Dropping a panic payload could panic again, here where nothing may unwind into CUDA.
            std::mem::forget(payload);
            0
        }
    }
}
