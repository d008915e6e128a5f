//! Whole-process checkpoint through the driver, on a GPU host, in one run:
//!
//! 1. criterion, side by side: the cheap calls raw (function pointers from `DriverApi`) and through the crate
//!    (`ProcessCheckpoint::state`, `current_state`, `lock` + `unlock` on a handle), then crate and raw alternating
//!    on one target, so drift hits both alike;
//! 2. a table: checkpoint and restore of a `debuggee_memory` target holding 1, 8 and 32 GiB, against a copy of the
//!    same size between device memory and pinned host memory (the host link, the physical limit), one cold
//!    round and warm rounds each.
//!
//! `GPU_TOOLS_BENCH_GIB` sets the sizes (default `1,8,32`), `GPU_TOOLS_BENCH_ROUNDS` the warm rounds (default 2).
//! Run with `--bench` (`bash .gpu/run.sh bench process_checkpoint --bench`); the debuggee is found next to the
//! bench (`$GPU_STAGE_BIN/example-debuggee_memory`, or `target/release/examples/debuggee_memory`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use criterion::Criterion;
use gpu_tools::cuda::process::ProcessCheckpoint;
use gpu_tools::cuda::{Context, Driver, DriverApi};
use gpu_tools::sys::cuda_driver as sys;
use gpu_tools_testing::process::Debuggee;

const GIB: f64 = (1u64 << 30) as f64;
const LOCK_TIMEOUT: Duration = Duration::from_secs(60);
const PAIRS: usize = 200;

fn debuggee_path() -> PathBuf {
    gpu_tools_testing::example("debuggee_memory")
}

fn env_list(name: &str, default: &str) -> Vec<f64> {
    std::env::var(name)
        .unwrap_or_else(|_| default.into())
        .split(',')
        .map(|s| {
            s.trim()
                .parse()
                .unwrap_or_else(|_| panic!("{name}: numbers, comma-separated"))
        })
        .collect()
}

fn check(code: u32, what: &str) {
    assert_eq!(code, 0, "{what} returned {code}");
}

fn raw_state(api: &DriverApi, pid: i32) -> u32 {
    let mut s = 0;
    let f = api
        .cu_checkpoint_process_get_state
        .expect("cuCheckpointProcessGetState");
    // SAFETY: header signature, valid out-pointer.
    check(unsafe { f(pid, &mut s) }, "cuCheckpointProcessGetState");
    s
}

