//! `Checkpoint` on a real NVIDIA GPU (feature `nvidia-hw-tests`; run on an H100 or H200 host with CUDA 13).
//!
//! Each test makes its own context, and the tests run one at a time: a checkpoint saves every allocation of its
//! context, and the memory-accounting checks must not see another test's allocations.
#![cfg(feature = "nvidia-hw-tests")]

use gpu_tools_testing::kernels as common;

use std::sync::{Mutex, MutexGuard};

use common::{STEP_PTX, checksum, download, first_difference, pattern, run_step};
use gpu_tools::Error;
use gpu_tools::cuda::{Context, DeviceBuffer};
use gpu_tools::cupti::{Checkpoint, CheckpointError, CuptiError, Optimizations, Reserve};

const MIB: usize = 1 << 20;
const GIB: usize = 1 << 30;

fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

fn context() -> Context {
    let ctx = Context::create(0).expect("CUDA context on device 0");
    let info = ctx.driver().device_info(0).expect("device info");
    eprintln!(
        "device 0: {} (sm_{}{})",
        info.name, info.compute_capability.0, info.compute_capability.1
    );
    ctx
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
fn round_trip_of_one_gib_compares_every_byte() {
    let _s = serial();
    let ctx = context();
    let saved = pattern(GIB + 4096, 0xC0FFEE);
    let mut buf = upload(&ctx, &saved);
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    buf.fill_u32(0xDEAD_BEEF).unwrap();
    let overwritten = download(&buf);
    assert!(
        overwritten
            .chunks(4)
            .all(|w| w == 0xDEAD_BEEFu32.to_le_bytes())
    );
    cp.restore().unwrap();
    assert_same(&download(&buf), &saved, "restored 1 GiB");
    cp.free().unwrap();
}

#[test]
fn in_place_kernel_replays_from_one_saved_state() {
    let _s = serial();
    let ctx = context();
    let module = ctx.load_module(STEP_PTX).expect("JIT the step kernel");
    let step = module.function(c"step").unwrap();
    let start = pattern(64 * MIB, 42);
    let mut buf = upload(&ctx, &start);

    // The kernel is right: one pass on the device equals one pass on the host.
    let mut expected = start.clone();
    common::step_on_host(&mut expected);
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    run_step(&ctx, &step, &mut buf);
    assert_same(&download(&buf), &expected, "one step pass");

    let replays: Vec<u64> = (0..10)
        .map(|_| {
            cp.restore().unwrap();
            run_step(&ctx, &step, &mut buf);
            checksum(&download(&buf))
        })
        .collect();
    eprintln!("replay checksums: {replays:016x?}");
    assert!(
        replays.iter().all(|&c| c == checksum(&expected)),
        "{replays:x?}"
    );

    cp.restore().unwrap();
    let free_running: Vec<u64> = (0..10)
        .map(|_| {
            run_step(&ctx, &step, &mut buf);
            checksum(&download(&buf))
        })
        .collect();
    eprintln!("without restore: {free_running:016x?}");
    let mut distinct = free_running.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        distinct.len(),
        10,
        "each pass without restore changes the state"
    );
    assert_eq!(free_running[0], replays[0]);
}

#[test]
fn overwrite_rules() {
    let _s = serial();
    let ctx = context();
    let (a, b) = (pattern(32 * MIB, 1), pattern(32 * MIB, 2));
    let mut buf = upload(&ctx, &a);

    let mut once = Checkpoint::new(&ctx).unwrap();
    once.save().unwrap();
    let err = once.save().unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::AlreadySaved)),
        "{err:?}"
    );
    buf.copy_from_host(&b).unwrap();
    once.restore().unwrap();
    assert_same(&download(&buf), &a, "first save kept");
    once.free().unwrap();

    let mut again = Checkpoint::builder(&ctx)
        .allow_overwrite(true)
        .build()
        .unwrap();
    again.save().unwrap();
    buf.copy_from_host(&b).unwrap();
    again.save().unwrap();
    buf.fill_u32(0).unwrap();
    again.restore().unwrap();
    assert_same(&download(&buf), &b, "overwritten save");
}

