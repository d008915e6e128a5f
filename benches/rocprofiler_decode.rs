//! Decoding a full buffer half in Rust (one pass over the record headers) against stepping through it with the
//! vendor's `rocprofiler_next_record`, one call per record, both on the same half in the same callback, against
//! the C double (`gpu-tools-testing/doubles/rocprofiler_double.c`, whose `next_record` takes the library lock per call as
//! the vendor's does).
//!
//! `cargo bench --bench rocprofiler_decode`: criterion reports each side; a summary table follows with the
//! medians and the speed-up.

use std::hint::black_box;
use std::mem::offset_of;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gpu_tools::rocprofiler::{
    Batch, Filter, ProfilingSession, Record, Rocprofiler, RocprofilerLibrary,
};
use gpu_tools::sys::rocprofiler as sys;

type NextRecord = unsafe extern "C" fn(
    *const sys::rocprofiler_record_header_t,
    *mut *const sys::rocprofiler_record_header_t,
    sys::rocprofiler_session_id_t,
    sys::rocprofiler_buffer_id_t,
) -> i32;
type Emit = unsafe extern "C" fn(
    u32,
    *const std::ffi::c_void,
    usize,
    *const std::ffi::c_void,
    usize,
    usize,
) -> i32;

const HALF: usize = 1 << 20;

struct Row {
    name: &'static str,
    records: usize,
    rust: Duration,
    vendor: Duration,
}

/// Runs `f` as one criterion benchmark and returns the median time of one call over every timed call.
fn bench(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    id: &str,
    mut f: impl FnMut() -> u64,
) -> Duration {
    let mut times = Vec::new();
    group.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let t = Instant::now();
                black_box(f());
                let d = t.elapsed();
                times.push(d);
                total += d;
            }
            total
        })
    });
    times.sort_unstable();
    times.get(times.len() / 2).copied().unwrap_or_default()
}

/// Decoding in Rust and the `next_record` loop, side by side in one criterion group, inside the callback (the
/// only place the records are valid).
fn measure(
    batch: &Batch<'_>,
    next: NextRecord,
    session: u64,
    buffer: u64,
    name: &'static str,
) -> Row {
    let records = batch.records().count();
    let mut c = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(200))
        .measurement_time(Duration::from_secs(1))
        .configure_from_args();
    let mut group = c.benchmark_group(name);
    group.throughput(Throughput::Elements(records as u64));
    let rust_decode = || {
        let mut sum = 0u64;
        for r in batch.records() {
            match r {
                Ok(Record::Profiler(p)) => {
                    sum = sum.wrapping_add(p.id());
                    for c in p.counters() {
                        sum = sum.wrapping_add(c.value as u64);
                    }
                }
                Ok(Record::Tracer(t)) => {
                    sum =
                        sum.wrapping_add(t.id() + t.name().map_or(0, |n| n.to_bytes().len() as u64))
                }
                Ok(other) => sum = sum.wrapping_add(other.id()),
                Err(_) => sum += 1,
            }
        }
        sum
    };
    let range = batch.as_ptr_range();
    let vendor_loop = || {
        let mut sum = 0u64;
        let mut p = range.start.cast::<sys::rocprofiler_record_header_t>();
        let end = range.end.cast::<sys::rocprofiler_record_header_t>();
        while p < end {
            // The same reading as on the Rust side: id, counter values, name length.
            // SAFETY: inside the callback, p is a record of its kind inside the half, pointers patched.
            unsafe {
                sum = sum.wrapping_add((*p).id.handle);
                match (*p).kind {
                    sys::ROCPROFILER_PROFILER_RECORD => {
                        let r = &*p.cast::<sys::rocprofiler_record_profiler_t>();
                        for i in 0..r.counters_count.value as usize {
                            sum = sum.wrapping_add((*r.counters.add(i)).value.value as u64);
                        }
                    }
                    sys::ROCPROFILER_TRACER_RECORD => {
                        let r = &*p.cast::<sys::rocprofiler_record_tracer_t>();
                        if !r.name.is_null() {
                            sum = sum.wrapping_add(
                                std::ffi::CStr::from_ptr(r.name).to_bytes().len() as u64,
                            );
                        }
                    }
                    _ => {}
                }
            }
            let mut n = std::ptr::null();
            // SAFETY: valid record, out-pointer, session and buffer of this callback.
            let st = unsafe {
                next(
                    p,
                    &mut n,
                    sys::rocprofiler_session_id_t { handle: session },
                    sys::rocprofiler_buffer_id_t { value: buffer },
                )
            };
            if st != 0 {
                break;
            }
            p = n;
        }
        sum
    };
    // Both sides read the same fields; a decoder that failed or skipped records would not reach the same sum.
    assert_eq!(
        rust_decode(),
        vendor_loop(),
        "{name}: Rust decode and next_record loop disagree"
    );
    let rust = bench(&mut group, "rust decode", rust_decode);
    let vendor = bench(&mut group, "next_record loop", vendor_loop);
    group.finish();
    Row {
        name,
        records,
        rust,
        vendor,
    }
}

