//! `libcheckpoint.so` (the checkpoint API) and `libcupti.so` (result strings, version), each loaded once.

use std::ffi::c_char;
use std::path::Path;

use crate::loader::{self, LibrarySpec, LoadError, Rejection, Slot};
use crate::sys::cupti as sys;

const CUDA_ROOTS: &[&str] = &["CUDA_HOME", "CUDA_PATH"];
const CUDA_SUBDIRS: &[&str] = &["extras/CUPTI/lib64", "targets/x86_64-linux/lib", "lib64"];
const CUDA_STANDARD: &[&str] = &[
    "/usr/local/cuda/extras/CUPTI/lib64",
    "/usr/local/cuda/targets/x86_64-linux/lib",
    "/usr/local/cuda/lib64",
];
const WHEEL_SUBDIRS: &[&str] = &["nvidia/cu13/lib", "nvidia/cuda_cupti/lib"];

pub(crate) static CHECKPOINT_SPEC: LibrarySpec = LibrarySpec {
    name: "CUPTI checkpoint (libcheckpoint.so)",
    file_names: &["libcheckpoint.so"],
    env_var: "GPU_TOOLS_CHECKPOINT_LIB",
    roots: CUDA_ROOTS,
    root_subdirs: CUDA_SUBDIRS,
    standard_dirs: CUDA_STANDARD,
    wheel_subdirs: WHEEL_SUBDIRS,
};

pub(crate) static CUPTI_SPEC: LibrarySpec = LibrarySpec {
    name: "CUPTI (libcupti.so.13 or .12)",
    file_names: &["libcupti.so.13", "libcupti.so.12", "libcupti.so"],
    env_var: "GPU_TOOLS_CUPTI_LIB",
    roots: CUDA_ROOTS,
    root_subdirs: CUDA_SUBDIRS,
    standard_dirs: CUDA_STANDARD,
    wheel_subdirs: WHEEL_SUBDIRS,
};

static CHECKPOINT: Slot<CheckpointLibrary> = Slot::new();
static CUPTI: Slot<CuptiLibrary> = Slot::new();

/// Signature of `cuptiCheckpointSave`, `cuptiCheckpointRestore` and `cuptiCheckpointFree`.
pub type CheckpointFn =
    unsafe extern "C" fn(*mut sys::NV_Cupti_Checkpoint_CUpti_Checkpoint) -> sys::CUptiResult;
type StringFn = unsafe extern "C" fn(sys::CUptiResult, *mut *const c_char) -> sys::CUptiResult;

/// The loaded `libcheckpoint.so`.
pub struct CheckpointLibrary {
    /// `cuptiCheckpointSave`.
    pub save: CheckpointFn,
    /// `cuptiCheckpointRestore`.
    pub restore: CheckpointFn,
    /// `cuptiCheckpointFree`.
    pub free: CheckpointFn,
    _table: sys::CuptiFns,
}

// SAFETY: only function pointers and a library handle that is never unloaded; the checkpoint entry points take
// their state through the handle argument.
unsafe impl Send for CheckpointLibrary {}
// SAFETY: as above.
unsafe impl Sync for CheckpointLibrary {}

impl std::fmt::Debug for CheckpointLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointLibrary")
            .field("path", &CHECKPOINT.path())
            .finish_non_exhaustive()
    }
}

impl CheckpointLibrary {
    /// Loads `libcheckpoint.so` with the crate's search order, once per process.
    pub fn load() -> Result<&'static Self, LoadError> {
        CHECKPOINT.load(&CHECKPOINT_SPEC, None, bind_checkpoint)
    }

    /// Loads it from an explicit path (or returns the copy already loaded from that path).
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Self, LoadError> {
        CHECKPOINT.load(&CHECKPOINT_SPEC, Some(path.as_ref()), bind_checkpoint)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        CHECKPOINT.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        CHECKPOINT.path()
    }
}

fn bind_checkpoint(path: &Path) -> Result<CheckpointLibrary, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: from_library only looks symbols up and calls nothing; each one is typed with the vendor
    // header's signature, which holds for the vendor library the loader opened (loader docs, "Trust").
    let t = unsafe { sys::CuptiFns::from_library(lib) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))?;
    Ok(CheckpointLibrary {
        save: loader::required(
            &t.NV_Cupti_Checkpoint_cuptiCheckpointSave,
            "cuptiCheckpointSave",
        )?,
        restore: loader::required(
            &t.NV_Cupti_Checkpoint_cuptiCheckpointRestore,
            "cuptiCheckpointRestore",
        )?,
        free: loader::required(
            &t.NV_Cupti_Checkpoint_cuptiCheckpointFree,
            "cuptiCheckpointFree",
        )?,
        _table: t,
    })
}

