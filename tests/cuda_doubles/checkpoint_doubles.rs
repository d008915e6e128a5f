//! The `Checkpoint` state machine against C doubles of `libcuda.so.1` and `libcheckpoint.so` that reproduce the
//! vendor's return codes. This test binary is its own process, so the process-wide library slots hold the
//! doubles. Each test makes its own context, so the double's per-context counters are its own.
#![cfg(feature = "cupti")]

use crate::common;

use common::{download, load_doubles, stats};
use gpu_tools::Error;
use gpu_tools::cuda::Context;
use gpu_tools::cupti::{Checkpoint, CheckpointError, CuptiError, Optimizations, Reserve};
use gpu_tools_testing::kernels::pattern;

fn context() -> Context {
    load_doubles();
    Context::create(0).expect("double context")
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn checkpoint_is_send_and_sync() {
    assert_send_sync::<Checkpoint<'static>>();
    assert_send_sync::<CheckpointError>();
}

#[test]
fn save_overwrite_restore_brings_the_saved_bytes_back() {
    let ctx = context();
    let saved = pattern(1 << 20, 1);
    let mut buf = ctx.alloc(saved.len()).unwrap();
    buf.copy_from_host(&saved).unwrap();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    assert!(cp.is_saved());
    buf.fill_u32(0xDEAD_BEEF).unwrap();
    assert_ne!(download(&buf), saved);
    cp.restore().unwrap();
    assert_eq!(download(&buf), saved);
    // Restore is repeatable.
    buf.fill_u32(7).unwrap();
    cp.restore().unwrap();
    assert_eq!(download(&buf), saved);
    let s = stats(&ctx);
    assert_eq!((s.saves, s.restores, s.live), (1, 2, 1));
}

#[test]
fn restore_before_save_is_a_typed_error_without_a_vendor_call() {
    let ctx = context();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    let err = cp.restore().unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::NotSaved)),
        "{err:?}"
    );
    assert_eq!(stats(&ctx).restores, 0);
}

#[test]
fn second_save_without_overwrite_is_refused_before_the_vendor() {
    let ctx = context();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    let err = cp.save().unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::AlreadySaved)),
        "{err:?}"
    );
    assert_eq!(
        stats(&ctx).saves,
        1,
        "the refused save never reached the vendor"
    );
    // The first save is intact.
    assert!(cp.is_saved());
    cp.restore().unwrap();
}

#[test]
fn overwrite_replaces_the_saved_state() {
    let ctx = context();
    let (a, b) = (pattern(4096, 10), pattern(4096, 11));
    let mut buf = ctx.alloc(a.len()).unwrap();
    let mut cp = Checkpoint::builder(&ctx)
        .allow_overwrite(true)
        .build()
        .unwrap();
    buf.copy_from_host(&a).unwrap();
    cp.save().unwrap();
    buf.copy_from_host(&b).unwrap();
    cp.save().unwrap();
    buf.fill_u32(0).unwrap();
    cp.restore().unwrap();
    assert_eq!(download(&buf), b);
    assert_eq!(stats(&ctx).saves, 2);
}

#[test]
fn options_reach_the_vendor_struct() {
    let ctx = context();
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(512))
        .reserve_host(Reserve::Everything)
        .allow_overwrite(true)
        .optimizations(Optimizations::TRANSFER)
        .build()
        .unwrap();
    cp.save().unwrap();
    let s = stats(&ctx);
    assert_eq!(s.last_reserve_device, 512);
    assert_eq!(s.last_reserve_host, usize::MAX);
    assert_eq!((s.last_overwrite, s.last_optimizations), (1, 1));
    assert_eq!(s.host_saves, 0);
}

#[test]
fn reserve_values_map_to_the_vendor_encoding() {
    assert_eq!(Reserve::Nothing.vendor_value(), 0);
    assert_eq!(Reserve::MiB(3).vendor_value(), 3);
    assert_eq!(Reserve::Everything.vendor_value(), usize::MAX);
    assert_eq!(
        Reserve::MiB(usize::MAX).vendor_value(),
        usize::MAX - 1,
        "MiB never means 'use none'"
    );
    assert_eq!(Optimizations::TRANSFER.bits(), 1);
}

#[test]
fn device_reserve_falls_back_to_host_and_still_restores() {
    let ctx = context();
    let saved = pattern(64 << 10, 3);
    let mut buf = ctx.alloc(saved.len()).unwrap();
    buf.copy_from_host(&saved).unwrap();
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(1024))
        .build()
        .unwrap();
    cp.save().unwrap();
    buf.fill_u32(1).unwrap();
    cp.restore().unwrap();
    assert_eq!(download(&buf), saved);
    assert_eq!(stats(&ctx).host_saves, 1);
}

