//! The built library is what CUDA can load: a shared object that exports `InitializeInjection` with C linkage.
//! (Building this test also makes cargo build the shared object, in `target/<profile>/deps/`; `cargo build`
//! copies it up to `target/<profile>/`. The `inject_double` test loads it too.)

use std::path::PathBuf;

fn library() -> PathBuf {
    gpu_tools_testing::inject_lib()
}

#[test]
fn the_library_exports_initialize_injection() {
    let path = library();
    assert!(path.exists(), "{} was not built", path.display());
    // SAFETY: the library's initialisers only register Rust statics; nothing runs until InitializeInjection.
    let lib = unsafe { libloading::Library::new(&path) }.expect("dlopen the library");
    // SAFETY: the symbol's C signature, `int InitializeInjection(void)`.
    let f =
        unsafe { lib.get::<unsafe extern "C" fn() -> std::ffi::c_int>(b"InitializeInjection\0") };
    assert!(f.is_ok(), "InitializeInjection is exported");
}
