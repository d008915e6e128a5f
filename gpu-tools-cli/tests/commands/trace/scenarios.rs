//! What `gpu-tools trace` reports for each scenario of the stand-in: the listing, the summary, the Chrome trace and
//! the exit code.

use std::time::{Duration, Instant};

use super::program::FILL_DEMANGLED;
use super::{entries, text, trace};

#[test]
fn normal_run_lists_kernels_copies_and_sets_with_their_api_calls() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("trace.json");
    let out = trace(
        "normal",
        &["--list", "--chrome-trace", chrome.to_str().unwrap()],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "exit code");
    // Listing: demangled names, ids, the API call of each (runtime wins over the driver call it made).
    let kernels: Vec<&str> = stdout
        .lines()
        .filter(|l| l.starts_with("kernel  "))
        .collect();
    assert_eq!(kernels.len(), 3, "{stdout}");
    assert!(
        kernels[0].contains(FILL_DEMANGLED) && kernels[0].contains("stream 7"),
        "{}",
        kernels[0]
    );
    assert!(
        kernels[0].ends_with("from cudaLaunchKernel"),
        "{}",
        kernels[0]
    );
    assert!(kernels[0].contains("dur 2.000 us"), "{}", kernels[0]);
    assert!(
        kernels[2].contains("add_one") && kernels[2].ends_with("from cuLaunchKernel"),
        "{}",
        kernels[2]
    );
    assert!(
        stdout.contains("memcpy  HtoD  65536 bytes")
            && stdout.contains("pinned -> device async  from cudaMemcpyAsync"),
        "{stdout}"
    );
    assert!(
        stdout.contains("memset  1048576 bytes") && stdout.contains("value 0x5a"),
        "{stdout}"
    );
    // Summary: counts, and per kernel count, total, mean, min, max.
    assert!(
        stdout.contains(
            "--- summary (backend cupti): 1 process, 3 kernels, 1 memcpys, 1 memsets, 5 API calls, 0 dropped records"
        ),
        "{stdout}"
    );
    let fill_row = stdout
        .lines()
        .find(|l| l.ends_with(FILL_DEMANGLED) && !l.starts_with("kernel"))
        .expect("summary row of the fill kernel");
    let cols: Vec<&str> = fill_row.split_whitespace().take(5).collect();
    assert_eq!(
        cols,
        ["2", "4.000", "2.000", "2.000", "2.000"],
        "{fill_row}"
    );
    // The Chrome trace: valid JSON with GPU and stream tracks, kernel/copy/set/API categories and flows.
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&chrome).unwrap()).expect("valid JSON");
    let events = json["traceEvents"].as_array().expect("traceEvents");
    let named = |what: &str, name: &str| {
        events
            .iter()
            .any(|e| e["ph"] == "M" && e["name"] == what && e["args"]["name"] == name)
    };
    assert!(events.iter().any(|e| {
        e["ph"] == "M"
            && e["name"] == "process_name"
            && e["args"]["name"]
                .as_str()
                .is_some_and(|n| n.starts_with("GPU 0"))
    }));
    assert!(named("thread_name", "stream 7") && named("thread_name", "stream 13"));
    // Host threads by the Linux thread id the stream's header says its records carry.
    assert!(
        named("thread_name", "TID 77 CUDA runtime") && named("thread_name", "TID 77 CUDA driver"),
        "{events:?}"
    );
    let count = |cat: &str| {
        events
            .iter()
            .filter(|e| e["ph"] == "X" && e["cat"] == cat)
            .count()
    };
    assert_eq!(
        (
            count("kernel"),
            count("gpu_memcpy"),
            count("gpu_memset"),
            count("cuda_runtime"),
            count("cuda_driver")
        ),
        (3, 1, 1, 3, 2)
    );
    let k = events
        .iter()
        .find(|e| e["cat"] == "kernel" && e["name"] == FILL_DEMANGLED)
        .expect("kernel event");
    assert_eq!(k["dur"], 2.0);
    assert_eq!(k["args"]["correlation"], 1);
    let flows = events.iter().filter(|e| e["ph"] == "f").count();
    assert_eq!(
        flows, 4,
        "one arrow into each kernel and copy from its API call (the set has none)"
    );
    assert_eq!(
        entries(dir.path()),
        ["trace.json"],
        "no temporary file left"
    );
}

