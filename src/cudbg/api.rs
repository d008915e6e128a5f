//! The debugger API table from `cudbgGetAPI`, with its version negotiated against `cudbgGetAPIVersion` and every
//! slot gated on the revision that first has it.
//!
//! The table only grows at its end between revisions, so a slot's position decides the first revision that has it.
//! A driver older than the crate's header hands over a shorter table: reading a slot past its end is undefined, so
//! the gate runs before the slot is even read, and a slot the negotiated revision lacks is a typed error.

use std::mem::offset_of;

use super::{ApiVersion, CudbgError, DebuggerLibrary, SessionError};
use crate::sys::cudbg as sys;

/// First revisions by table position. Each entry: the first slot of a group, and the earliest revision known to
/// have that slot. Where the exact revision is not public, the entry is the lowest revision known to have it (an
/// upper bound), so the gate may refuse a call an older driver could serve but never calls through a missing slot.
const REVISION_STEPS: &[(usize, u32)] = &[
    // cuda-gdb gates getLoadedFunctionInfo (the slot now named getLoadedFunctionInfo118) on revision 132.
    (offset_of!(sys::CUDBGAPI_st, getLoadedFunctionInfo118), 132),
    // CUDA 12.0 to 12.5 slots up to getSupportedDebuggerCapabilities, which cuda-gdb gates on revision 144.
    (offset_of!(sys::CUDBGAPI_st, getGridInfo120), 144),
    // CUDA 12.5 to 13.0 slots after it: known present at the 13.0 header's revision.
    (offset_of!(sys::CUDBGAPI_st, readSmException), 163),
];

/// The first API revision whose table has the slot at byte `offset`.
pub(crate) fn first_revision(offset: usize) -> u32 {
    REVISION_STEPS
        .iter()
        .rev()
        .find(|(start, _)| offset >= *start)
        .map_or(0, |(_, rev)| *rev)
}

/// The version to ask `cudbgGetAPI` for: the lesser of what the driver supports and what the crate was built for.
pub fn negotiate(driver: ApiVersion, header: ApiVersion) -> ApiVersion {
    driver.min(header)
}

/// The negotiated debugger API table.
///
/// Holds the driver's table pointer (static data inside `libcudadebugger.so.1`, which is never unloaded) and the
/// version it was obtained for. Slots are read only through the gate, which checks the revision before the slot
/// is touched.
///
/// Calls made through an `Api` directly skip what a [`DebugSession`](super::DebugSession) checks first: after a
/// debuggee died from a signal they can crash the process, and the driver is not known to accept calls from two
/// threads at once. While a session is open, go through the session.
#[derive(Debug, Clone, Copy)]
pub struct Api {
    table: *const sys::CUDBGAPI_st,
    version: ApiVersion,
}

// SAFETY: the table is immutable static data of the driver library; sharing the pointer between threads is sound.
// Serialising the calls themselves is the caller's job (the session does it; see the type's docs).
unsafe impl Send for Api {}
// SAFETY: as above; `Api` itself has no interior mutability.
unsafe impl Sync for Api {}

impl Api {
    /// Negotiates the version with the driver and fetches the table.
    pub fn load(lib: &DebuggerLibrary) -> Result<Self, crate::Error> {
        let driver = lib.api_version()?;
        let version = negotiate(driver, ApiVersion::HEADER);
        let mut table: sys::CUDBGAPI = std::ptr::null();
        // SAFETY: valid out-pointer; cudbgGetAPI only writes the table address (or fails).
        CudbgError::check(unsafe {
            (lib.get_api)(version.major, version.minor, version.revision, &mut table)
        })?;
        if table.is_null() {
            return Err(CudbgError::IncompatibleApi.into());
        }
        Ok(Api { table, version })
    }

    /// Wraps a table obtained elsewhere.
    ///
    /// # Safety
    /// `table` must point to a debugger API table valid for `version` (every slot up to the last one that revision
    /// has is readable) and must stay valid for as long as the returned value, or a copy of it, is used.
    pub unsafe fn from_raw(table: *const sys::CUDBGAPI_st, version: ApiVersion) -> Self {
        Api { table, version }
    }

    /// The negotiated version.
    pub fn version(&self) -> ApiVersion {
        self.version
    }

    /// `getNumDevices` through the revision gate: the number of devices the debugger API sees.
    pub fn num_devices(&self) -> Result<u32, crate::Error> {
        let mut n = 0;
        // SAFETY: valid out-pointer.
        api_call!(*self, getNumDevices(&mut n))?;
        Ok(n)
    }

    /// Reads one slot after checking the gate; `read` must read the field at `offset`.
    ///
    /// # Safety
    /// `read` must read only the field that lies at `offset` of the table it is given.
    pub(crate) unsafe fn slot<F>(
        &self,
        name: &'static str,
        offset: usize,
        read: impl FnOnce(*const sys::CUDBGAPI_st) -> Option<F>,
    ) -> Result<F, SessionError> {
        let needs = first_revision(offset);
        if self.version.revision < needs {
            return Err(SessionError::Unsupported {
                slot: name,
                needs,
                have: self.version.revision,
            });
        }
        read(self.table).ok_or(SessionError::MissingSlot(name))
    }
}

