//! Without `libnvperf_host.so` CUPTI's counter APIs fail with `CUPTI_ERROR_NOT_INITIALIZED`; the crate looks for
//! it first and reports a typed `LoadError` naming where it looked, before any counter call. Here the variable
//! `GPU_TOOLS_NVPERF_HOST_LIB` names a file that does not exist, so it is the only place searched. In a process of
//! its own (`gpu_tools_testing::own_process`): the other modules load the CUPTI double.
#![cfg(feature = "cupti")]

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::cupti::profiler::host::Catalog;
use gpu_tools::{Error, LoadError};

#[test]
fn a_missing_nvperf_host_is_a_load_error() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    // SAFETY: this test runs alone in its own process (own_process); no other thread reads the environment yet.
    unsafe {
        std::env::set_var(
            "GPU_TOOLS_NVPERF_HOST_LIB",
            "/nonexistent/gpu-tools/libnvperf_host.so",
        )
    };
    if let Some(dir) = cuda13_wheel_dir() {
        CuptiLibrary::load_from(dir.join("libcupti.so.13")).expect("the wheel's CUPTI loads");
    }
    // With the wheel's CUPTI loaded, or with no CUPTI at all: the error names the library and the path tried.
    match Catalog::for_chip("GH100") {
        Err(Error::Load(LoadError::NotFound { library, attempts })) => {
            if cuda13_wheel_dir().is_some() {
                assert!(library.contains("libnvperf_host.so"), "{library}");
                assert_eq!(attempts.len(), 1);
                assert_eq!(
                    attempts[0].path,
                    std::path::Path::new("/nonexistent/gpu-tools/libnvperf_host.so")
                );
            }
        }
        other => panic!("expected a load error, got {other:?}"),
    }
}

/// The CUDA 13 wheel's library folder (`GPU_TOOLS_CUPTI_WHEEL_LIB`, as the `wheels` tests read it); `None` when
/// the variable is unset. A set variable naming a folder without the wheel's libraries panics.
fn cuda13_wheel_dir() -> Option<std::path::PathBuf> {
    let dir = std::path::PathBuf::from(std::env::var_os("GPU_TOOLS_CUPTI_WHEEL_LIB")?);
    for file in ["libcheckpoint.so", "libcupti.so.13"] {
        assert!(
            dir.join(file).is_file(),
            "GPU_TOOLS_CUPTI_WHEEL_LIB is set but {} has no {file}",
            dir.display()
        );
    }
    Some(dir)
}
