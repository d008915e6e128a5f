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

/// The loaded `libcupti.so`: version and the vendor's names and messages for result codes.
pub struct CuptiLibrary {
    get_version: unsafe extern "C" fn(*mut u32) -> sys::CUptiResult,
    get_result_string: StringFn,
    /// Only in CUPTI 12.2 and later.
    get_error_message: Option<StringFn>,
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
        super::CuptiError::check(unsafe { (self.get_version)(&mut v) })?;
        Ok(v)
    }

    /// `cuptiGetResultString`: the vendor's name for a code, `None` where the library does not know it.
    pub fn result_string(&self, code: u32) -> Option<String> {
        call_string(self.get_result_string, code)
    }

    /// `cuptiGetErrorMessage` (CUPTI 12.2+): the vendor's description of a code.
    pub fn error_message(&self, code: u32) -> Option<String> {
        self.get_error_message.and_then(|f| call_string(f, code))
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
    Ok(CuptiLibrary {
        get_version: loader::required(&t.cuptiGetVersion, "cuptiGetVersion")?,
        get_result_string: loader::required(&t.cuptiGetResultString, "cuptiGetResultString")?,
        get_error_message: loader::optional(&t.cuptiGetErrorMessage),
        _table: t,
    })
}