#[test]
fn restore_before_save_is_refused() {
    let _s = serial();
    let ctx = context();
    let _buf = upload(&ctx, &pattern(MIB, 3));
    let mut cp = Checkpoint::new(&ctx).unwrap();
    let err = cp.restore().unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::NotSaved)),
        "{err:?}"
    );
}

#[test]
fn transfer_restores_correctly_at_the_same_point() {
    let _s = serial();
    let ctx = context();
    let module = ctx.load_module(STEP_PTX).unwrap();
    let step = module.function(c"step").unwrap();
    let saved = pattern(256 * MIB, 7);
    let mut buf = upload(&ctx, &saved);
    let mut cp = Checkpoint::builder(&ctx)
        .optimizations(Optimizations::TRANSFER)
        .build()
        .unwrap();
    cp.save().unwrap();
    for i in 0..5 {
        run_step(&ctx, &step, &mut buf);
        cp.restore().unwrap();
        assert_same(&download(&buf), &saved, &format!("TRANSFER restore {i}"));
    }
}

#[test]
fn several_checkpoints_alive_at_once() {
    let _s = serial();
    let ctx = context();
    let (a, b, c) = (
        pattern(16 * MIB, 11),
        pattern(16 * MIB, 12),
        pattern(16 * MIB, 13),
    );
    let mut buf = upload(&ctx, &a);
    let mut cp_a = Checkpoint::new(&ctx).unwrap();
    cp_a.save().unwrap();
    buf.copy_from_host(&b).unwrap();
    let mut cp_b = Checkpoint::new(&ctx).unwrap();
    cp_b.save().unwrap();
    buf.copy_from_host(&c).unwrap();
    let mut cp_c = Checkpoint::new(&ctx).unwrap();
    cp_c.save().unwrap();
    let check = |cp: &mut Checkpoint<'_>, want: &[u8], name: &str| {
        cp.restore().unwrap();
        assert_same(&download(&buf), want, name);
    };
    check(&mut cp_a, &a, "a");
    check(&mut cp_c, &c, "c");
    check(&mut cp_b, &b, "b");
    check(&mut cp_a, &a, "a again");
    cp_b.free().unwrap();
    cp_c.restore().unwrap();
    assert_same(&download(&buf), &c, "c after b freed");
}

#[test]
fn saved_on_one_thread_restored_on_another() {
    let _s = serial();
    let ctx = context();
    let saved = pattern(8 * MIB, 21);
    let mut buf = upload(&ctx, &saved);
    let mut cp = Checkpoint::new(&ctx).unwrap();
    std::thread::scope(|s| s.spawn(|| cp.save().unwrap()).join().unwrap());
    buf.fill_u32(5).unwrap();
    std::thread::scope(|s| s.spawn(move || cp.restore().unwrap()).join().unwrap());
    assert_same(&download(&buf), &saved, "restored on another thread");
}

#[test]
fn free_gives_device_memory_back() {
    let _s = serial();
    let ctx = context();
    let _buf = upload(&ctx, &pattern(GIB, 31));
    let (before, _) = ctx.memory_info().unwrap();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    let (saved, _) = ctx.memory_info().unwrap();
    eprintln!("free device memory: before save {before}, after save {saved}");
    assert!(
        before.saturating_sub(saved) >= GIB / 2,
        "a device-memory checkpoint of 1 GiB uses device memory"
    );
    cp.free().unwrap();
    let (after, _) = ctx.memory_info().unwrap();
    eprintln!("after free {after}");
    assert!(
        after + GIB / 8 >= before,
        "free returned the checkpoint's device memory"
    );
}

#[test]
fn device_reserve_forces_host_memory_and_still_restores() {
    let _s = serial();
    let ctx = context();
    let saved = pattern(512 * MIB, 41);
    let mut buf = upload(&ctx, &saved);
    let (_, total) = ctx.memory_info().unwrap();
    let (before, _) = ctx.memory_info().unwrap();
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(total / MIB))
        .build()
        .unwrap();
    cp.save().unwrap();
    let (after, _) = ctx.memory_info().unwrap();
    eprintln!("reserve all device memory: free before save {before}, after {after}");
    assert!(
        before.saturating_sub(after) < 256 * MIB,
        "the checkpoint did not go to device memory"
    );
    buf.fill_u32(9).unwrap();
    cp.restore().unwrap();
    assert_same(&download(&buf), &saved, "restored from host memory");
}

