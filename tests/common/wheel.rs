//! The real CUPTI libraries of NVIDIA's PyPI wheels, for the tests that run against them without a GPU. A
//! process loads one CUPTI, so each CUDA major version has its own test binaries (`*12.rs` for CUDA 12).
#![allow(dead_code)]

use std::path::PathBuf;

/// One wheel's library folder and what is known about the CUPTI in it.
pub struct Wheel {
    /// The variable naming the wheel's library folder.
    pub var: &'static str,
    /// The CUPTI library file in that folder.
    pub cupti_file: &'static str,
    /// The CUDA release of the wheel CI installs.
    pub cuda: (u32, u32),
    /// What `cuptiGetVersion` reports for it.
    pub api_version: u32,
    /// Codes of the crate's `cupti_result.h` (13.0) that this release's `cuptiGetResultString` does not name.
    pub vendor_unnamed: &'static [u32],
    /// The record layout this release writes.
    pub layout: gpu_tools::cupti::activity::RecordLayout,
    /// How many record kinds the vendor's own record walk sizes (and the crate's table sizes alike).
    pub vendor_sized_kinds: usize,
    /// The size of a kernel record (`CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL`).
    pub kernel_record_size: usize,
    /// What the Activity and Callback entry points return without a driver.
    pub no_driver_code: u32,
    /// Whether the library exports `cuptiSubscribe_v2` (new in 13.0).
    pub has_subscribe_v2: bool,
}

/// `nvidia-cuda-cupti` 13.0.85: `nvidia/cu13/lib`.
pub const CUDA13: Wheel = Wheel {
    var: "GPU_TOOLS_CUPTI_WHEEL_LIB",
    cupti_file: "libcupti.so.13",
    cuda: (13, 0),
    api_version: 130001,
    // The 13.0 header defines 36 and 37, but the library of the same release rejects them.
    vendor_unnamed: &[36, 37],
    layout: gpu_tools::cupti::activity::RecordLayout::Cupti13_0,
    // 13.0 refuses 16 kinds its header still defines.
    vendor_sized_kinds: 39,
    kernel_record_size: 216,
    // CUPTI_ERROR_UNKNOWN
    no_driver_code: 999,
    has_subscribe_v2: true,
};

/// `nvidia-cuda-cupti-cu12` 12.9.79: `nvidia/cuda_cupti/lib`.
pub const CUDA12: Wheel = Wheel {
    var: "GPU_TOOLS_CUPTI12_WHEEL_LIB",
    cupti_file: "libcupti.so.12",
    cuda: (12, 9),
    api_version: 28,
    // 46 (CUPTI_ERROR_INVALID_CHIP_NAME) is new in CUDA 13.0.
    vendor_unnamed: &[36, 37, 46],
    layout: gpu_tools::cupti::activity::RecordLayout::Cupti12_9,
    vendor_sized_kinds: 55,
    kernel_record_size: 208,
    // CUPTI_ERROR_NOT_INITIALIZED
    no_driver_code: 15,
    has_subscribe_v2: false,
};

impl Wheel {
    /// The wheel's library folder. Unset variable: a notice, and `None` (the caller checks nothing), except under
    /// CI (`CI` set), whose script sets it, so its absence fails. Set, but without the wheel's libraries: the test
    /// fails.
    pub fn dir(&self) -> Option<PathBuf> {
        let Some(dir) = std::env::var_os(self.var) else {
            assert!(
                std::env::var_os("CI").is_none(),
                "{} is unset under CI: .ci/run installs the wheel and sets it",
                self.var
            );
            eprintln!("{} is unset: real-library checks not run", self.var);
            return None;
        };
        let dir = PathBuf::from(dir);
        for file in ["libcheckpoint.so", self.cupti_file] {
            assert!(
                dir.join(file).is_file(),
                "{} is set but {} has no {file}",
                self.var,
                dir.display()
            );
        }
        Some(dir)
    }
}
