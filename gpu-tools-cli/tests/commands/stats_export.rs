//! `gpu-tools stats` and `gpu-tools export` on trace files written here: the reports in each format and by name,
//! Perfetto and Chrome output (gzip too; a trace with a counter stream: `stats_export_counters`), and bad input:
//! a truncated file and one cut between chunks, not finished by its writer (what was read still counts, exit 3),
//! a file that is not a trace or of a newer version (exit 1, an existing output left as it was), an
//! output that cannot be written (exit 1 before anything is read), and nothing left behind on failure; a changed
//! byte (a checksum fails: exit 1, naming where), a final chunk that disagrees with what was read (exit 1), and
//! files of format versions 2 and 3 (read as before, with a line saying what they cannot show).

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use gpu_tools::trace::file::{CHUNK_HEADER_LEN, FILE_HEADER_LEN, FILE_VERSION, TraceFileWriter};
use gpu_tools::trace::*;
use gpu_tools_testing::records::kernel;

/// Perfetto's messages, as gpu-tools-trace's export test declares them.
use gpu_tools_testing::perfetto;

pub(super) fn gpu_tools(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_gpu-tools"))
        .args(args)
        .output()
        .expect("run gpu-tools");
    println!(
        "{args:?}: {}\n--- stdout\n{}--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn launch(start: u64, end: u64, correlation: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end,
        domain: ApiDomain::Runtime,
        cbid: 211,
        name: Arc::from("cudaLaunchKernel"),
        correlation,
        process: 100,
        thread: 1,
        return_value: 0,
    })
}

/// A trace file of one process: three launches of two kernels.
pub(super) fn trace_file(dir: &Path) -> PathBuf {
    trace_file_named(dir, "run.gputrace", false)
}