fn raw_lock_unlock(api: &DriverApi, pid: i32) {
    let lock = api.cu_checkpoint_process_lock.expect("lock");
    let unlock = api.cu_checkpoint_process_unlock.expect("unlock");
    let mut l = sys::CUcheckpointLockArgs {
        timeoutMs: LOCK_TIMEOUT.as_millis() as u32,
        ..Default::default()
    };
    let mut u = sys::CUcheckpointUnlockArgs::default();
    // SAFETY: header signatures; zeroed argument blocks with a timeout.
    check(unsafe { lock(pid, &mut l) }, "cuCheckpointProcessLock");
    // SAFETY: as above.
    check(unsafe { unlock(pid, &mut u) }, "cuCheckpointProcessUnlock");
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn secs(t: Instant) -> f64 {
    t.elapsed().as_secs_f64()
}

/// Cold (first) and warm (median of the rest) times of one operation, in seconds.
#[derive(Default)]
struct Rounds(Vec<f64>);

impl Rounds {
    fn cold(&self) -> f64 {
        self.0.first().copied().unwrap_or(f64::NAN)
    }
    fn warm(&self) -> f64 {
        median(&mut self.0.get(1..).unwrap_or_default().to_vec())
    }
    fn cell(&self, bytes: f64, warm: bool) -> String {
        let s = if warm { self.warm() } else { self.cold() };
        format!("{:.1} ms ({:.2} GB/s)", s * 1e3, bytes / s / 1e9)
    }
}

struct SizeRow {
    gib: f64,
    pin_alloc_s: f64,
    d2h: Rounds,
    h2d: Rounds,
    lock: Rounds,
    checkpoint: Rounds,
    restore: Rounds,
    unlock: Rounds,
}

fn progress(gib: f64, what: &str, s: f64) {
    eprintln!("[{gib} GiB] {what}: {:.1} ms", s * 1e3);
}

/// Copies between a device buffer and pinned host memory of `bytes`, one cold round and `warm` more.
fn copies(ctx: &Context, bytes: usize, warm: usize, row: &mut SizeRow) {
    let api = *ctx.driver().api();
    let (alloc_host, free_host) = (
        api.cu_mem_alloc_host.expect("cuMemAllocHost"),
        api.cu_mem_free_host.expect("cuMemFreeHost"),
    );
    let mut dev = ctx.alloc(bytes).expect("device buffer");
    dev.fill_u32(0x5A5A_1234).expect("fill");
    let _current = ctx.make_current().expect("current");
    let mut host = std::ptr::null_mut();
    let t = Instant::now();
    // SAFETY: the context is current; valid out-pointer.
    check(unsafe { alloc_host(&mut host, bytes) }, "cuMemAllocHost");
    row.pin_alloc_s = secs(t);
    progress(row.gib, "pinned host allocation", row.pin_alloc_s);
    for round in 0..=warm {
        let t = Instant::now();
        // SAFETY: both allocations hold `bytes`; the context is current; the copy is synchronous.
        check(
            unsafe { (api.cu_memcpy_dtoh)(host, dev.device_ptr(), bytes) },
            "cuMemcpyDtoH",
        );
        row.d2h.0.push(secs(t));
        progress(
            row.gib,
            &format!("round {round}: device to pinned host"),
            secs(t),
        );
        let t = Instant::now();
        // SAFETY: as above.
        check(
            unsafe { (api.cu_memcpy_htod)(dev.device_ptr(), host, bytes) },
            "cuMemcpyHtoD",
        );
        row.h2d.0.push(secs(t));
        progress(
            row.gib,
            &format!("round {round}: pinned host to device"),
            secs(t),
        );
    }
    // SAFETY: allocated above, freed once.
    check(unsafe { free_host(host) }, "cuMemFreeHost");
}

/// Lock, checkpoint, restore, unlock of a target holding `gib`, one cold round and `warm` more.
fn process_rounds(gib: f64, warm: usize, row: &mut SizeRow) {
    let mut d = Debuggee::start(
        &debuggee_path(),
        &["--gib", &gib.to_string(), "--interval-ms", "1000"],
    );
    let mut running = ProcessCheckpoint::attach(d.pid()).expect("attach");
    for round in 0..=warm {
        let t = Instant::now();
        let locked = running.lock(LOCK_TIMEOUT).expect("lock");
        row.lock.0.push(secs(t));
        let t = Instant::now();
        let saved = locked.checkpoint().expect("checkpoint");
        row.checkpoint.0.push(secs(t));
        progress(gib, &format!("round {round}: checkpoint"), secs(t));
        let t = Instant::now();
        let locked = saved.restore().expect("restore");
        row.restore.0.push(secs(t));
        progress(gib, &format!("round {round}: restore"), secs(t));
        let t = Instant::now();
        running = locked.unlock().expect("unlock");
        row.unlock.0.push(secs(t));
    }
    drop(running);
    d.assert_intact();
}

fn main() {
    let driver = Driver::load().expect("CUDA driver");
    driver.init().expect("cuInit");
    let info = driver.device_info(0).expect("device 0");
    let version = driver.version().unwrap_or(0);
    println!("device: {}, CUDA driver API {version}", info.name);
    let api = *driver.api();

    // 1. The cheap calls, raw and through the crate.
    let mut idle = Debuggee::start(
        &debuggee_path(),
        &["--gib", "0.0625", "--interval-ms", "1000"],
    );
    let pid = idle.pid();
    let raw_pid = pid as i32;
    let mut c = Criterion::default()
        .sample_size(50)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(3))
        .configure_from_args();
    let mut slot = Some(ProcessCheckpoint::attach(pid).expect("attach"));
    {
        let mut g = c.benchmark_group("process checkpoint calls");
        g.bench_function("get_state/raw", |b| b.iter(|| raw_state(&api, raw_pid)));
        g.bench_function("get_state/crate", |b| {
            b.iter(|| ProcessCheckpoint::state(pid).expect("state"))
        });
        g.bench_function("get_state/handle", |b| {
            let h = slot.as_ref().expect("handle");
            b.iter(|| h.current_state().expect("state"))
        });
        g.bench_function("lock+unlock/raw", |b| {
            b.iter(|| raw_lock_unlock(&api, raw_pid))
        });
        g.bench_function("lock+unlock/crate", |b| {
            b.iter(|| {
                let h = slot.take().expect("handle");
                slot = Some(
                    h.lock(LOCK_TIMEOUT)
                        .expect("lock")
                        .unlock()
                        .expect("unlock"),
                );
            })
        });
        g.finish();
    }
    let (mut crate_us, mut raw_us) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        for turn in 0..2 {
            let t = Instant::now();
            if (turn == 0) == (i % 2 == 0) {
                let h = slot.take().expect("handle");
                slot = Some(
                    h.lock(LOCK_TIMEOUT)
                        .expect("lock")
                        .unlock()
                        .expect("unlock"),
                );
                crate_us.push(secs(t) * 1e6);
            } else {
                raw_lock_unlock(&api, raw_pid);
                raw_us.push(secs(t) * 1e6);
            }
        }
    }
    let (mut crate_state, mut raw_state_us) = (Vec::new(), Vec::new());
    for i in 0..PAIRS {
        for turn in 0..2 {
            let t = Instant::now();
            if (turn == 0) == (i % 2 == 0) {
                ProcessCheckpoint::state(pid).expect("state");
                crate_state.push(secs(t) * 1e6);
            } else {
                raw_state(&api, raw_pid);
                raw_state_us.push(secs(t) * 1e6);
            }
        }
    }
    drop(slot);
    idle.assert_intact();
    let (lc, lr) = (median(&mut crate_us), median(&mut raw_us));
    let (sc, sr) = (median(&mut crate_state), median(&mut raw_state_us));
    println!(
        "\ncrate and raw alternating on one target ({PAIRS} pairs each; medians, us) on {}",
        info.name
    );
    println!("| call | crate | raw | crate/raw |");
    println!("|---|---|---|---|");
    println!("| get state | {sc:.1} | {sr:.1} | {:.3} |", sc / sr);
    println!("| lock + unlock | {lc:.1} | {lr:.1} | {:.3} |", lc / lr);

    // 2. Checkpoint and restore against the host link.
    let warm = env_list("GPU_TOOLS_BENCH_ROUNDS", "2")
        .first()
        .map_or(2, |&n| n as usize);
    let ctx = Context::primary(0).expect("context on device 0");
    let mut rows = Vec::new();
    for gib in env_list("GPU_TOOLS_BENCH_GIB", "1,8,32") {
        let bytes = (gib * GIB) as usize / 4 * 4;
        let mut row = SizeRow {
            gib,
            pin_alloc_s: 0.0,
            d2h: Rounds::default(),
            h2d: Rounds::default(),
            lock: Rounds::default(),
            checkpoint: Rounds::default(),
            restore: Rounds::default(),
            unlock: Rounds::default(),
        };
        copies(&ctx, bytes, warm, &mut row);
        process_rounds(gib, warm, &mut row);
        rows.push(row);
    }
    println!(
        "\nprocess checkpoint against the host link on {} (cold = first round, warm = median of {warm} more)",
        info.name
    );
    println!(
        "| size | round | device -> pinned host | checkpoint | pinned host -> device | restore | lock | unlock |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for r in &rows {
        let b = r.gib * GIB;
        for (label, w) in [("cold", false), ("warm", true)] {
            let small = |x: &Rounds| format!("{:.2} ms", if w { x.warm() } else { x.cold() } * 1e3);
            println!(
                "| {} GiB | {label} | {} | {} | {} | {} | {} | {} |",
                r.gib,
                r.d2h.cell(b, w),
                r.checkpoint.cell(b, w),
                r.h2d.cell(b, w),
                r.restore.cell(b, w),
                small(&r.lock),
                small(&r.unlock)
            );
        }
    }
    for r in &rows {
        println!(
            "pinned allocation of {} GiB: {:.1} ms",
            r.gib,
            r.pin_alloc_s * 1e3
        );
    }
}
