//! One callback subscriber for two: the session's and the program's.
//!
//! CUPTI 13.0 gives one subscriber per process. Where the session holds it and cannot give it up (the range
//! profiler sees launches and contexts through it), the program's `cuptiSubscribe` gets a handle of ours instead:
//! what it enables is enabled on the session's subscriber too, and each callback the session's subscriber gets is
//! handed on to the program's callback when the program asked for it, with CUPTI's own data. The program's later
//! calls with that handle (`cuptiEnableCallback`, `cuptiEnableDomain`, `cuptiEnableAllDomains`,
//! `cuptiGetCallbackState`, `cuptiUnsubscribe`) come here through their redirected import slots.

use std::ffi::c_void;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use gpu_tools::cupti::callback::CallbackEvent;
use gpu_tools::sys::cupti as sys;

type CallbackFn = unsafe extern "C" fn(*mut c_void, u32, u32, *const c_void);
pub(super) type UnsubscribeFn =
    unsafe extern "C" fn(sys::CUpti_SubscriberHandle) -> sys::CUptiResult;
pub(super) type EnableCallbackFn =
    unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle, u32, u32) -> sys::CUptiResult;
pub(super) type EnableDomainFn =
    unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle, u32) -> sys::CUptiResult;
pub(super) type EnableAllFn =
    unsafe extern "C" fn(u32, sys::CUpti_SubscriberHandle) -> sys::CUptiResult;
pub(super) type GetStateFn =
    unsafe extern "C" fn(*mut u32, sys::CUpti_SubscriberHandle, u32, u32) -> sys::CUptiResult;

/// The real calls on subscribers, resolved with the others.
#[derive(Clone, Copy)]
pub(super) struct SubscriberFns {
    pub unsubscribe: UnsubscribeFn,
    pub enable_callback: EnableCallbackFn,
    pub enable_domain: EnableDomainFn,
    pub enable_all: EnableAllFn,
    pub get_state: GetStateFn,
}

/// The program's subscriber, as the session serves it.
struct Program {
    callback: CallbackFn,
    userdata: usize,
    /// Whole domains it enabled (bit per domain), every domain, and single callbacks.
    domains: u64,
    all: bool,
    callbacks: Vec<(u32, u32)>,
}

impl Program {
    fn wants(&self, domain: u32, cbid: u32) -> bool {
        self.all
            || self.domains & 1u64.checked_shl(domain).unwrap_or(0) != 0
            || self.callbacks.contains(&(domain, cbid))
    }
}

/// The session's subscriber (its raw handle), while it holds one that it cannot give up.
static SESSION: Mutex<Option<usize>> = Mutex::new(None);
static PROGRAM: Mutex<Option<Program>> = Mutex::new(None);
/// The program subscribed through the session's subscriber.
static SERVING: AtomicBool = AtomicBool::new(false);
/// Its address is the handle the program gets.
static HANDLE: u8 = 0;

fn handle() -> sys::CUpti_SubscriberHandle {
    std::ptr::from_ref(&HANDLE).cast_mut().cast()
}

/// Whether `h` is the handle the program got from us.
pub(super) fn is_ours(h: sys::CUpti_SubscriberHandle) -> bool {
    std::ptr::eq(h.cast::<u8>(), &HANDLE)
}

