//! Changed and cut trace files: a real trace with a byte changed, or cut anywhere, reads with an error (that says
//! where) or to the very diagnosis of the whole file, never to other findings or other numbers.

use std::path::PathBuf;

use gpu_tools_trace::analyze::{Diagnosis, Trace};
use gpu_tools_trace::file::TraceFileError;

fn torch_compile() -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces/torch_compile.gputrace");
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn read(bytes: &[u8]) -> (Diagnosis, Vec<TraceFileError>) {
    let mut t = Trace::new();
    let errors = t.read(0, bytes);
    (t.diagnose(), errors)
}

#[test]
fn a_changed_byte_is_an_error_or_changes_nothing() {
    let original = torch_compile();
    let (whole, errors) = read(&original);
    assert!(errors.is_empty());
    // Every 2039th byte (a prime: every part of the chunks' layout is hit), each changed two ways; the fuzz
    // target `analyze` tries the rest.
    for at in (0..original.len()).step_by(2_039) {
        for flip in [0x01, 0x80] {
            let mut changed = original.clone();
            changed[at] ^= flip;
            let (d, errors) = read(&changed);
            if errors.is_empty() {
                assert_eq!(
                    d, whole,
                    "byte {at} ^ {flip:#x} read clean to another diagnosis"
                );
            }
        }
    }
}

#[test]
fn a_cut_file_is_an_error() {
    let original = torch_compile();
    for cut in (1..original.len()).step_by(2_027) {
        let errors = Trace::new().read(0, &original[..cut]);
        assert!(!errors.is_empty(), "cut at {cut} read clean");
    }
}
