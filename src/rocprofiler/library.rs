//! `librocprofiler64.so.2`, loaded once per process.
//!
//! The library is itself an HSA tool: it must be mapped before the HSA runtime starts (before the first HIP call
//! of the process), or named in `HSA_TOOLS_LIB`. Loading it is safe on any machine; initialising it is not (see
//! the safe layer), which is why loading never initialises.

use std::ffi::CStr;
use std::path::Path;

use crate::loader::{self, LibrarySpec, LoadError, Rejection, Slot};
use crate::sys::rocprofiler as sys;

pub(crate) static SPEC: LibrarySpec = LibrarySpec {
    name: "rocprofiler v2 (librocprofiler64.so.2)",
    file_names: &["librocprofiler64.so.2", "librocprofiler64v2.so"],
    env_var: "GPU_TOOLS_ROCPROFILER_LIB",
    roots: &["ROCM_PATH"],
    root_subdirs: &["lib", "lib64"],
    standard_dirs: &["/opt/rocm/lib", "/opt/rocm/lib64"],
    wheel_subdirs: &[],
};

static ROCPROFILER: Slot<RocprofilerLibrary> = Slot::new();

/// Every function the crate binds; a library missing one of them is rejected at load time.
pub(crate) const REQUIRED: &[&str] = &[
    "rocprofiler_version_major",
    "rocprofiler_version_minor",
    "rocprofiler_error_str",
    "rocprofiler_initialize",
    "rocprofiler_finalize",
    "rocprofiler_get_timestamp",
    "rocprofiler_query_agent_info_size",
    "rocprofiler_query_agent_info",
    "rocprofiler_query_queue_info_size",
    "rocprofiler_query_queue_info",
    "rocprofiler_query_kernel_info_size",
    "rocprofiler_query_kernel_info",
    "rocprofiler_iterate_counters",
    "rocprofiler_query_counter_info_size",
    "rocprofiler_query_counter_info",
    "rocprofiler_query_tracer_operation_name",
    "rocprofiler_tracer_operation_id",
    "rocprofiler_flush_data",
    "rocprofiler_next_record",
    "rocprofiler_create_session",
    "rocprofiler_destroy_session",
    "rocprofiler_create_filter",
    "rocprofiler_set_filter_buffer",
    "rocprofiler_set_api_trace_sync_callback",
    "rocprofiler_destroy_filter",
    "rocprofiler_create_buffer",
    "rocprofiler_set_buffer_properties",
    "rocprofiler_destroy_buffer",
    "rocprofiler_create_ready_session",
    "rocprofiler_start_session",
    "rocprofiler_terminate_session",
    "rocprofiler_device_profiling_session_create",
    "rocprofiler_device_profiling_session_start",
    "rocprofiler_device_profiling_session_poll",
    "rocprofiler_device_profiling_session_stop",
    "rocprofiler_device_profiling_session_destroy",
    "rocprofiler_codeobj_capture_create",
    "rocprofiler_codeobj_capture_get",
    "rocprofiler_codeobj_capture_free",
    "rocprofiler_codeobj_capture_start",
    "rocprofiler_codeobj_capture_stop",
];

/// The loaded rocprofiler v2 library.
pub struct RocprofilerLibrary {
    /// The bindgen table; every entry of [`REQUIRED`] was checked present at load time.
    pub(crate) t: sys::RocprofilerFns,
}

// SAFETY: the table holds function pointers and a never-unloaded library handle; rocprofiler's entry points
// lock their own state.
unsafe impl Send for RocprofilerLibrary {}
// SAFETY: as above.
unsafe impl Sync for RocprofilerLibrary {}

impl std::fmt::Debug for RocprofilerLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RocprofilerLibrary")
            .field("path", &ROCPROFILER.path())
            .finish_non_exhaustive()
    }
}

impl RocprofilerLibrary {
    /// Loads `librocprofiler64.so.2` with the crate's search order, once per process. Does not initialise it.
    pub fn load() -> Result<&'static Self, LoadError> {
        ROCPROFILER.load(&SPEC, None, bind)
    }

    /// Loads it from an explicit path.
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Self, LoadError> {
        ROCPROFILER.load(&SPEC, Some(path.as_ref()), bind)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        ROCPROFILER.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        ROCPROFILER.path()
    }

    /// `rocprofiler_version_major/minor`: safe without an AMD driver.
    pub fn version(&self) -> (u32, u32) {
        match (
            &self.t.rocprofiler_version_major,
            &self.t.rocprofiler_version_minor,
        ) {
            // SAFETY: both take no arguments and return constants; checked present at load time.
            (Ok(major), Ok(minor)) => unsafe { (major(), minor()) },
            _ => (0, 0),
        }
    }

    /// `rocprofiler_error_str` without its trailing newline: safe without an AMD driver.
    pub fn error_str(&self, status: i32) -> Option<String> {
        let f = self.t.rocprofiler_error_str.as_ref().ok()?;
        // SAFETY: the function maps a status to a static string and takes no other state.
        let p = unsafe { f(status) };
        if p.is_null() {
            return None;
        }
        // SAFETY: non-null NUL-terminated static string.
        let s = unsafe { CStr::from_ptr(p) }.to_string_lossy();
        Some(s.trim_end_matches(['\n', '\r']).to_string())
    }
}

fn bind(path: &Path) -> Result<RocprofilerLibrary, Rejection> {
    let lib = loader::dlopen(path)?;
    for name in REQUIRED {
        let mut sym = name.as_bytes().to_vec();
        sym.push(0);
        // SAFETY: only looks the symbol up, as an untyped address; nothing is called.
        if unsafe { lib.get::<*const ()>(&sym) }.is_err() {
            return Err(Rejection::MissingSymbol(name));
        }
    }
    // SAFETY: from_library only looks symbols up.
    let t = unsafe { sys::RocprofilerFns::from_library(lib) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))?;
    Ok(RocprofilerLibrary { t })
}

/// A bound function pointer. Every name in [`REQUIRED`] was checked present at load time, so the error is
/// unreachable for a loaded library; it exists so that no call site needs `unwrap`.
pub(crate) fn sym<F: Copy>(
    field: &Result<F, libloading::Error>,
    name: &'static str,
) -> Result<F, super::ProfilerError> {
    crate::loader::required(field, name).map_err(|_| super::ProfilerError::MissingSymbol(name))
}
