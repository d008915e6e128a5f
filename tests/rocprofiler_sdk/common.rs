//! Shared helpers for tests against the rocprofiler-sdk double (`gpu-tools-testing/doubles/rocprofiler_sdk.c`).

use std::ffi::{c_char, c_void};
use std::path::PathBuf;
use std::sync::OnceLock;

use gpu_tools::rocprofiler_sdk::SdkLibrary;

/// The double's test controls, opened from the same file the crate loads.
pub struct Double {
    pub lib: &'static SdkLibrary,
    pub start_runtime: unsafe extern "C" fn() -> i32,
    pub emit_to: unsafe extern "C" fn(u64, u32, u32, *const c_void, usize) -> i32,
    pub emit: unsafe extern "C" fn(u32, *const c_void, usize) -> i32,
    pub emit_kernel: unsafe extern "C" fn(u64, u64, u64, u64, u64, u64) -> i32,
    pub emit_api: unsafe extern "C" fn(u32, i32, u64, u64, u64) -> i32,
    pub emit_copy: unsafe extern "C" fn(u32, u64, u64, u64, u64) -> i32,
    pub load_code_object: unsafe extern "C" fn(u64, i32),
    pub roctx_mark: unsafe extern "C" fn(*const c_char),
    pub roctx_push: unsafe extern "C" fn(*const c_char) -> i32,
    pub roctx_pop: unsafe extern "C" fn() -> i32,
    pub roctx_start: unsafe extern "C" fn(*const c_char) -> u64,
    pub roctx_stop: unsafe extern "C" fn(u64),
    pub thread_id: unsafe extern "C" fn() -> u64,
    stats: unsafe extern "C" fn(*mut u64),
    _controls: libloading::Library,
}

/// Counters the double keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub records: u64,
    pub callbacks: u64,
    pub flushes: u64,
    pub dropped: u64,
    pub tool_inits: u64,
    pub tool_finis: u64,
    pub callbacks_traced: u64,
}

pub fn path() -> PathBuf {
    gpu_tools_testing::double_path("rocprofiler_sdk")
}

/// Opens the controls (the crate's copy of the double is loaded separately, by the test).
pub fn controls() -> Double {
    let lib = SdkLibrary::load_from(path()).expect("the double loads through the crate");
    // SAFETY: the same file the crate opened (dlopen returns the same handle); symbols typed as in the C file.
    unsafe {
        let c = libloading::Library::new(path()).expect("open the double");
        macro_rules! get {
            ($n:literal) => {
                *c.get($n).unwrap()
            };
        }
        Double {
            lib,
            start_runtime: get!(b"rpsdk_start_runtime\0"),
            emit_to: get!(b"rpsdk_emit_to\0"),
            emit: get!(b"rpsdk_emit\0"),
            emit_kernel: get!(b"rpsdk_emit_kernel\0"),
            emit_api: get!(b"rpsdk_emit_api\0"),
            emit_copy: get!(b"rpsdk_emit_copy\0"),
            load_code_object: get!(b"rpsdk_load_code_object\0"),
            roctx_mark: get!(b"rpsdk_roctx_mark\0"),
            roctx_push: get!(b"rpsdk_roctx_push\0"),
            roctx_pop: get!(b"rpsdk_roctx_pop\0"),
            roctx_start: get!(b"rpsdk_roctx_start\0"),
            roctx_stop: get!(b"rpsdk_roctx_stop\0"),
            thread_id: get!(b"rpsdk_thread_id\0"),
            stats: get!(b"rpsdk_stats\0"),
            _controls: c,
        }
    }
}

pub fn double() -> &'static Double {
    static D: OnceLock<Double> = OnceLock::new();
    D.get_or_init(controls)
}

impl Double {
    pub fn stats(&self) -> Stats {
        let mut s = [0u64; 7];
        // SAFETY: the double writes 7 values.
        unsafe { (self.stats)(s.as_mut_ptr()) };
        Stats {
            records: s[0],
            callbacks: s[1],
            flushes: s[2],
            dropped: s[3],
            tool_inits: s[4],
            tool_finis: s[5],
            callbacks_traced: s[6],
        }
    }

    /// Writes `record` (a plain C struct) into buffer `buffer` as (category, kind).
    pub fn emit_to<R>(&self, buffer: u64, category: u32, kind: u32, record: &R) -> i32 {
        // SAFETY: `record` is plain data of its size.
        unsafe {
            (self.emit_to)(
                buffer,
                category,
                kind,
                (record as *const R).cast(),
                size_of::<R>(),
            )
        }
    }

    /// Writes `record` to every buffer tracing `kind`.
    pub fn emit<R>(&self, kind: u32, record: &R) -> i32 {
        // SAFETY: as above.
        unsafe { (self.emit)(kind, (record as *const R).cast(), size_of::<R>()) }
    }
}
