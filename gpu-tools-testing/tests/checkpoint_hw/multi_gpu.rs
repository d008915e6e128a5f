//! Checkpoints across two GPUs (feature `nvidia-hw-tests`): `cupti::Checkpoint` of a context on each device,
//! saved and restored independently, and `ProcessCheckpoint` of a process that uses both devices.
//!
//! Every test here is `#[ignore]`d, so a run on a one-GPU host skips them; on a two-GPU host run them with
//! `--ignored --test-threads=1 --nocapture`. With fewer than two GPUs they fail, saying so.
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::cudbg as cudbg_common;
use gpu_tools_testing::kernels as checkpoint_common;

use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use checkpoint_common::{download, first_difference, pattern};
use gpu_tools::cuda::process::{GpuPair, ProcessCheckpoint, ProcessState};
use gpu_tools::cuda::{Context, DeviceBuffer, Driver};
use gpu_tools::cupti::Checkpoint;
use gpu_tools_testing::gpu_memory::{GpuMemory, ProcessMemory, mib};
use gpu_tools_testing::process::{Debuggee, OrPanic};

const MIB: usize = 1 << 20;
const GIB: u64 = 1 << 30;
const LOCK_TIMEOUT: Duration = Duration::from_secs(10);

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn two_gpus() {
    let driver = Driver::load().expect("CUDA driver");
    let n = driver.device_count().expect("device count");
    assert!(n >= 2, "these tests need two GPUs; this host has {n}");
    for i in 0..2 {
        let info = driver.device_info(i).unwrap();
        let uuid = driver.device_uuid(i).unwrap();
        eprintln!("device {i}: {} {uuid}", info.name);
    }
}

fn upload<'c>(ctx: &'c Context, bytes: &[u8]) -> DeviceBuffer<'c> {
    let mut buf = ctx.alloc(bytes.len()).expect("alloc");
    buf.copy_from_host(bytes).expect("upload");
    buf
}

fn assert_same(actual: &[u8], expected: &[u8], what: &str) {
    if let Some(i) = first_difference(actual, expected) {
        panic!("{what}: first difference at byte {i} of {}", expected.len());
    }
}

#[test]
#[ignore = "needs two GPUs: run with --ignored on a two-GPU host"]
fn cupti_checkpoints_on_two_devices_are_independent() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    two_gpus();
    let (ctx0, ctx1) = (Context::create(0).unwrap(), Context::create(1).unwrap());
    let (saved0, saved1) = (pattern(256 * MIB, 100), pattern(256 * MIB, 101));
    let (mut buf0, mut buf1) = (upload(&ctx0, &saved0), upload(&ctx1, &saved1));
    let (free0, _) = ctx0.memory_info().unwrap();
    let (free1, _) = ctx1.memory_info().unwrap();
    let mut cp0 = Checkpoint::new(&ctx0).unwrap();
    let mut cp1 = Checkpoint::new(&ctx1).unwrap();
    cp0.save().unwrap();
    let (free0_saved, _) = ctx0.memory_info().unwrap();
    let (free1_after_0, _) = ctx1.memory_info().unwrap();
    eprintln!(
        "save on device 0: device 0 free {} -> {} MiB, device 1 free {} -> {} MiB",
        free0 / MIB,
        free0_saved / MIB,
        free1 / MIB,
        free1_after_0 / MIB
    );
    assert!(
        free1.abs_diff(free1_after_0) < 64 * MIB,
        "device 0's checkpoint left device 1's memory alone"
    );
    cp1.save().unwrap();

    buf0.fill_u32(0xAAAA_AAAA).unwrap();
    buf1.fill_u32(0xBBBB_BBBB).unwrap();
    let overwritten1 = download(&buf1);
    cp0.restore().or_panic("restore");
    assert_same(&download(&buf0), &saved0, "device 0 after its restore");
    assert_same(
        &download(&buf1),
        &overwritten1,
        "device 1 untouched by device 0's restore",
    );

    let changed0 = pattern(256 * MIB, 102);
    buf0.copy_from_host(&changed0).unwrap();
    cp1.restore().or_panic("restore");
    assert_same(&download(&buf1), &saved1, "device 1 after its restore");
    assert_same(
        &download(&buf0),
        &changed0,
        "device 0 untouched by device 1's restore",
    );

    // Both at once, from two threads.
    buf0.fill_u32(1).unwrap();
    buf1.fill_u32(2).unwrap();
    std::thread::scope(|s| {
        let a = s.spawn(|| cp0.restore());
        let b = s.spawn(|| cp1.restore());
        a.join().unwrap().unwrap();
        b.join().unwrap().unwrap();
    });
    assert_same(
        &download(&buf0),
        &saved0,
        "device 0 after concurrent restores",
    );
    assert_same(
        &download(&buf1),
        &saved1,
        "device 1 after concurrent restores",
    );
    cp0.free().unwrap();
    cp1.free().unwrap();
}

