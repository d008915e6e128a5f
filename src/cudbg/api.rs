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
    // CUDA 12.5 to 12.9 slots after it, up to readCPUCallStack: the end of the 12.9 header's table (API 12.9.156).
    (offset_of!(sys::CUDBGAPI_st, readSmException), 156),
    // CUDA 13.0 slots: getCudaExceptionString and the setNotifyNewEventCallback that takes user data (the 12.x
    // slot of that name is setNotifyNewEventCallback41 in the 13.0 header).
    (offset_of!(sys::CUDBGAPI_st, getCudaExceptionString), 163),
];

/// The oldest debugger API revision the crate works with: the first one its revision table is anchored on
/// (CUDA 11.8's getLoadedFunctionInfo; every CUDA 12 driver is newer). An older driver is refused before
/// `cudbgGetAPI` is called.
pub const OLDEST_REVISION: u32 = 132;

/// The first API revision whose table has the slot at byte `offset`.
pub(crate) fn first_revision(offset: usize) -> u32 {
    REVISION_STEPS
        .iter()
        .rev()
        .find(|(start, _)| offset >= *start)
        .map_or(0, |(_, rev)| *rev)
}

/// The version to ask `cudbgGetAPI` for: the lesser of what the driver supports and what the crate was built for.
/// A newer driver serves the crate's own header version; an older one its own, and slots past it are gated.
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

/// Environment variable capping the version the crate asks for, `MAJOR.MINOR.REVISION` (default: the header's).
/// With it a newer driver can be driven the way an older one is (for example `12.9.156`, CUDA 12.9's API), to try
/// the older revisions' code paths on the hardware at hand.
pub const API_VERSION_VAR: &str = "GPU_TOOLS_CUDBG_API_VERSION";

/// The cap from [`API_VERSION_VAR`], if set to a valid version.
fn version_cap() -> Option<ApiVersion> {
    let value = std::env::var(API_VERSION_VAR).ok()?;
    let cap = parse_version(&value);
    if cap.is_none() {
        log::debug!("{API_VERSION_VAR}={value:?} is not MAJOR.MINOR.REVISION: ignored");
    }
    cap
}

fn parse_version(text: &str) -> Option<ApiVersion> {
    let mut parts = text.trim().split('.').map(|p| p.parse::<u32>().ok());
    let version = ApiVersion {
        major: parts.next()??,
        minor: parts.next()??,
        revision: parts.next()??,
    };
    parts.next().is_none().then_some(version)
}

impl Api {
    /// Negotiates the version with the driver and fetches the table. The crate asks for the lesser of the
    /// driver's version and its header's, or of [`API_VERSION_VAR`] where that is set.
    pub fn load(lib: &DebuggerLibrary) -> Result<Self, crate::Error> {
        let ceiling = match version_cap() {
            Some(cap) => {
                log::debug!("{API_VERSION_VAR} caps the debugger API at {cap}");
                cap.min(ApiVersion::HEADER)
            }
            None => ApiVersion::HEADER,
        };
        Self::load_at_most(lib, ceiling)
    }

