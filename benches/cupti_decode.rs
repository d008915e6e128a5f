//! Decoding one CUPTI 13.0 activity buffer three ways, side by side in one criterion group:
//!
//! - **crate**: `ActivityBatch::records()`, matching on `Activity` and reading fields through the typed views;
//! - **raw**: the same walk written by hand over the bindgen structs (kind → size, then field reads);
//! - **vendor walk**: `cuptiActivityGetNextRecord` of the real CUPTI 13.0 library (wheel folder in
//!   `GPU_TOOLS_CUPTI_WHEEL_LIB`; left out when unset) stepping, with the same raw field reads.
//!
//! Each side sums the same fields of every record; the sums are checked equal before timing. The buffer holds
//! 8 MiB of a launch loop's records: per step a runtime and a driver API record, a kernel, and every fourth step
//! a memcpy and a memset.
//!
//! `cargo bench --bench cupti_decode`: criterion reports each side; a summary with the medians follows, and the
//! fastest of 300 interleaved runs of the crate and the raw reads (the medians move with the machine's load).

use std::hint::black_box;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gpu_tools::cupti::activity::{Activity, ActivityBatch, RecordLayout};
use gpu_tools::sys::cupti as sys;

const BUFFER: usize = 8 << 20;

/// A buffer of records as CUPTI 13.0 writes them, 8-aligned; returns the words and the valid length.
fn buffer() -> (Vec<u64>, usize) {
    let mut words: Vec<u64> = Vec::with_capacity(BUFFER / 8);
    let push = |words: &mut Vec<u64>, bytes: &[u8]| {
        debug_assert!(bytes.len() % 8 == 0);
        for c in bytes.chunks(8) {
            words.push(u64::from_le_bytes(c.try_into().unwrap_or_default()));
        }
    };
    fn as_bytes<T>(v: &T) -> &[u8] {
        // SAFETY: a plain C struct of the bindings, read as its bytes.
        unsafe { std::slice::from_raw_parts(std::ptr::from_ref(v).cast::<u8>(), size_of::<T>()) }
    }
    let name = c"_Z6kernelPfi";
    let mut step = 0u32;
    loop {
        let t = u64::from(step) * 1000;
        let corr = step * 2 + 1;
        let runtime = sys::CUpti_ActivityAPI {
            kind: sys::CUPTI_ACTIVITY_KIND_RUNTIME,
            cbid: 211,
            start: t,
            end: t + 400,
            processId: 1,
            threadId: 2,
            correlationId: corr,
            returnValue: 0,
        };
        let driver = sys::CUpti_ActivityAPI {
            kind: sys::CUPTI_ACTIVITY_KIND_DRIVER,
            cbid: 307,
            correlationId: corr + 1,
            start: t + 10,
            end: t + 390,
            ..runtime
        };
        // SAFETY: all-zero is a valid value of the plain C struct.
        let mut kernel: sys::CUpti_ActivityKernel10 = unsafe { std::mem::zeroed() };
        kernel.kind = sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
        kernel.start = t + 500;
        kernel.end = t + 900;
        kernel.deviceId = 0;
        kernel.contextId = 1;
        kernel.streamId = 7;
        kernel.correlationId = corr;
        kernel.gridX = 64;
        kernel.gridY = 1;
        kernel.gridZ = 1;
        kernel.blockX = 256;
        kernel.blockY = 1;
        kernel.blockZ = 1;
        kernel.name = name.as_ptr();
        let mut records: Vec<&[u8]> =
            vec![as_bytes(&runtime), as_bytes(&driver), as_bytes(&kernel)];
        // SAFETY: as above.
        let mut memcpy: sys::CUpti_ActivityMemcpy6 = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let mut memset: sys::CUpti_ActivityMemset4 = unsafe { std::mem::zeroed() };
        if step % 4 == 0 {
            memcpy.kind = sys::CUPTI_ACTIVITY_KIND_MEMCPY;
            memcpy.copyKind = 1;
            memcpy.bytes = 4096;
            memcpy.start = t + 100;
            memcpy.end = t + 200;
            memcpy.streamId = 7;
            memcpy.correlationId = corr;
            memset.kind = sys::CUPTI_ACTIVITY_KIND_MEMSET;
            memset.bytes = 1 << 20;
            memset.start = t + 200;
            memset.end = t + 300;
            memset.streamId = 7;
            memset.correlationId = corr;
            records.push(as_bytes(&memcpy));
            records.push(as_bytes(&memset));
        }
        let size: usize = records.iter().map(|r| r.len()).sum();
        if (words.len() * 8) + size > BUFFER {
            break;
        }
        for r in records {
            push(&mut words, r);
        }
        step += 1;
    }
    let len = words.len() * 8;
    (words, len)
}

