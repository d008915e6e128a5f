//! Files refused before anything is reported or written (exit 1, an existing output left as it was, nothing left
//! behind): an input that is not a trace, of a newer version or missing, an output that cannot be written or would
//! write over an input, and a file given twice.

use std::path::Path;
use std::process::{Command, Output};

use gpu_tools::trace::file::FILE_VERSION;

use super::{gpu_tools, s, trace_file, trace_file_named};

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn unreadable_input_is_refused_and_leaves_the_output_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let good = trace_file(dir.path());
    let not_trace = dir.path().join("notes.txt");
    std::fs::write(&not_trace, "hello, this is not a trace\n").unwrap();
    let mut newer = std::fs::read(&good).unwrap();
    // A newer format's header: not one whose checksum holds for this version (that would be a damaged field).
    newer[8..10].copy_from_slice(&(FILE_VERSION + 1).to_le_bytes());
    newer[24..32].fill(0);
    let newer_path = dir.path().join("newer.gputrace");
    std::fs::write(&newer_path, newer).unwrap();
    let out_path = dir.path().join("keep.json");
    std::fs::write(&out_path, "previous").unwrap();

    for (input, says) in [
        (&not_trace, "not a gpu-tools trace"),
        (&newer_path, "newer"),
    ] {
        let out = gpu_tools(&["stats", s(&good), s(input)]);
        assert_eq!(out.status.code(), Some(1));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("gpu-tools stats: ") && err.contains(says),
            "{err}"
        );
        let out = gpu_tools(&["export", s(&good), s(input), "--chrome", s(&out_path)]);
        assert_eq!(out.status.code(), Some(1));
        assert!(String::from_utf8_lossy(&out.stderr).contains(says));
        assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "previous");
    }
    let missing = dir.path().join("missing.gputrace");
    let out = gpu_tools(&["stats", s(&missing)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot read"));
    // An output that cannot be written fails first, naming it.
    let out = gpu_tools(&[
        "export",
        s(&good),
        "--perfetto",
        s(&dir.path().join("no/dir/t.pb")),
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write the Perfetto trace"));
    // Nothing left behind: no partial files.
    assert_eq!(
        names_in(dir.path()),
        ["keep.json", "newer.gputrace", "notes.txt", "run.gputrace"]
    );
}

/// `gpu-tools ARGS` run in `dir`.
fn gpu_tools_in(dir: &Path, args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?} in {}: {}\n--- stderr\n{}",
        dir.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn export_refuses_to_write_over_an_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let original = std::fs::read(&file).unwrap();
    std::fs::hard_link(&file, dir.path().join("hard.gputrace")).unwrap();
    std::os::unix::fs::symlink(&file, dir.path().join("soft.gputrace")).unwrap();
    let other = trace_file_named(dir.path(), "other.gputrace", false);
    let other_bytes = std::fs::read(&other).unwrap();
    for (out_flag, out_path) in [
        ("--perfetto", "run.gputrace"),
        ("--chrome", "./run.gputrace"),
        ("--chrome", "../run.gputrace"),
        ("--perfetto", "hard.gputrace"),
        ("--chrome", "soft.gputrace"),
    ] {
        // From a folder of its own, so that `../run.gputrace` is another path to the same file.
        let sub = dir.path().join("sub");
        std::fs::create_dir_all(&sub).unwrap();
        let cwd = if out_path.starts_with("../") {
            sub.as_path()
        } else {
            dir.path()
        };
        let input = if out_path.starts_with("../") {
            "../other.gputrace"
        } else {
            "other.gputrace"
        };
        let out = gpu_tools_in(cwd, &["export", input, s(&file), out_flag, out_path]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{out_path}: {err}");
        assert_eq!(
            err,
            format!(
                "gpu-tools export: cannot write the {} trace {out_path}: it is the input {}, which would be \
                 overwritten\n",
                if out_flag == "--perfetto" {
                    "Perfetto"
                } else {
                    "Chrome"
                },
                file.display()
            ),
            "{out_path}"
        );
        assert_eq!(
            std::fs::read(&file).unwrap(),
            original,
            "{out_path}: untouched"
        );
        std::fs::remove_dir(&sub).unwrap();
    }
    assert_eq!(std::fs::read(&other).unwrap(), other_bytes);
    assert_eq!(
        names_in(dir.path()),
        [
            "hard.gputrace",
            "other.gputrace",
            "run.gputrace",
            "soft.gputrace"
        ],
        "nothing left behind"
    );
}

#[test]
fn a_file_given_twice_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    std::fs::hard_link(&file, dir.path().join("hard.gputrace")).unwrap();
    for (args, says) in [
        (
            vec!["stats", "run.gputrace", "run.gputrace"],
            "run.gputrace is given twice: its records would count twice",
        ),
        (
            vec!["stats", "run.gputrace", "./run.gputrace"],
            "run.gputrace and ./run.gputrace are the same file: its records would count twice",
        ),
        (
            vec!["stats", "hard.gputrace", "run.gputrace"],
            "hard.gputrace and run.gputrace are the same file: its records would count twice",
        ),
        (
            vec![
                "export",
                "run.gputrace",
                "run.gputrace",
                "--chrome",
                "t.json",
            ],
            "run.gputrace is given twice: its records would count twice",
        ),
    ] {
        let out = gpu_tools_in(dir.path(), &args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            String::from_utf8_lossy(&out.stderr),
            format!("gpu-tools {}: {says}\n", args[0]),
        );
        assert!(out.stdout.is_empty(), "{args:?}: no report");
    }
    assert_eq!(names_in(dir.path()), ["hard.gputrace", "run.gputrace"]);
}
