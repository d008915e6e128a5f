//! `gpu-tools stats` and `gpu-tools export` on trace files written here: the reports in each format and by name,
//! Perfetto and Chrome output (gzip too; a trace with a counter stream: `stats_export_counters`), and bad input:
//! a truncated file and one cut between chunks, not finished by its writer (what was read still counts, exit 3),
//! a file that is not a trace or of a newer version (exit 1, an existing output left as it was), an
//! output that cannot be written (exit 1 before anything is read), and nothing left behind on failure; a changed
//! byte (a checksum fails: exit 1, naming where), a final chunk that disagrees with what was read (exit 1), and
//! files of format versions 2 and 3 (read as before, with a line saying what they cannot show).
//!
//! One module per concern:
//! - `reports`: `stats`' reports in each format and by name, kernel names demangled or raw, standard input, and
//!   traces of one host or several merged;
//! - `exports`: Perfetto and Chrome output, gzip-compressed too, launches tied to their kernels, an overfull track;
//! - `refused_files`: a file that is not a trace or of a newer version, a missing file, an output that cannot be
//!   written or would write over an input, and a file given twice;
//! - `cut_short`: a file truncated, cut before its first record, cut between chunks, or cut inside its end record;
//! - `integrity`: a changed byte, a final chunk that disagrees with what was read, and files of format versions 2
//!   and 3, which lack those checks.

mod cut_short;
mod exports;
mod integrity;
mod refused_files;
mod reports;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::Arc;

use gpu_tools::trace::file::{CHUNK_HEADER_LEN, FILE_HEADER_LEN, TraceFileWriter};
use gpu_tools::trace::*;
use gpu_tools_testing::records::kernel;

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