fn main() {
    let path = gpu_tools_testing::double_path("rocprofiler_double");
    let lib = RocprofilerLibrary::load_from(&path).expect("load the double");
    // SAFETY: the same file; symbol types as in the C double.
    let controls = unsafe { libloading::Library::new(&path) }.expect("open the double");
    // SAFETY: as above.
    let next: NextRecord = unsafe { *controls.get(b"rocprofiler_next_record\0").unwrap() };
    // SAFETY: as above.
    let emit: Emit = unsafe { *controls.get(b"rpd_emit\0").unwrap() };
    // SAFETY: the double needs no driver.
    let rp = unsafe { Rocprofiler::initialize_unchecked(lib) }.expect("initialise");

    let rows: Arc<Mutex<Vec<Row>>> = Arc::default();
    let ids: Arc<Mutex<(u64, u64, &'static str)>> = Arc::new(Mutex::new((0, 0, "")));
    let session = ProfilingSession::new(&rp).unwrap();
    let (r2, i2) = (Arc::clone(&rows), Arc::clone(&ids));
    let buffer = session
        .create_buffer(HALF, move |batch| {
            let (s, b, name) = *i2.lock().unwrap();
            if !batch.is_empty() {
                r2.lock().unwrap().push(measure(batch, next, s, b, name));
            }
        })
        .unwrap();
    *ids.lock().unwrap() = (session.id(), buffer.id(), "");
    session
        .add_filter(Filter::dispatch_timestamps(), &buffer)
        .unwrap();
    session.start().unwrap();

    let fill = |name: &'static str, make: &dyn Fn(u64) -> (Vec<u8>, Vec<u8>, usize)| {
        ids.lock().unwrap().2 = name;
        // Fill one half to the byte, then let the flush hand it over.
        let mut used = 0usize;
        for id in 0.. {
            let (rec, data, off) = make(id);
            if used + rec.len() + data.len() > HALF {
                break;
            }
            used += rec.len() + data.len();
            // SAFETY: record bytes and data are readable for their lengths.
            let st = unsafe {
                emit(
                    sys::ROCPROFILER_DISPATCH_TIMESTAMPS_COLLECTION,
                    rec.as_ptr().cast(),
                    rec.len(),
                    if data.is_empty() {
                        std::ptr::null()
                    } else {
                        data.as_ptr().cast()
                    },
                    data.len(),
                    off,
                )
            };
            assert_eq!(st, 0);
        }
        buffer.flush().unwrap();
    };
    fill("profiler, 4 counters", &|id| {
        let mut rec = sys::rocprofiler_record_profiler_t::default();
        rec.header.id.handle = id;
        rec.counters_count.value = 4;
        let data: Vec<u8> = (0..4u64)
            .flat_map(|i| [i.to_ne_bytes(), (id as f64).to_ne_bytes()])
            .flatten()
            .collect();
        (
            as_bytes(&rec),
            data,
            offset_of!(sys::rocprofiler_record_profiler_t, counters),
        )
    });
    fill("profiler, timestamps only", &|id| {
        let mut rec = sys::rocprofiler_record_profiler_t::default();
        rec.header.id.handle = id;
        (as_bytes(&rec), Vec::new(), 0)
    });
    fill("tracer with names", &|id| {
        let mut rec = sys::rocprofiler_record_tracer_t::default();
        rec.header.kind = sys::ROCPROFILER_TRACER_RECORD;
        rec.header.id.handle = id;
        (
            as_bytes(&rec),
            b"hipLaunchKernel\0".to_vec(),
            offset_of!(sys::rocprofiler_record_tracer_t, name),
        )
    });
    session.terminate().unwrap();
    drop(buffer);
    drop(session);

    println!(
        "| half of {} KiB | records | Rust decode | next_record loop | speed-up |",
        HALF >> 10
    );
    println!("|---|---|---|---|---|");
    let mut ok = true;
    for r in rows.lock().unwrap().iter() {
        let speedup = r.vendor.as_secs_f64() / r.rust.as_secs_f64();
        ok &= speedup >= 5.0;
        println!(
            "| {} | {} | {:.1} µs ({:.2} ns/record) | {:.1} µs ({:.2} ns/record) | {:.1}x |",
            r.name,
            r.records,
            r.rust.as_secs_f64() * 1e6,
            r.rust.as_secs_f64() * 1e9 / r.records as f64,
            r.vendor.as_secs_f64() * 1e6,
            r.vendor.as_secs_f64() * 1e9 / r.records as f64,
            speedup
        );
    }
    println!(
        "criterion medians of one pass over the half; bar 5x: {}",
        if ok { "met" } else { "NOT met" }
    );
}

fn as_bytes<T: Copy>(v: &T) -> Vec<u8> {
    // SAFETY: a plain C struct viewed as its bytes (padding bytes were zeroed by Default).
    unsafe { std::slice::from_raw_parts((v as *const T).cast::<u8>(), size_of::<T>()) }.to_vec()
}
