//! NVTX through CUPTI: NVTX loads the library named by `NVTX_INJECTION64_PATH` at a program's first NVTX call and
//! calls its `InitializeInjectionNvtx2`. This library forwards that call to the `libcupti` the program uses (the
//! one it has mapped, else the crate's search), which implements NVTX and records the calls as marker activity.
//! Pointing `NVTX_INJECTION64_PATH` at this library rather than at a `libcupti` keeps one CUPTI in the process. A
//! program that makes no NVTX call never comes here: NVTX costs it nothing. A program that was started without the
//! variable has made its NVTX calls no-ops by the time a trace attaches: `nvtx_attach` reaches those.

use std::ffi::{c_int, c_void};

/// The address of `symbol` in the loaded `libcupti`, loading it the way the tracing session does.
pub(crate) fn cupti_symbol(symbol: &str) -> Result<*mut c_void, String> {
    crate::session::use_mapped_libraries();
    crate::nvtx_attach::cupti_symbol(symbol)
}

/// Runs `call` with CUPTI's function, catching every panic: nothing unwinds into NVTX.
fn forward(symbol: &str, call: impl FnOnce(*mut c_void) -> c_int) -> c_int {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        match cupti_symbol(symbol) {
            Ok(f) => {
                log::debug!("NVTX handed to CUPTI's {symbol}");
                call(f)
            }
            Err(e) => {
                log::warn!("NVTX is not traced: {e}");
                0
            }
        }
    }));
    result.unwrap_or_else(|payload| {
        std::mem::forget(payload);
        0
    })
}

/// NVTX's entry point into an injection library: forwarded to CUPTI's. Returns what CUPTI returns (non-zero:
/// NVTX calls go to CUPTI), 0 where CUPTI cannot take them (NVTX calls then do nothing, as without a tool).
///
/// # Safety
/// Called by NVTX with its export-table getter, as NVTX's injection protocol says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtx2(get_export_table: *const c_void) -> c_int {
    forward("InitializeInjectionNvtx2", |f| {
        // SAFETY: CUPTI's function of NVTX's injection signature `int (*)(NvtxGetExportTableFunc_t)`.
        let f: unsafe extern "C" fn(*const c_void) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: the argument NVTX gave, passed on unchanged.
        unsafe { f(get_export_table) }
    })
}

/// NVTX's entry point for its extensions (payload schemas): forwarded to CUPTI's.
///
/// # Safety
/// Called by NVTX with its extension module information, as NVTX's injection protocol says.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn InitializeInjectionNvtxExtension(module_info: *mut c_void) -> c_int {
    forward("InitializeInjectionNvtxExtension", |f| {
        // SAFETY: CUPTI's function of signature `int (*)(nvtxExtModuleInfo_t*)`.
        let f: unsafe extern "C" fn(*mut c_void) -> c_int = unsafe { std::mem::transmute(f) };
        // SAFETY: the argument NVTX gave, passed on unchanged.
        unsafe { f(module_info) }
    })
}
