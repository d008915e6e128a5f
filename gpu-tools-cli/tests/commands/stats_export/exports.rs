//! `gpu-tools export`: Perfetto and Chrome output, gzip-compressed when the name ends in `.gz`, exactly one output,
//! each launch tied to its kernel whatever their order, and a slice in an overfull track's last lane.

use std::io::Read;

use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::*;
use gpu_tools_testing::records::kernel;

/// Perfetto's messages, as gpu-tools-trace's export test declares them.
use gpu_tools_testing::perfetto;

use super::{gpu_tools, s, trace_file, trace_file_named};

#[test]
fn export_writes_perfetto_chrome_and_gzip() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let pb = dir.path().join("t.pb");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--perfetto", s(&pb)])
            .status
            .code(),
        Some(0)
    );
    assert!(std::fs::metadata(&pb).unwrap().len() > 0);

    let json = dir.path().join("t.json");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--chrome", s(&json)])
            .status
            .code(),
        Some(0)
    );
    let plain = std::fs::read_to_string(&json).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&plain).expect("Chrome JSON");
    assert!(plain.contains("scale"), "{doc}");

    let gz = dir.path().join("t.json.gz");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--chrome", s(&gz)])
            .status
            .code(),
        Some(0)
    );
    let mut unzipped = String::new();
    flate2::read::GzDecoder::new(std::fs::File::open(&gz).unwrap())
        .read_to_string(&mut unzipped)
        .unwrap();
    assert_eq!(unzipped, plain, "the gzip file holds the same document");
    assert!(std::fs::metadata(&gz).unwrap().len() < plain.len() as u64);

    // One output exactly.
    assert_eq!(gpu_tools(&["export", s(&file)]).status.code(), Some(2));
    assert_eq!(
        gpu_tools(&[
            "export",
            s(&file),
            "--chrome",
            s(&json),
            "--perfetto",
            s(&pb)
        ])
        .status
        .code(),
        Some(2)
    );
}

#[test]
fn export_ties_each_launch_to_its_kernel_whatever_their_order() {
    let dir = tempfile::tempdir().unwrap();
    for work_first in [false, true] {
        let file = trace_file_named(dir.path(), "t.gputrace", work_first);
        let json = dir.path().join("t.json");
        let out = gpu_tools(&["export", s(&file), "--chrome", s(&json)]);
        assert_eq!(out.status.code(), Some(0));
        let doc: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        let count = |ph: &str| events.iter().filter(|e| e["ph"] == ph).count();
        assert_eq!((count("s"), count("f")), (3, 3), "work first: {work_first}");
    }
}

#[test]
fn export_counts_one_misnested_slice_in_the_singular() {
    // 33 kernels that all overlap on one stream: 32 lanes, and one slice more in the last.
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    for c in 1..=33 {
        e.push(&kernel("k", 1_000 + u64::from(c), 100_000, c));
    }
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let stream = w.add_stream();
    w.write(stream, e.bytes()).unwrap();
    w.close(stream).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("lanes.gputrace");
    std::fs::write(&file, w.finish().unwrap()).unwrap();
    let out = gpu_tools(&[
        "export",
        s(&file),
        "--chrome",
        s(&dir.path().join("t.json")),
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "gpu-tools export: 1 slice went to an overfull track's last lane and may nest wrongly there\n"
    );
}

/// `--perfetto OUT.gz` is gzip-compressed, as `--chrome OUT.gz` is.
#[test]
fn a_perfetto_export_to_gz_is_compressed() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let gz = dir.path().join("t.pb.gz");
    assert_eq!(
        gpu_tools(&["export", s(&file), "--perfetto", s(&gz)])
            .status
            .code(),
        Some(0)
    );
    let bytes = std::fs::read(&gz).unwrap();
    assert_eq!(&bytes[..2], b"\x1f\x8b", "gzip's magic");
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(&bytes[..])
        .read_to_end(&mut plain)
        .unwrap();
    let (starts, ends) = perfetto::flows(&plain);
    assert_eq!(starts.len(), 3, "a flow per launch");
    assert_eq!(starts, ends);
}