/// Calls a slot of an [`Api`] through the revision gate: `api_call!(api, slotName(args...))` evaluates to
/// `Result<(), crate::Error>`. The arguments must satisfy the slot's contract in `cudadebugger.h`; the call site
/// states that in its own `SAFETY` comment.
macro_rules! api_call {
    ($api:expr, $slot:ident ( $($arg:expr),* $(,)? )) => {{
        let api: &$crate::cudbg::api::Api = &$api;
        // SAFETY: the closure reads exactly the field at the offset it is gated on, through a raw pointer, so
        // nothing past the end of a shorter table is touched.
        let f = unsafe {
            api.slot(
                stringify!($slot),
                ::std::mem::offset_of!($crate::sys::cudbg::CUDBGAPI_st, $slot),
                |t| ::std::ptr::addr_of!((*t).$slot).read(),
            )
        };
        match f {
            // SAFETY: the slot exists in the negotiated table; the caller's SAFETY comment at the `api_call!`
            // site covers the arguments.
            Ok(f) => $crate::cudbg::CudbgError::check(unsafe { f($($arg),*) }).map_err($crate::Error::from),
            Err(e) => Err($crate::Error::from(e)),
        }
    }};
}

pub(crate) use api_call;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn revisions_grow_with_position() {
        assert_eq!(first_revision(offset_of!(sys::CUDBGAPI_st, initialize)), 0);
        assert_eq!(
            first_revision(offset_of!(sys::CUDBGAPI_st, getNextEvent)),
            0
        );
        assert_eq!(
            first_revision(offset_of!(sys::CUDBGAPI_st, getLoadedFunctionInfo118)),
            132
        );
        assert_eq!(
            first_revision(offset_of!(
                sys::CUDBGAPI_st,
                getSupportedDebuggerCapabilities
            )),
            144
        );
        assert_eq!(
            first_revision(offset_of!(sys::CUDBGAPI_st, setNotifyNewEventCallback)),
            163
        );
        let mut last = 0;
        for (offset, rev) in REVISION_STEPS {
            assert!(*rev > last, "steps must grow");
            assert!(first_revision(*offset) == *rev);
            last = *rev;
        }
    }

    unsafe extern "C" fn ok() -> sys::CUDBGResult {
        sys::CUDBG_SUCCESS
    }
    unsafe extern "C" fn uninitialized(n: *mut u32) -> sys::CUDBGResult {
        // SAFETY: the caller passes a valid out-pointer.
        unsafe { n.write(7) };
        sys::CUDBG_ERROR_UNINITIALIZED
    }
    unsafe extern "C" fn never_called(
        _: sys::CUDBGNotifyNewEventCallback,
        _: *mut std::ffi::c_void,
    ) -> sys::CUDBGResult {
        panic!("a gated slot must not be called")
    }

    fn fake(revision: u32) -> (Box<sys::CUDBGAPI_st>, Api) {
        // SAFETY: an all-zero table is valid: every slot is an Option of a function pointer (None).
        let mut t: Box<sys::CUDBGAPI_st> = Box::new(unsafe { std::mem::zeroed() });
        t.initialize = Some(ok);
        t.getNumDevices = Some(uninitialized);
        t.setNotifyNewEventCallback = Some(never_called);
        let version = ApiVersion {
            major: 12,
            minor: 9,
            revision,
        };
        // SAFETY: the boxed table outlives the Api in each test and is complete.
        let api = unsafe { Api::from_raw(&*t, version) };
        (t, api)
    }

    #[test]
    fn gate_refuses_a_slot_newer_than_the_revision() {
        let (_t, api) = fake(150);
        let r = api_call!(api, setNotifyNewEventCallback(None, std::ptr::null_mut()));
        match r {
            Err(crate::Error::Session(SessionError::Unsupported { slot, needs, have })) => {
                assert_eq!((slot, needs, have), ("setNotifyNewEventCallback", 163, 150));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn gate_passes_calls_and_reports_results_and_empty_slots() {
        let (_t, api) = fake(163);
        assert!(api_call!(api, initialize()).is_ok());
        let mut n = 0;
        let r = api_call!(api, getNumDevices(&mut n));
        assert!(
            matches!(r, Err(crate::Error::Cudbg(CudbgError::Uninitialized))),
            "{r:?}"
        );
        assert_eq!(n, 7, "the slot was really called");
        let r = api_call!(api, finalize());
        assert!(
            matches!(
                r,
                Err(crate::Error::Session(SessionError::MissingSlot("finalize")))
            ),
            "{r:?}"
        );
    }

    #[test]
    fn negotiation_takes_the_lesser_version() {
        let old = ApiVersion {
            major: 12,
            minor: 8,
            revision: 150,
        };
        let new = ApiVersion {
            major: 13,
            minor: 1,
            revision: 170,
        };
        assert_eq!(negotiate(old, ApiVersion::HEADER), old);
        assert_eq!(negotiate(new, ApiVersion::HEADER), ApiVersion::HEADER);
    }
}
