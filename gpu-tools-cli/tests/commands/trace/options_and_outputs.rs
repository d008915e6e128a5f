//! What the options of `gpu-tools trace` reach: the variables the injection library reads, the progress line,
//! the trace file (streamed, then read back by `stats` and `export`) and standard output.

use std::io::Write;
use std::process::Command;

use gpu_tools_injection::env;

use super::program::FILL_DEMANGLED;
use super::{LINGER, STANDIN, entries, environment, gpu_tools_trace, text, trace, trace_with};

#[test]
fn a_progress_line_only_when_asked_or_on_a_terminal() {
    // stderr is a pipe here: no progress line by default.
    let out = trace("normal", &[]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains('\r') && !err.contains("records from"),
        "{err:?}"
    );
    // --progress forces it: one line rewritten in place with the records and processes so far and the trace
    // file's size, erased at the end.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.gputrace");
    let out = trace_with(
        "normal",
        &["--progress", "-o", file.to_str().unwrap()],
        &[(LINGER, "700")],
    );
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    // The last line drawn, after every record arrived (the program lingers after sending them).
    let drawn = err
        .rfind("\r\x1b[Kgpu-tools trace: ")
        .unwrap_or_else(|| panic!("a progress line: {err:?}"));
    let line = &err[drawn + 4..];
    let line = &line[..line.find('\r').unwrap()];
    assert!(
        line.starts_with("gpu-tools trace: 12 records from 1 process, ")
            && line.contains(" written, "),
        "{line:?}"
    );
    assert!(err.ends_with("\r\x1b[K"), "erased at the end: {err:?}");
    // --no-progress wins over --progress given before it; --quiet alone keeps it off.
    let out = trace("normal", &["--progress", "--no-progress"]);
    assert!(!text(&out.stderr).contains('\r'));
    let out = trace("normal", &["--quiet"]);
    assert!(!text(&out.stderr).contains('\r'));
}

