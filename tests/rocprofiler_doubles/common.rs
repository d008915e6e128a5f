//! Shared helpers for tests against the rocprofiler double (`gpu-tools-testing/doubles/rocprofiler_double.c`).

use std::ffi::{CString, c_char, c_int, c_void};
use std::mem::offset_of;
use std::sync::{Mutex, MutexGuard, OnceLock};

use gpu_tools::rocprofiler::{Rocprofiler, RocprofilerLibrary};
use gpu_tools::sys::rocprofiler as sys;

pub const SESSION_NOT_ACTIVE: i32 = sys::ROCPROFILER_STATUS_ERROR_SESSION_NOT_ACTIVE;

type EmitFn = unsafe extern "C" fn(u32, *const c_void, usize, *const c_void, usize, usize) -> c_int;

/// The double, loaded once per test process, with its test controls.
pub struct Double {
    pub lib: &'static RocprofilerLibrary,
    emit: EmitFn,
    fail_next: unsafe extern "C" fn(*const c_char, c_int),
    corrupt_next: unsafe extern "C" fn(c_int),
    stats: unsafe extern "C" fn(*mut u64),
    _controls: libloading::Library,
}

/// Counters the double keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    pub records: u64,
    pub callbacks: u64,
    pub flushes: u64,
    pub destroyed: u64,
    pub next_record: u64,
    pub initialize: u64,
    pub finalize: u64,
    pub callback_bytes: u64,
    pub active: u64,
}

pub fn path() -> std::path::PathBuf {
    gpu_tools_testing::double_path("rocprofiler_double")
}

pub fn double() -> &'static Double {
    static D: OnceLock<Double> = OnceLock::new();
    D.get_or_init(|| {
        let lib = RocprofilerLibrary::load_from(path()).expect("double loads through the crate");
        // SAFETY: the same file the crate opened: dlopen returns the same handle; symbols typed as in the C file.
        unsafe {
            let controls = libloading::Library::new(path()).expect("open double");
            let emit = *controls.get::<EmitFn>(b"rpd_emit\0").unwrap();
            let fail_next = *controls.get(b"rpd_fail_next\0").unwrap();
            let corrupt_next = *controls.get(b"rpd_corrupt_next\0").unwrap();
            let stats = *controls.get(b"rpd_stats\0").unwrap();
            Double {
                lib,
                emit,
                fail_next,
                corrupt_next,
                stats,
                _controls: controls,
            }
        }
    })
}

/// rocprofiler state is per process: tests of one binary take turns.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|p| p.into_inner())
}

pub fn init() -> Rocprofiler {
    // SAFETY: the double needs no driver and never aborts.
    unsafe { Rocprofiler::initialize_unchecked(double().lib) }.expect("initialise the double")
}

impl Double {
    /// Emits a record through the filter of `filter_kind`; `data` goes to the buffer's back with the pointer at
    /// `pointer_offset` patched. Returns the double's status.
    pub fn emit<R>(&self, filter_kind: u32, record: &R, data: &[u8], pointer_offset: usize) -> i32 {
        // SAFETY: `record` is a plain C struct of its size; `data` is readable for its length.
        unsafe {
            (self.emit)(
                filter_kind,
                (record as *const R).cast(),
                size_of::<R>(),
                if data.is_empty() {
                    std::ptr::null()
                } else {
                    data.as_ptr().cast()
                },
                data.len(),
                pointer_offset,
            )
        }
    }

    pub fn emit_profiler(
        &self,
        filter_kind: u32,
        id: u64,
        kernel_id: u64,
        counters: &[(u64, f64)],
    ) -> i32 {
        let (rec, bytes) = profiler_record(id, kernel_id, counters);
        self.emit(
            filter_kind,
            &rec,
            &bytes,
            offset_of!(sys::rocprofiler_record_profiler_t, counters),
        )
    }

    pub fn emit_tracer(&self, id: u64, name: &str, phase: u32) -> i32 {
        let mut rec = sys::rocprofiler_record_tracer_t::default();
        rec.header.kind = sys::ROCPROFILER_TRACER_RECORD;
        rec.header.id.handle = id;
        rec.domain = sys::ACTIVITY_DOMAIN_HIP_API;
        rec.operation_id.id = 7;
        rec.phase = phase;
        rec.timestamps.begin.value = id * 10;
        rec.timestamps.end.value = id * 10 + 5;
        let name = CString::new(name).unwrap();
        self.emit(
            sys::ROCPROFILER_API_TRACE,
            &rec,
            name.as_bytes_with_nul(),
            offset_of!(sys::rocprofiler_record_tracer_t, name),
        )
    }

    pub fn fail_next(&self, function: &str, status: i32) {
        let name = CString::new(function).unwrap();
        // SAFETY: valid C string for the call; the double copies it.
        unsafe { (self.fail_next)(name.as_ptr(), status) }
    }

    pub fn corrupt_next(&self, mode: i32) {
        // SAFETY: plain value.
        unsafe { (self.corrupt_next)(mode) }
    }

    pub fn stats(&self) -> Stats {
        let mut s = [0u64; 9];
        // SAFETY: the double writes 9 values.
        unsafe { (self.stats)(s.as_mut_ptr()) };
        Stats {
            records: s[0],
            callbacks: s[1],
            flushes: s[2],
            destroyed: s[3],
            next_record: s[4],
            initialize: s[5],
            finalize: s[6],
            callback_bytes: s[7],
            active: s[8],
        }
    }
}

/// A profiler record and the bytes of its counter array.
pub fn profiler_record(
    id: u64,
    kernel_id: u64,
    counters: &[(u64, f64)],
) -> (sys::rocprofiler_record_profiler_t, Vec<u8>) {
    let mut rec = sys::rocprofiler_record_profiler_t::default();
    rec.header.kind = sys::ROCPROFILER_PROFILER_RECORD;
    rec.header.id.handle = id;
    rec.kernel_id.handle = kernel_id;
    rec.gpu_id.handle = 1;
    rec.timestamps.begin.value = id;
    rec.timestamps.end.value = id + 100;
    rec.counters_count.value = counters.len() as u64;
    rec.correlation_id.value = id ^ 0xabc;
    let mut bytes = Vec::with_capacity(counters.len() * 16);
    for &(cid, v) in counters {
        bytes.extend_from_slice(&cid.to_ne_bytes());
        bytes.extend_from_slice(&v.to_ne_bytes());
    }
    (rec, bytes)
}