/// Fields every side sums, by kind.
#[inline(always)]
fn crate_decode(batch: &ActivityBatch<'_>) -> u64 {
    let mut sum = 0u64;
    for r in batch.records() {
        sum = sum.wrapping_add(match r {
            Ok(Activity::Kernel(k)) => {
                let t = k.time();
                t.end - t.start
                    + u64::from(k.correlation_id() ^ k.stream_id())
                    + u64::from(k.grid().x)
            }
            Ok(Activity::Memcpy(m)) => {
                m.bytes() + m.time().end - m.time().start + u64::from(m.correlation_id())
            }
            Ok(Activity::Memset(m)) => {
                m.bytes() + m.time().end - m.time().start + u64::from(m.correlation_id())
            }
            Ok(Activity::Api(a)) => {
                a.time().end - a.time().start + u64::from(a.correlation_id() ^ a.raw().cbid)
            }
            _ => 1,
        });
    }
    sum
}

/// The same reads on a bindgen struct at `at`.
///
/// # Safety
/// `at` must hold a whole, 8-aligned record of `kind`.
#[inline(always)]
unsafe fn raw_fields(kind: u32, at: *const u8) -> u64 {
    // SAFETY: the caller's contract.
    unsafe {
        match kind {
            sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => {
                let k = &*at.cast::<sys::CUpti_ActivityKernel10>();
                k.end - k.start + u64::from(k.correlationId ^ k.streamId) + k.gridX as u64
            }
            sys::CUPTI_ACTIVITY_KIND_MEMCPY => {
                let m = &*at.cast::<sys::CUpti_ActivityMemcpy6>();
                m.bytes + m.end - m.start + u64::from(m.correlationId)
            }
            sys::CUPTI_ACTIVITY_KIND_MEMSET => {
                let m = &*at.cast::<sys::CUpti_ActivityMemset4>();
                m.bytes + m.end - m.start + u64::from(m.correlationId)
            }
            sys::CUPTI_ACTIVITY_KIND_DRIVER | sys::CUPTI_ACTIVITY_KIND_RUNTIME => {
                let a = &*at.cast::<sys::CUpti_ActivityAPI>();
                a.end - a.start + u64::from(a.correlationId ^ a.cbid)
            }
            _ => 1,
        }
    }
}

/// The hand-written walk: kind, size by kind, fields; no checks beyond the end of the valid bytes.
#[inline(always)]
fn raw_decode(base: *const u8, len: usize) -> u64 {
    let mut sum = 0u64;
    let mut off = 0;
    while off + 4 <= len {
        // SAFETY: inside the buffer, 8-aligned.
        let kind = unsafe { base.add(off).cast::<u32>().read() };
        let size = match kind {
            sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL => size_of::<sys::CUpti_ActivityKernel10>(),
            sys::CUPTI_ACTIVITY_KIND_MEMCPY => size_of::<sys::CUpti_ActivityMemcpy6>(),
            sys::CUPTI_ACTIVITY_KIND_MEMSET => size_of::<sys::CUpti_ActivityMemset4>(),
            _ => size_of::<sys::CUpti_ActivityAPI>(),
        };
        if off + size > len {
            break;
        }
        // SAFETY: a whole record of `kind` at an 8-aligned offset.
        sum = sum.wrapping_add(unsafe { raw_fields(kind, base.add(off)) });
        off += size;
    }
    sum
}

type NextRecord = unsafe extern "C" fn(*mut u8, usize, *mut *mut sys::CUpti_Activity) -> u32;

/// The vendor's walk with the raw field reads.
fn vendor_decode(next: NextRecord, base: *mut u8, len: usize) -> u64 {
    let mut sum = 0u64;
    let mut record: *mut sys::CUpti_Activity = std::ptr::null_mut();
    // SAFETY: `len` readable bytes at `base`; each returned record lies whole inside them.
    while unsafe { next(base, len, &mut record) } == 0 {
        // SAFETY: as above.
        let kind = unsafe { (*record).kind };
        // SAFETY: as above.
        sum = sum.wrapping_add(unsafe { raw_fields(kind, record.cast()) });
    }
    sum
}

