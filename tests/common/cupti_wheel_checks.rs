//! Checks of the real CUPTI libraries of one wheel (`super::WHEEL`), loaded through the crate's loader on a
//! machine without a GPU. Included by `tests/cupti_wheel.rs` (CUDA 13) and `tests/cupti_wheel12.rs` (CUDA 12).

use gpu_tools::cupti::{CheckpointLibrary, CuptiError, CuptiLibrary, CuptiVersion};

use super::WHEEL;

fn cupti() -> Option<&'static CuptiLibrary> {
    let dir = WHEEL.dir()?;
    let path = dir.join(WHEEL.cupti_file);
    Some(CuptiLibrary::load_from(&path).unwrap_or_else(|e| panic!("the wheel's CUPTI loads: {e}")))
}

#[test]
fn checkpoint_library_resolves_every_symbol() {
    let Some(dir) = WHEEL.dir() else { return };
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

#[test]
fn cupti_version_is_decoded_for_its_cuda_release() {
    let Some(lib) = cupti() else { return };
    let raw = lib.version().expect("cuptiGetVersion");
    let v = lib.api_version().expect("cuptiGetVersion");
    eprintln!("{}: {v}", WHEEL.cupti_file);
    assert_eq!(raw, WHEEL.api_version, "the wheel CI installs");
    assert_eq!(v.api(), raw);
    // CUDA 12 numbers the API 19..=28, CUDA 13 as xxyyzz: both decode to their CUDA release.
    assert_eq!(v.cuda(), Some(WHEEL.cuda));
    if WHEEL.cuda.0 == 13 {
        assert_eq!(v, CuptiVersion::HEADER, "wheel and generated header agree");
    } else {
        assert!(v < CuptiVersion::HEADER, "an older CUPTI than the header");
    }
}

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
        if WHEEL.vendor_unnamed.contains(&e.code()) {
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

#[test]
fn display_has_name_and_vendor_message() {
    let Some(lib) = cupti() else { return };
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
    if WHEEL.cuda.0 == 12 {
        assert_eq!(chip.as_deref(), Some("<unknown>"));
    }
    assert_eq!(
        CuptiError::from_code(46).to_string(),
        "CUPTI_ERROR_INVALID_CHIP_NAME"
    );
}
