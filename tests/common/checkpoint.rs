//! Helpers for the checkpoint tests: the C doubles, an in-place PTX kernel, patterns and checksums.
#![allow(dead_code)]

use std::ffi::{CStr, c_void};
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
    // SAFETY: the double has no initialisers; opening it again returns the copy the crate loaded.
    LIB.get_or_init(|| {
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

/// A position-dependent pattern (xorshift of the word index and a seed), so a misplaced block is caught.
pub fn pattern(bytes: usize, seed: u64) -> Vec<u8> {
    let mut out = Vec::with_capacity(bytes);
    let mut i: u64 = 0;
    while out.len() < bytes {
        let mut x = (i ^ seed).wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        x ^= x >> 29;
        x = x.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x ^= x >> 32;
        let take = (bytes - out.len()).min(8);
        out.extend_from_slice(&x.to_le_bytes()[..take]);
        i += 1;
    }
    out
}

/// Reads the whole buffer back.
pub fn download(buf: &DeviceBuffer<'_>) -> Vec<u8> {
    let mut v = vec![0u8; buf.len()];
    buf.copy_to_host(&mut v).expect("copy to host");
    v
}

/// Order-sensitive 64-bit checksum.
pub fn checksum(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xCBF2_9CE4_8422_2325;
    for chunk in bytes.chunks(8) {
        let mut w = [0u8; 8];
        w[..chunk.len()].copy_from_slice(chunk);
        h = (h ^ u64::from_le_bytes(w))
            .wrapping_mul(0x0000_0100_0000_01B3)
            .rotate_left(17);
    }
    h
}

/// Index of the first differing byte, for a readable failure.
pub fn first_difference(a: &[u8], b: &[u8]) -> Option<usize> {
    a.iter()
        .zip(b)
        .position(|(x, y)| x != y)
        .or((a.len() != b.len()).then(|| a.len().min(b.len())))
}

/// `step(u32* buf, u64 n)`: every word `x[i] = x[i] * 1664525 + 1013904223 + i`, in place (it reads and writes
/// the same buffer), grid-stride loop with 64-bit indices. PTX text JIT-compiled by the driver for sm_80 and later.
pub const STEP_PTX: &CStr = match CStr::from_bytes_with_nul(
    concat!(include_str!("../../examples/kernels/step.ptx"), "\0").as_bytes(),
) {
    Ok(ptx) => ptx,
    Err(_) => panic!("step.ptx holds a NUL byte"),
};

/// The host reference of one `step` pass, for checking the kernel itself.
pub fn step_on_host(bytes: &mut [u8]) {
    for (i, w) in bytes.chunks_exact_mut(4).enumerate() {
        let x = u32::from_le_bytes([w[0], w[1], w[2], w[3]]);
        let y = x
            .wrapping_mul(1_664_525)
            .wrapping_add(1_013_904_223)
            .wrapping_add(i as u32);
        w.copy_from_slice(&y.to_le_bytes());
    }
}

/// Runs `step` once over the whole buffer (whole 32-bit words) and waits for it.
pub fn run_step(ctx: &Context, step: &gpu_tools::cuda::Function<'_>, buf: &mut DeviceBuffer<'_>) {
    let mut ptr = buf.device_ptr();
    let mut n = (buf.len() / 4) as u64;
    let mut params = [
        (&raw mut ptr).cast::<c_void>(),
        (&raw mut n).cast::<c_void>(),
    ];
    // SAFETY: `step` takes (u64 device pointer, u64 word count); the pointer addresses `n` words of `buf`.
    unsafe { step.launch((1024, 1, 1), (256, 1, 1), &mut params) }.expect("launch step");
    ctx.synchronize().expect("synchronize after step");
}