/// The session's subscriber that the program may share (`None` when the session has none, or gave it up).
pub fn set_session(raw: Option<sys::CUpti_SubscriberHandle>) {
    *SESSION.lock().unwrap_or_else(|p| p.into_inner()) = raw.map(|h| h as usize);
    if raw.is_none() {
        SERVING.store(false, Ordering::Release);
        PROGRAM.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

fn session() -> Option<sys::CUpti_SubscriberHandle> {
    SESSION
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .map(|h| h as sys::CUpti_SubscriberHandle)
}

/// The program subscribes while the session holds CUPTI's one subscriber: it shares the session's. False when
/// the session holds none.
pub(super) fn serve(
    out: *mut sys::CUpti_SubscriberHandle,
    callback: sys::CUpti_CallbackFunc,
    userdata: *mut c_void,
) -> bool {
    let (Some(_), Some(callback)) = (session(), callback) else {
        return false;
    };
    if out.is_null() {
        return false;
    }
    *PROGRAM.lock().unwrap_or_else(|p| p.into_inner()) = Some(Program {
        callback,
        userdata: userdata as usize,
        domains: 0,
        all: false,
        callbacks: Vec::new(),
    });
    SERVING.store(true, Ordering::Release);
    // SAFETY: the program's out-pointer, checked non-null.
    unsafe { *out = handle() };
    true
}

/// `cuptiUnsubscribe` with our handle.
pub(super) fn unsubscribe() -> sys::CUptiResult {
    SERVING.store(false, Ordering::Release);
    PROGRAM.lock().unwrap_or_else(|p| p.into_inner()).take();
    sys::CUPTI_SUCCESS
}

/// `cuptiEnableCallback`, `cuptiEnableDomain` (`cbid` `None`) and `cuptiEnableAllDomains` (`domain` `None`)
/// with our handle: the program's choice is kept, and what it enables is enabled on the session's subscriber
/// (never disabled there: the session's own callbacks stay; callbacks the program did not ask for are not
/// handed on).
pub(super) fn enable(
    fns: &SubscriberFns,
    enable: u32,
    domain: Option<u32>,
    cbid: Option<u32>,
) -> sys::CUptiResult {
    let Some(session) = session() else {
        return sys::CUPTI_ERROR_INVALID_PARAMETER;
    };
    {
        let mut guard = PROGRAM.lock().unwrap_or_else(|p| p.into_inner());
        let Some(p) = guard.as_mut() else {
            return sys::CUPTI_ERROR_INVALID_PARAMETER;
        };
        let on = enable != 0;
        match (domain, cbid) {
            (None, _) => {
                p.all = on;
                if !on {
                    p.domains = 0;
                    p.callbacks.clear();
                }
            }
            (Some(d), None) => {
                let bit = 1u64.checked_shl(d).unwrap_or(0);
                if on {
                    p.domains |= bit;
                } else {
                    p.domains &= !bit;
                    p.callbacks.retain(|&(cd, _)| cd != d);
                }
            }
            (Some(d), Some(c)) => {
                p.callbacks.retain(|&x| x != (d, c));
                if on {
                    p.callbacks.push((d, c));
                }
            }
        }
    }
    if enable == 0 {
        return sys::CUPTI_SUCCESS;
    }
    // SAFETY (each call): the real functions, with the session's live subscriber and the program's values.
    unsafe {
        match (domain, cbid) {
            (None, _) => (fns.enable_all)(1, session),
            (Some(d), None) => (fns.enable_domain)(1, session, d),
            (Some(d), Some(c)) => (fns.enable_callback)(1, session, d, c),
        }
    }
}

/// `cuptiGetCallbackState` with our handle.
pub(super) fn state(out: *mut u32, domain: u32, cbid: u32) -> sys::CUptiResult {
    if out.is_null() {
        return sys::CUPTI_ERROR_INVALID_PARAMETER;
    }
    let on = PROGRAM
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .is_some_and(|p| p.wants(domain, cbid));
    // SAFETY: the program's out-pointer, checked non-null.
    unsafe { *out = u32::from(on) };
    sys::CUPTI_SUCCESS
}

/// Hands one of the session's callbacks on to the program's subscriber, if it asked for it. Called first in the
/// session's callback, on the thread CUPTI called it on.
pub fn forward(event: &CallbackEvent<'_>) {
    if !SERVING.load(Ordering::Acquire) {
        return;
    }
    let (domain, cbid, data) = event.vendor_parts();
    let target = PROGRAM
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
        .filter(|p| p.wants(domain, cbid))
        .map(|p| (p.callback, p.userdata));
    if let Some((callback, userdata)) = target {
        // SAFETY: the program's callback with its own userdata and CUPTI's data for this call, as CUPTI would
        // call it; the lock is not held (the callback may call CUPTI).
        unsafe { callback(userdata as *mut c_void, domain, cbid, data) };
    }
}