    fn load_at_most(lib: &DebuggerLibrary, ceiling: ApiVersion) -> Result<Self, crate::Error> {
        let driver = lib.api_version()?;
        let version = negotiate(driver, ceiling);
        log::debug!(
            "debugger API: driver {driver}, crate header {}, negotiated {version}",
            ApiVersion::HEADER
        );
        if version.revision < OLDEST_REVISION {
            log::debug!(
                "debugger API revision {} is older than the oldest the crate supports ({OLDEST_REVISION})",
                version.revision
            );
            return Err(SessionError::Unsupported {
                slot: "cudbgGetAPI",
                needs: OLDEST_REVISION,
                have: version.revision,
            }
            .into());
        }
        let mut table: sys::CUDBGAPI = std::ptr::null();
        // SAFETY: valid out-pointer; cudbgGetAPI only writes the table address (or fails).
        CudbgError::check_call("cudbgGetAPI", unsafe {
            (lib.get_api)(version.major, version.minor, version.revision, &mut table)
        })?;
        if table.is_null() {
            log::debug!("cudbgGetAPI({version}) succeeded but handed out no table");
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

    /// Registers the new-event callback through the slot the negotiated revision has: from revision 163 (CUDA 13)
    /// `setNotifyNewEventCallback`, which also takes user data; before it, the CUDA 12 slot of that name, which the
    /// 13.0 header calls `setNotifyNewEventCallback41` and whose callback data is `{tid, timeout}`.
    ///
    /// The callbacks must not unwind and must not call the debugger API (the driver runs them on its own thread).
    pub(crate) fn register_event_callback(
        &self,
        cuda13: unsafe extern "C" fn(*mut sys::CUDBGEventCallbackData),
        cuda12: unsafe extern "C" fn(*mut sys::CUDBGEventCallbackData41),
    ) -> Result<(), crate::Error> {
        let current = offset_of!(sys::CUDBGAPI_st, setNotifyNewEventCallback);
        if self.version.revision >= first_revision(current) {
            // SAFETY: a callback the caller vouches for; the user data is unused (null).
            api_call!(
                *self,
                setNotifyNewEventCallback(Some(cuda13), std::ptr::null_mut())
            )
        } else {
            log::debug!(
                "debugger API {}: registering the event callback through the CUDA 12 slot",
                self.version
            );
            // SAFETY: as above; this slot's callback takes only the driver's data.
            api_call!(*self, setNotifyNewEventCallback41(Some(cuda12)))
        }
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
            log::debug!(
                "debugger API slot {name} refused: it needs revision {needs}, the negotiated API is {}",
                self.version
            );
            return Err(SessionError::Unsupported {
                slot: name,
                needs,
                have: self.version.revision,
            });
        }
        read(self.table).ok_or_else(|| {
            log::debug!("debugger API slot {name} is empty in the driver's table");
            SessionError::MissingSlot(name)
        })
    }
}

/// The result of a slot call as the crate's error, logged by slot name when it failed. The end of an event queue
/// (`CUDBG_ERROR_NO_EVENT_AVAILABLE`) is how every drain stops, so it is logged at trace level only.
pub(crate) fn finish(slot: &'static str, code: sys::CUDBGResult) -> Result<(), crate::Error> {
    if code == sys::CUDBG_ERROR_NO_EVENT_AVAILABLE {
        log::trace!("{slot}: CUDBG_ERROR_NO_EVENT_AVAILABLE ({code})");
        return Err(CudbgError::NoEventAvailable.into());
    }
    CudbgError::check_call(slot, code).map_err(crate::Error::from)
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
            Ok(f) => $crate::cudbg::api::finish(stringify!($slot), unsafe { f($($arg),*) }),
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
        assert_eq!(
            first_revision(offset_of!(sys::CUDBGAPI_st, readCPUCallStack)),
            156,
            "the last slot of the 12.9 header (API 12.9.156)"
        );
        assert_eq!(
            first_revision(offset_of!(sys::CUDBGAPI_st, setNotifyNewEventCallback41)),
            0,
            "the CUDA 12 event callback slot"
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

    // A stand-in table with a recording function in one slot of each revision group, and a stand-in
    // `cudbgGetAPIVersion` / `cudbgGetAPI` pair. Test threads each have their own record.
    thread_local! {
        static CALLED: std::cell::RefCell<Vec<&'static str>> = const { std::cell::RefCell::new(Vec::new()) };
        static DRIVER: std::cell::Cell<(u32, u32, u32)> = const { std::cell::Cell::new((0, 0, 0)) };
        static ASKED: std::cell::Cell<Option<(u32, u32, u32)>> = const { std::cell::Cell::new(None) };
        static TABLE: std::cell::Cell<sys::CUDBGAPI> = const { std::cell::Cell::new(std::ptr::null()) };
    }

    fn called(name: &'static str) -> sys::CUDBGResult {
        CALLED.with(|c| c.borrow_mut().push(name));
        sys::CUDBG_SUCCESS
    }
    fn take_called() -> Vec<&'static str> {
        CALLED.with(|c| std::mem::take(&mut *c.borrow_mut()))
    }
    unsafe extern "C" fn num_devices(_: *mut u32) -> sys::CUDBGResult {
        called("getNumDevices")
    }
    unsafe extern "C" fn loaded_function_info(
        _: u32,
        _: u64,
        _: *mut sys::CUDBGLoadedFunctionInfo,
        _: u32,
    ) -> sys::CUDBGResult {
        called("getLoadedFunctionInfo118")
    }
    unsafe extern "C" fn capabilities(_: *mut sys::CUDBGCapabilityFlags) -> sys::CUDBGResult {
        called("getSupportedDebuggerCapabilities")
    }
    unsafe extern "C" fn sm_exception(
        _: u32,
        _: u32,
        _: *mut sys::CUDBGException_t,
        _: *mut u64,
        _: *mut bool,
    ) -> sys::CUDBGResult {
        called("readSmException")
    }
    unsafe extern "C" fn cpu_call_stack(
        _: u32,
        _: u64,
        _: *mut u64,
        _: u32,
        _: *mut u32,
    ) -> sys::CUDBGResult {
        called("readCPUCallStack")
    }
    unsafe extern "C" fn exception_string(
        _: u32,
        _: u32,
        _: u32,
        _: u32,
        _: *mut std::ffi::c_char,
        _: u32,
        _: *mut u32,
    ) -> sys::CUDBGResult {
        called("getCudaExceptionString")
    }
    unsafe extern "C" fn callback13(
        _: sys::CUDBGNotifyNewEventCallback,
        _: *mut std::ffi::c_void,
    ) -> sys::CUDBGResult {
        called("setNotifyNewEventCallback")
    }
    unsafe extern "C" fn callback12(_: sys::CUDBGNotifyNewEventCallback41) -> sys::CUDBGResult {
        called("setNotifyNewEventCallback41")
    }
    unsafe extern "C" fn on_event13(_: *mut sys::CUDBGEventCallbackData) {}
    unsafe extern "C" fn on_event12(_: *mut sys::CUDBGEventCallbackData41) {}

    fn stand_in_table() -> Box<sys::CUDBGAPI_st> {
        Box::new(sys::CUDBGAPI_st {
            getNumDevices: Some(num_devices),
            getLoadedFunctionInfo118: Some(loaded_function_info),
            getSupportedDebuggerCapabilities: Some(capabilities),
            readSmException: Some(sm_exception),
            readCPUCallStack: Some(cpu_call_stack),
            getCudaExceptionString: Some(exception_string),
            setNotifyNewEventCallback41: Some(callback12),
            setNotifyNewEventCallback: Some(callback13),
            ..Default::default()
        })
    }

    /// Calls one stand-in slot of each revision group: its name when it was called, else the gate's refusal.
    fn call_each_group(api: &Api) -> Vec<Result<&'static str, (&'static str, u32)>> {
        let mut n = 0;
        let mut caps = 0;
        let (mut exception, mut pc, mut valid, mut total) = (0, 0, false, 0);
        let mut buf = [0 as std::ffi::c_char; 8];
        // SAFETY: valid out-pointers throughout; the stand-ins only record the call.
        let results = [
            api_call!(*api, getNumDevices(&mut n)),
            api_call!(
                *api,
                getLoadedFunctionInfo118(0, 0, std::ptr::null_mut(), 0)
            ),
            api_call!(*api, getSupportedDebuggerCapabilities(&mut caps)),
            api_call!(
                *api,
                readSmException(0, 0, &mut exception, &mut pc, &mut valid)
            ),
            api_call!(
                *api,
                readCPUCallStack(0, 0, std::ptr::null_mut(), 0, &mut total)
            ),
            api_call!(
                *api,
                getCudaExceptionString(0, 0, 0, 0, buf.as_mut_ptr(), 8, &mut total)
            ),
        ];
        let mut names = take_called().into_iter();
        results
            .into_iter()
            .map(|r| match r {
                Ok(()) => Ok(names.next().expect("a call was recorded")),
                Err(crate::Error::Session(SessionError::Unsupported { slot, needs, .. })) => {
                    Err((slot, needs))
                }
                Err(other) => panic!("{other}"),
            })
            .collect()
    }

