//! Save and restore through the crate's `Checkpoint`, through the raw `libcheckpoint.so` function pointers, and a
//! device-to-device memcpy of the same size, in one run on one context. Needs a CUDA GPU.
//!
//! `GPU_TOOLS_BENCH_GIB` picks the state sizes in GiB, comma-separated (default `1,8,32`; fractions allowed, e.g.
//! `0.25`). Device memory needed: about three times the largest size (state plus two checkpoints, then state
//! plus memcpy target). Every timed call is followed by `cuCtxSynchronize`, so each figure is the complete operation.
//! After criterion's report, a summary table gives medians, the crate/raw ratio and the ratio to memcpy.

use std::cell::RefCell;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput};
use gpu_tools::cuda::Context;
use gpu_tools::cupti::{Checkpoint, CheckpointLibrary};
use gpu_tools::sys::cupti::NV_Cupti_Checkpoint_CUpti_Checkpoint as RawCheckpoint;

const GIB: f64 = (1u64 << 30) as f64;

/// Per-iteration times of one benchmark, for the summary's medians.
#[derive(Default)]
struct Samples(RefCell<Vec<Duration>>);

impl Samples {
    /// Runs `op` `iters` times, each followed by `sync`, recording each iteration; returns the total.
    fn time(&self, iters: u64, mut op: impl FnMut(), sync: impl Fn()) -> Duration {
        let mut total = Duration::ZERO;
        let mut v = self.0.borrow_mut();
        for _ in 0..iters {
            let t = Instant::now();
            op();
            sync();
            let d = t.elapsed();
            v.push(d);
            total += d;
        }
        total
    }

    fn median_ms(&self) -> f64 {
        let mut v = self.0.borrow().clone();
        if v.is_empty() {
            return f64::NAN;
        }
        v.sort_unstable();
        v[v.len() / 2].as_secs_f64() * 1e3
    }
}

#[derive(Default)]
struct Row {
    label: String,
    memcpy: Samples,
    save_crate: Samples,
    save_raw: Samples,
    restore_crate: Samples,
    restore_raw: Samples,
    paired_save_crate: Samples,
    paired_save_raw: Samples,
    paired_restore_crate: Samples,
    paired_restore_raw: Samples,
}

/// Pairs of alternating crate/raw calls per operation and size.
const PAIRS: usize = 150;

fn sizes() -> Vec<(String, usize)> {
    let spec = std::env::var("GPU_TOOLS_BENCH_GIB").unwrap_or_else(|_| "1,8,32".into());
    spec.split(',')
        .map(|s| {
            let gib: f64 = s
                .trim()
                .parse()
                .expect("GPU_TOOLS_BENCH_GIB: numbers in GiB, comma-separated");
            (format!("{} GiB", s.trim()), (gib * GIB) as usize / 4 * 4)
        })
        .collect()
}

fn check(code: u32, what: &str) {
    assert_eq!(code, 0, "{what} returned {code}");
}

