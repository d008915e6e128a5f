//! Checks of the real CUPTI libraries of one wheel (the process's: [`the_wheel`]), loaded through the crate's
//! loader on a machine without a GPU. Run by the groups `cupti_wheel` (CUDA 13) and `cupti_wheel12` (CUDA 12) of
//! `main.rs`, with `cupti_tracing.rs`; the harness (`wheel.rs`) runs `CHECKS`: a new check is a function here
//! taking the wheel's library folder, listed in `CHECKS` (not a `#[test]`).

use std::path::Path;

use gpu_tools::cupti::{CheckpointLibrary, CuptiError, CuptiLibrary, CuptiVersion};

use crate::wheel::the_wheel;
use crate::wheel::{Check, Child};

/// The checks, in the order they are listed.
pub const CHECKS: &[Check] = &[
    check(
        "checkpoint_library_resolves_every_symbol",
        checkpoint_library_resolves_every_symbol,
    ),
    check(
        "cupti_is_not_a_checkpoint_library",
        cupti_is_not_a_checkpoint_library,
    ),
    check(
        "cupti_version_is_decoded_for_its_cuda_release",
        cupti_version_is_decoded_for_its_cuda_release,
    ),
    check(
        "every_result_name_matches_cupti_get_result_string",
        every_result_name_matches_cupti_get_result_string,
    ),
    check(
        "display_has_name_and_vendor_message",
        display_has_name_and_vendor_message,
    ),
    check(
        "every_tracing_symbol_resolves",
        every_tracing_symbol_resolves,
    ),
    check(
        "the_layout_sizes_agree_with_the_vendors_record_walk",
        the_layout_sizes_agree_with_the_vendors_record_walk,
    ),
    Check {
        name: "the_thread_id_kind_without_a_driver_is_a_typed_error",
        run: the_thread_id_kind_without_a_driver_is_a_typed_error,
        without_driver: true,
    },
    Check {
        name: "tracing_without_a_driver_is_a_typed_error",
        run: tracing_without_a_driver_is_a_typed_error,
        without_driver: true,
    },
    Check {
        name: "raw_tracing_calls_without_a_driver_fail_with_a_vendor_code",
        run: raw_tracing_calls_without_a_driver_fail_with_a_vendor_code,
        without_driver: true,
    },
];

/// The helpers run in a child process of their own.
pub const CHILDREN: &[Child] = &[
    Child {
        name: "raw_calls",
        run: raw_calls_child,
    },
    Child {
        name: "cupti_as_checkpoint",
        run: cupti_as_checkpoint_child,
    },
];

const fn check(name: &'static str, run: fn(&Path)) -> Check {
    Check {
        name,
        run,
        without_driver: false,
    }
}

fn cupti(dir: &Path) -> &'static CuptiLibrary {
    CuptiLibrary::load_from(the_wheel().cupti(dir))
        .unwrap_or_else(|e| panic!("the wheel's CUPTI loads: {e}"))
}

fn checkpoint_library_resolves_every_symbol(dir: &Path) {
    let path = dir.join("libcheckpoint.so");
    let lib = CheckpointLibrary::load_from(&path)
        .unwrap_or_else(|e| panic!("the wheel's libcheckpoint.so loads: {e}"));
    assert_eq!(lib.path(), Some(path.as_path()));
    // Loading again from the same path gives the same process-wide copy.
    let again = CheckpointLibrary::load_from(&path).expect("second load");
    assert!(std::ptr::eq(lib, again));
    assert_ne!(lib.save as usize, lib.restore as usize);
    assert_ne!(lib.restore as usize, lib.free as usize);
}

fn cupti_version_is_decoded_for_its_cuda_release(dir: &Path) {
    let lib = cupti(dir);
    let raw = lib.version().expect("cuptiGetVersion");
    let v = lib.api_version().expect("cuptiGetVersion");
    eprintln!("{}: {v}", the_wheel().cupti_file);
    assert_eq!(raw, the_wheel().api_version, "the wheel CI installs");
    assert_eq!(v.api(), raw);
    // CUDA 12 numbers the API 19..=28, CUDA 13 as xxyyzz: both decode to their CUDA release.
    assert_eq!(v.cuda(), Some(the_wheel().cuda));
    if the_wheel().cuda.0 == 13 {
        assert_eq!(v, CuptiVersion::HEADER, "wheel and generated header agree");
    } else {
        assert!(v < CuptiVersion::HEADER, "an older CUPTI than the header");
    }
}

