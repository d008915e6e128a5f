//! A standard output whose reader has gone away (`gpu-tools stats t.gputrace | head`): every subcommand that
//! prints stops quietly with exit code 141 (128 + SIGPIPE, as a shell reports a tool that SIGPIPE ended), with
//! nothing on stderr: no panic, no message. Other write errors are still reported.

use std::io::Write;
use std::os::fd::{FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::*;
use gpu_tools_injection::env;
use gpu_tools_testing::{coredump_writer, double_path, records};

const BROKEN_PIPE: i32 = 141;

/// Runs `gpu-tools ARGS` with its standard output a pipe whose read end is already closed.
fn with_closed_stdout(args: &[&str], env: &[(&str, &Path)]) -> Output {
    with_closed_stdout_in(args, env, None)
}

fn with_closed_stdout_in(args: &[&str], env: &[(&str, &Path)], dir: Option<&Path>) -> Output {
    let mut fds = [0; 2];
    // SAFETY: `fds` has room for the two descriptors; close-on-exec keeps other children from holding the read end.
    assert_eq!(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }, 0);
    // SAFETY: both descriptors were just made by pipe2 and are owned here only.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    drop(read);
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-tools"));
    if let Some(dir) = dir {
        command.current_dir(dir);
    }
    let out = command
        .args(args)
        .envs(env.iter().copied())
        .env_remove("RUST_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::from(write))
        .stderr(Stdio::piped())
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?}: {}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn assert_quiet_141(args: &[&str], env: &[(&str, &Path)]) {
    let out = with_closed_stdout(args, env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert_eq!(err, "", "{args:?}: nothing on stderr");
    assert_eq!(out.status.code(), Some(BROKEN_PIPE), "{args:?}");
}

/// A trace file of one process: launches of two kernels, enough for every report to have rows.
fn trace_file(dir: &Path) -> PathBuf {
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    e.push(&Record::ProcessStart(ProcessStart {
        pid: 100,
        parent_pid: 1,
        time: 1_000,
        command: "app".into(),
    }));
    for c in 1..=200u32 {
        let t = u64::from(c) * 10_000;
        e.push(&Record::Api(ApiRecord {
            start: t,
            end: t + 500,
            domain: ApiDomain::Runtime,
            cbid: 211,
            name: Arc::from("cudaLaunchKernel"),
            correlation: c,
            process: 100,
            thread: 1,
            return_value: 0,
        }));
        e.push(&records::kernel(
            &format!("_Z6kernelILi{c}EEvv"),
            t + 1_000,
            t + 3_000,
            c,
        ));
    }
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let s = w.add_stream();
    w.write(s, e.bytes()).unwrap();
    w.close(s).unwrap();
    let path = dir.join("run.gputrace");
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path
}

#[test]
fn doctor_stops_quietly() {
    let cache = tempfile::tempdir().unwrap();
    let env = [("XDG_CACHE_HOME", cache.path())];
    assert_quiet_141(&["doctor"], &env);
    assert_quiet_141(&["doctor", "--verbose"], &env);
    assert_quiet_141(&["doctor", "--json"], &env);
}

#[test]
fn stats_stops_quietly_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let file = file.to_str().unwrap();
    for format in ["text", "csv", "json"] {
        assert_quiet_141(&["stats", "--format", format, file], &[]);
    }
}

#[test]
fn analyze_and_diff_stop_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let file = file.to_str().unwrap();
    assert_quiet_141(&["analyze", file], &[]);
    assert_quiet_141(&["analyze", "--json", file], &[]);
    assert_quiet_141(&["diff", file, file], &[]);
    assert_quiet_141(&["diff", "--json", file, file], &[]);
}

#[test]
fn coredump_stops_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let core = dir.path().join("sample.cudacore");
    std::fs::write(
        &core,
        coredump_writer::sample(coredump_writer::Layout::Current),
    )
    .unwrap();
    let core = core.to_str().unwrap();
    assert_quiet_141(&["coredump", core], &[]);
    assert_quiet_141(&["coredump", "--json", core, core], &[]);
    assert_quiet_141(&["coredump", "--all-lanes", "--warps", core], &[]);
}

