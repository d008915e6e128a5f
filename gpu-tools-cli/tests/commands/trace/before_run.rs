//! The checks `gpu-tools trace` makes before the program runs: the program, the driver, CUPTI, the injection
//! library, the trace file, the options of the other backend, attaching.

use std::process::Command;

use super::{gpu_tools_trace, text, trace};

#[test]
fn an_unwritable_trace_file_fails_before_the_program_runs() {
    for (path, why) in [
        ("/nonexistent-dir/trace.json", "No such file or directory"),
        ("/", "it is a folder"),
    ] {
        let out = trace("normal", &["--chrome-trace", path]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains(&format!(
                "gpu-tools trace: cannot write the Chrome trace {path}: "
            )) && stderr.contains(why),
            "{stderr}"
        );
        assert!(
            !text(&out.stdout).contains("--- summary"),
            "the program did not run"
        );
    }
}

#[test]
fn a_missing_or_unrunnable_program_is_a_clear_error() {
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--", "/nonexistent/program"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(text(&out.stderr).contains("cannot start /nonexistent/program: not found"));
    let out = gpu_tools_trace()
        .args(["--", "no-such-program-in-path"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(127));
    assert!(
        text(&out.stderr).contains("cannot start no-such-program-in-path: not found in PATH"),
        "{}",
        text(&out.stderr)
    );
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("not-executable");
    std::fs::write(&plain, b"#!/bin/sh\n").unwrap();
    for program in [plain.as_path(), dir.path()] {
        let out = gpu_tools_trace().arg("--").arg(program).output().unwrap();
        assert_eq!(out.status.code(), Some(126), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("not an executable file"),
            "{}",
            text(&out.stderr)
        );
    }
}

#[test]
fn without_a_driver_the_cupti_backend_says_so_and_does_not_run_the_program() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--backend", "cupti", "--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: the CUDA driver is not installed here, and the cupti backend needs it (the program \
             was not run): CUDA driver (libcuda.so.1) not loaded; tried "
        ),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program did not run");
}

#[test]
fn a_missing_injection_library_is_named() {
    let out = gpu_tools_trace()
        .args([
            "--backend",
            "cupti",
            "--inject-lib",
            "/nonexistent/libgpu_tools_inject.so",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("the injection library /nonexistent/libgpu_tools_inject.so does not exist"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--", "true"])
        .env("GPU_TOOLS_INJECT_LIB", "/nonexistent/lib.so")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr)
            .contains("$GPU_TOOLS_INJECT_LIB names /nonexistent/lib.so, which does not exist"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn options_of_the_other_backend_are_usage_errors() {
    let out = gpu_tools_trace()
        .args(["--backend", "debugger", "--no-api", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--no-api does not apply to the debugger backend"));
    assert!(
        text(&out.stderr).contains("Usage: gpu-tools trace"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--buffer-size", "lots", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid value 'lots' for '--buffer-size <BYTES>'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn an_attach_protocol_without_attach_is_a_usage_error() {
    let out = gpu_tools_trace()
        .args(["--attach-protocol", "call", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("--attach-protocol applies only with --attach PID"),
        "{}",
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--attach", "1", "--attach-protocol", "fd"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("[possible values: auto, call, descriptor]"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn attaching_to_a_missing_process_is_a_clear_error() {
    let gone = gpu_tools_testing::process::vanished_pid();
    let out = gpu_tools_trace()
        .args(["--attach", &gone.to_string()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        text(&out.stderr),
        format!("gpu-tools trace: no process {gone}\n")
    );
}

/// No backend asked for and no CUPTI: options that need the cupti backend are refused with what is missing and
/// its fix (not blamed on the debugger backend), and nothing runs.
#[test]
fn without_cupti_an_option_that_needs_it_names_the_missing_library() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let file = dir.path().join("run.gputrace");
    let out = gpu_tools_trace()
        .arg("-o")
        .arg(&file)
        .args(["--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: --output needs the cupti backend, and CUPTI was not found (the program was not run): \
             CUPTI (libcupti.so.13 or .12) not loaded; tried /nonexistent/libcupti.so.13 ($GPU_TOOLS_CUPTI_LIB): \
             no such file. CUPTI comes with the CUDA toolkit, not the driver: "
        ),
        "{stderr}"
    );
    assert!(stderr.contains("pip install nvidia-cuda-cupti"), "{stderr}");
    assert!(!stderr.contains("does not apply"), "{stderr}");
    assert!(!marker.exists(), "the program did not run");
    assert!(!file.exists(), "no trace file");
}

/// No backend asked for, no CUPTI and no driver: the driver is named (both backends need it), CUPTI beside it, and
/// nothing runs; no bare loader error.
#[test]
fn without_cupti_or_a_driver_trace_says_both_are_missing() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["trace", "--", "touch"])
        .arg(&marker)
        .env("GPU_TOOLS_CUPTI_LIB", "/nonexistent/libcupti.so.13")
        .env("GPU_TOOLS_CUDA_DRIVER_LIB", "/nonexistent/libcuda.so.1")
        .output()
        .unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.starts_with(
            "gpu-tools trace: the CUDA driver is not installed here, and the debugger backend needs it (the \
             program was not run): CUDA driver (libcuda.so.1) not loaded; tried /nonexistent/libcuda.so.1"
        ),
        "{stderr}"
    );
    assert!(stderr.contains("install the NVIDIA driver"), "{stderr}");
    assert!(
        stderr
            .contains("(and CUPTI was not found either: CUPTI (libcupti.so.13 or .12) not loaded;"),
        "{stderr}"
    );
    assert!(!marker.exists(), "the program did not run");
}
