//! The real `libcheckpoint.so` of one wheel (the process's: [`the_wheel`]) on a machine without a CUDA driver:
//! called directly it crashes the process (SIGSEGV, vendor-facts.md), while every route through the crate stops
//! at the driver with a typed error. On a GPU host the same test saves and restores through the crate with that
//! library. Run by the groups `checkpoint_no_driver` (CUDA 13) and `checkpoint_no_driver12` (CUDA 12) of
//! `main.rs`; the harness (`wheel.rs`) runs `CHECKS`.

use std::path::{Path, PathBuf};

use gpu_tools::cuda::{Context, Driver};
use gpu_tools::cupti::{Checkpoint, CheckpointLibrary};
use gpu_tools::{Error, LoadError};

use crate::wheel::the_wheel;
use crate::wheel::{Check, Child};

/// The checks, in the order they are listed.
pub const CHECKS: &[Check] = &[
    Check {
        name: "checkpoint_through_the_crate_is_a_typed_error_or_works",
        run: checkpoint_through_the_crate_is_a_typed_error_or_works,
        without_driver: false,
    },
    Check {
        name: "raw_vendor_call_without_a_driver_kills_the_process",
        run: raw_vendor_call_without_a_driver_kills_the_process,
        without_driver: true,
    },
];

/// The helper run in a child process of its own.
pub const CHILDREN: &[Child] = &[Child {
    name: "raw_save",
    run: raw_save_in_child,
}];

fn wheel_checkpoint(dir: &Path) -> PathBuf {
    dir.join("libcheckpoint.so")
}

fn checkpoint_through_the_crate_is_a_typed_error_or_works(dir: &Path) {
    let path = wheel_checkpoint(dir);
    CheckpointLibrary::load_from(&path).expect("the wheel's libcheckpoint.so loads");
    match Driver::load() {
        Err(e) => {
            eprintln!("no CUDA driver: {e}");
            assert!(matches!(e, LoadError::NotFound { .. }), "{e:?}");
            // Every way to get the context a checkpoint needs stops at the driver, before libcheckpoint is
            // called: a Checkpoint cannot be built without one.
            assert!(matches!(Context::primary(0), Err(Error::Load(_))));
            assert!(matches!(Context::create(0), Err(Error::Load(_))));
            // SAFETY: a null handle is rejected by the crate itself (after the driver check that fails here).
            let raw = unsafe { Context::from_raw(std::ptr::null_mut()) };
            assert!(matches!(raw, Err(Error::Load(_))), "{raw:?}");
            assert!(Driver::get().is_none());
        }
        Ok(driver) => match driver.init() {
            Err(e) => {
                eprintln!("CUDA driver without a usable GPU: {e}");
                assert!(matches!(Context::primary(0), Err(Error::Cuda(_))));
            }
            Ok(()) if driver.device_count().unwrap_or(0) == 0 => {
                assert!(matches!(Context::primary(0), Err(Error::Cuda(_))));
            }
            Ok(()) => {
                // A GPU host: the real library saves and restores through the crate.
                eprintln!(
                    "CUDA driver {:?} at {:?}; checkpoint library {}",
                    driver.version(),
                    driver.path(),
                    path.display()
                );
                let ctx = Context::primary(0).expect("primary context");
                let mut buf = ctx.alloc(1 << 20).expect("alloc");
                buf.fill_u32(0x1234_5678).expect("fill");
                let mut cp = Checkpoint::new(&ctx).expect("checkpoint");
                cp.save()
                    .unwrap_or_else(|e| panic!("cuptiCheckpointSave of {}: {e}", path.display()));
                buf.fill_u32(0).expect("overwrite");
                cp.restore().unwrap_or_else(|e| {
                    panic!("cuptiCheckpointRestore of {}: {e}", path.display())
                });
                let mut back = vec![0u8; 1 << 20];
                buf.copy_to_host(&mut back).expect("read back");
                assert!(back.chunks(4).all(|w| w == 0x1234_5678u32.to_le_bytes()));
                cp.free().expect("free");
                eprintln!("save, overwrite, restore: the saved bytes came back");
            }
        },
    }
}

/// Why the crate checks first: the raw call, made in a child process, kills it.
fn raw_vendor_call_without_a_driver_kills_the_process(dir: &Path) {
    use std::os::unix::process::ExitStatusExt;
    let path = wheel_checkpoint(dir);
    let out = crate::wheel::run_child(the_wheel(), "raw_save", dir);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("calling cuptiCheckpointSave"),
        "child output: {stdout}"
    );
    assert!(
        out.status.signal().is_some(),
        "the raw call no longer crashes without a driver ({:?}); update vendor-facts.md. Output: {stdout}",
        out.status
    );
    eprintln!(
        "raw cuptiCheckpointSave of {} without a driver: {:?}",
        path.display(),
        out.status
    );
}

/// In a child process: the raw `cuptiCheckpointSave` without a driver.
fn raw_save_in_child(dir: &Path) {
    let lib = CheckpointLibrary::load_from(wheel_checkpoint(dir)).expect("load");
    let mut raw = gpu_tools::sys::cupti::NV_Cupti_Checkpoint_CUpti_Checkpoint {
        structSize: 48,
        ..Default::default()
    };
    println!("calling cuptiCheckpointSave");
    // SAFETY: not safe without a driver, which is what this child process demonstrates to its parent.
    let code = unsafe { (lib.save)(&mut raw) };
    println!("returned {code}");
}
