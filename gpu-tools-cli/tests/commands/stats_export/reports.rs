//! `gpu-tools stats`' reports: every report and one by name in each format, kernel names demangled unless
//! `--raw-names` (in the exports too), the trace read from standard input, and traces of one host or of several
//! merged (other hosts' clocks said in words).

use std::path::{Path, PathBuf};
use std::process::Command;

use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::*;
use gpu_tools_testing::records::kernel;

use super::{gpu_tools, launch, s, trace_file};

#[test]
fn stats_prints_every_report_and_one_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let out = gpu_tools(&["stats", s(&file)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("cuda_gpu_kern_sum") && text.contains("cuda_api_sum"),
        "{text}"
    );
    assert!(
        text.contains("copy(float const*, float*, unsigned long)")
            || text.contains("_Z4copyPKfPfm")
    );

    let out = gpu_tools(&[
        "stats",
        "--format",
        "json",
        "--report",
        "cuda_gpu_kern_sum",
        s(&file),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    let doc: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let values = doc.as_array().expect("an array of reports");
    let names: Vec<&str> = values.iter().filter_map(|v| v["name"].as_str()).collect();
    assert_eq!(names, ["cuda_gpu_kern_sum"], "{text}");
    assert_eq!(
        values[0]["rows"].as_array().unwrap().len(),
        2,
        "two kernel names"
    );

    let out = gpu_tools(&[
        "stats",
        "--format",
        "csv",
        "--report",
        "cuda_api_sum",
        s(&file),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cudaLaunchKernel"));

    let out = gpu_tools(&["stats", "--report", "no_such_report", s(&file)]);
    assert_eq!(out.status.code(), Some(2));
    let out = gpu_tools(&["stats", "--format", "xml", s(&file)]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn stats_csv_keeps_each_reports_notes() {
    let torch = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../tests/fixtures/traces/torch_loop.gputrace");
    let out = gpu_tools(&[
        "stats",
        "--format",
        "csv",
        "--report",
        "cuda_gpu_kern_counters_sum,stragglers",
        s(&torch),
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    // Why the first table is empty, and what the second's empty fields and figures mean.
    assert!(
        text.contains("\n# note: the trace holds no counter samples"),
        "{text}"
    );
    assert!(
        text.contains("\n# note: no NCCL collective kernels in the trace"),
        "{text}"
    );
}

const COPY: &str = "_Z4copyPKfPfm";
const COPY_DEMANGLED: &str = "copy(float const*, float*, unsigned long)";

#[test]
fn kernel_names_are_demangled_unless_raw_names() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    for format in ["text", "csv", "json"] {
        let args = [
            "stats",
            "--report",
            "cuda_gpu_kern_sum",
            "--format",
            format,
            s(&file),
        ];
        let out = gpu_tools(&args);
        assert_eq!(out.status.code(), Some(0));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(COPY_DEMANGLED) && !text.contains(COPY),
            "{format}: {text}"
        );
        assert!(text.contains("scale"), "a C name stays: {text}");
        let out = gpu_tools(&[&args[..], &["--raw-names"]].concat());
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(COPY) && !text.contains(COPY_DEMANGLED),
            "{format} --raw-names: {text}"
        );
    }

    let json = dir.path().join("t.json");
    let kernels = |raw: bool| -> Vec<String> {
        let mut args = vec!["export", s(&file), "--chrome", s(&json)];
        if raw {
            args.push("--raw-names");
        }
        assert_eq!(gpu_tools(&args).status.code(), Some(0));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let mut names: Vec<String> = doc["traceEvents"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["cat"] == "kernel")
            .map(|e| e["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    assert_eq!(kernels(false), [COPY_DEMANGLED, COPY_DEMANGLED, "scale"]);
    assert_eq!(kernels(true), [COPY, COPY, "scale"]);

    let pb = dir.path().join("t.pb");
    let holds = |bytes: &[u8], name: &str| bytes.windows(name.len()).any(|w| w == name.as_bytes());
    assert_eq!(
        gpu_tools(&["export", s(&file), "--perfetto", s(&pb)])
            .status
            .code(),
        Some(0)
    );
    let bytes = std::fs::read(&pb).unwrap();
    assert!(holds(&bytes, COPY_DEMANGLED) && !holds(&bytes, COPY));
    assert_eq!(
        gpu_tools(&["export", s(&file), "--perfetto", s(&pb), "--raw-names"])
            .status
            .code(),
        Some(0)
    );
    let bytes = std::fs::read(&pb).unwrap();
    assert!(holds(&bytes, COPY) && !holds(&bytes, COPY_DEMANGLED));
}

/// A trace of one process of `host` (boot `boot`) whose clock anchor puts monotonic `mono` at wall-clock `wall`.
fn host_trace(dir: &Path, name: &str, host: &str, boot: &str, mono: u64, wall: u64) -> PathBuf {
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    e.push(&Record::ProcessStart(ProcessStart {
        pid: 100,
        parent_pid: 1,
        time: mono,
        command: name.into(),
    }));
    e.push(&Record::ProcessInfo(ProcessInfo {
        host: host.into(),
        boot_id: boot.into(),
        labels: vec![],
    }));
    e.push(&Record::ClockAnchor(ClockAnchor {
        monotonic: mono,
        realtime: wall,
        uncertainty: 200,
    }));
    e.push(&launch(mono + 10_000, mono + 10_500, 1));
    e.push(&kernel("scale", mono + 11_000, mono + 13_000, 1));
    e.push(&Record::ProcessEnd(ProcessEnd {
        time: mono + 90_000,
        reason: EndReason::Exit,
        records: 6,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let s = w.add_stream();
    w.write(s, e.bytes()).unwrap();
    w.close(s).unwrap();
    let path = dir.join(name);
    std::fs::write(&path, w.finish().unwrap()).unwrap();
    path
}

#[test]
fn merged_traces_of_one_host_are_not_moved_and_other_hosts_are_said_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let boot = "5e1c0a9f-0000-4000-8000-000000000001";
    // Two runs on one host boot, 731 s apart: one clock, nothing to move, nothing said.
    let a = host_trace(
        dir.path(),
        "a.gputrace",
        "vm",
        boot,
        1_000_000_000,
        1_700_000_000_000_000_000,
    );
    let b = host_trace(
        dir.path(),
        "b.gputrace",
        "vm",
        boot,
        732_013_545_862,
        1_700_000_731_013_545_862,
    );
    let out = gpu_tools(&["stats", "--report", "processes", s(&a), s(&b)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains("moved") && !text.contains("shifted"),
        "{text}"
    );
    // Another host: said in words, with the error bound.
    let c = host_trace(
        dir.path(),
        "c.gputrace",
        "gpu2",
        "0a9f5e1c-0000-4000-8000-000000000002",
        5_000_000_000,
        1_700_000_731_013_545_862,
    );
    let out = gpu_tools(&["stats", "--report", "processes", s(&a), s(&c)]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(
            "note: host gpu2's timestamps moved by +727.0 s to align with host vm (clock anchors, ±0.4 µs, plus \
             whatever the hosts' wall clocks disagree)"
        ),
        "{text}"
    );
}

/// `stats -` reads the trace from standard input (once: `- -` is the same file twice).
#[test]
fn stats_reads_standard_input_for_a_dash() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let run = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
            .args(args)
            .stdin(std::fs::File::open(&file).unwrap())
            .output()
            .unwrap();
        println!(
            "{args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        out
    };
    let out = run(&[
        "stats",
        "--report",
        "cuda_gpu_kern_sum",
        "--format",
        "csv",
        "-",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("scale"), "{text}");
    let out = run(&["stats", "-", "-"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("given twice"));
    // Standard input and the same file by name: counted once.
    let out = run(&["stats", "-", s(&file)]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("the same file"));
}
