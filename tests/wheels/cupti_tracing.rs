//! Activity and Callback checks of the real CUPTI libraries of the PyPI wheels (13.0 and 12.9), on a machine
//! without a CUDA driver; used by `cupti_wheel_checks.rs`.
use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::cupti::activity::{ActivityKinds, ActivityTracer, LayoutMatch, RecordLayout};
use gpu_tools::cupti::callback::Subscriber;
use gpu_tools::{Error, LoadError};
use std::os::unix::process::ExitStatusExt;

/// The kinds a buffer walk compares against the vendor: every value of the 13.0 enum.
const KINDS: std::ops::Range<u32> = 1..56;

/// The library opened a second time, for raw calls (the loader hands back the same mapping).
fn raw_lib(path: &std::path::Path) -> &'static libloading::Library {
    static LIB: std::sync::OnceLock<libloading::Library> = std::sync::OnceLock::new();
    // SAFETY: the vendor library the test loads anyway; opening it again runs no initialiser twice.
    LIB.get_or_init(|| unsafe { libloading::Library::new(path) }.expect("open the wheel library"))
}

type NextRecord =
    unsafe extern "C" fn(*mut u8, usize, *mut *mut gpu_tools::sys::cupti::CUpti_Activity) -> u32;

/// The size the vendor's `cuptiActivityGetNextRecord` steps over a record of `kind`; `None` where the vendor
/// refuses the kind. The vendor also checks the kind of the record it steps to, so every 4 bytes after the first
/// record hold a valid kind (1).
pub fn vendor_record_size(path: &std::path::Path, kind: u32) -> Option<usize> {
    // SAFETY: the header's signature.
    let step = *unsafe { raw_lib(path).get::<NextRecord>(b"cuptiActivityGetNextRecord\0") }.ok()?;
    let mut buf = vec![0x0000_0001_0000_0001u64; 1024];
    buf[0] = u64::from(kind);
    let mut record: *mut gpu_tools::sys::cupti::CUpti_Activity = std::ptr::null_mut();
    let base = buf.as_mut_ptr().cast::<u8>();
    // SAFETY: an 8 KiB readable buffer; the vendor only reads kinds and computes positions inside it.
    unsafe {
        if step(base, 8192, &mut record) != 0 {
            return None;
        }
        if step(base, 8192, &mut record) != 0 {
            return None;
        }
    }
    Some(record as usize - base as usize)
}

/// Every kind the crate sizes has the size the vendor's walk gives it; returns (agreed, vendor-only kinds).
pub fn layout_matches_vendor(
    path: &std::path::Path,
    layout: RecordLayout,
) -> (usize, Vec<(u32, usize)>) {
    let mut agreed = 0;
    let mut vendor_only = Vec::new();
    for kind in KINDS {
        let vendor = vendor_record_size(path, kind);
        match (layout.record_size(kind), vendor) {
            (Some(ours), Some(theirs)) => {
                assert_eq!(
                    ours, theirs,
                    "kind {kind}: crate {ours} bytes, vendor {theirs}"
                );
                agreed += 1;
            }
            (Some(ours), None) => {
                panic!("kind {kind}: the crate sizes it ({ours}) but the vendor refuses it")
            }
            (None, Some(theirs)) => vendor_only.push((kind, theirs)),
            (None, None) => {}
        }
    }
    (agreed, vendor_only)
}

/// Without a CUDA driver, starting a tracer or subscribing stops at the driver check with a typed error.
pub fn tracing_without_a_driver_is_a_typed_error(lib_path: &std::path::Path) {
    assert!(
        gpu_tools::cuda::Driver::load().is_err(),
        "run only where no CUDA driver loads"
    );
    let tracer = ActivityTracer::builder()
        .library_path(lib_path)
        .kinds(ActivityKinds::CONCURRENT_KERNEL)
        .start(|_| {});
    match tracer {
        Err(Error::Load(LoadError::NotFound { library, .. })) => {
            assert!(library.contains("libcuda"), "{library}")
        }
        other => panic!("expected the driver's load error, got {other:?}"),
    }
    let sub = Subscriber::builder()
        .library_path(lib_path)
        .subscribe(|_| {});
    assert!(matches!(sub, Err(Error::Load(_))), "{sub:?}");
    // Neither held the process's slot.
    let again = ActivityTracer::builder()
        .library_path(lib_path)
        .start(|_| {});
    assert!(matches!(again, Err(Error::Load(_))), "{again:?}");
}

