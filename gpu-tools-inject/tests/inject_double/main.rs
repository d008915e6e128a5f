//! The injection library (`libgpu_tools_inject.so`) end to end without a GPU: a child process (this test binary
//! run again) opens the library, calls its `InitializeInjection` as CUDA would, with the CUDA driver and CUPTI
//! doubles named by `GPU_TOOLS_CUDA_DRIVER_LIB` / `GPU_TOOLS_CUPTI_LIB`, makes the CUPTI double write records, and
//! exits; the test listens on the socket the child's environment names and checks the stream: every record, the
//! flush at context destruction, the flush at exit, a forked child that writes nothing, the refusal without a
//! driver. Building this test builds the library too (the crate's `rlib` type makes cargo build its `cdylib`).

#[path = "../common/mod.rs"]
mod common;

mod attach;
mod container;
mod cycles;
mod flight;
mod kineto;
mod lagging;
mod launched;
mod nvtx;
mod pc_after_program;
mod probe;
mod program_profiler;
mod scheduled;
mod support;