    #[test]
    fn the_gate_at_several_revisions() {
        let table = stand_in_table();
        let refused = |slot, needs| Err((slot, needs));
        // Revisions: the oldest the crate supports, CUDA 12.x values around each step, 12.9 (156), 13.0 (163).
        for revision in [132, 143, 144, 155, 156, 162, 163] {
            // SAFETY: the stand-in table is complete and outlives `api`.
            let api = unsafe {
                Api::from_raw(
                    &*table,
                    ApiVersion {
                        major: 12,
                        minor: 9,
                        revision,
                    },
                )
            };
            let got = call_each_group(&api);
            let want = [
                Ok("getNumDevices"),
                Ok("getLoadedFunctionInfo118"),
                if revision >= 144 {
                    Ok("getSupportedDebuggerCapabilities")
                } else {
                    refused("getSupportedDebuggerCapabilities", 144)
                },
                if revision >= 156 {
                    Ok("readSmException")
                } else {
                    refused("readSmException", 156)
                },
                if revision >= 156 {
                    Ok("readCPUCallStack")
                } else {
                    refused("readCPUCallStack", 156)
                },
                if revision >= 163 {
                    Ok("getCudaExceptionString")
                } else {
                    refused("getCudaExceptionString", 163)
                },
            ];
            assert_eq!(got, want, "revision {revision}");

            // The event callback goes through the slot this revision has.
            api.register_event_callback(on_event13, on_event12)
                .expect("registered");
            let slot = if revision >= 163 {
                "setNotifyNewEventCallback"
            } else {
                "setNotifyNewEventCallback41"
            };
            assert_eq!(take_called(), [slot], "revision {revision}");
        }
    }

