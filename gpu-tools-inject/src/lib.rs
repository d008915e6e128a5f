//! The gpu-tools injection library. CUDA loads it into any program started with
//! `CUDA_INJECTION64_PATH=/abs/path/libgpu_tools_inject.so` and calls its `InitializeInjection` from inside the
//! program's first `cuInit`. It then collects the program's CUPTI activity records through gpu-tools' safe layer
//! and streams them, in the format of `gpu_tools::trace`, to the tracer named by the environment
//! (`gpu_tools::trace::env`): a Unix socket, or a file.
//!
//! It flushes periodically (so a crash loses at most the last interval), when a context is destroyed, and at
//! process exit (so nothing is lost at a normal exit). A forked child does not write into its parent's stream; an
//! exec'd child that uses CUDA connects anew. Nothing is printed to the program's stdout; diagnostics go to
//! stderr only when `GPU_TOOLS_TRACE_LOG` asks for them. No panic crosses into the program.

// Wired into InitializeInjection once the session module lands; until then only the tests use them.
#![allow(dead_code)]

mod config;
mod logger;
mod maps;
mod sink;
