//! libFuzzer target: trace files. Any bytes given to the reader give items and errors, never a panic, with at most
//! one fatal error and that one last. A file of the current version whose bytes the input changes (each 3 bytes of
//! input: an offset of two bytes and a value to XOR there) reads either as written or with an error: never with a
//! record that differs from what was written. And the same file cut short (where the input's length says) reads
//! with an error, never as whole, with no record that was not written.
#![no_main]

use std::sync::Arc;

use gpu_tools::trace::file::{TraceFileError, TraceFileWriter, TraceItem, TraceReader};
use gpu_tools::trace::{
    ApiDomain, ApiRecord, Encoder, KernelRecord, Record, StreamHeader, TimestampClock,
};
use libfuzzer_sys::fuzz_target;

fn read(bytes: &[u8]) -> (Vec<TraceItem>, Vec<TraceFileError>) {
    let (mut items, mut errors) = (Vec::new(), Vec::new());
    for item in TraceReader::new(bytes) {
        match item {
            Ok(i) => items.push(i),
            Err(e) => errors.push(e),
        }
    }
    let fatal = errors.iter().filter(|e| e.is_fatal()).count();
    assert!(fatal <= 1);
    if fatal == 1 {
        assert!(errors.last().is_some_and(TraceFileError::is_fatal));
    }
    (items, errors)
}

/// Two streams of a launch and its kernel each, written in pieces of 40 bytes.
fn file() -> Vec<u8> {
    let stream = |pid: u32| {
        let mut e = Encoder::new(&StreamHeader::new(pid, 130_001, TimestampClock::Monotonic));
        e.push(&Record::Api(ApiRecord {
            start: 1_000,
            end: 1_100,
            domain: ApiDomain::Runtime,
            cbid: 211,
            name: Arc::from("cudaLaunchKernel"),
            correlation: 1,
            process: pid,
            thread: 1,
            return_value: 0,
        }));
        e.push(&Record::Kernel(KernelRecord {
            start: 1_200,
            end: 2_200,
            device: 0,
            context: 1,
            stream: 7,
            correlation: 1,
            grid_id: 1,
            grid: [1, 1, 1],
            block: [32, 1, 1],
            static_shared: 0,
            dynamic_shared: 0,
            registers: 16,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::from("gemm"),
        }));
        e.bytes().to_vec()
    };
    let Ok(mut w) = TraceFileWriter::new(Vec::new()) else {
        return Vec::new();
    };
    for pid in [100, 200] {
        let s = w.add_stream();
        for piece in stream(pid).chunks(40) {
            let _ = w.write(s, piece);
        }
        let _ = w.close(s);
    }
    w.finish().unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    let _ = read(data);
    let original = file();
    let (whole, errors) = read(&original);
    assert!(errors.is_empty());
    let cut = data.len() % original.len();
    let (items, errors) = read(&original[..cut]);
    assert!(!errors.is_empty(), "a file cut to {cut} bytes read clean");
    assert_eq!(items[..], whole[..items.len()], "a cut file read as other records");
    let mut changed = original.clone();
    for edit in data.chunks_exact(3) {
        let at = usize::from(u16::from_le_bytes([edit[0], edit[1]])) % changed.len();
        changed[at] ^= edit[2];
    }
    if changed == original {
        return;
    }
    let (items, errors) = read(&changed);
    assert!(!errors.is_empty(), "a changed file read clean");
    assert_eq!(items[..], whole[..items.len()], "a changed file read as other records");
});