fn start_two_device_debuggee(gib: &str) -> Debuggee {
    Debuggee::start(
        &cudbg_common::example("debuggee_memory"),
        &["--gib", gib, "--devices", "0,1", "--interval-ms", "20"],
    )
}

/// The target's memory on CUDA devices 0 and 1 (nvidia-smi's entries matched by UUID).
fn held_on_both(mem: &GpuMemory, pid: u32, label: &str) -> [(u64, ProcessMemory); 2] {
    let s = mem.snapshot(pid).expect("nvidia-smi snapshot");
    let driver = Driver::load().unwrap();
    [0, 1].map(|ordinal| {
        let uuid = driver.device_uuid(ordinal).unwrap().to_string();
        let d = s
            .iter()
            .find(|d| d.uuid.eq_ignore_ascii_case(&uuid))
            .unwrap_or_else(|| panic!("nvidia-smi lists no device with {uuid}"));
        eprintln!(
            "  memory {label}: device {ordinal} used {} of {} MiB; process {pid}: {:?}",
            mib(d.used),
            mib(d.total),
            d.process
        );
        (d.used, d.process)
    })
}

#[test]
#[ignore = "needs two GPUs: run with --ignored on a two-GPU host"]
fn process_checkpoint_of_a_target_on_two_devices() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    two_gpus();
    let mem = GpuMemory::open().unwrap_or_else(|e| panic!("{e}"));
    let gib = 2u64;
    let bytes = gib * GIB;
    let mut d = start_two_device_debuggee(&gib.to_string());
    let pid = d.pid();
    d.wait_check_after(1, Duration::from_secs(60));
    let before = held_on_both(&mem, pid, "running");
    for (i, (_, p)) in before.iter().enumerate() {
        assert!(
            matches!(p, ProcessMemory::Used(b) if *b >= bytes),
            "device {i}: {p:?}"
        );
    }
    let t = Instant::now();
    let saved = ProcessCheckpoint::attach(pid)
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .unwrap_or_else(|f| panic!("lock: {f}"))
        .checkpoint()
        .unwrap_or_else(|f| panic!("checkpoint: {f}"));
    let checkpoint_ms = t.elapsed().as_secs_f64() * 1e3;
    assert_eq!(
        ProcessCheckpoint::state(pid).unwrap(),
        ProcessState::Checkpointed
    );
    let after = held_on_both(&mem, pid, "checkpointed");
    for i in 0..2 {
        let freed = before[i].0.saturating_sub(after[i].0);
        eprintln!("  device {i}: {} MiB freed", mib(freed));
        assert!(
            matches!(after[i].1, ProcessMemory::Absent | ProcessMemory::Used(0)),
            "device {i}"
        );
        assert!(freed >= bytes * 9 / 10, "device {i}: {freed} bytes freed");
    }
    let t = Instant::now();
    let locked = saved.restore().unwrap_or_else(|f| panic!("restore: {f}"));
    let restore_ms = t.elapsed().as_secs_f64() * 1e3;
    let restored = held_on_both(&mem, pid, "restored");
    for (i, (_, p)) in restored.iter().enumerate() {
        assert!(
            matches!(p, ProcessMemory::Used(b) if *b >= bytes),
            "device {i} after restore: {p:?}"
        );
    }
    let checks = d.last_check();
    locked.unlock().or_panic("unlock");
    d.wait_check_after(checks, Duration::from_secs(60));
    eprintln!(
        "summary: 2 x {gib} GiB on two devices, lock+checkpoint {checkpoint_ms:.1} ms, restore {restore_ms:.1} ms"
    );
    d.assert_intact();
}

#[test]
#[ignore = "needs two GPUs: run with --ignored on a two-GPU host"]
fn restore_onto_swapped_gpus() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let _s = serial();
    two_gpus();
    let driver = Driver::load().unwrap();
    let (u0, u1) = (
        driver.device_uuid(0).unwrap(),
        driver.device_uuid(1).unwrap(),
    );
    let mut d = start_two_device_debuggee("0.5");
    let saved = ProcessCheckpoint::attach(d.pid())
        .or_panic("attach")
        .lock(LOCK_TIMEOUT)
        .or_panic("lock")
        .checkpoint()
        .or_panic("checkpoint");
    let swapped = [
        GpuPair {
            checkpointed: u0,
            restore_on: u1,
        },
        GpuPair {
            checkpointed: u1,
            restore_on: u0,
        },
    ];
    match saved.restore_onto(&swapped) {
        Ok(locked) => {
            eprintln!("  restore with the two GPUs swapped: accepted");
            locked.unlock().or_panic("unlock");
        }
        Err(failed) => {
            eprintln!("  restore with the two GPUs swapped: {failed}");
            assert_eq!(
                ProcessCheckpoint::state(d.pid()).unwrap(),
                ProcessState::Checkpointed
            );
            failed
                .into_handle()
                .restore()
                .unwrap_or_else(|f| panic!("plain restore after the refused remap: {f}"))
                .unlock()
                .or_panic("unlock");
        }
    }
    d.assert_intact();
}
