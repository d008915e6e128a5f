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

/// An output that cannot be written is named as given; the temporary file beside it is never mentioned.
#[test]
fn output_errors_name_the_path_given() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("missing");
    let chrome = missing.join("t.json");
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

/// `trace --pid` names a process that does not exist before it looks for a driver, whichever the backend.
#[test]
fn trace_checks_the_process_before_the_driver() {
    let gone = process::vanished_pid();
    let pid = gone.to_string();
    for args in [
        vec!["trace", "--backend", "debugger", "--pid", &pid],
        vec!["trace", "--backend", "cupti", "--pid", &pid],
    ] {
        let out = gpu_tools(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert_eq!(
            stderr(&out),
            format!("gpu-tools trace: no process {gone}\n"),
            "{args:?}"
        );
    }
}