/// What the raw vendor calls returned without a driver, from the output of the child process that made them
/// (`raw_calls`; they could crash it): its lines `raw name=code`.
pub fn raw_call_codes(out: &std::process::Output) -> Vec<(String, u32)> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && out.status.signal().is_none(),
        "the raw calls killed or failed the child ({:?}): {stdout}",
        out.status
    );
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("raw "))
        .filter_map(|l| {
            let (name, code) = l.split_once('=')?;
            Some((name.to_string(), code.trim().parse().ok()?))
        })
        .collect()
}

/// The child side: calls the Activity and Callback entry points directly and prints each code.
pub fn raw_calls(path: &std::path::Path) {
    type U32Fn = unsafe extern "C" fn(u32) -> u32;
    type Request = unsafe extern "C" fn(*mut *mut u8, *mut usize, *mut usize);
    type Complete = unsafe extern "C" fn(*mut std::ffi::c_void, u32, *mut u8, usize, usize);
    type Register = unsafe extern "C" fn(Option<Request>, Option<Complete>) -> u32;
    type Callback = unsafe extern "C" fn(*mut std::ffi::c_void, u32, u32, *const std::ffi::c_void);
    type Subscribe = unsafe extern "C" fn(
        *mut *mut std::ffi::c_void,
        Option<Callback>,
        *mut std::ffi::c_void,
    ) -> u32;
    type Timestamp = unsafe extern "C" fn(Option<unsafe extern "C" fn() -> u64>) -> u32;
    type Dropped = unsafe extern "C" fn(*mut std::ffi::c_void, u32, *mut usize) -> u32;
    unsafe extern "C" fn request(b: *mut *mut u8, s: *mut usize, m: *mut usize) {
        // SAFETY: CUPTI's out-pointers; no buffer is given.
        unsafe {
            *b = std::ptr::null_mut();
            *s = 0;
            *m = 0;
        }
    }
    unsafe extern "C" fn complete(
        _: *mut std::ffi::c_void,
        _: u32,
        _: *mut u8,
        _: usize,
        _: usize,
    ) {
    }
    unsafe extern "C" fn callback(
        _: *mut std::ffi::c_void,
        _: u32,
        _: u32,
        _: *const std::ffi::c_void,
    ) {
    }
    unsafe extern "C" fn now() -> u64 {
        1
    }
    let lib = raw_lib(path);
    // SAFETY: each symbol has the header's signature; the calls are what this child process exists to make.
    unsafe {
        let sym = |name: &[u8]| format!("{}", String::from_utf8_lossy(&name[..name.len() - 1]));
        macro_rules! call {
            ($t:ty, $name:literal, $($arg:expr),*) => {{
                let f = *lib.get::<$t>($name).expect("symbol");
                println!("raw {}={}", sym($name), f($($arg),*));
            }};
        }
        call!(
            Register,
            b"cuptiActivityRegisterCallbacks\0",
            Some(request),
            Some(complete)
        );
        call!(
            Timestamp,
            b"cuptiActivityRegisterTimestampCallback\0",
            Some(now)
        );
        call!(U32Fn, b"cuptiActivityEnable\0", 10);
        call!(U32Fn, b"cuptiActivityFlushAll\0", 1);
        call!(U32Fn, b"cuptiActivityDisable\0", 10);
        call!(U32Fn, b"cuptiSetThreadIdType\0", 1);
        let mut kind = 7u32;
        call!(
            unsafe extern "C" fn(*mut u32) -> u32,
            b"cuptiGetThreadIdType\0",
            &mut kind
        );
        let mut n = 7usize;
        call!(
            Dropped,
            b"cuptiActivityGetNumDroppedRecords\0",
            std::ptr::null_mut(),
            0,
            &mut n
        );
        let mut handle = std::ptr::null_mut();
        call!(
            Subscribe,
            b"cuptiSubscribe\0",
            &mut handle,
            Some(callback),
            std::ptr::null_mut()
        );
    }
}

/// The layout the version maps to.
pub fn exact_layout(lib: &CuptiLibrary) -> RecordLayout {
    match RecordLayout::for_version(lib.version().expect("cuptiGetVersion")) {
        LayoutMatch::Exact(l) => l,
        other => panic!("the wheel's version should be known exactly: {other:?}"),
    }
}
