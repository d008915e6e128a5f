//! Helpers for the checkpoint tests against the C doubles: loading them, their counters, and reading a buffer
//! back. The kernel, patterns and checksums are `gpu_tools_testing::kernels`.

use std::ffi::c_void;
use std::path::PathBuf;

use gpu_tools::cuda::{Context, DeviceBuffer};

/// Path of a compiled test double, `lib<name>.so`.
pub fn double_path(name: &str) -> PathBuf {
    gpu_tools_testing::double_path(name)
}

/// Loads the driver and checkpoint doubles into this process's library slots (idempotent).
pub fn load_doubles() {
    gpu_tools::cuda::Driver::load_from(double_path("cuda_driver")).expect("driver double loads");
    gpu_tools::cupti::CheckpointLibrary::load_from(double_path("checkpoint"))
        .expect("checkpoint double loads");
}

/// What the checkpoint double counted for one context (layout of `struct ckpt_double_stats`).
#[repr(C)]
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct DoubleStats {
    pub saves: std::ffi::c_ulong,
    pub restores: std::ffi::c_ulong,
    pub frees: std::ffi::c_ulong,
    pub live: std::ffi::c_ulong,
    pub dead_ctx_calls: std::ffi::c_ulong,
    pub last_reserve_device: usize,
    pub last_reserve_host: usize,
    pub last_overwrite: u32,
    pub last_optimizations: u32,
    pub host_saves: std::ffi::c_ulong,
}

fn double_lib() -> &'static libloading::Library {
    static LIB: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        // SAFETY: the double has no initialisers; opening it again returns the copy the crate loaded.
        unsafe { libloading::Library::new(double_path("checkpoint")) }.expect("open double")
    })
}

/// The double's counters for `ctx`.
pub fn stats(ctx: &Context) -> DoubleStats {
    let mut out = DoubleStats::default();
    // SAFETY: the symbol has this signature in checkpoint.c; `out` is a valid destination of that layout.
    unsafe {
        let f: libloading::Symbol<unsafe extern "C" fn(*mut c_void, *mut DoubleStats) -> i32> =
            double_lib()
                .get(b"ckpt_double_stats\0")
                .expect("ckpt_double_stats");
        f(ctx.as_raw().cast(), &mut out);
    }
    out
}

/// The most checkpoint calls the double ever saw running at the same time.
pub fn max_in_flight() -> i32 {
    // SAFETY: the symbol has this signature in checkpoint.c.
    unsafe {
        let f: libloading::Symbol<unsafe extern "C" fn() -> i32> = double_lib()
            .get(b"ckpt_double_max_in_flight\0")
            .expect("ckpt_double_max_in_flight");
        f()
    }
}

/// Reads the whole buffer back.
pub fn download(buf: &DeviceBuffer<'_>) -> Vec<u8> {
    let mut v = vec![0u8; buf.len()];
    buf.copy_to_host(&mut v).expect("copy to host");
    v
}
