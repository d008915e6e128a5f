//! Bad input to the rocprofiler-sdk layer, each a typed error: no SDK installed, an SDK of an unsupported major
//! version, registration after the SDK initialised. One test: registration state is per process.
#![cfg(feature = "rocprofiler-sdk")]

use crate::common;

use gpu_tools::loader::Rejection;
use gpu_tools::rocprofiler_sdk::{SdkError, SdkLibrary, Setup, Tool, force_configure};

struct Late;
impl Tool for Late {
    const NAME: &'static str = "late";
    fn initialize(_: &mut Setup<'_>) -> gpu_tools::Result<Self> {
        Ok(Late)
    }
}

#[test]
fn missing_unsupported_and_late_are_typed_errors() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    // No SDK at the path named.
    match SdkLibrary::load_from("/nonexistent/librocprofiler-sdk.so.1") {
        Err(gpu_tools::Error::Load(e)) => {
            assert_eq!(e.attempts()[0].rejection, Rejection::NotFound);
            assert!(
                e.to_string()
                    .contains("/nonexistent/librocprofiler-sdk.so.1 (explicit path): no such file")
            );
        }
        other => panic!("{other:?}"),
    }
    // An SDK 0.x (ROCm 6.2-6.4): the double reports major version 0.
    // SAFETY: no other thread reads the environment here.
    unsafe { std::env::set_var("RPSDK_DOUBLE_MAJOR", "0") };
    match SdkLibrary::load_from(common::path()) {
        Err(gpu_tools::Error::Sdk(SdkError::UnsupportedVersion {
            found,
            supported,
            path,
        })) => {
            assert_eq!((found.as_str(), supported), ("0.0.0", 1));
            assert!(path.ends_with("librocprofiler_sdk.so"), "{path}");
        }
        other => panic!("{other:?}"),
    }
    // SAFETY: as above.
    unsafe { std::env::remove_var("RPSDK_DOUBLE_MAJOR") };
    let d = common::double();
    // The runtime started (no tool named): registering now is too late.
    // SAFETY: a control without arguments.
    assert_eq!(unsafe { (d.start_runtime)() }, 0);
    assert!(d.lib.is_initialized().unwrap());
    match force_configure::<Late>(d.lib) {
        Err(gpu_tools::Error::Sdk(SdkError::TooLate)) => {}
        other => panic!("{other:?}"),
    }
    assert!(!gpu_tools::rocprofiler_sdk::is_registered());
}
