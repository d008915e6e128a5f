//! `cuda::Stream` and `PinnedBuffer` against the CUDA driver double (its streams run work at once): ids, async
//! copies in both directions, a set, and the errors of a driver without the calls.
#![cfg(feature = "cupti")]

use crate::common;

use gpu_tools::cuda::{Context, PinnedBuffer, Stream};

fn context() -> Context {
    common::load_doubles();
    Context::create(0).expect("double context")
}

#[test]
fn stream_and_pinned_types_are_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<Stream<'static>>();
    both::<PinnedBuffer<'static>>();
}

#[test]
fn copies_and_sets_on_a_stream_move_the_bytes() {
    let ctx = context();
    let a = ctx.create_stream().expect("stream");
    let b = ctx.create_stream().expect("second stream");
    assert_ne!(a.id().unwrap(), b.id().unwrap(), "stream ids are unique");
    assert_eq!(ctx.id().unwrap(), ctx.id().unwrap());
    let dev = ctx.alloc(4096).unwrap();
    let mut up = ctx.alloc_pinned(1000).unwrap();
    assert!(
        up.as_slice().iter().all(|&x| x == 0),
        "pinned memory starts zeroed"
    );
    for (i, x) in up.as_mut_slice().iter_mut().enumerate() {
        *x = i as u8;
    }
    let down = ctx.alloc_pinned(8192).unwrap();
    // SAFETY: the double runs each call at once; all buffers outlive the synchronize.
    unsafe {
        a.set_bytes(&dev, 0x5a, usize::MAX).unwrap();
        a.copy_to_device(&dev, &up).unwrap();
        a.copy_to_host(&down, &dev).unwrap();
    }
    a.synchronize().unwrap();
    // 1000 bytes came from `up`, the rest of the 4096-byte buffer is the set value, and only 4096 bytes moved.
    let got = down.as_slice();
    assert_eq!(&got[..1000], up.as_slice());
    assert!(got[1000..4096].iter().all(|&x| x == 0x5a));
    assert!(got[4096..].iter().all(|&x| x == 0));
}

#[test]
fn looking_for_an_active_primary_context_never_creates_one() {
    common::load_doubles();
    assert!(
        Context::active_primary(0).unwrap().is_none(),
        "no primary context yet: none is made"
    );
    let held = Context::primary(0).unwrap();
    let found = Context::active_primary(0)
        .unwrap()
        .expect("the program's primary context is found");
    assert_eq!(found.as_raw(), held.as_raw());
    drop(found);
    drop(held);
    assert!(
        Context::active_primary(0).unwrap().is_none(),
        "both references were released"
    );
}

/// Launches that reached the driver double.
fn launches() -> i32 {
    // SAFETY: the double has no initialisers; opening it again returns the copy the crate loaded, where
    // `int dbl_launches(void)` is defined.
    unsafe {
        let lib = libloading::Library::new(common::double_path("cuda_driver")).expect("the double");
        let f = lib
            .get::<unsafe extern "C" fn() -> i32>(b"dbl_launches\0")
            .expect("dbl_launches");
        f()
    }
}

#[test]
fn a_launch_on_a_stream_of_another_context_is_refused_before_the_driver() {
    let ours = context();
    let theirs = Context::create(0).expect("a second context");
    let module = ours.load_module(c"any image").expect("the double's module");
    let kernel = module.function(c"k").expect("the double's function");
    let other_stream = theirs
        .create_stream()
        .expect("a stream of the second context");
    let own_stream = ours
        .create_stream()
        .expect("a stream of the module's context");
    let before = launches();
    // SAFETY: the double's kernel takes no parameters and runs nothing.
    let refused = unsafe { other_stream.launch(&kernel, (1, 1, 1), (32, 1, 1), &mut []) };
    let e = refused.expect_err("a stream of another context than the function's");
    assert_eq!(e.name, "CUDA_ERROR_INVALID_HANDLE", "{e}");
    assert_eq!(launches(), before, "the launch did not reach the driver");
    // SAFETY: as above.
    unsafe { own_stream.launch(&kernel, (1, 1, 1), (32, 1, 1), &mut []) }
        .expect("a stream of the function's context");
    assert_eq!(launches(), before + 1);
}
