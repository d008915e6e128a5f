//! The real CUPTI libraries of the `nvidia-cuda-cupti` PyPI wheel, loaded through the crate's loader on a machine
//! without a GPU. `GPU_TOOLS_CUPTI_WHEEL_LIB` names the wheel's `nvidia/cu13/lib` folder; CI always sets it. When it
//! is unset the tests print a notice and pass without checking anything, except under CI (`CI` set), where they
//! fail; when it is set, a missing file fails.
#![cfg(feature = "cupti")]

#[path = "common/cupti_wheel.rs"]
mod common;

use std::path::PathBuf;

use gpu_tools::cupti::activity::RecordLayout;
use gpu_tools::cupti::{CheckpointLibrary, CuptiError, CuptiLibrary};

const VAR: &str = "GPU_TOOLS_CUPTI_WHEEL_LIB";

fn wheel_lib() -> Option<PathBuf> {
    common::wheel_dir(VAR)
}

fn cupti() -> Option<&'static CuptiLibrary> {
    let dir = wheel_lib()?;
    Some(
        CuptiLibrary::load_from(dir.join("libcupti.so.13"))
            .expect("the wheel's libcupti.so.13 loads"),
    )
}

#[test]
fn checkpoint_library_resolves_every_symbol() {
    let Some(dir) = wheel_lib() else { return };
    let path = dir.join("libcheckpoint.so");
    let lib = CheckpointLibrary::load_from(&path).expect("the wheel's libcheckpoint.so loads");
    assert_eq!(lib.path(), Some(path.as_path()));
    // Loading again from the same path gives the same process-wide copy.
    let again = CheckpointLibrary::load_from(&path).expect("second load");
    assert!(std::ptr::eq(lib, again));
    assert_ne!(lib.save as usize, lib.restore as usize);
    assert_ne!(lib.restore as usize, lib.free as usize);
}

#[test]
fn cupti_version_is_13() {
    let Some(lib) = cupti() else { return };
    let v = lib.version().expect("cuptiGetVersion");
    assert!((130_000..140_000).contains(&v), "CUPTI API version {v}");
    assert_eq!(
        v,
        gpu_tools::sys::cupti::CUPTI_API_VERSION,
        "wheel and generated header agree"
    );
}

/// Codes of `cupti_result.h` (13.0) that `cuptiGetResultString` of the same release does not name.
const VENDOR_UNNAMED: [u32; 2] = [36, 37];

#[test]
fn every_result_name_matches_cupti_get_result_string() {
    let Some(lib) = cupti() else { return };
    assert!(
        CuptiError::ALL.len() >= 47,
        "{} codes",
        CuptiError::ALL.len()
    );
    for e in CuptiError::ALL {
        let vendor = lib.result_string(e.code());
        if VENDOR_UNNAMED.contains(&e.code()) {
            // The header defines these, but cuptiGetResultString of CUPTI 13.0 rejects them.
            assert_eq!(
                vendor,
                None,
                "code {} is now named by the vendor: update VENDOR_UNNAMED",
                e.code()
            );
        } else {
            assert_eq!(vendor.as_deref(), e.vendor_name(), "code {}", e.code());
        }
    }
    // Codes neither the header nor the library knows are kept as unrecognized.
    for code in [47, 500, 998] {
        assert_eq!(lib.result_string(code), None, "code {code}");
        assert_eq!(CuptiError::from_code(code), CuptiError::Unrecognized(code));
        assert_eq!(
            CuptiError::from_code(code).to_string(),
            format!("unrecognized CUPTI result {code}")
        );
    }
    // 1000 is not in the public header, but the library names it: the crate keeps the code and shows the name.
    let internal = CuptiError::from_code(1000);
    assert_eq!(internal, CuptiError::Unrecognized(1000));
    assert_eq!(
        internal.to_string(),
        "CUPTI_ERROR_CANT_OPEN_FILE (code 1000 unknown to this crate)"
    );
}