/// "Impossible" reserves, as CUPTI 13.0 handles them: the vendor has no out-of-memory answer for them. The
/// "use none" value is refused (by the crate for both levels, by the vendor for one), and reserving all device
/// and host memory makes the checkpoint fall back to a file. `CuptiError::OutOfMemory` itself is mapped in the
/// double-based tests.
#[test]
fn impossible_reserves_are_refused_or_fall_back_to_a_file() {
    let _s = serial();
    let ctx = context();
    let state = pattern(GIB, 51);
    let mut buf = upload(&ctx, &state);
    let refused = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::Everything)
        .reserve_host(Reserve::Everything)
        .build()
        .unwrap_err();
    assert!(matches!(
        refused,
        Error::Checkpoint(CheckpointError::NoMemoryAllowed)
    ));
    let mut none_on_device = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::Everything)
        .build()
        .unwrap();
    let err = none_on_device.save().unwrap_err();
    eprintln!("save with reserve_device(Everything): {err}");
    assert!(
        matches!(err, Error::Cupti(CuptiError::InvalidParameter)),
        "{err:?}"
    );
    assert!(matches!(
        none_on_device.restore(),
        Err(Error::Checkpoint(CheckpointError::NotSaved))
    ));
    // Reserving all device memory and all host memory: the 1 GiB goes to neither.
    let (free_before, device_total) = ctx.memory_info().unwrap();
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap();
    let host_mib: usize = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<usize>().ok())
        .expect("MemTotal in /proc/meminfo")
        / 1024;
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(device_total / MIB))
        .reserve_host(Reserve::MiB(host_mib))
        .build()
        .unwrap();
    cp.save().expect("save falls back to a file");
    let (free_after, _) = ctx.memory_info().unwrap();
    eprintln!(
        "device free {} -> {} MiB after saving 1 GiB",
        free_before / MIB,
        free_after / MIB
    );
    assert!(
        free_before.saturating_sub(free_after) < 256 * MIB,
        "the checkpoint used device memory"
    );
    buf.fill_u32(0).unwrap();
    cp.restore().unwrap();
    assert_eq!(first_difference(&download(&buf), &state), None);
    cp.free().unwrap();
}

#[test]
fn destroyed_context_is_a_typed_error() {
    let _s = serial();
    let owner = context();
    // SAFETY: deliberately breaks the contract (the owner is destroyed below) to show the driver's detection.
    let borrowed = unsafe { Context::from_raw(owner.as_raw()) }.unwrap();
    let buf = upload(&borrowed, &pattern(4 * MIB, 61));
    let mut cp = Checkpoint::builder(&borrowed)
        .allow_overwrite(true)
        .build()
        .unwrap();
    cp.save().unwrap();
    std::mem::forget(buf); // its memory goes with the context
    drop(owner); // cuCtxDestroy
    for err in [cp.restore().unwrap_err(), cp.save().unwrap_err()] {
        eprintln!("after destroy: {err}");
        assert!(
            matches!(&err, Error::Cuda(e) if e.is_invalid_context()),
            "{err:?}"
        );
    }
    assert!(matches!(cp.free(), Err(Error::Cuda(e)) if e.is_invalid_context()));
}

/// A context made by `cudarc` (feature `cudarc`), checkpointed through `Context::from_cudarc`.
#[cfg(feature = "cudarc")]
#[test]
fn cudarc_context_saves_and_restores() {
    let _s = serial();
    let owner = cudarc::driver::CudaContext::new(0).expect("cudarc context on device 0");
    let ctx = Context::from_cudarc(&owner).unwrap();
    assert_eq!(ctx.as_raw() as usize, owner.cu_ctx() as usize);
    let state = pattern(64 * MIB, 71);
    let mut buf = upload(&ctx, &state);
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    buf.fill_u32(0).unwrap();
    cp.restore().unwrap();
    assert_same(&download(&buf), &state, "after restore in a cudarc context");
    drop(buf);
    cp.free().unwrap();
}