#[test]
fn kinds_take_all() {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--kinds", "all", "--inject-lib"])
        .arg(&me)
        .arg("--")
        .arg(&me)
        .args(super::STANDIN_TEST)
        .env(STANDIN, "environment")
        .output()
        .unwrap();
    assert!(
        text(&out.stdout).contains(&format!(
            "{}=kernel,memcpy,memset,sync,driver,runtime,overhead",
            env::KINDS
        )),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--kinds", "kernels", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("invalid value 'kernels' for '--kinds <KINDS>'"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn graph_api_and_nvtx_options_reach_the_injection_library() {
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    // Defaults: graphs as whole launches, every API call but host-side bookkeeping, NVTX on (the nvtx kind is on
    // by default).
    let seen = environment(&[]);
    assert!(
        seen.contains(&format!("{}=graph\n", env::CUDA_GRAPH)),
        "{seen}"
    );
    assert!(
        seen.contains(&format!("{}=essential\n", env::API)),
        "{seen}"
    );
    let seen_all = environment(&["--api", "all"]);
    assert!(
        seen_all.contains(&format!("{}=all\n", env::API)),
        "{seen_all}"
    );
    assert!(
        seen.contains(&format!("{}={me}\n", env::NVTX_INJECTION)),
        "{seen}"
    );
    assert!(seen.contains(&format!("{}=\n", env::API_SKIP)), "{seen}");
    let seen = environment(&[
        "--cuda-graph-trace",
        "node",
        "--api",
        "launches",
        "--api-skip",
        "cudaGetLastError,cuKernelGetName",
        "--kinds",
        "kernel,runtime",
    ]);
    assert!(
        seen.contains(&format!("{}=node\n", env::CUDA_GRAPH)),
        "{seen}"
    );
    assert!(seen.contains(&format!("{}=launches\n", env::API)), "{seen}");
    assert!(
        seen.contains(&format!(
            "{}=cudaGetLastError,cuKernelGetName\n",
            env::API_SKIP
        )),
        "{seen}"
    );
    // Without the nvtx kind, NVTX is not injected.
    assert!(
        seen.contains(&format!("{}=\n", env::NVTX_INJECTION)),
        "{seen}"
    );
    let seen = environment(&["--api", "none"]);
    assert!(
        seen.contains(&format!("{}=kernel,memcpy,memset,nvtx\n", env::KINDS)),
        "{seen}"
    );
    // Usage errors: a bad value, or the option for the other backend.
    let out = gpu_tools_trace()
        .args([
            "--backend",
            "cupti",
            "--cuda-graph-trace",
            "kernel",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let out = gpu_tools_trace()
        .args(["--backend", "debugger", "--api", "launches", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).contains("--api does not apply to the debugger backend"));
}

#[test]
fn the_trace_file_is_streamed_and_read_back_by_stats_and_export() {
    let dir = tempfile::tempdir().unwrap();
    let template = dir.path().join("run-%p.gputrace");
    let out = trace("normal", &["-q", "-o", template.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    let files = entries(dir.path());
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(
        files[0].starts_with("run-") && !files[0].contains("%p"),
        "{files:?}"
    );
    let file = dir.path().join(&files[0]);
    let stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--format", "csv", "--report", "cuda_gpu_kern_sum"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", text(&stats.stderr));
    let csv = text(&stats.stdout);
    assert!(
        csv.contains("add_one") && csv.contains(FILL_DEMANGLED),
        "{csv}"
    );
    let json = dir.path().join("t.json");
    let export = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .arg("export")
        .arg(&file)
        .arg("--chrome")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(export.status.code(), Some(0), "{}", text(&export.stderr));
    // A run that traced nothing writes no trace file.
    let empty = dir.path().join("none");
    std::fs::create_dir(&empty).unwrap();
    let out = trace(
        "nocuda",
        &["-o", empty.join("t.gputrace").to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(entries(&empty).is_empty());
}

/// `-o -` is standard output: the trace goes there (`gpu-tools stats -` reads it back), and the listing, the
/// summary and the program's own output go to stderr; both traces on standard output are refused.
#[test]
fn a_dash_writes_the_trace_to_standard_output() {
    let out = trace("normal", &["--list", "-o", "-"]);
    assert_eq!(out.status.code(), Some(0), "exit code");
    let err = text(&out.stderr);
    assert!(err.contains("kernel  "), "the listing on stderr: {err}");
    assert!(err.contains("--- summary"), "the summary on stderr: {err}");
    assert!(
        err.contains("running 1 test"),
        "the program's output on stderr: {err}"
    );
    let mut stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args([
            "stats",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            "csv",
            "-",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    stats.stdin.take().unwrap().write_all(&out.stdout).unwrap();
    let read = stats.wait_with_output().unwrap();
    assert_eq!(read.status.code(), Some(0));
    assert!(
        text(&read.stdout).contains("FillFunctor"),
        "{}",
        text(&read.stdout)
    );

    let both = trace("normal", &["-o", "-", "--chrome-trace", "-"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(text(&both.stderr).contains("cannot both be standard output"));
}

/// A device that is also standard output (`/dev/null` for both) is written, but not taken for standard output: the
/// listing stays there and does not move to stderr.
#[test]
fn a_device_that_is_standard_output_too_keeps_the_listing_there() {
    let me = std::env::current_exe().unwrap();
    let out = gpu_tools_trace()
        .args(["--backend", "cupti", "--inject-lib"])
        .arg(&me)
        .args(["--list", "--chrome-trace", "/dev/null", "--"])
        .arg(&me)
        .args(["trace::standin", "--exact", "--ignored", "--test-threads=1"])
        .env(STANDIN, "normal")
        .stdout(std::process::Stdio::null())
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(
        !err.contains("kernel  "),
        "the listing is not on stderr: {err}"
    );
}
