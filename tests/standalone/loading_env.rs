//! Environment variables of the search order. Each test runs in a process of its own
//! (`gpu_tools_testing::own_process`): it changes the process environment.
// Each vendor's checks need its feature; with fewer features some imports and helpers go unused.
#![cfg_attr(
    not(all(feature = "cupti", feature = "cudbg", feature = "rocprofiler")),
    allow(unused)
)]

use std::path::Path;

use gpu_tools::loader::{Origin, Rejection};

#[cfg(feature = "rocprofiler")]
#[test]
fn env_var_overrides_the_search_and_roots_are_searched() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    use gpu_tools::rocprofiler::RocprofilerLibrary;
    // SAFETY: this test runs alone in its own process (own_process), so no other thread reads the environment
    // concurrently.
    unsafe {
        std::env::set_var(
            "GPU_TOOLS_ROCPROFILER_LIB",
            "/nonexistent/librocprofiler64.so.2",
        )
    };
    let err = RocprofilerLibrary::load().unwrap_err();
    let attempts = err.attempts();
    assert_eq!(attempts.len(), 1, "the variable is authoritative: {err}");
    assert_eq!(
        attempts[0].path,
        Path::new("/nonexistent/librocprofiler64.so.2")
    );
    assert_eq!(
        attempts[0].origin,
        Origin::EnvVar("GPU_TOOLS_ROCPROFILER_LIB")
    );
    assert_eq!(attempts[0].rejection, Rejection::NotFound);
    assert!(
        err.to_string()
            .contains("($GPU_TOOLS_ROCPROFILER_LIB): no such file"),
        "{err}"
    );

    // Without the variable: ROCM_PATH first, then the standard folders, then the system loader.
    // SAFETY: as above.
    unsafe {
        std::env::remove_var("GPU_TOOLS_ROCPROFILER_LIB");
        std::env::set_var("ROCM_PATH", "/nonexistent/rocm");
    }
    let err = RocprofilerLibrary::load().unwrap_err();
    let attempts = err.attempts();
    assert_eq!(
        attempts[0].path,
        Path::new("/nonexistent/rocm/lib/librocprofiler64.so.2")
    );
    assert_eq!(attempts[0].origin, Origin::Root("ROCM_PATH"));
    assert!(attempts.iter().any(
        |a| a.path == Path::new("/opt/rocm/lib/librocprofiler64.so.2")
            && a.origin == Origin::StandardFolder
    ));
    let last = attempts.last().expect("attempts");
    assert_eq!(
        (last.path.as_path(), &last.origin),
        (Path::new("librocprofiler64v2.so"), &Origin::SystemLoader)
    );
    // No such library on this machine: the system loader's miss is "not found", not a refusal.
    assert_eq!(last.rejection, Rejection::NotFound, "{err:#}");
    let summary = err.to_string();
    assert!(!summary.contains("refused"), "{summary}");
    assert!(
        summary.contains(
            "not found (under $ROCM_PATH, standard folder, system loader). Install ROCm 6.1 to 7.2"
        ),
        "{summary}"
    );
}