    unsafe extern "C" fn driver_version(
        major: *mut u32,
        minor: *mut u32,
        revision: *mut u32,
    ) -> sys::CUDBGResult {
        let (a, b, c) = DRIVER.with(|d| d.get());
        // SAFETY: the crate passes valid out-pointers.
        unsafe {
            major.write(a);
            minor.write(b);
            revision.write(c);
        }
        sys::CUDBG_SUCCESS
    }

    /// Serves any version up to the driver's, like the driver; a newer request is incompatible.
    unsafe extern "C" fn get_api(
        major: u32,
        minor: u32,
        revision: u32,
        api: *mut sys::CUDBGAPI,
    ) -> sys::CUDBGResult {
        ASKED.with(|a| a.set(Some((major, minor, revision))));
        if (major, minor, revision) > DRIVER.with(|d| d.get()) {
            return sys::CUDBG_ERROR_INCOMPATIBLE_API;
        }
        // SAFETY: the crate passes a valid out-pointer.
        unsafe { api.write(TABLE.with(|t| t.get())) };
        sys::CUDBG_SUCCESS
    }

    #[test]
    fn negotiation_with_older_and_newer_drivers() {
        let table = stand_in_table();
        TABLE.with(|t| t.set(&*table));
        let lib = DebuggerLibrary {
            get_api,
            get_api_version: driver_version,
            lib: libloading::os::unix::Library::this().into(),
        };
        let header = (13, 0, 163);
        for (driver, asked) in [
            ((11, 8, 132), (11, 8, 132)),
            ((12, 5, 144), (12, 5, 144)),
            ((12, 9, 156), (12, 9, 156)),
            ((13, 0, 163), header),
            // Newer drivers serve the crate's own header version.
            ((13, 1, 170), header),
            ((14, 0, 200), header),
        ] {
            DRIVER.with(|d| d.set(driver));
            ASKED.with(|a| a.set(None));
            let api = Api::load(&lib).unwrap_or_else(|e| panic!("driver {driver:?}: {e}"));
            assert_eq!(ASKED.with(|a| a.get()), Some(asked), "driver {driver:?}");
            let v = api.version();
            assert_eq!((v.major, v.minor, v.revision), asked);
            assert_eq!(api.num_devices().expect("stand-in"), 0);
            take_called();
        }
        // Older than the oldest revision the crate supports: refused before cudbgGetAPI is called.
        DRIVER.with(|d| d.set((7, 0, 122)));
        ASKED.with(|a| a.set(None));
        match Api::load(&lib) {
            Err(crate::Error::Session(SessionError::Unsupported { slot, needs, have })) => {
                assert_eq!((slot, needs, have), ("cudbgGetAPI", OLDEST_REVISION, 122));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(ASKED.with(|a| a.get()), None, "cudbgGetAPI was not called");

        // A cap below the header: a 13.0 driver is asked for CUDA 12.9's API, and the CUDA 12 paths are taken.
        DRIVER.with(|d| d.set((13, 0, 163)));
        let cap = ApiVersion {
            major: 12,
            minor: 9,
            revision: 156,
        };
        let api = Api::load_at_most(&lib, cap).expect("capped");
        assert_eq!(ASKED.with(|a| a.get()), Some((12, 9, 156)));
        assert_eq!(api.version(), cap);
        api.register_event_callback(on_event13, on_event12)
            .expect("registered");
        assert_eq!(take_called(), ["setNotifyNewEventCallback41"]);
    }

    #[test]
    fn version_cap_parses_major_minor_revision_only() {
        assert_eq!(
            parse_version("12.9.156"),
            Some(ApiVersion {
                major: 12,
                minor: 9,
                revision: 156
            })
        );
        assert_eq!(parse_version(" 13.0.163\n").map(|v| v.revision), Some(163));
        for bad in ["", "12.9", "12.9.156.1", "12.x.156", "-1.0.0", "12..156"] {
            assert_eq!(parse_version(bad), None, "{bad:?}");
        }
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