type Status = sys::CUptiResult;

/// The Activity API entry points the tracer calls.
#[derive(Clone, Copy)]
pub(crate) struct ActivityFns {
    pub enable: unsafe extern "C" fn(sys::CUpti_ActivityKind) -> Status,
    pub disable: unsafe extern "C" fn(sys::CUpti_ActivityKind) -> Status,
    pub register_callbacks: unsafe extern "C" fn(
        sys::CUpti_BuffersCallbackRequestFunc,
        sys::CUpti_BuffersCallbackCompleteFunc,
    ) -> Status,
    pub flush_all: unsafe extern "C" fn(u32) -> Status,
    pub get_num_dropped: unsafe extern "C" fn(sys::CUcontext, u32, *mut usize) -> Status,
    pub get_next_record: NextRecordFn,
    /// CUPTI 12.? and later (both wheels have it).
    pub register_timestamp_callback:
        Option<unsafe extern "C" fn(sys::CUpti_TimestampCallbackFunc) -> Status>,
    pub get_timestamp: Option<unsafe extern "C" fn(*mut u64) -> Status>,
    pub flush_period: Option<unsafe extern "C" fn(u32) -> Status>,
    pub get_context_id: Option<unsafe extern "C" fn(sys::CUcontext, *mut u32) -> Status>,
    /// CUPTI 12.? and later: API records per callback id.
    pub enable_driver_api: Option<unsafe extern "C" fn(sys::CUpti_CallbackId, u8) -> Status>,
    pub enable_runtime_api: Option<unsafe extern "C" fn(sys::CUpti_CallbackId, u8) -> Status>,
    /// Which thread id activity records carry (process-wide).
    pub get_thread_id_type:
        Option<unsafe extern "C" fn(*mut sys::CUpti_ActivityThreadIdType) -> Status>,
    pub set_thread_id_type: Option<unsafe extern "C" fn(sys::CUpti_ActivityThreadIdType) -> Status>,
}

/// `cuptiActivityGetNextRecord`.
pub(crate) type NextRecordFn =
    unsafe extern "C" fn(*mut u8, usize, *mut *mut sys::CUpti_Activity) -> Status;

/// `cuptiSubscribe`'s signature.
pub(crate) type SubscribeFn = unsafe extern "C" fn(
    *mut sys::CUpti_SubscriberHandle,
    sys::CUpti_CallbackFunc,
    *mut std::ffi::c_void,
) -> Status;

/// `cuptiSubscribe_v2`'s signature.
pub(crate) type SubscribeV2Fn = unsafe extern "C" fn(
    *mut sys::CUpti_SubscriberHandle,
    sys::CUpti_CallbackFunc,
    *mut std::ffi::c_void,
    *mut sys::CUpti_SubscriberParams,
) -> Status;

/// The Callback API entry points the subscriber calls.
#[derive(Clone, Copy)]
pub(crate) struct CallbackFns {
    pub subscribe: SubscribeFn,
    /// CUPTI 13.0 and later: names the subscriber and reports who holds the one subscription.
    pub subscribe_v2: Option<SubscribeV2Fn>,
    pub unsubscribe: unsafe extern "C" fn(sys::CUpti_SubscriberHandle) -> Status,
    pub enable_domain:
        unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle, sys::CUpti_CallbackDomain) -> Status,
    pub enable_callback: unsafe extern "C" fn(
        u32,
        sys::CUpti_SubscriberHandle,
        sys::CUpti_CallbackDomain,
        sys::CUpti_CallbackId,
    ) -> Status,
    pub get_context_id: Option<unsafe extern "C" fn(sys::CUcontext, *mut u32) -> Status>,
    pub get_stream_id:
        Option<unsafe extern "C" fn(sys::CUcontext, sys::CUstream, *mut u32) -> Status>,
    pub get_graph_id: Option<unsafe extern "C" fn(sys::CUgraph, *mut u32) -> Status>,
    pub get_graph_exec_id: Option<unsafe extern "C" fn(sys::CUgraphExec, *mut u32) -> Status>,
    /// `cuptiFinalize`: detaches CUPTI from the process (see `callback::finalize_at_api_exit`).
    pub finalize: Option<unsafe extern "C" fn() -> Status>,
}

