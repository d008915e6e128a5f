//! Bad input to each subcommand that takes a process, a file or an output path: a clear message, a non-zero exit,
//! nothing half-written and no target changed. (`trace`, `coredump` and `freeze` have more in their own tests.)

use std::path::Path;
use std::process::{Command, Output};

use gpu_tools_testing::process;

fn gpu_tools(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .expect("run gpu-tools")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Every subcommand that takes a PID says the same of one that names no process, before it acts.
#[test]
fn a_missing_process_has_one_wording() {
    let gone = process::vanished_pid();
    let pid = gone.to_string();
    for args in [
        vec!["where", &pid],
        vec!["freeze", &pid],
        vec!["freeze", &pid, "--resume"],
        vec!["trace", "--attach", &pid],
    ] {
        let out = gpu_tools(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!("gpu-tools {}: no process {gone}\n", args[0]),
            "{args:?}"
        );
    }
    let out = gpu_tools(&["where", "0"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("no process 0"), "{}", stderr(&out));
    let out = gpu_tools(&["where", "-5"]);
    assert_eq!(out.status.code(), Some(2), "not a PID: a usage error");
}

#[test]
fn where_without_a_driver_names_what_is_missing_and_leaves_the_process_alone() {
    let mut target = process::Target::sleeper();
    let out = gpu_tools(&["where", &target.pid().to_string()]);
    let err = stderr(&out);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("gpu-tools where: "), "{err}");
    assert!(err.contains("libcuda.so.1"), "{err}");
    assert!(target.running(), "the process runs on");
    // Not stopped or traced by anyone.
    let status = std::fs::read_to_string(format!("/proc/{}/status", target.pid())).unwrap();
    assert!(status.lines().any(|l| l == "TracerPid:\t0"), "{status}");
}

#[test]
fn record_refuses_a_folder_that_is_not_empty_and_leaves_nothing_when_it_fails() {
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full");
    std::fs::create_dir(&full).unwrap();
    std::fs::write(full.join("keep.bin"), b"mine").unwrap();
    let out = gpu_tools(&["record", "--out", full.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with(&format!(
            "gpu-tools record: cannot write the recording {}: the folder is not empty",
            full.display()
        )),
        "{}",
        stderr(&out)
    );
    assert_eq!(names(&full), ["keep.bin"], "untouched");
    // Without a GPU the recording fails: the folder is not created.
    let fresh = dir.path().join("fresh");
    let out = gpu_tools(&["record", "--out", fresh.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("not loaded; tried"),
        "{}",
        stderr(&out)
    );
    assert_eq!(names(dir.path()), ["full"]);
    // A folder whose parent does not exist.
    let out = gpu_tools(&["record", "--out", "/nonexistent-dir/fixtures"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("cannot write the recording /nonexistent-dir/fixtures"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn output_files_that_cannot_be_written_fail_first() {
    let dir = tempfile::tempdir().unwrap();
    let folder = dir.path().to_str().unwrap().to_string();
    for (args, what) in [
        (
            vec!["rocprof", "--output", "/nonexistent-dir/t.json"],
            "the Chrome trace /nonexistent-dir/t.json",
        ),
        (vec!["rocprof", "--output", &folder], "the Chrome trace"),
        (
            vec!["replay", "--json", "/nonexistent-dir/r.json"],
            "the results /nonexistent-dir/r.json",
        ),
    ] {
        let out = gpu_tools(&args);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.starts_with(&format!("gpu-tools {}: cannot write {what}", args[0])),
            "{args:?}: {err}"
        );
        // Checked before any vendor library was looked for.
        assert!(!err.contains("not loaded"), "{args:?}: {err}");
    }
    assert!(names(dir.path()).is_empty());
}

#[test]
fn an_existing_output_is_left_as_it_was_when_the_run_fails() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("rocprof_trace.json");
    std::fs::write(&old, b"{\"traceEvents\": []}\n").unwrap();
    let out = gpu_tools(&["rocprof", "--output", old.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(std::fs::read(&old).unwrap(), b"{\"traceEvents\": []}\n");
    assert_eq!(names(dir.path()), ["rocprof_trace.json"]);
}

/// `replay --bytes` takes a size as `trace --buffer-size` does (`4M`, `4096k`, `1G`): accepted, the run then
/// fails here only for want of a driver.
#[test]
fn replay_takes_sizes_with_a_suffix() {
    for size in ["4M", "4096k", "1G", "4", "268435456"] {
        let out = gpu_tools(&["replay", "--bytes", size]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(1), "{size}: {err}");
        assert!(
            err.starts_with("gpu-tools replay: CUDA driver (libcuda.so.1) not loaded"),
            "{size}: {err}"
        );
    }
    for (size, says) in [
        ("3", "at least 4 bytes"),
        ("4Q", "not a byte count"),
        ("M", "not a byte count"),
    ] {
        let out = gpu_tools(&["replay", "--bytes", size]);
        let err = stderr(&out);
        assert_eq!(out.status.code(), Some(2), "{size}: {err}");
        assert!(
            err.contains(&format!(
                "invalid value '{size}' for '--bytes <BYTES>': {says}"
            )),
            "{size}: {err}"
        );
    }
}

/// An output that cannot be written is named as given; the temporary file beside it is never mentioned.
#[test]
fn output_errors_name_the_path_given() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let chrome = missing.join("t.json");
    let recording = missing.join("fixtures");
    let results = missing.join("r.json");
    let relative = "missing-folder/t.pb";
    for (args, what) in [
        (
            vec!["export", "/dev/null", "--chrome", chrome.to_str().unwrap()],
            format!("the Chrome trace {}", chrome.display()),
        ),
        (
            vec!["export", "/dev/null", "--perfetto", relative],
            format!("the Perfetto trace {relative}"),
        ),
        (
            vec!["record", "--out", recording.to_str().unwrap()],
            format!("the recording {}", recording.display()),
        ),
        (
            vec!["rocprof", "--output", chrome.to_str().unwrap()],
            format!("the Chrome trace {}", chrome.display()),
        ),
        (
            vec!["replay", "--json", results.to_str().unwrap()],
            format!("the results {}", results.display()),
        ),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args(&args)
            .current_dir(dir.path())
            .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!(
                "gpu-tools {}: cannot write {what}: No such file or directory (os error 2)\n",
                args[0]
            ),
            "{args:?}"
        );
    }
    assert!(names(dir.path()).is_empty());
}