#[test]
fn display_has_name_and_vendor_message() {
    let Some(lib) = cupti() else { return };
    // Where CUPTI has a description, Display adds it, without the trailing newline.
    let msg = lib
        .error_message(CuptiError::InvalidDevice.code())
        .expect("cuptiGetErrorMessage in CUPTI 13");
    assert!(msg.ends_with('\n'), "{msg:?}");
    assert_eq!(
        CuptiError::InvalidDevice.to_string(),
        format!("CUPTI_ERROR_INVALID_DEVICE: {}", msg.trim())
    );
    // Where the description only repeats the name, Display does not repeat it.
    assert_eq!(
        lib.error_message(7).as_deref(),
        Some("CUPTI_ERROR_INVALID_OPERATION")
    );
    assert_eq!(
        CuptiError::InvalidOperation.to_string(),
        "CUPTI_ERROR_INVALID_OPERATION"
    );
    // "<unknown>" from the library is not shown as a message.
    assert_eq!(
        CuptiError::Unrecognized(4242).to_string(),
        "unrecognized CUPTI result 4242"
    );
}

#[test]
fn every_tracing_symbol_resolves() {
    let Some(lib) = cupti() else { return };
    let symbols = lib.tracing_symbols();
    assert!(symbols.missing_required.is_empty(), "{symbols:?}");
    assert!(symbols.optional_missing.is_empty(), "{symbols:?}");
    for optional in [
        "cuptiActivityRegisterTimestampCallback",
        "cuptiGetTimestamp",
        "cuptiActivityFlushPeriod",
        "cuptiGetContextId",
        "cuptiSubscribe_v2",
        "cuptiGetStreamId",
    ] {
        assert!(
            symbols.optional_present.contains(&optional),
            "{optional}: {symbols:?}"
        );
    }
}

#[test]
fn the_layout_sizes_agree_with_the_vendors_record_walk() {
    let Some(dir) = wheel_lib() else { return };
    let Some(lib) = cupti() else { return };
    let layout = common::exact_layout(lib);
    assert_eq!(layout, RecordLayout::Cupti13_0);
    let (agreed, vendor_only) = common::layout_matches_vendor(&dir.join("libcupti.so.13"), layout);
    eprintln!("{agreed} kinds agree; sized by the vendor only: {vendor_only:?}");
    // Every kind of the 13.0 enum that 13.0 still writes: the crate's table and the vendor's walk agree on all of them.
    assert_eq!(agreed, 39);
    assert!(vendor_only.is_empty());
}

#[test]
fn tracing_without_a_driver_is_a_typed_error() {
    let Some(dir) = wheel_lib() else { return };
    cupti();
    common::tracing_without_a_driver_is_a_typed_error(&dir.join("libcupti.so.13"));
}

/// What the crate's driver check spares the caller: the raw calls without a driver fail with vendor codes (13.0:
/// `CUPTI_ERROR_UNKNOWN`), without crashing or hanging.
#[test]
fn raw_tracing_calls_without_a_driver_fail_with_unknown() {
    let Some(dir) = wheel_lib() else { return };
    if gpu_tools::cuda::Driver::load().is_ok() {
        eprintln!("a CUDA driver is present: the no-driver codes cannot be shown here");
        return;
    }
    let codes = common::raw_calls_in_child("raw_calls_child", VAR, &dir);
    eprintln!("CUPTI 13.0 without a driver: {codes:?}");
    let code = |name: &str| codes.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
    assert_eq!(code("cuptiActivityRegisterCallbacks"), Some(0));
    assert_eq!(code("cuptiActivityGetNumDroppedRecords"), Some(0));
    for failing in [
        "cuptiActivityRegisterTimestampCallback",
        "cuptiActivityEnable",
        "cuptiActivityFlushAll",
        "cuptiActivityDisable",
        "cuptiSubscribe",
    ] {
        assert_eq!(code(failing), Some(999), "{failing}: {codes:?}");
    }
}

#[test]
#[ignore = "run in a child process by raw_tracing_calls_without_a_driver_fail_with_unknown"]
fn raw_calls_child() {
    let dir = PathBuf::from(std::env::var_os(VAR).expect("started by the parent test"));
    common::raw_calls(&dir.join("libcupti.so.13"));
}