/// The summary alone unless `--list`: launched with and without a trace file (attached traces print through the
/// same code); `--list` with `--quiet` is a usage error.
#[test]
fn the_listing_is_printed_only_with_list() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("t.gputrace");
    let listed = |stdout: &str| {
        stdout
            .lines()
            .filter(|l| {
                ["kernel  ", "memcpy  ", "memset  "]
                    .iter()
                    .any(|p| l.starts_with(p))
            })
            .count()
    };
    for args in [vec![], vec!["-o", file.to_str().unwrap()]] {
        let out = trace("normal", &args);
        let stdout = text(&out.stdout);
        assert_eq!(out.status.code(), Some(0), "{args:?}");
        assert!(
            stdout.contains(
                "--- summary (backend cupti): 1 process, 3 kernels, 1 memcpys, 1 memsets"
            ),
            "{args:?}: {stdout}"
        );
        assert_eq!(listed(&stdout), 0, "{args:?}: no listing: {stdout}");
    }
    assert!(
        std::fs::metadata(&file).unwrap().len() > 0,
        "the trace file is written"
    );
    let out = trace("normal", &["--list", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(listed(&text(&out.stdout)), 5, "3 kernels, a copy and a set");
    let both = trace("normal", &["--list", "--quiet"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        text(&both.stderr).contains("cannot be used with"),
        "{}",
        text(&both.stderr)
    );
}

#[test]
fn dropped_records_are_reported_with_a_nonzero_exit() {
    let out = trace("dropped", &["--quiet"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(text(&out.stdout).contains("42 dropped records"));
    assert!(text(&out.stderr).contains("42 activity records were dropped"));
}

#[test]
fn records_the_process_sent_that_did_not_arrive_make_the_exit_nonzero() {
    let out = trace("short", &["--quiet"]);
    assert!(
        text(&out.stderr).contains("arrived"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
}

#[test]
fn batches_lost_to_a_panic_in_the_library_make_the_exit_nonzero() {
    let out = trace("panicked", &["--quiet"]);
    assert!(
        text(&out.stderr).contains("2 record batches were lost"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
}

#[test]
fn a_crash_keeps_what_came_before_and_exits_with_the_signal() {
    let out = trace("crash", &["--quiet"]);
    assert_eq!(out.status.code(), Some(128 + 6), "SIGABRT");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("3 kernels, 1 memcpys, 1 memsets"),
        "{stdout}"
    );
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("ended without finishing its stream"),
        "{stderr}"
    );
    assert!(stderr.contains("ended by signal 6"), "{stderr}");
}

/// The line that says a process's trace ended at SIGSEGV.
const AT_SEGV: &str = "its trace ended at signal 11 (SIGSEGV), which was ending the process";

#[test]
fn a_crash_whose_records_were_flushed_says_the_signal_and_exits_with_it() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("run.gputrace");
    let out = trace("segv", &["--quiet", "-o", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(128 + 11), "the program's signal");
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("3 kernels, 1 memcpys, 1 memsets"),
        "{stdout}"
    );
    let stderr = text(&out.stderr);
    assert!(stderr.contains(AT_SEGV), "{stderr}");
    assert!(stderr.contains("ended by signal 11"), "{stderr}");
    // The saved trace says how the process's stream ended.
    let stats = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(["stats", "--report", "processes", "--format", "json"])
        .arg(&file)
        .output()
        .unwrap();
    assert_eq!(stats.status.code(), Some(0), "{}", text(&stats.stderr));
    let json: serde_json::Value = serde_json::from_slice(&stats.stdout).unwrap();
    let rows = json[0]["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    assert_eq!(rows[0]["Complete"], "yes", "{json}");
    assert_eq!(rows[0]["End"], "signal 11 (SIGSEGV)", "{json}");
}

#[test]
fn a_child_that_crashed_while_the_program_went_on_makes_the_trace_incomplete() {
    let out = trace("segv-child", &["--quiet"]);
    let stderr = text(&out.stderr);
    assert!(stderr.contains(AT_SEGV), "{stderr}");
    assert!(
        text(&out.stdout).contains("2 processes, 6 kernels"),
        "{}",
        text(&out.stdout)
    );
    // The program exited 0; one of its processes died of a signal, its work in flight unrecorded: exit 3, as for
    // a process that crashed before it could send its end record.
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
}

#[test]
fn a_program_that_never_uses_cuda_is_a_clear_error_and_writes_no_trace() {
    let dir = tempfile::tempdir().unwrap();
    let chrome = dir.path().join("trace.json");
    let out = trace(
        "nocuda",
        &["--quiet", "--chrome-trace", chrome.to_str().unwrap()],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(text(&out.stderr).contains("no traced process connected"));
    assert!(entries(dir.path()).is_empty(), "{:?}", entries(dir.path()));
}

#[test]
fn every_process_that_uses_cuda_is_traced() {
    let out = trace("two", &["--quiet"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(text(&out.stdout).contains("2 processes, 6 kernels"));
}

#[test]
fn a_stream_kept_open_by_a_child_does_not_hang_the_tracer() {
    let t0 = Instant::now();
    let out = trace("lingering-child", &["--quiet", "--drain-timeout-ms", "700"]);
    assert!(t0.elapsed() < Duration::from_secs(20), "bounded wait");
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
    assert!(text(&out.stdout).contains("3 kernels"));
    assert!(text(&out.stderr).contains("had not finished its stream"));
}

#[test]
fn a_connection_that_sends_nothing_is_reported_with_a_nonzero_exit() {
    let out = trace("mute-child", &["--quiet", "--drain-timeout-ms", "700"]);
    assert_eq!(out.status.code(), Some(3), "incomplete trace");
    assert!(text(&out.stdout).contains("3 kernels"));
    let stderr = text(&out.stderr);
    assert!(stderr.contains("sent nothing"), "{stderr}");
}

#[test]
fn a_corrupt_stream_is_reported() {
    let out = trace("garbage", &["--quiet"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(
        text(&out.stderr).contains("not a gpu-tools trace stream"),
        "{}",
        text(&out.stderr)
    );
}
