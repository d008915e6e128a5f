//! The `step` kernel (PTX) and its host reference, and the byte patterns, checksums and comparisons that the
//! checkpoint tests check device memory with. `download` and `run_step` drive a real context (feature
//! `nvidia-hw-tests`; named without links, which a build without the feature could not resolve).

use std::ffi::CStr;
#[cfg(feature = "nvidia-hw-tests")]
use std::ffi::c_void;

#[cfg(feature = "nvidia-hw-tests")]
use gpu_tools::cuda::{Context, DeviceBuffer, Function};

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
    concat!(include_str!("../../gpu-host/kernels/step.ptx"), "\0").as_bytes(),
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

#[cfg(feature = "nvidia-hw-tests")]
/// Reads the whole buffer back.
pub fn download(buf: &DeviceBuffer<'_>) -> Vec<u8> {
    let mut v = vec![0u8; buf.len()];
    buf.copy_to_host(&mut v).expect("copy to host");
    v
}

#[cfg(feature = "nvidia-hw-tests")]
/// Runs `step` once over the whole buffer (whole 32-bit words) and waits for it.
pub fn run_step(ctx: &Context, step: &Function<'_>, buf: &mut DeviceBuffer<'_>) {
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