/// Which tracing entry points a loaded `libcupti` exports.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TracingSymbols {
    /// Required by the Activity or Callback layer and missing: that layer refuses to start.
    pub missing_required: Vec<&'static str>,
    /// Optional entry points the library has.
    pub optional_present: Vec<&'static str>,
    /// Optional entry points it lacks (older releases).
    pub optional_missing: Vec<&'static str>,
}

/// The loaded `libcupti.so`: version, the vendor's names and messages for result codes, and the Activity and
/// Callback APIs.
pub struct CuptiLibrary {
    get_version: unsafe extern "C" fn(*mut u32) -> sys::CUptiResult,
    get_result_string: StringFn,
    /// Only in CUPTI 12.2 and later.
    get_error_message: Option<StringFn>,
    /// The Activity API, or the first required symbol it lacks.
    pub(crate) activity: Result<ActivityFns, &'static str>,
    /// The Callback API, or the first required symbol it lacks.
    pub(crate) callback: Result<CallbackFns, &'static str>,
    symbols: TracingSymbols,
    /// The profiling APIs' entry points, each optional (`None` where the table could not be made at all).
    pub(crate) profiling: Option<crate::sys::cupti_profiling::CuptiProfilingFns>,
    _table: sys::CuptiFns,
}

// SAFETY: function pointers and a never-unloaded library handle; the called functions are documented as
// thread-safe queries.
unsafe impl Send for CuptiLibrary {}
// SAFETY: as above.
unsafe impl Sync for CuptiLibrary {}

impl std::fmt::Debug for CuptiLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CuptiLibrary")
            .field("path", &CUPTI.path())
            .finish_non_exhaustive()
    }
}

impl CuptiLibrary {
    /// Loads `libcupti.so.13` (or `.12`) with the crate's search order, once per process.
    pub fn load() -> Result<&'static Self, LoadError> {
        CUPTI.load(&CUPTI_SPEC, None, bind_cupti)
    }

    /// Loads it from an explicit path.
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Self, LoadError> {
        CUPTI.load(&CUPTI_SPEC, Some(path.as_ref()), bind_cupti)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        CUPTI.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        CUPTI.path()
    }

    /// `cuptiGetVersion`: the CUPTI API version, for example 130001. Needs no GPU and no driver.
    pub fn version(&self) -> Result<u32, super::CuptiError> {
        let mut v = 0;
        // SAFETY: valid out-pointer; the call only reports a constant.
        super::CuptiError::check_call("cuptiGetVersion", unsafe { (self.get_version)(&mut v) })?;
        Ok(v)
    }

    /// [`version`](Self::version), decoded: CUDA 12 and CUDA 13 number the CUPTI API differently.
    pub fn api_version(&self) -> Result<CuptiVersion, super::CuptiError> {
        self.version().map(CuptiVersion::from_api)
    }

    /// `cuptiGetResultString`: the vendor's name for a code, `None` where the library does not know it.
    pub fn result_string(&self, code: u32) -> Option<String> {
        call_string(self.get_result_string, code)
    }

    /// `cuptiGetErrorMessage` (CUPTI 12.2+): the vendor's description of a code.
    pub fn error_message(&self, code: u32) -> Option<String> {
        self.get_error_message.and_then(|f| call_string(f, code))
    }

    /// Which Activity and Callback entry points the library exports.
    pub fn tracing_symbols(&self) -> &TracingSymbols {
        &self.symbols
    }
}

fn call_string(f: StringFn, code: u32) -> Option<String> {
    // SAFETY: cuptiGetResultString and cuptiGetErrorMessage hand out static strings and return CUPTI_SUCCESS (0).
    unsafe { crate::status::code_string(f, code) }
}

