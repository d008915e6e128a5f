//! The real CUPTI 12.9 library of the `nvidia-cuda-cupti-cu12==12.9.79` PyPI wheel (API version 28), on a machine
//! without a GPU: it loads through the crate, has the tracing entry points but not `cuptiSubscribe_v2`, its buffers
//! use the 12.9 layouts (208-byte kernels), and tracing without a driver is a typed error.
//! `GPU_TOOLS_CUPTI12_WHEEL_LIB` names the wheel's `nvidia/cuda_cupti/lib` folder; CI sets it (unset under CI is
//! a failure, elsewhere a notice).
#![cfg(feature = "cupti")]

#[path = "common/cupti_wheel.rs"]
mod common;

use std::path::PathBuf;

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::cupti::activity::RecordLayout;

const VAR: &str = "GPU_TOOLS_CUPTI12_WHEEL_LIB";

fn lib_path() -> Option<PathBuf> {
    Some(common::wheel_dir(VAR)?.join("libcupti.so.12"))
}

fn cupti() -> Option<&'static CuptiLibrary> {
    let path = lib_path()?;
    Some(CuptiLibrary::load_from(&path).expect("the 12.9 wheel's libcupti.so.12 loads"))
}

#[test]
fn version_28_reads_with_the_12_9_layout() {
    let Some(lib) = cupti() else { return };
    assert_eq!(lib.version().unwrap(), 28);
    assert_eq!(common::exact_layout(lib), RecordLayout::Cupti12_9);
}

#[test]
fn tracing_symbols_resolve_and_subscribe_v2_is_absent() {
    let Some(lib) = cupti() else { return };
    let symbols = lib.tracing_symbols();
    assert!(symbols.missing_required.is_empty(), "{symbols:?}");
    assert!(
        symbols.optional_missing.contains(&"cuptiSubscribe_v2"),
        "{symbols:?}"
    );
    assert!(
        symbols
            .optional_present
            .contains(&"cuptiActivityRegisterTimestampCallback"),
        "{symbols:?}"
    );
}

#[test]
fn the_layout_sizes_agree_with_the_vendors_record_walk() {
    let Some(path) = lib_path() else { return };
    cupti();
    let (agreed, vendor_only) = common::layout_matches_vendor(&path, RecordLayout::Cupti12_9);
    eprintln!("{agreed} kinds agree; sized by the vendor only: {vendor_only:?}");
    // Every kind of the enum: the crate's table and the vendor's walk agree on all of them.
    assert_eq!(agreed, 55);
    assert!(vendor_only.is_empty());
    // The difference that matters most: kernels are 208 bytes in 12.9, 216 in 13.0.
    assert_eq!(common::vendor_record_size(&path, 10), Some(208));
}

#[test]
fn tracing_without_a_driver_is_a_typed_error() {
    let Some(path) = lib_path() else { return };
    cupti();
    common::tracing_without_a_driver_is_a_typed_error(&path);
}

/// CUPTI 12.9 without a driver answers `CUPTI_ERROR_NOT_INITIALIZED` where 13.0 answers `CUPTI_ERROR_UNKNOWN`.
#[test]
fn raw_tracing_calls_without_a_driver_fail_with_not_initialized() {
    let Some(path) = lib_path() else { return };
    if gpu_tools::cuda::Driver::load().is_ok() {
        eprintln!("a CUDA driver is present: the no-driver codes cannot be shown here");
        return;
    }
    let codes = common::raw_calls_in_child("raw_calls_child", VAR, path.parent().unwrap());
    eprintln!("CUPTI 12.9 without a driver: {codes:?}");
    let code = |name: &str| codes.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
    assert_eq!(code("cuptiActivityRegisterCallbacks"), Some(0));
    for failing in [
        "cuptiActivityRegisterTimestampCallback",
        "cuptiActivityEnable",
        "cuptiActivityFlushAll",
        "cuptiSubscribe",
    ] {
        assert_eq!(code(failing), Some(15), "{failing}: {codes:?}");
    }
}

#[test]
#[ignore = "run in a child process by raw_tracing_calls_without_a_driver_fail_with_not_initialized"]
fn raw_calls_child() {
    let dir = PathBuf::from(std::env::var_os(VAR).expect("started by the parent test"));
    common::raw_calls(&dir.join("libcupti.so.12"));
}
