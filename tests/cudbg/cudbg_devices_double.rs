//! A session's device calls against the C double `gpu-tools-testing/doubles/cudbg_attach.c`, whose debugger side
//! also fills the device slots and counts the calls that reach them. The session is started the environment way
//! (the debuggee is `sleep`, which ignores the variables; the double reports the first event itself). Each test runs
//! in a process of its own (`gpu_tools_testing::own_process`): the double becomes the process's driver, and the
//! debugger API serves one session per process.
#![cfg(feature = "cudbg")]

use std::mem::offset_of;
use std::process::Command;
use std::time::Duration;

use gpu_tools::cudbg::{DebugSession, DebuggerLibrary, SessionError};
use gpu_tools::sys::cudbg::{CUDBG_EVENT_CTX_CREATE, CUDBG_MAX_DEVICES, CUDBGAPI_st};

/// The double, loaded as the driver, with the session's slots and the device slots installed.
struct Double(libloading::Library);

impl Double {
    fn load() -> Self {
        let lib = super::cudbg_attach_double::double_copy();
        DebuggerLibrary::load_from(&lib).expect("the double loads as the driver");
        let slot = |offset: usize| (offset / 8) as u64;
        let session = [
            offset_of!(CUDBGAPI_st, initialize),
            offset_of!(CUDBGAPI_st, finalize),
            offset_of!(CUDBGAPI_st, setNotifyNewEventCallback),
            offset_of!(CUDBGAPI_st, getNextEvent),
            offset_of!(CUDBGAPI_st, acknowledgeSyncEvents),
            offset_of!(CUDBGAPI_st, requestCleanupOnDetach),
            offset_of!(CUDBGAPI_st, getNumDevices),
            offset_of!(CUDBGAPI_st, clearAttachState),
            offset_of!(CUDBGAPI_st, setKernelLaunchNotificationMode),
        ]
        .map(slot);
        let devices = [
            offset_of!(CUDBGAPI_st, getDeviceName),
            offset_of!(CUDBGAPI_st, getDeviceType),
            offset_of!(CUDBGAPI_st, getSmType),
            offset_of!(CUDBGAPI_st, getNumSMs),
            offset_of!(CUDBGAPI_st, getNumWarps),
            offset_of!(CUDBGAPI_st, getNumLanes),
            offset_of!(CUDBGAPI_st, getNumRegisters),
            offset_of!(CUDBGAPI_st, suspendDevice),
            offset_of!(CUDBGAPI_st, resumeDevice),
        ]
        .map(slot);
        // SAFETY: the same file the crate loaded (dlopen returns that copy); each install function reads 9
        // integers.
        unsafe {
            let double = Double(libloading::Library::new(&lib).expect("the double"));
            double.get::<unsafe extern "C" fn(*const u64)>("dbl_cudbg_install")(session.as_ptr());
            double.get::<unsafe extern "C" fn(*const u64)>("dbl_cudbg_install_devices")(
                devices.as_ptr(),
            );
            double
        }
    }

    /// # Safety
    /// `T` must be the type of the double's function `name`.
    unsafe fn get<T: Copy>(&self, name: &str) -> T {
        let symbol = format!("{name}\0");
        // SAFETY: the caller names the function's type.
        *unsafe { self.0.get::<T>(symbol.as_bytes()) }.expect(name)
    }

    fn set_devices(&self, n: u32) {
        // SAFETY: `void dbl_cudbg_set_devices(uint32_t)`.
        unsafe { self.get::<unsafe extern "C" fn(u32)>("dbl_cudbg_set_devices")(n) }
    }

    fn queue_event(&self, kind: u32) {
        // SAFETY: `void dbl_cudbg_queue_event(uint32_t)`.
        unsafe { self.get::<unsafe extern "C" fn(u32)>("dbl_cudbg_queue_event")(kind) }
    }

    /// Calls of getNumDevices and of the device slots so far.
    fn device_calls(&self) -> i32 {
        // SAFETY: `int dbl_cudbg_device_calls(void)`.
        unsafe { self.get::<unsafe extern "C" fn() -> i32>("dbl_cudbg_device_calls")() }
    }

    fn suspended(&self, dev: u32) -> bool {
        // SAFETY: `int dbl_cudbg_suspended(uint32_t)`.
        unsafe { self.get::<unsafe extern "C" fn(u32) -> i32>("dbl_cudbg_suspended")(dev) != 0 }
    }
}

/// A session on `sleep`, opened by the double's first event.
fn session(double: &Double) -> DebugSession {
    double.queue_event(CUDBG_EVENT_CTX_CREATE);
    let mut sleeper = Command::new("sleep");
    sleeper.arg("60");
    DebugSession::builder(sleeper)
        .handshake_timeout(Duration::from_secs(10))
        .start()
        .expect("a session on the double")
}

fn assert_beyond_api(got: Result<impl std::fmt::Debug, gpu_tools::Error>, dev: u32) {
    match got {
        Err(gpu_tools::Error::Session(SessionError::DeviceBeyondApi { dev: d, max })) => {
            assert_eq!((d, max), (dev, CUDBG_MAX_DEVICES));
        }
        Err(e) => panic!("device {dev}: expected DeviceBeyondApi, got: {e}"),
        Ok(v) => panic!("device {dev} was accepted: {v:?}"),
    }
}

#[test]
fn a_device_past_the_api_limit_is_refused_before_any_driver_call() {
    if !gpu_tools_testing::own_process() {
        return;
    }
    let double = Double::load();
    // A driver that reports more devices than the debugger API can name (CUDBG_MAX_DEVICES, 64).
    double.set_devices(CUDBG_MAX_DEVICES + 1);
    let session = session(&double);
    assert_eq!(session.device_count().unwrap(), CUDBG_MAX_DEVICES + 1);

    let first = session.suspend(0).expect("device 0");
    assert!(double.suspended(0));
    let calls = double.device_calls();
    // Device 64 would share device 0's bit in a 64-bit mask: it is refused, with no call to the driver.
    assert_beyond_api(session.suspend(CUDBG_MAX_DEVICES), CUDBG_MAX_DEVICES);
    assert_beyond_api(session.device(CUDBG_MAX_DEVICES), CUDBG_MAX_DEVICES);
    assert_beyond_api(session.device(u32::MAX), u32::MAX);
    assert_eq!(double.device_calls(), calls, "no driver call for them");
    assert!(!double.suspended(CUDBG_MAX_DEVICES));
    assert!(double.suspended(0), "device 0 is still suspended");
    drop(first);
    assert!(!double.suspended(0), "its guard resumed device 0");

    // The last device the API names has a bit of its own: device 0 is not taken by it.
    let last = session.suspend(CUDBG_MAX_DEVICES - 1).expect("device 63");
    let again = session.suspend(0).expect("device 0 beside device 63");
    assert_eq!(again.device().index, 0);
    assert!(matches!(
        session.suspend(CUDBG_MAX_DEVICES - 1).map(|_| ()),
        Err(gpu_tools::Error::Session(SessionError::AlreadySuspended(
            63
        )))
    ));
    drop(last);
    drop(again);
    assert!(!double.suspended(0) && !double.suspended(CUDBG_MAX_DEVICES - 1));
}