#[test]
fn metrics_stops_quietly() {
    // The CUPTI double stands in for libcupti and libnvperf_host.so (chips GH100 and TU102).
    let double = double_path("cupti_profiling");
    let env = [
        ("GPU_TOOLS_CUPTI_LIB", double.as_path()),
        ("GPU_TOOLS_NVPERF_HOST_LIB", double.as_path()),
    ];
    assert_quiet_141(&["metrics", "--chips"], &env);
    assert_quiet_141(&["metrics", "--chip", "GH100"], &env);
    assert_quiet_141(&["metrics", "--chip", "GH100", "--json"], &env);
    assert_quiet_141(
        &[
            "metrics",
            "--chip",
            "GH100",
            "--check",
            "dram__bytes_read.sum",
        ],
        &env,
    );
}

#[test]
fn export_writes_nothing_to_stdout_and_succeeds() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let json = dir.path().join("t.json");
    let out = with_closed_stdout(
        &[
            "export",
            file.to_str().unwrap(),
            "--chrome",
            json.to_str().unwrap(),
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(0));
    assert!(out.stderr.is_empty());
    assert!(std::fs::metadata(&json).unwrap().len() > 0);
}

#[test]
fn other_write_errors_are_still_reported() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let full = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/full")
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", file.to_str().unwrap()])
        .stdout(full)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpu-tools stats: cannot write the output: No space left on device (os error 28)\n"
    );
}

const STANDIN: &str = "GPU_TOOLS_TEST_STANDIN";

/// A traced program's stand-in: streams one launch and its kernel to the socket `gpu-tools trace` names, as the
/// injection library does.
#[test]
#[ignore = "a stand-in traced program, run by the test below"]
fn standin() {
    if std::env::var_os(STANDIN).is_none() {
        return;
    }
    let socket = std::env::var_os(env::SOCKET).expect("gpu-tools trace sets the socket");
    let mut sock = UnixStream::connect(socket).expect("connect");
    let pid = std::process::id();
    let mut enc = Encoder::new(&StreamHeader::new(pid, 130001, TimestampClock::Monotonic));
    enc.push(&Record::ProcessStart(ProcessStart {
        pid,
        parent_pid: 1,
        time: 0,
        command: "standin".into(),
    }));
    enc.push(&Record::Kernel(KernelRecord {
        grid_id: 1,
        grid: [2, 1, 1],
        block: [32, 1, 1],
        registers: 16,
        ..records::kernel_record("add_one", 2_000, 4_000, 1)
    }));
    let records = enc.records();
    enc.push(&Record::ProcessEnd(ProcessEnd {
        time: 9_000,
        reason: EndReason::Exit,
        records,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    sock.write_all(enc.bytes()).expect("send");
}

/// `trace` goes on when its output is closed: the trace file is still written whole.
#[test]
fn trace_still_writes_its_trace_file() {
    let dir = tempfile::tempdir().unwrap();
    let me = std::env::current_exe().unwrap();
    let me = me.to_str().unwrap();
    let driver = double_path("cuda_driver");
    // The stand-in's own output goes elsewhere: only the tracer's is closed.
    let out = with_closed_stdout_in(
        &[
            "trace",
            "--backend",
            "cupti",
            "--inject-lib",
            me,
            "-o",
            "run.gputrace",
            "--",
            "/bin/sh",
            "-c",
            "exec \"$0\" broken_pipe::standin --exact --ignored --test-threads=1 >/dev/null",
            me,
        ],
        &[
            ("GPU_TOOLS_CUDA_DRIVER_LIB", driver.as_path()),
            (STANDIN, Path::new("1")),
        ],
        Some(dir.path()),
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("cannot write the output"), "{err}");
    assert_eq!(out.status.code(), Some(BROKEN_PIPE));
    let stats = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--report", "cuda_gpu_kern_sum", "--format", "csv"])
        .arg(dir.path().join("run.gputrace"))
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&stats.stdout).contains("add_one"));
}

/// Help and version go to standard output too: into a closed pipe they exit 141, as the reports do.
#[test]
fn help_and_version_stop_quietly() {
    for args in [
        &["--help"][..],
        &["-h"],
        &["--version"],
        &["-V"],
        &["stats", "--help"],
        &["trace", "--version"],
        &["help", "export"],
    ] {
        assert_quiet_141(args, &[]);
    }
}