fn bind_cupti(path: &Path) -> Result<CuptiLibrary, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: from_library only looks symbols up and calls nothing; each one is typed with the vendor
    // header's signature, which holds for the vendor library the loader opened (loader docs, "Trust").
    let t = unsafe { sys::CuptiFns::from_library(lib) }
        .map_err(|e| Rejection::OpenFailed(e.to_string()))?;
    let mut symbols = TracingSymbols::default();
    let activity = bind_activity(&t, &mut symbols);
    let callback = bind_callback(&t, &mut symbols);
    // The profiling entry points are a table of their own on the same file: opening it again returns the handle
    // just made. Every entry point is optional (older releases lack the newer APIs).
    let profiling = loader::dlopen(path).ok().and_then(|lib| {
        // SAFETY: as above, for the profiling headers' signatures.
        unsafe { crate::sys::cupti_profiling::CuptiProfilingFns::from_library(lib) }.ok()
    });
    Ok(CuptiLibrary {
        get_version: loader::required(&t.cuptiGetVersion, "cuptiGetVersion")?,
        get_result_string: loader::required(&t.cuptiGetResultString, "cuptiGetResultString")?,
        get_error_message: loader::optional(&t.cuptiGetErrorMessage),
        activity,
        callback,
        symbols,
        profiling,
        _table: t,
    })
}

/// Copies a required tracing entry point, noting it when missing.
fn need<F: Copy>(
    field: &Result<F, libloading::Error>,
    name: &'static str,
    symbols: &mut TracingSymbols,
) -> Result<F, &'static str> {
    field.as_ref().map(|f| *f).map_err(|_| {
        symbols.missing_required.push(name);
        name
    })
}

/// Copies an optional tracing entry point, noting whether it is there.
fn want<F: Copy>(
    field: &Result<F, libloading::Error>,
    name: &'static str,
    symbols: &mut TracingSymbols,
) -> Option<F> {
    let f = loader::optional(field);
    if f.is_some() {
        symbols.optional_present.push(name);
    } else {
        symbols.optional_missing.push(name);
    }
    f
}

fn bind_activity(
    t: &sys::CuptiFns,
    symbols: &mut TracingSymbols,
) -> Result<ActivityFns, &'static str> {
    // Every symbol is looked at, so `symbols` lists all that are missing, not only the first.
    let enable = need(&t.cuptiActivityEnable, "cuptiActivityEnable", symbols);
    let disable = need(&t.cuptiActivityDisable, "cuptiActivityDisable", symbols);
    let register_callbacks = need(
        &t.cuptiActivityRegisterCallbacks,
        "cuptiActivityRegisterCallbacks",
        symbols,
    );
    let flush_all = need(&t.cuptiActivityFlushAll, "cuptiActivityFlushAll", symbols);
    let get_num_dropped = need(
        &t.cuptiActivityGetNumDroppedRecords,
        "cuptiActivityGetNumDroppedRecords",
        symbols,
    );
    let get_next_record = need(
        &t.cuptiActivityGetNextRecord,
        "cuptiActivityGetNextRecord",
        symbols,
    );
    let register_timestamp_callback = want(
        &t.cuptiActivityRegisterTimestampCallback,
        "cuptiActivityRegisterTimestampCallback",
        symbols,
    );
    let get_timestamp = want(&t.cuptiGetTimestamp, "cuptiGetTimestamp", symbols);
    let flush_period = want(
        &t.cuptiActivityFlushPeriod,
        "cuptiActivityFlushPeriod",
        symbols,
    );
    let get_context_id = want(&t.cuptiGetContextId, "cuptiGetContextId", symbols);
    let enable_driver_api = want(
        &t.cuptiActivityEnableDriverApi,
        "cuptiActivityEnableDriverApi",
        symbols,
    );
    let enable_runtime_api = want(
        &t.cuptiActivityEnableRuntimeApi,
        "cuptiActivityEnableRuntimeApi",
        symbols,
    );
    let get_thread_id_type = want(&t.cuptiGetThreadIdType, "cuptiGetThreadIdType", symbols);
    let set_thread_id_type = want(&t.cuptiSetThreadIdType, "cuptiSetThreadIdType", symbols);
    Ok(ActivityFns {
        enable: enable?,
        disable: disable?,
        register_callbacks: register_callbacks?,
        flush_all: flush_all?,
        get_num_dropped: get_num_dropped?,
        get_next_record: get_next_record?,
        register_timestamp_callback,
        get_timestamp,
        flush_period,
        get_context_id,
        enable_driver_api,
        enable_runtime_api,
        get_thread_id_type,
        set_thread_id_type,
    })
}