fn main() {
    let ctx = Context::primary(0).expect("CUDA context on device 0");
    let info = ctx.driver().device_info(0).expect("device info");
    let api = *ctx.driver().api();
    // Current for the whole run, so raw calls and the synchronisations need no push of their own.
    let _current = ctx.make_current().expect("make current");
    // SAFETY: the context is current on this thread for the whole run.
    let sync = || check(unsafe { (api.cu_ctx_synchronize)() }, "cuCtxSynchronize");
    let lib = CheckpointLibrary::load().expect("libcheckpoint.so");
    println!("device: {}, driver {:?}", info.name, ctx.driver().version());

    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(2))
        .configure_from_args();
    let mut rows = Vec::new();
    for (label, bytes) in sizes() {
        let row = Row {
            label: label.clone(),
            ..Row::default()
        };
        let mut state = ctx.alloc(bytes).expect("state buffer");
        state.fill_u32(0x5A5A_1234).expect("fill");
        let mut g = c.benchmark_group(format!("checkpoint {label}"));
        g.throughput(Throughput::Bytes(bytes as u64));

        // Both checkpoints stay alive for the whole size, so the crate and the raw calls can also be timed in
        // alternation (below): the vendor's save time drifts between runs by more than the 1% asked of the crate.
        let mut cp = Checkpoint::builder(&ctx)
            .allow_overwrite(true)
            .build()
            .expect("checkpoint");
        cp.save().expect("first save");
        let mut raw = Box::new(RawCheckpoint {
            structSize: 48,
            ctx: ctx.as_raw(),
            allowOverwrite: 1,
            ..RawCheckpoint::default()
        });
        let call = |f: gpu_tools::cupti::CheckpointFn, raw: &mut RawCheckpoint, what: &str| {
            // SAFETY: driver initialised, context alive and current, complete struct with an explicit
            // context, boxed so its address is stable.
            let code = unsafe { f(raw) };
            check(code, what)
        };
        call(lib.save, &mut raw, "first raw save");
        g.bench_function("save/crate", |b| {
            b.iter_custom(|n| row.save_crate.time(n, || cp.save().expect("save"), sync))
        });
        g.bench_function("save/raw", |b| {
            b.iter_custom(|n| {
                row.save_raw
                    .time(n, || call(lib.save, &mut raw, "save"), sync)
            })
        });
        g.bench_function("restore/crate", |b| {
            b.iter_custom(|n| {
                row.restore_crate
                    .time(n, || cp.restore().expect("restore"), sync)
            })
        });
        g.bench_function("restore/raw", |b| {
            b.iter_custom(|n| {
                row.restore_raw
                    .time(n, || call(lib.restore, &mut raw, "restore"), sync)
            })
        });
        // Paired: crate and raw back to back on the same vendor checkpoint (the raw call gets the crate's own
        // struct), the order alternating each pair, so vendor state and drift are the same for both.
        let shared = cp.as_mut_ptr();
        // SAFETY: the pointer stays valid while `cp` lives; cp is only used through its own methods in between,
        // never concurrently, and the raw calls neither free it nor change its options.
        let call_shared =
            |f: gpu_tools::cupti::CheckpointFn, what: &str| check(unsafe { f(shared) }, what);
        for i in 0..PAIRS {
            let crate_first = i % 2 == 0;
            for turn in 0..2 {
                if (turn == 0) == crate_first {
                    row.paired_save_crate
                        .time(1, || cp.save().expect("save"), sync);
                } else {
                    row.paired_save_raw
                        .time(1, || call_shared(lib.save, "save"), sync);
                }
            }
        }
        for i in 0..PAIRS {
            let crate_first = i % 2 == 0;
            for turn in 0..2 {
                if (turn == 0) == crate_first {
                    row.paired_restore_crate
                        .time(1, || cp.restore().expect("restore"), sync);
                } else {
                    row.paired_restore_raw
                        .time(1, || call_shared(lib.restore, "restore"), sync);
                }
            }
        }
        cp.free().expect("free");
        call(lib.free, &mut raw, "free");
        {
            let dst = ctx.alloc(bytes).expect("memcpy target");
            let (to, from) = (dst.device_ptr(), state.device_ptr());
            g.bench_function("memcpy", |b| {
                b.iter_custom(|n| {
                    row.memcpy.time(
                        n,
                        || {
                            // SAFETY: both allocations hold `bytes` bytes; the context is current.
                            let copied = unsafe { (api.cu_memcpy_dtod)(to, from, bytes) };
                            check(copied, "cuMemcpyDtoD")
                        },
                        sync,
                    )
                })
            });
        }
        g.finish();
        rows.push(row);
    }

    print_summary(&info.name, &rows);
}

/// The summary tables after criterion's report: medians, the crate/raw ratio and the ratio to memcpy; then the
/// paired runs.
fn print_summary(device: &str, rows: &[Row]) {
    println!(
        "\nsummary on {} (medians, ms; ratios crate/raw and to memcpy)",
        device
    );
    println!(
        "| state | memcpy | save crate | save raw | crate/raw | save/memcpy | restore crate | restore raw | crate/raw | restore/memcpy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for r in rows {
        let (m, sc, sr, rc, rr) = (
            r.memcpy.median_ms(),
            r.save_crate.median_ms(),
            r.save_raw.median_ms(),
            r.restore_crate.median_ms(),
            r.restore_raw.median_ms(),
        );
        println!(
            "| {} | {m:.3} | {sc:.3} | {sr:.3} | {:.4} | {:.3} | {rc:.3} | {rr:.3} | {:.4} | {:.3} |",
            r.label,
            sc / sr,
            sc / m,
            rc / rr,
            rc / m
        );
    }
    println!(
        "\npaired on one vendor checkpoint (crate and raw alternating, {PAIRS} pairs each; medians, ms)"
    );
    println!(
        "| state | save crate | save raw | crate/raw | restore crate | restore raw | crate/raw |"
    );
    println!("|---|---|---|---|---|---|---|");
    for r in rows {
        let (sc, sr, rc, rr) = (
            r.paired_save_crate.median_ms(),
            r.paired_save_raw.median_ms(),
            r.paired_restore_crate.median_ms(),
            r.paired_restore_raw.median_ms(),
        );
        println!(
            "| {} | {sc:.3} | {sr:.3} | {:.4} | {rc:.3} | {rr:.3} | {:.4} |",
            r.label,
            sc / sr,
            rc / rr
        );
    }
}
