//! Bad input to the loader: each case is a typed error naming the path and the reason, and nothing panics.
//! No test in this binary loads a library successfully into a process-wide slot, so every case sees the search.
// Each vendor's checks need its feature; with fewer features some imports and helpers go unused.
#![cfg_attr(
    not(all(feature = "cupti", feature = "cudbg", feature = "rocprofiler")),
    allow(unused)
)]

use std::path::{Path, PathBuf};

use gpu_tools::LoadError;
use gpu_tools::loader::{Origin, Rejection};

fn single_attempt(err: &LoadError) -> (&Path, &Origin, &Rejection) {
    let attempts = err.attempts();
    assert_eq!(
        attempts.len(),
        1,
        "an explicit path is the only candidate: {err}"
    );
    (
        &attempts[0].path,
        &attempts[0].origin,
        &attempts[0].rejection,
    )
}

#[cfg(feature = "cupti")]
#[test]
fn a_file_that_is_not_a_library() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let err = gpu_tools::cupti::CheckpointLibrary::load_from(&path).unwrap_err();
    let (p, origin, rejection) = single_attempt(&err);
    assert_eq!(p, path);
    assert_eq!(*origin, Origin::Explicit);
    assert!(
        matches!(rejection, Rejection::OpenFailed(msg) if msg.contains("Cargo.toml")),
        "{rejection:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with("CUPTI checkpoint (libcheckpoint.so) not loaded; tried "),
        "{text}"
    );
    assert!(text.contains("(explicit path): cannot be opened"), "{text}");
}

#[cfg(feature = "cupti")]
#[test]
fn a_folder_is_not_a_library() {
    let err = gpu_tools::cupti::CuptiLibrary::load_from(env!("CARGO_MANIFEST_DIR")).unwrap_err();
    assert_eq!(*single_attempt(&err).2, Rejection::NotAFile);
}

#[cfg(feature = "rocprofiler")]
#[test]
fn a_library_of_another_vendor() {
    // A real shared library that opens fine but is not rocprofiler: rejected for the first missing symbol.
    let libz = Path::new("/lib/x86_64-linux-gnu/libz.so.1");
    assert!(libz.exists(), "test needs zlib (Debian package zlib1g)");
    let err = gpu_tools::rocprofiler::RocprofilerLibrary::load_from(libz).unwrap_err();
    let (_, _, rejection) = single_attempt(&err);
    assert_eq!(
        *rejection,
        Rejection::MissingSymbol("rocprofiler_version_major")
    );
    assert!(err.to_string().contains(
        "libz.so.1 (explicit path): missing required symbol `rocprofiler_version_major`"
    ));
}

#[cfg(feature = "cupti")]
#[test]
fn a_missing_explicit_path() {
    let err = gpu_tools::cuda::Driver::load_from("/nonexistent/libcuda.so.1").unwrap_err();
    let (p, origin, rejection) = single_attempt(&err);
    assert_eq!(p, Path::new("/nonexistent/libcuda.so.1"));
    assert_eq!(
        (origin, rejection),
        (&Origin::Explicit, &Rejection::NotFound)
    );
}
