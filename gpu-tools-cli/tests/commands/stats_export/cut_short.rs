//! Files cut short: truncated or cut between chunks, not finished by their writer (what was read still counts, exit
//! 3); cut before the first record (nothing to report, exit 1); and cut inside the end record, which does not blame
//! the program.

use gpu_tools::trace::file::{FILE_HEADER_LEN, TraceFileWriter};
use gpu_tools::trace::*;
use gpu_tools_testing::records::kernel;

use super::{chunks_v3, gpu_tools, launch, s, trace_file};

#[test]
fn a_truncated_file_keeps_what_was_read_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let file = trace_file(dir.path());
    let bytes = std::fs::read(&file).unwrap();
    let cut = dir.path().join("cut.gputrace");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let out = gpu_tools(&["stats", s(&cut)]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("truncated"));
    assert!(
        String::from_utf8_lossy(&out.stdout)
            .contains("note: 1 error while reading (reported on stderr)\n")
    );
    let json = dir.path().join("cut.json");
    let out = gpu_tools(&["export", s(&cut), "--chrome", s(&json)]);
    assert_eq!(out.status.code(), Some(3));
    serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap())
        .expect("a whole document of what was read");
}

#[test]
fn a_file_cut_before_its_first_record_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let good = trace_file(dir.path());
    let bytes = std::fs::read(&good).unwrap();
    let out_path = dir.path().join("keep.json");
    std::fs::write(&out_path, "previous").unwrap();
    // The magic and the version only; the whole file header and a piece of the first chunk.
    for len in [10, 40] {
        let cut = dir.path().join(format!("cut{len}.gputrace"));
        std::fs::write(&cut, &bytes[..len]).unwrap();
        let says = format!("{} holds no records: the file is truncated", cut.display());
        let out = gpu_tools(&["stats", s(&cut)]);
        assert_eq!(out.status.code(), Some(1), "{len} bytes");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("gpu-tools stats: {says}")),
            "{err}"
        );
        if len == 10 {
            assert!(
                err.contains("it ends inside its header (10 bytes of it present)"),
                "{err}"
            );
        }
        assert!(out.stdout.is_empty(), "no report");
        let out = gpu_tools(&["export", s(&good), s(&cut), "--chrome", s(&out_path)]);
        assert_eq!(out.status.code(), Some(1), "{len} bytes");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("gpu-tools export: {says}")),
            "{err}"
        );
        assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "previous");
    }
}

/// The defect of format 3: a file cut where a chunk ends read as whole. Now it is not finished by its writer.
#[test]
fn a_file_cut_between_chunks_was_not_finished_by_its_writer_and_exits_3() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(trace_file(dir.path())).unwrap();
    let chunks = chunks_v3(&bytes);
    // After the records and after the closing: everything but the final chunk (before the records, nothing would
    // be left to report: that is below).
    assert_eq!(
        chunks.iter().map(|c| bytes[c.0]).collect::<Vec<u8>>(),
        [1, 3, 2, 4]
    );
    for &(at, _) in &chunks[2..] {
        let cut = dir.path().join(format!("cut{at}.gputrace"));
        std::fs::write(&cut, &bytes[..at]).unwrap();
        let says = format!(
            "gpu-tools stats: {}: the file was not finished by its writer (cut short, or the tracer was \
             killed): it ends at byte {at} without its final chunk",
            cut.display()
        );
        let out = gpu_tools(&["stats", s(&cut)]);
        assert_eq!(out.status.code(), Some(3), "cut {at}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&says),
            "cut {at}"
        );
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains("cuda_gpu_kern_sum"),
            "what was read is reported"
        );
        assert!(text.contains("note: 1 error while reading (reported on stderr)\n"));
        let json = dir.path().join("cut.json");
        let out = gpu_tools(&["export", s(&cut), "--chrome", s(&json)]);
        assert_eq!(out.status.code(), Some(3), "cut {at}");
        serde_json::from_str::<serde_json::Value>(&std::fs::read_to_string(&json).unwrap())
            .expect("a whole document of what was read");
    }
    // Cut to its header (the tracer killed before any process wrote): nothing to report, refused.
    let cut = dir.path().join("header.gputrace");
    std::fs::write(&cut, &bytes[..FILE_HEADER_LEN]).unwrap();
    for args in [
        vec!["stats", s(&cut)],
        vec!["export", s(&cut), "--perfetto", "/dev/null"],
    ] {
        let out = gpu_tools(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(&format!(
                "{} holds no records: the file was not finished by its writer",
                cut.display()
            )),
            "{args:?}"
        );
        assert!(out.stdout.is_empty());
    }
}

#[test]
fn a_cut_file_does_not_blame_the_program_for_its_missing_end() {
    let dir = tempfile::tempdir().unwrap();
    // The records, then the end record in a chunk of its own (as a tracer writes them as they arrive).
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    e.push(&launch(10_000, 10_500, 1));
    e.push(&kernel("scale", 11_000, 13_000, 1));
    let mut w = TraceFileWriter::new(Vec::new()).unwrap();
    let stream = w.add_stream();
    w.write(stream, e.bytes()).unwrap();
    e.clear();
    e.push(&Record::ProcessEnd(ProcessEnd {
        time: 90_000,
        reason: EndReason::Exit,
        records: 2,
        dropped: 0,
        skipped: 0,
        callback_panics: 0,
    }));
    w.write(stream, e.bytes()).unwrap();
    w.close(stream).unwrap();
    let bytes = w.finish().unwrap();
    let cut = dir.path().join("cut.gputrace");
    // Cut inside the end record's chunk (the closing chunk is a 17-byte header and no payload, the final chunk
    // 17 bytes and 28 + 12 for its one stream).
    std::fs::write(&cut, &bytes[..bytes.len() - (17 + 40) - 17 - 3]).unwrap();
    let out = gpu_tools(&["stats", "--report", "processes", s(&cut)]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("unknown (the file is cut short: its end was not read)"),
        "{text}"
    );
    assert!(!text.contains("crashed or killed"), "{text}");
}