/// The same, each kernel record before its launch's when `work_first` (the order of real CUPTI traces).
fn trace_file_named(dir: &Path, name: &str, work_first: bool) -> PathBuf {
    let mut e = Encoder::new(&StreamHeader::new(100, 130001, TimestampClock::Monotonic));
    e.push(&Record::ProcessStart(ProcessStart {
        pid: 100,
        parent_pid: 1,
        time: 1_000,
        command: "app".into(),
    }));
    for (i, (name, t)) in [
        ("_Z4copyPKfPfm", 10_000u64),
        ("scale", 20_000),
        ("_Z4copyPKfPfm", 30_000),
    ]
    .into_iter()
    .enumerate()
    {
        let c = u32::try_from(i).unwrap() + 1;
        let call = launch(t, t + 500, c);
        let work = kernel(name, t + 1_000, t + 1_000 + 2_000 * u64::from(c), c);
        if work_first {
            e.push(&work);
            e.push(&call);
        } else {
            e.push(&call);
            e.push(&work);
        }
    }
    e.push(&Record::ProcessEnd(ProcessEnd {
        time: 90_000,
        reason: EndReason::Exit,
        records: 8,
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

pub(super) fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn names_in(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

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

/// The chunks of a file of the current version (or 3): offset and payload length.
fn chunks_v3(file: &[u8]) -> Vec<(usize, usize)> {
    let mut at = FILE_HEADER_LEN;
    let mut out = Vec::new();
    while at < file.len() {
        let len = u32::from_le_bytes(file[at + 5..at + 9].try_into().unwrap()) as usize;
        out.push((at, len));
        at += CHUNK_HEADER_LEN + len;
    }
    assert_eq!(at, file.len());
    out
}

#[test]
fn a_changed_byte_is_refused_with_where_it_is_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let good = trace_file(dir.path());
    let bytes = std::fs::read(&good).unwrap();
    let out = gpu_tools(&["stats", s(&good)]);
    assert_eq!(out.status.code(), Some(0));
    // The packed chunk of the records: the largest one.
    let (at, len) = *chunks_v3(&bytes).iter().max_by_key(|c| c.1).unwrap();
    assert!(len > 40, "{len}");
    let out_path = dir.path().join("keep.pb");
    for (i, says) in [
        (20, "the file header (bytes 0 to 31) is corrupt".to_string()),
        (
            at + 6,
            format!("corrupt at byte {at}: the chunk header there fails its checksum"),
        ),
        (
            at + CHUNK_HEADER_LEN + len / 2,
            format!(
                "corrupt at byte {at}: the chunk of stream 0 there ({len} bytes) fails its checksum"
            ),
        ),
    ] {
        let mut changed = bytes.clone();
        changed[i] ^= 0x10;
        let path = dir.path().join("changed.gputrace");
        std::fs::write(&path, &changed).unwrap();
        let out = gpu_tools(&["stats", s(&path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&says), "byte {i}: {err}");
        assert!(out.stdout.is_empty(), "byte {i}: no report of another run");
        // Merged with a whole file: refused all the same.
        let out = gpu_tools(&["stats", s(&good), s(&path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
        assert!(out.stdout.is_empty());
        std::fs::write(&out_path, "previous").unwrap();
        let out = gpu_tools(&["export", s(&path), "--perfetto", s(&out_path)]);
        assert_eq!(out.status.code(), Some(1), "byte {i}");
        assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
        assert_eq!(std::fs::read_to_string(&out_path).unwrap(), "previous");
    }
}

/// Whether `path` is said on `stderr` to be of an older format (`limits`, the start of what is said), once, on a
/// line of its own.
fn said_once(stderr: &[u8], command: &str, path: &Path, limits: &str) -> bool {
    let line = format!("gpu-tools {command}: {}: {limits}", path.display());
    let err = String::from_utf8_lossy(stderr);
    err.lines().filter(|l| l.starts_with(&line)).count() == 1 && err.matches(limits).count() == 1
}

#[test]
fn files_of_versions_2_and_3_read_as_their_current_form_and_say_once_what_they_cannot_show() {
    let dir = tempfile::tempdir().unwrap();
    let v4_path = trace_file(dir.path());
    let v4 = std::fs::read(&v4_path).unwrap();
    let kept: Vec<(usize, usize)> = chunks_v3(&v4)
        .into_iter()
        .filter(|&(at, _)| v4[at] != 4)
        .collect();
    assert_eq!(kept.len() + 1, chunks_v3(&v4).len(), "one final chunk");
    // As the version 2 writer wrote it: no checksums, zeros in the header's bytes 24 to 31, no final chunk.
    let mut v2 = v4[..FILE_HEADER_LEN].to_vec();
    v2[8..10].copy_from_slice(&2u16.to_le_bytes());
    v2[24..32].fill(0);
    for &(at, len) in &kept {
        v2.extend_from_slice(&v4[at..at + 9]);
        v2.extend_from_slice(&v4[at + CHUNK_HEADER_LEN..at + CHUNK_HEADER_LEN + len]);
    }
    // As the version 3 writer wrote it: checksums, no final chunk.
    let mut v3 = v4[..kept
        .last()
        .map_or(0, |&(at, len)| at + CHUNK_HEADER_LEN + len)]
        .to_vec();
    v3[8..10].copy_from_slice(&3u16.to_le_bytes());
    let mut crc = crc32fast::Hasher::new();
    crc.update(&v3[..24]);
    crc.update(&v3[28..32]);
    let crc = crc.finalize();
    v3[24..28].copy_from_slice(&crc.to_le_bytes());
    let v2_path = dir.path().join("v2.gputrace");
    let v3_path = dir.path().join("v3.gputrace");
    std::fs::write(&v2_path, &v2).unwrap();
    std::fs::write(&v3_path, &v3).unwrap();
    let limits = [
        (
            &v2_path,
            "trace file format 2 has no checksums and no final chunk",
        ),
        (
            &v3_path,
            "trace file format 3 has no final chunk: the file cannot be checked for completeness",
        ),
    ];
    for format in ["text", "json"] {
        let a = gpu_tools(&["stats", "--format", format, s(&v4_path)]);
        assert_eq!(a.status.code(), Some(0));
        assert!(a.stderr.is_empty(), "the current format: nothing to say");
        for (path, says) in limits {
            let b = gpu_tools(&["stats", "--format", format, s(path)]);
            assert_eq!(b.status.code(), Some(0));
            assert!(String::from_utf8_lossy(&b.stdout).contains("cuda_gpu_kern_sum"));
            assert_eq!(a.stdout, b.stdout, "{format}");
            assert!(
                said_once(&b.stderr, "stats", path, says),
                "{}",
                String::from_utf8_lossy(&b.stderr)
            );
        }
    }
    // Each file of an older format is said once, whatever else is read with it.
    let out_path = dir.path().join("t.json");
    let out = gpu_tools(&["export", s(&v2_path), s(&v3_path), "--chrome", s(&out_path)]);
    assert_eq!(out.status.code(), Some(0));
    for (path, says) in limits {
        assert!(
            said_once(&out.stderr, "export", path, says),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
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
fn a_final_chunk_that_disagrees_with_what_was_read_is_refused_with_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let bytes = std::fs::read(trace_file(dir.path())).unwrap();
    let chunks = chunks_v3(&bytes);
    // The closing chunk (17 bytes, no payload) left out: every chunk's checksum holds.
    let (closing, len) = chunks[chunks.len() - 2];
    assert_eq!((bytes[closing], len), (2, 0));
    let mut out_of = bytes[..closing].to_vec();
    out_of.extend_from_slice(&bytes[closing + CHUNK_HEADER_LEN..]);
    let path = dir.path().join("less.gputrace");
    std::fs::write(&path, &out_of).unwrap();
    let out = gpu_tools(&["stats", s(&path)]);
    assert_eq!(out.status.code(), Some(1));
    let says = format!(
        "gpu-tools stats: {}: the file is corrupt: its final chunk (at byte {closing}) says {} bytes come before \
         it, but it is at byte {closing}",
        path.display(),
        closing + CHUNK_HEADER_LEN
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&says));
    assert!(out.stdout.is_empty(), "no report of another run");
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