fn bind_callback(
    t: &sys::CuptiFns,
    symbols: &mut TracingSymbols,
) -> Result<CallbackFns, &'static str> {
    let subscribe = need(&t.cuptiSubscribe, "cuptiSubscribe", symbols);
    let subscribe_v2 = want(&t.cuptiSubscribe_v2, "cuptiSubscribe_v2", symbols);
    let unsubscribe = need(&t.cuptiUnsubscribe, "cuptiUnsubscribe", symbols);
    let enable_domain = need(&t.cuptiEnableDomain, "cuptiEnableDomain", symbols);
    let enable_callback = need(&t.cuptiEnableCallback, "cuptiEnableCallback", symbols);
    // Already noted by the activity binding.
    let get_context_id = loader::optional(&t.cuptiGetContextId);
    let get_stream_id = want(&t.cuptiGetStreamId, "cuptiGetStreamId", symbols);
    Ok(CallbackFns {
        subscribe: subscribe?,
        subscribe_v2,
        unsubscribe: unsubscribe?,
        enable_domain: enable_domain?,
        enable_callback: enable_callback?,
        get_context_id,
        get_stream_id,
        get_graph_id: loader::optional(&t.cuptiGetGraphId),
        get_graph_exec_id: loader::optional(&t.cuptiGetGraphExecId),
        finalize: want(&t.cuptiFinalize, "cuptiFinalize", symbols),
    })
}

/// A CUPTI API version as `cuptiGetVersion` reports it, with the CUDA release it belongs to.
///
/// Up to CUDA 12.9 the API version is a small counter (19 for CUDA 12.0, 28 for 12.9 Update 1); from CUDA 13.0 on
/// it is `xxyyzz`: CUDA major, CUDA minor, CUPTI update (130001 for 13.0 Update 1). The two forms do not overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CuptiVersion {
    api: u32,
}

/// The counters of `cupti_version.h` for CUDA 12 (25 is not listed there).
const CUDA12_COUNTERS: &[(u32, (u32, u32))] = &[
    (19, (12, 0)),
    (20, (12, 2)),
    (21, (12, 3)),
    (22, (12, 4)),
    (23, (12, 5)),
    (24, (12, 6)),
    (26, (12, 8)),
    (27, (12, 9)),
    (28, (12, 9)),
];

impl CuptiVersion {
    /// The version of the CUPTI header the crate's bindings were generated from.
    pub const HEADER: CuptiVersion = CuptiVersion {
        api: sys::CUPTI_API_VERSION,
    };

    /// Wraps a value of `cuptiGetVersion` or `CUPTI_API_VERSION`.
    pub const fn from_api(api: u32) -> Self {
        CuptiVersion { api }
    }

    /// The raw API version.
    pub const fn api(self) -> u32 {
        self.api
    }

    /// The CUDA release (major, minor) this CUPTI belongs to; `None` for a counter older than CUDA 12.0 or one
    /// `cupti_version.h` does not list.
    pub fn cuda(self) -> Option<(u32, u32)> {
        if self.api >= 10_000 {
            return Some((self.api / 10_000, self.api / 100 % 100));
        }
        CUDA12_COUNTERS
            .iter()
            .find(|(api, _)| *api == self.api)
            .map(|(_, cuda)| *cuda)
    }
}

impl std::fmt::Display for CuptiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.cuda() {
            Some((major, minor)) => write!(f, "API {} (CUDA {major}.{minor})", self.api),
            None => write!(f, "API {}", self.api),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::CuptiVersion;

    #[test]
    fn both_numberings_decode() {
        assert_eq!(CuptiVersion::from_api(28).cuda(), Some((12, 9)));
        assert_eq!(CuptiVersion::from_api(19).cuda(), Some((12, 0)));
        assert_eq!(
            CuptiVersion::from_api(25).cuda(),
            None,
            "not in cupti_version.h"
        );
        assert_eq!(CuptiVersion::from_api(18).cuda(), None, "CUDA 11.8");
        assert_eq!(CuptiVersion::from_api(130001).cuda(), Some((13, 0)));
        assert_eq!(CuptiVersion::from_api(130100).cuda(), Some((13, 1)));
        assert_eq!(CuptiVersion::HEADER.cuda(), Some((13, 0)));
        assert_eq!(CuptiVersion::from_api(28).to_string(), "API 28 (CUDA 12.9)");
        assert_eq!(
            CuptiVersion::from_api(130001).to_string(),
            "API 130001 (CUDA 13.0)"
        );
        assert_eq!(CuptiVersion::from_api(25).to_string(), "API 25");
        assert!(CuptiVersion::from_api(28) < CuptiVersion::from_api(130000));
    }
}
