//! The C double of `libcheckpoint.so` answers like the real library (vendor-facts.md): these are the rules the
//! `Checkpoint` type enforces before calling it. Raw calls bypass the crate's serialisation, so they run in
//! processes of their own (`gpu_tools_testing::own_process`).
#![cfg(feature = "cupti")]

use crate::common;

use gpu_tools::cuda::Context;
use gpu_tools::cupti::CuptiError;

fn context() -> Context {
    common::load_doubles();
    Context::create(0).expect("double context")
}

#[test]
fn vendor_rule_seven_is_what_the_crate_prevents() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    // The double answers INVALID_OPERATION (7) to a second save without overwrite, like the real library:
    // reach it through the raw function pointer to show the crate's check mirrors it.
    let ctx = context();
    let lib = gpu_tools::cupti::CheckpointLibrary::load().unwrap();
    let mut raw = gpu_tools::sys::cupti::NV_Cupti_Checkpoint_CUpti_Checkpoint {
        structSize: 48,
        ctx: ctx.as_raw(),
        ..Default::default()
    };
    // SAFETY: a complete struct with a live double context; the double checks everything else.
    unsafe {
        assert_eq!((lib.save)(&mut raw), 0);
        assert_eq!(
            CuptiError::from_code((lib.save)(&mut raw)),
            CuptiError::InvalidOperation
        );
        assert_eq!((lib.free)(&mut raw), 0);
        assert_eq!(
            CuptiError::from_code((lib.free)(&mut raw)),
            CuptiError::InvalidParameter
        );
        assert_eq!(
            CuptiError::from_code((lib.restore)(&mut raw)),
            CuptiError::NotInitialized
        );
        // Both levels "use none" is an invalid parameter (seen with the real library on an H200).
        raw.reserveDeviceMB = usize::MAX;
        raw.reserveHostMB = usize::MAX;
        assert_eq!(
            CuptiError::from_code((lib.save)(&mut raw)),
            CuptiError::InvalidParameter
        );
        raw.ctx = std::ptr::null_mut();
        assert_eq!(
            CuptiError::from_code((lib.save)(&mut raw)),
            CuptiError::NotInitialized
        );
    }
}
