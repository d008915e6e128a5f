//! What the injection library spends per CUPTI record to put it on the wire, side by side in one run:
//!
//! - `memcpy of the buffer`: copying the CUPTI buffer's bytes as they are (the floor of any forwarding);
//! - `raw field reads`: a hand-written walk over the bindgen structs that writes each record's fields into a frame,
//!   as C code against the headers would (no names, no interning, no checks);
//! - `crate decode only`: the `ActivityBatch` walk alone, reading one field per record;
//! - `crate`: `ActivityBatch` decoding + `convert::TraceConverter::convert_ref` + `trace::Encoder`, as the library
//!   runs it (it also interns names and sends each once, which the raw walk does not do: it writes the name's
//!   address).
//!
//! The buffer holds 1000 kernel records (two kernel names) and 1000 driver API records in CUPTI 13.0's layout.
//! No GPU is needed. `cargo bench -p gpu-tools-inject --bench trace_stream`.

use std::ffi::CStr;
use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use gpu_tools::cupti::activity::{ActivityBatch, RecordLayout};
use gpu_tools::sys::cupti as sys;
use gpu_tools::trace::{Encoder, StreamHeader, TimestampClock};
use gpu_tools_inject::convert::TraceConverter;

const PAIRS: usize = 1000;
static NAMES: [&CStr; 2] = [c"_Z7add_onePji", c"_ZN2at6native18elementwise_kernelEv"];

/// A CUPTI 13.0 buffer: kernel and API records alternating, 8-byte aligned.
fn buffer() -> Vec<u64> {
    let k = std::mem::size_of::<sys::CUpti_ActivityKernel10>();
    let a = std::mem::size_of::<sys::CUpti_ActivityAPI>();
    assert!(k % 8 == 0 && a % 8 == 0);
    let mut words = vec![0u64; PAIRS * (k + a) / 8];
    let base = words.as_mut_ptr().cast::<u8>();
    let mut at = 0usize;
    for i in 0..PAIRS {
        let mut rec = sys::CUpti_ActivityKernel10 {
            kind: sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
            start: 1_000 * i as u64 + 10_000,
            end: 1_000 * i as u64 + 10_700,
            deviceId: 0,
            contextId: 1,
            streamId: 7 + (i % 2) as u32,
            correlationId: 2 * i as u32,
            gridX: 2,
            gridY: 1,
            gridZ: 1,
            blockX: 32,
            blockY: 1,
            blockZ: 1,
            registersPerThread: 16,
            ..Default::default()
        };
        rec.name = NAMES[i % 2].as_ptr();
        // SAFETY: `at + k` lies inside `words`; the record is written unaligned-safe.
        unsafe {
            base.add(at)
                .cast::<sys::CUpti_ActivityKernel10>()
                .write_unaligned(rec)
        };
        at += k;
        let api = sys::CUpti_ActivityAPI {
            kind: sys::CUPTI_ACTIVITY_KIND_DRIVER,
            cbid: sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
            start: 1_000 * i as u64 + 9_999,
            end: 1_000 * i as u64 + 10_003,
            processId: 4242,
            threadId: 77,
            correlationId: 2 * i as u32,
            returnValue: 0,
        };
        // SAFETY: as above.
        unsafe {
            base.add(at)
                .cast::<sys::CUpti_ActivityAPI>()
                .write_unaligned(api)
        };
        at += a;
    }
    words
}

/// The hand-written baseline: read each record's fields through the bindgen structs and write a fixed frame.
fn raw_walk(bytes: &[u8], out: &mut Vec<u8>) {
    let k = std::mem::size_of::<sys::CUpti_ActivityKernel10>();
    let a = std::mem::size_of::<sys::CUpti_ActivityAPI>();
    let mut at = 0;
    while at + 4 <= bytes.len() {
        let kind = u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]]);
        // SAFETY: the buffer was built of whole records of these kinds, 8-aligned.
        unsafe {
            let p = bytes.as_ptr().add(at);
            if kind == sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL {
                let r = &*p.cast::<sys::CUpti_ActivityKernel10>();
                out.push(2);
                for v in [r.start, r.end] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for v in [r.deviceId, r.contextId, r.streamId, r.correlationId] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for v in [r.gridX, r.gridY, r.gridZ, r.blockX, r.blockY, r.blockZ] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                out.extend_from_slice(&(r.name as usize).to_le_bytes());
                at += k;
            } else {
                let r = &*p.cast::<sys::CUpti_ActivityAPI>();
                out.push(5);
                for v in [r.start, r.end] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                for v in [
                    r.cbid,
                    r.processId,
                    r.threadId,
                    r.correlationId,
                    r.returnValue,
                ] {
                    out.extend_from_slice(&v.to_le_bytes());
                }
                at += a;
            }
        }
    }
}

fn bench(c: &mut Criterion) {
    let words = buffer();
    // SAFETY: reinterpreting the u64 words as bytes.
    let bytes: &[u8] =
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast::<u8>(), words.len() * 8) };
    // Both sides must see the same records before they are timed.
    let mut converter = TraceConverter::new();
    // SAFETY: the buffer's name pointers point at static strings; the buffer outlives the batch.
    let batch =
        unsafe { ActivityBatch::from_raw(bytes.as_ptr(), bytes.len(), RecordLayout::Cupti13_0) };
    let converted = batch
        .records()
        .filter_map(|r| r.ok().and_then(|a| converter.convert(&a)))
        .count();
    assert_eq!(converted, 2 * PAIRS, "every record converts");

    let mut g = c.benchmark_group("forward 1000 kernel + 1000 API records");
    g.throughput(Throughput::Elements(2 * PAIRS as u64));
    let mut out = Vec::with_capacity(1 << 20);
    g.bench_function("memcpy of the buffer", |b| {
        b.iter(|| {
            out.clear();
            out.extend_from_slice(black_box(bytes));
            black_box(out.len())
        })
    });
    g.bench_function("raw field reads", |b| {
        b.iter(|| {
            out.clear();
            raw_walk(black_box(bytes), &mut out);
            black_box(out.len())
        })
    });
    g.bench_function("crate decode only (walk, read the correlation id)", |b| {
        b.iter(|| {
            // SAFETY: as above.
            let batch = unsafe {
                ActivityBatch::from_raw(
                    black_box(bytes).as_ptr(),
                    bytes.len(),
                    RecordLayout::Cupti13_0,
                )
            };
            let mut sum = 0u64;
            for record in batch.records().flatten() {
                sum += u64::from(record.correlation_id().unwrap_or(0));
            }
            black_box(sum)
        })
    });
    let mut encoder = Encoder::new(&StreamHeader::new(1, 130_001, TimestampClock::Monotonic));
    g.bench_function("crate (decode, convert, encode)", |b| {
        b.iter(|| {
            encoder.clear();
            // SAFETY: as above.
            let batch = unsafe {
                ActivityBatch::from_raw(
                    black_box(bytes).as_ptr(),
                    bytes.len(),
                    RecordLayout::Cupti13_0,
                )
            };
            for activity in batch.records().flatten() {
                if let Some(r) = converter.convert_ref(&activity) {
                    encoder.push(r);
                }
            }
            black_box(encoder.bytes().len())
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