fn every_result_name_matches_cupti_get_result_string(dir: &Path) {
    let lib = cupti(dir);
    assert!(
        CuptiError::ALL.len() >= 47,
        "{} codes",
        CuptiError::ALL.len()
    );
    for e in CuptiError::ALL {
        let vendor = lib.result_string(e.code());
        if the_wheel().vendor_unnamed.contains(&e.code()) {
            // The crate's header defines these, but this release's cuptiGetResultString rejects them: the crate
            // still names them from its own table.
            assert_eq!(
                vendor,
                None,
                "code {} is now named by the vendor: update vendor_unnamed",
                e.code()
            );
            assert!(e.vendor_name().is_some());
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

fn display_has_name_and_vendor_message(dir: &Path) {
    let lib = cupti(dir);
    // Where CUPTI has a description, Display adds it, without the trailing newline.
    let msg = lib
        .error_message(CuptiError::InvalidDevice.code())
        .expect("cuptiGetErrorMessage (CUPTI 12.2+)");
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
    // CUPTI_ERROR_INVALID_CHIP_NAME (46) is new in 13.0: CUDA 12's library has no message for it ("<unknown>"),
    // so Display is the crate's name alone; CUDA 13's message only repeats the name. Same text either way.
    let chip = lib.error_message(46);
    if the_wheel().cuda.0 == 12 {
        assert_eq!(chip.as_deref(), Some("<unknown>"));
    }
    assert_eq!(
        CuptiError::from_code(46).to_string(),
        "CUPTI_ERROR_INVALID_CHIP_NAME"
    );
}

fn every_tracing_symbol_resolves(dir: &Path) {
    let lib = cupti(dir);
    let symbols = lib.tracing_symbols();
    assert!(symbols.missing_required.is_empty(), "{symbols:?}");
    let mut expected = vec![
        "cuptiActivityRegisterTimestampCallback",
        "cuptiGetTimestamp",
        "cuptiActivityFlushPeriod",
        "cuptiGetContextId",
        "cuptiGetStreamId",
    ];
    if the_wheel().has_subscribe_v2 {
        expected.push("cuptiSubscribe_v2");
        assert!(symbols.optional_missing.is_empty(), "{symbols:?}");
    } else {
        assert_eq!(
            symbols.optional_missing,
            ["cuptiSubscribe_v2"],
            "{symbols:?}"
        );
    }
    for optional in expected {
        assert!(
            symbols.optional_present.contains(&optional),
            "{optional}: {symbols:?}"
        );
    }
}

fn the_layout_sizes_agree_with_the_vendors_record_walk(dir: &Path) {
    let lib = cupti(dir);
    let layout = crate::cupti_tracing::exact_layout(lib);
    assert_eq!(layout, the_wheel().layout);
    let path = the_wheel().cupti(dir);
    let (agreed, vendor_only) = crate::cupti_tracing::layout_matches_vendor(&path, layout);
    eprintln!("{agreed} kinds agree; sized by the vendor only: {vendor_only:?}");
    // Every kind this release still writes: the crate's table and the vendor's walk agree on all of them.
    assert_eq!(agreed, the_wheel().vendor_sized_kinds);
    assert!(vendor_only.is_empty());
    // The difference that matters most: kernels are 208 bytes in 12.9, 216 in 13.0.
    assert_eq!(
        crate::cupti_tracing::vendor_record_size(&path, 10),
        Some(the_wheel().kernel_record_size)
    );
}

/// The thread id kind needs CUPTI initialised with a driver (the raw calls fail without one, see
/// [`raw_tracing_calls_without_a_driver_fail_with_a_vendor_code`]): the crate says so with the driver's load error.
fn the_thread_id_kind_without_a_driver_is_a_typed_error(dir: &Path) {
    use gpu_tools::cupti::activity::{ThreadIdKind, set_thread_id_kind, thread_id_kind};
    cupti(dir);
    assert!(
        matches!(thread_id_kind(), Err(gpu_tools::Error::Load(_))),
        "{:?}",
        thread_id_kind()
    );
    assert!(matches!(
        set_thread_id_kind(ThreadIdKind::System),
        Err(gpu_tools::Error::Load(_))
    ));
}

fn tracing_without_a_driver_is_a_typed_error(dir: &Path) {
    cupti(dir);
    crate::cupti_tracing::tracing_without_a_driver_is_a_typed_error(&the_wheel().cupti(dir));
}

/// What the crate's driver check spares the caller: the raw calls without a driver fail with vendor codes (13.0:
/// `CUPTI_ERROR_UNKNOWN`, 12.9: `CUPTI_ERROR_NOT_INITIALIZED`), without crashing or hanging.
fn raw_tracing_calls_without_a_driver_fail_with_a_vendor_code(dir: &Path) {
    let codes = crate::cupti_tracing::raw_call_codes(&crate::wheel::run_child(
        the_wheel(),
        "raw_calls",
        dir,
    ));
    eprintln!("{} without a driver: {codes:?}", the_wheel().cupti_file);
    let code = |name: &str| codes.iter().find(|(n, _)| n == name).map(|(_, c)| *c);
    assert_eq!(code("cuptiActivityRegisterCallbacks"), Some(0));
    assert_eq!(code("cuptiActivityGetNumDroppedRecords"), Some(0));
    for failing in [
        "cuptiActivityRegisterTimestampCallback",
        "cuptiActivityEnable",
        "cuptiActivityFlushAll",
        "cuptiSubscribe",
        "cuptiSetThreadIdType",
        "cuptiGetThreadIdType",
    ] {
        assert_eq!(
            code(failing),
            Some(the_wheel().no_driver_code),
            "{failing}: {codes:?}"
        );
    }
}

/// In a child process: the raw Activity and Callback calls (`tracing::raw_calls`).
fn raw_calls_child(dir: &Path) {
    crate::cupti_tracing::raw_calls(&the_wheel().cupti(dir));
}

/// The CUPTI library of the wheel exports the result strings but not the checkpoint API: loaded as the checkpoint
/// library it is rejected for the first missing symbol. In a child process: a process holds one checkpoint
/// library, which the other checks load.
fn cupti_is_not_a_checkpoint_library(dir: &Path) {
    let out = crate::wheel::run_child(the_wheel(), "cupti_as_checkpoint", dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{:?}: {stdout}{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("(explicit path): missing required symbol `cuptiCheckpointSave`"),
        "{stdout}"
    );
    eprintln!(
        "{} rejected as a checkpoint library: {}",
        the_wheel().cupti_file,
        stdout.trim()
    );
}

fn cupti_as_checkpoint_child(dir: &Path) {
    let err = CheckpointLibrary::load_from(the_wheel().cupti(dir))
        .expect_err("libcupti is not libcheckpoint");
    let attempts = err.attempts();
    assert_eq!(attempts.len(), 1, "{err}");
    assert_eq!(
        attempts[0].rejection,
        gpu_tools::loader::Rejection::MissingSymbol("cuptiCheckpointSave")
    );
    println!("{err}");
}
