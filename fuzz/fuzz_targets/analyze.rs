//! libFuzzer target: the analysis of trace files (`gpu_tools::trace::analyze`). Any bytes read and diagnosed give
//! errors and a diagnosis, never a panic. A file of the current version whose bytes the input changes (each 3
//! bytes of input: an offset of two bytes and a value to XOR there) reads either with an error or to the very
//! diagnosis of the file as written: never to other findings or other numbers. And the same file cut short (where
//! the input's length says) reads with an error.
#![no_main]

use std::sync::Arc;

use gpu_tools::trace::analyze::{Diagnosis, Trace};
use gpu_tools::trace::diff::{Profile, Select};
use gpu_tools::trace::file::{TraceFileError, TraceFileWriter};
use gpu_tools::trace::{
    ApiDomain, ApiRecord, CopyKind, Encoder, KernelRecord, MemcpyRecord, MemoryKind, Record,
    StreamHeader, TimestampClock,
};
use libfuzzer_sys::fuzz_target;

fn diagnose(bytes: &[u8]) -> (Diagnosis, Vec<TraceFileError>) {
    let mut t = Trace::new();
    let errors = t.read(0, bytes);
    // `diff`'s profile of the same trace: its sums of untrusted durations never panic either.
    let _ = Profile::of(&t, Select::All);
    (t.diagnose(), errors)
}

fn call(name: &str, start: u64, end: u64, correlation: u32) -> Record {
    Record::Api(ApiRecord {
        start,
        end,
        domain: ApiDomain::Runtime,
        cbid: 1,
        name: Arc::from(name),
        correlation,
        process: 100,
        thread: 1,
        return_value: 0,
    })
}

/// One process, ten steps of a pageable copy, two kernels and a synchronisation, in pieces of 40 bytes: its idle
/// time has two causes the analysis tells apart (synchronisation and pageable copies).
fn file() -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(100, 130_001, TimestampClock::Monotonic));
    let mut t = 1_000_000u64;
    let mut correlation = 0;
    for _ in 0..10 {
        correlation += 1;
        e.push(&call("cudaMemcpyAsync", t, t + 30_000, correlation));
        e.push(&Record::Memcpy(MemcpyRecord {
            start: t + 10_000,
            end: t + 29_000,
            device: 0,
            context: 1,
            stream: 7,
            correlation,
            bytes: 1 << 20,
            kind: CopyKind::HtoD,
            src: MemoryKind::Pageable,
            dst: MemoryKind::Device,
            is_async: true,
        }));
        t += 31_000;
        for name in ["gemm", "relu"] {
            correlation += 1;
            e.push(&call("cudaLaunchKernel", t, t + 5_000, correlation));
            e.push(&Record::Kernel(KernelRecord {
                start: t + 6_000,
                end: t + 56_000,
                device: 0,
                context: 1,
                stream: 7,
                correlation,
                grid_id: u64::from(correlation),
                grid: [64, 1, 1],
                block: [256, 1, 1],
                static_shared: 0,
                dynamic_shared: 0,
                registers: 32,
                graph_id: 0,
                graph_node_id: 0,
                name: Arc::from(name),
            }));
            t += 5_000;
        }
        correlation += 1;
        e.push(&call("cudaStreamSynchronize", t, t + 110_000, correlation));
        t += 300_000;
    }
    let Ok(mut w) = TraceFileWriter::new(Vec::new()) else {
        return Vec::new();
    };
    let s = w.add_stream();
    for piece in e.bytes().chunks(40) {
        let _ = w.write(s, piece);
    }
    let _ = w.close(s);
    w.finish().unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let _ = diagnose(data);
    let original = file();
    let (whole, errors) = diagnose(&original);
    assert!(errors.is_empty());
    let cut = data.len() % original.len();
    let (_, errors) = diagnose(&original[..cut]);
    assert!(!errors.is_empty(), "a file cut to {cut} bytes read clean");
    let mut changed = original.clone();
    for edit in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % changed.len();
        changed[at] ^= edit[2];
    }
    if changed == original {
        return;
    }
    let (d, errors) = diagnose(&changed);
    if errors.is_empty() {
        assert_eq!(d, whole, "a changed file read clean to another diagnosis");
    }
});