/// Runs `f` as one criterion benchmark and returns the median of every timed call.
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

fn main() {
    let (mut words, len) = buffer();
    let base = words.as_mut_ptr().cast::<u8>();
    // SAFETY: the words hold `len` bytes of records whose only pointer (the kernel name) is a static string.
    let batch = unsafe { ActivityBatch::from_raw(base, len, RecordLayout::Cupti13_0) };
    let records = batch.count();
    let expected = raw_decode(base, len);
    assert_eq!(
        crate_decode(&batch),
        expected,
        "the crate and the raw reads agree"
    );
    // For instruction counts under cachegrind (deterministic where times are not): GPU_TOOLS_DECODE_ONLY=crate,
    // raw or setup runs one side 10 times (setup: none) and exits.
    if let Ok(side) = std::env::var("GPU_TOOLS_DECODE_ONLY") {
        let mut x = 0;
        for _ in 0..if side == "setup" { 0 } else { 10 } {
            x += if side == "crate" {
                crate_decode(&batch)
            } else {
                raw_decode(base, len)
            };
        }
        println!("{x}");
        return;
    }
    let vendor = std::env::var_os("GPU_TOOLS_CUPTI_WHEEL_LIB").map(|dir| {
        let path = PathBuf::from(dir).join("libcupti.so.13");
        // SAFETY: the vendor library; its initialisers need no driver.
        let lib =
            unsafe { libloading::Library::new(&path) }.expect("open the wheel's libcupti.so.13");
        // SAFETY: the header's signature.
        let next =
            *unsafe { lib.get::<NextRecord>(b"cuptiActivityGetNextRecord\0") }.expect("symbol");
        assert_eq!(
            vendor_decode(next, base, len),
            expected,
            "the vendor's walk agrees"
        );
        (lib, next)
    });
    let mut c = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut group = c.benchmark_group("cupti decode 8 MiB");
    group.throughput(Throughput::Elements(records as u64));
    let t_crate = bench(&mut group, "crate", || crate_decode(&batch));
    let t_raw = bench(&mut group, "raw bindgen reads", || raw_decode(base, len));
    let t_vendor = vendor.as_ref().map(|(_, next)| {
        bench(&mut group, "vendor walk", || {
            vendor_decode(*next, base, len)
        })
    });
    group.finish();
    // Criterion's medians move with the machine's load; the fastest of interleaved runs shows each side's cost
    // with the least interference.
    let mut best = [Duration::MAX; 2];
    for _ in 0..300 {
        let t = Instant::now();
        black_box(crate_decode(&batch));
        best[0] = best[0].min(t.elapsed());
        let t = Instant::now();
        black_box(raw_decode(base, len));
        best[1] = best[1].min(t.elapsed());
    }
    let per = |d: Duration| d.as_secs_f64() * 1e9 / records as f64;
    println!("\n{records} records in {len} bytes; median per buffer and per record:");
    println!(
        "  crate              {:>9.3} ms  {:>6.2} ns/record",
        t_crate.as_secs_f64() * 1e3,
        per(t_crate)
    );
    println!(
        "  raw bindgen reads  {:>9.3} ms  {:>6.2} ns/record",
        t_raw.as_secs_f64() * 1e3,
        per(t_raw)
    );
    match t_vendor {
        Some(t) => println!(
            "  vendor walk        {:>9.3} ms  {:>6.2} ns/record",
            t.as_secs_f64() * 1e3,
            per(t)
        ),
        None => println!("  vendor walk        (GPU_TOOLS_CUPTI_WHEEL_LIB unset)"),
    }
    println!(
        "  crate / raw        {:>9.2}x",
        t_crate.as_secs_f64() / t_raw.as_secs_f64()
    );
    println!(
        "fastest of 300 interleaved runs: crate {:.3} ms ({:.2} ns/record), raw {:.3} ms ({:.2} ns/record), \
         crate / raw {:.2}x",
        best[0].as_secs_f64() * 1e3,
        per(best[0]),
        best[1].as_secs_f64() * 1e3,
        per(best[1]),
        best[0].as_secs_f64() / best[1].as_secs_f64()
    );
}