#[test]
fn reserving_both_levels_entirely_is_refused_before_the_vendor() {
    let ctx = context();
    let err = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::Everything)
        .reserve_host(Reserve::Everything)
        .build()
        .unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::NoMemoryAllowed)),
        "{err:?}"
    );
    assert_eq!(stats(&ctx).saves, 0);
    // One level entirely reserved is fine.
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_host(Reserve::Everything)
        .build()
        .unwrap();
    cp.save().unwrap();
}

#[test]
fn no_usable_memory_is_the_typed_out_of_memory_error() {
    let ctx = context();
    // The double's device has 1024 MiB and its host 4096 MiB: reserving all of both leaves nothing.
    let mut cp = Checkpoint::builder(&ctx)
        .reserve_device(Reserve::MiB(1024))
        .reserve_host(Reserve::MiB(4096))
        .build()
        .unwrap();
    let err = cp.save().unwrap_err();
    assert!(
        matches!(err, Error::Cupti(CuptiError::OutOfMemory)),
        "{err:?}"
    );
    assert!(!cp.is_saved());
    let err = cp.restore().unwrap_err();
    assert!(
        matches!(err, Error::Checkpoint(CheckpointError::NotSaved)),
        "{err:?}"
    );
    // The failed first call left vendor state behind (pPriv); free releases it.
    assert_eq!(stats(&ctx).live, 1);
    cp.free().unwrap();
    assert_eq!(stats(&ctx).live, 0);
}

#[test]
fn free_reports_and_drop_frees_exactly_once() {
    let ctx = context();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    cp.free().unwrap();
    let s = stats(&ctx);
    assert_eq!(
        (s.frees, s.live),
        (1, 0),
        "free called once, not again by drop"
    );

    let mut cp = Checkpoint::new(&ctx).unwrap();
    cp.save().unwrap();
    drop(cp);
    let s = stats(&ctx);
    assert_eq!((s.frees, s.live), (2, 0));

    // Never saved: nothing to free, no vendor call.
    Checkpoint::new(&ctx).unwrap().free().unwrap();
    drop(Checkpoint::new(&ctx).unwrap());
    assert_eq!(stats(&ctx).frees, 2);
}

#[test]
fn destroyed_context_is_a_typed_error_and_never_reaches_the_vendor() {
    let owner = context();
    // SAFETY: deliberately breaks the contract (the owner is dropped below) to show the documented detection.
    let borrowed = unsafe { Context::from_raw(owner.as_raw()) }.unwrap();
    let buf_bytes = pattern(4096, 5);
    {
        let mut buf = borrowed.alloc(buf_bytes.len()).unwrap();
        buf.copy_from_host(&buf_bytes).unwrap();
        std::mem::forget(buf); // its memory goes with the context
    }
    let mut cp = Checkpoint::builder(&borrowed)
        .allow_overwrite(true)
        .build()
        .unwrap();
    cp.save().unwrap();
    drop(owner); // cuCtxDestroy
    for err in [cp.restore().unwrap_err(), cp.save().unwrap_err()] {
        assert!(
            matches!(&err, Error::Cuda(e) if e.is_invalid_context()),
            "{err:?}"
        );
    }
    let err = cp.free().unwrap_err();
    assert!(
        matches!(&err, Error::Cuda(e) if e.is_invalid_context()),
        "{err:?}"
    );
    let s = stats(&borrowed);
    assert_eq!(
        s.dead_ctx_calls, 0,
        "no vendor call with a destroyed context"
    );
    assert_eq!((s.saves, s.restores, s.frees), (1, 0, 0));
    assert!(matches!(Checkpoint::new(&borrowed), Err(Error::Cuda(e)) if e.is_invalid_context()));
}

#[test]
fn saved_on_one_thread_restored_on_another() {
    let ctx = context();
    let saved = pattern(8192, 9);
    let mut buf = ctx.alloc(saved.len()).unwrap();
    buf.copy_from_host(&saved).unwrap();
    let mut cp = Checkpoint::new(&ctx).unwrap();
    std::thread::scope(|s| {
        s.spawn(|| cp.save().unwrap()).join().unwrap();
    });
    buf.fill_u32(2).unwrap();
    std::thread::scope(|s| {
        s.spawn(move || cp.restore().unwrap()).join().unwrap();
    });
    assert_eq!(download(&buf), saved);
}

#[test]
fn vendor_calls_never_overlap() {
    let ctx = context();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let mut cp = Checkpoint::builder(&ctx)
                    .allow_overwrite(true)
                    .build()
                    .unwrap();
                for _ in 0..10 {
                    cp.save().unwrap();
                    cp.restore().unwrap();
                }
            });
        }
    });
    assert_eq!(stats(&ctx).saves, 40);
    assert_eq!(
        common::max_in_flight(),
        1,
        "the crate serialises vendor calls"
    );
}
