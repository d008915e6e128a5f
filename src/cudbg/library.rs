//! The debugger API entry points of `libcuda.so.1` (`cudbgGetAPIVersion`, `cudbgGetAPI`), loaded once.
//!
//! The API table itself lives in `libcudadebugger.so.1`, which libcuda loads on demand inside `cudbgGetAPI`.

use std::path::Path;

use crate::loader::{self, LoadError, Rejection, Slot};
use crate::sys::cudbg as sys;

static CUDBG: Slot<DebuggerLibrary> = Slot::new();

/// Signature of `cudbgGetAPI`.
pub type GetApiFn = unsafe extern "C" fn(u32, u32, u32, *mut sys::CUDBGAPI) -> sys::CUDBGResult;
/// Signature of `cudbgGetAPIVersion`.
pub type GetApiVersionFn = unsafe extern "C" fn(*mut u32, *mut u32, *mut u32) -> sys::CUDBGResult;

/// The debugger entry points of the CUDA driver library.
pub struct DebuggerLibrary {
    pub(crate) get_api: GetApiFn,
    pub(crate) get_api_version: GetApiVersionFn,
    pub(crate) lib: libloading::Library,
}

// SAFETY: function pointers and a never-unloaded library handle; both entry points are plain queries.
unsafe impl Send for DebuggerLibrary {}
// SAFETY: as above.
unsafe impl Sync for DebuggerLibrary {}

impl std::fmt::Debug for DebuggerLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DebuggerLibrary")
            .field("path", &CUDBG.path())
            .finish_non_exhaustive()
    }
}

/// A debugger API version (major, minor, revision), for example 13.0.163.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ApiVersion {
    /// Major version.
    pub major: u32,
    /// Minor version.
    pub minor: u32,
    /// Revision (build) number; new table slots are gated on it.
    pub revision: u32,
}

impl std::fmt::Display for ApiVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.revision)
    }
}

impl ApiVersion {
    /// The version of the header the crate was generated from (13.0.163).
    pub const HEADER: ApiVersion = ApiVersion {
        major: sys::CUDBG_API_VERSION_MAJOR,
        minor: sys::CUDBG_API_VERSION_MINOR,
        revision: sys::CUDBG_API_VERSION_REVISION,
    };
}

impl DebuggerLibrary {
    /// Loads `libcuda.so.1` (same search order as [`crate::cuda::Driver`]) for its debugger entry points.
    pub fn load() -> Result<&'static Self, LoadError> {
        CUDBG.load(crate::cuda::driver_spec(), None, bind)
    }

    /// Loads it from an explicit path.
    pub fn load_from(path: impl AsRef<Path>) -> Result<&'static Self, LoadError> {
        CUDBG.load(crate::cuda::driver_spec(), Some(path.as_ref()), bind)
    }

    /// The library if loaded; never loads.
    pub fn get() -> Option<&'static Self> {
        CUDBG.get()
    }

    /// Where it was loaded from.
    pub fn path(&self) -> Option<&'static Path> {
        CUDBG.path()
    }

    /// `cudbgGetAPIVersion`: what the installed driver supports. Needs no debuggee and no GPU work.
    pub fn api_version(&self) -> Result<ApiVersion, super::CudbgError> {
        let (mut major, mut minor, mut revision) = (0, 0, 0);
        // SAFETY: valid out-pointers; the call reports constants of the driver.
        super::CudbgError::check_call("cudbgGetAPIVersion", unsafe {
            (self.get_api_version)(&mut major, &mut minor, &mut revision)
        })?;
        Ok(ApiVersion {
            major,
            minor,
            revision,
        })
    }
}

fn bind(path: &Path) -> Result<DebuggerLibrary, Rejection> {
    let lib = loader::dlopen(path)?;
    // SAFETY: symbol look-ups with the signatures of cudadebugger.h; nothing is called.
    let get_api = unsafe { lib.get::<GetApiFn>(b"cudbgGetAPI\0") }
        .map(|s| *s)
        .map_err(|_| Rejection::MissingSymbol("cudbgGetAPI"))?;
    // SAFETY: as above.
    let get_api_version = unsafe { lib.get::<GetApiVersionFn>(b"cudbgGetAPIVersion\0") }
        .map(|s| *s)
        .map_err(|_| Rejection::MissingSymbol("cudbgGetAPIVersion"))?;
    Ok(DebuggerLibrary {
        get_api,
        get_api_version,
        lib,
    })
}
