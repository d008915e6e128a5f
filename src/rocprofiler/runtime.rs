//! The initialised library: a process-wide guard that finalises on drop, timestamps, counter listing.

use std::ffi::{CStr, c_char, c_int};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use super::library::sym;
use super::{ProfilerError, RocprofilerError, RocprofilerLibrary, kfd};
use crate::Result;
use crate::sys::rocprofiler as sys;

/// Set while a [`Rocprofiler`] guard exists.
static INITIALIZED: AtomicBool = AtomicBool::new(false);

/// rocprofiler, initialised. Dropping it calls `rocprofiler_finalize`; sessions borrow it, so they end first.
///
/// One guard exists per process at a time.
#[derive(Debug)]
pub struct Rocprofiler {
    lib: &'static RocprofilerLibrary,
}

impl Rocprofiler {
    /// Checks that an AMD GPU driver is present ([`amd_gpus`](super::amd_gpus)),
    /// then calls `rocprofiler_initialize`. Without a driver this returns [`ProfilerError::NoAmdDriver`] and
    /// does not call the vendor, whose initialisation would abort the process.
    pub fn initialize(lib: &'static RocprofilerLibrary) -> Result<Self> {
        kfd::amd_gpus().map_err(|e| ProfilerError::NoAmdDriver(e.reason))?;
        // SAFETY: the driver is present, which is what the vendor's initialisation needs not to abort.
        unsafe { Self::initialize_unchecked(lib) }
    }

    /// Calls `rocprofiler_initialize` without looking for the driver.
    ///
    /// # Safety
    /// The loaded library must not abort in its initialisation: an AMD GPU driver is present, or the library
    /// is one (such as a test double) that needs none.
    pub unsafe fn initialize_unchecked(lib: &'static RocprofilerLibrary) -> Result<Self> {
        if INITIALIZED
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(ProfilerError::AlreadyInitialized.into());
        }
        let init = match sym(&lib.t.rocprofiler_initialize, "rocprofiler_initialize") {
            Ok(f) => f,
            Err(e) => {
                INITIALIZED.store(false, Ordering::Release);
                return Err(e.into());
            }
        };
        // SAFETY: takes no arguments; the caller vouches that it does not abort here.
        let status = unsafe { init() };
        if let Err(e) = RocprofilerError::check(status) {
            INITIALIZED.store(false, Ordering::Release);
            return Err(e.into());
        }
        Ok(Rocprofiler { lib })
    }

    /// The library.
    pub fn library(&self) -> &'static RocprofilerLibrary {
        self.lib
    }

    /// `rocprofiler_get_timestamp`: the clock of record timestamps, in nanoseconds.
    pub fn timestamp(&self) -> Result<u64> {
        let f = sym(
            &self.lib.t.rocprofiler_get_timestamp,
            "rocprofiler_get_timestamp",
        )?;
        let mut ts = sys::rocprofiler_timestamp_t::default();
        // SAFETY: initialised library; `ts` is a valid out-pointer for the call.
        RocprofilerError::check(unsafe { f(&mut ts) })?;
        Ok(ts.value)
    }

    /// Every counter the GPUs offer (`rocprofiler_iterate_counters`), copied into owned values.
    pub fn counters(&self) -> Result<Vec<CounterInfo>> {
        // The vendor's callback takes no user pointer: collect through a process-wide sink, one listing at a time.
        static LISTING: Mutex<()> = Mutex::new(());
        let _one = LISTING.lock().unwrap_or_else(|p| p.into_inner());
        let f = sym(
            &self.lib.t.rocprofiler_iterate_counters,
            "rocprofiler_iterate_counters",
        )?;
        COUNTER_SINK
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        // SAFETY: initialised library; `collect_counter` is a valid callback for the duration of the call.
        let status = unsafe { f(Some(collect_counter)) };
        let out = std::mem::take(&mut *COUNTER_SINK.lock().unwrap_or_else(|p| p.into_inner()));
        RocprofilerError::check(status)?;
        Ok(out)
    }
}

impl Drop for Rocprofiler {
    fn drop(&mut self) {
        if let Ok(f) = sym(&self.lib.t.rocprofiler_finalize, "rocprofiler_finalize") {
            // SAFETY: initialised by this guard; every session borrowed it and has ended.
            let _ = unsafe { f() };
        }
        INITIALIZED.store(false, Ordering::Release);
    }
}

/// A hardware counter as `rocprofiler_iterate_counters` describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterInfo {
    /// Name, as used in [`Filter::counters`](super::Filter::counters).
    pub name: String,
    /// Description.
    pub description: String,
    /// Expression of a derived counter (empty for a basic one).
    pub expression: String,
    /// Number of instances.
    pub instances_count: u32,
    /// Hardware block.
    pub block_name: String,
    /// Counters of the block that can be collected at once.
    pub block_counters: u32,
    /// GPU name (e.g. `gfx942`).
    pub gpu_name: String,
    /// GPU index.
    pub gpu_index: u32,
}

static COUNTER_SINK: Mutex<Vec<CounterInfo>> = Mutex::new(Vec::new());

fn owned(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: the vendor passes NUL-terminated strings valid for the callback.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

unsafe extern "C" fn collect_counter(
    counter: sys::rocprofiler_counter_info_t,
    gpu_name: *const c_char,
    gpu_index: u32,
) -> c_int {
    // No panic may unwind into the vendor (a caught payload is leaked: dropping it could panic again).
    let r = std::panic::catch_unwind(|| {
        let info = CounterInfo {
            name: owned(counter.name),
            description: owned(counter.description),
            expression: owned(counter.expression),
            instances_count: counter.instances_count,
            block_name: owned(counter.block_name),
            block_counters: counter.block_counters,
            gpu_name: owned(gpu_name),
            gpu_index,
        };
        COUNTER_SINK
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(info);
    });
    match r {
        Ok(()) => 0,
        Err(payload) => {
            std::mem::forget(payload);
            1
        }
    }
}
