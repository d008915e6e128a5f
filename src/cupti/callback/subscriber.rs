//! [`Subscriber`]: the process's one CUPTI callback subscriber, RAII.
//!
//! CUPTI calls the subscriber's C function on any thread, on every enabled API call, so the closure is found
//! without a lock: an atomic pointer to its state plus a count of calls in flight. Unsubscribing clears the pointer,
//! waits for the calls in flight to end, and only then frees the closure.

use std::ffi::{CString, c_char, c_void};
use std::fmt;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use super::event::{ApiSite, CallbackDomain, CallbackEvent};
use crate::cupti::cbid::{DriverCbid, RuntimeCbid};
use crate::cupti::library::CallbackFns;
use crate::cupti::tracing_error::vendor;
use crate::cupti::{CuptiError, CuptiLibrary, TracingError};
use crate::delivery::{self, panic_message};
use crate::sys::cupti as sys;

/// The closure a subscriber calls.
type EventFn = dyn for<'a> Fn(&CallbackEvent<'a>) + Send + Sync;

/// What the C callback reaches: the closure, the vendor functions the events use, counts.
struct State {
    callback: Box<EventFn>,
    fns: CallbackFns,
    calls: AtomicU64,
    panics: AtomicU64,
    pending_panic: Mutex<Option<String>>,
    /// CUPTI was finalised from this subscriber's callback (`finalize_at_api_exit`): the subscription ended with it.
    finalized: AtomicBool,
}

/// Set while a subscriber exists (CUPTI allows one per process).
static SUBSCRIBED: AtomicBool = AtomicBool::new(false);
/// The live subscriber's state, null when none.
static CURRENT: AtomicPtr<State> = AtomicPtr::new(std::ptr::null_mut());
/// Calls of the C callback running now.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);

/// How long dropping a subscriber waits for callbacks still running before it leaks their state instead.
const DRAIN_LIMIT: Duration = Duration::from_secs(10);

/// The longest name CUPTI keeps (`CUPTI_SUBSCRIBER_NAME_MAX_LEN`).
const NAME_MAX: usize = 53;
/// The room CUPTI needs for the holder's name (`CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN`).
const HOLDER_LEN: usize = 64;

thread_local! {
    static IN_SUBSCRIBER: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Whether this thread runs the subscriber's closure: unsubscribing there would wait for itself.
fn in_subscriber_callback() -> bool {
    IN_SUBSCRIBER.with(|d| d.get() > 0)
}

struct InFlight;

impl InFlight {
    fn enter() -> Self {
        IN_FLIGHT.fetch_add(1, Ordering::SeqCst);
        IN_SUBSCRIBER.with(|d| d.set(d.get().saturating_add(1)));
        InFlight
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        IN_SUBSCRIBER.with(|d| d.set(d.get().saturating_sub(1)));
        IN_FLIGHT.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The function CUPTI calls.
unsafe extern "C" fn on_callback(
    _userdata: *mut c_void,
    domain: sys::CUpti_CallbackDomain,
    cbid: sys::CUpti_CallbackId,
    data: *const c_void,
) {
    delivery::vendor_callback((), || {
        let _in_flight = InFlight::enter();
        let state = CURRENT.load(Ordering::SeqCst);
        if state.is_null() {
            return;
        }
        // SAFETY: a non-null CURRENT stays allocated while IN_FLIGHT counts this call (the unsubscriber clears
        // CURRENT first, then waits for IN_FLIGHT to reach 0 before freeing).
        let state = unsafe { &*state };
        state.calls.fetch_add(1, Ordering::Relaxed);
        // SAFETY: CUPTI's data for this domain and id, valid during this call.
        let event = unsafe { CallbackEvent::new(domain, cbid, data, &state.fns) };
        if let Err(payload) =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (state.callback)(&event)))
        {
            state.panics.fetch_add(1, Ordering::Relaxed);
            let msg = panic_message(&*payload);
            std::mem::forget(payload);
            state
                .pending_panic
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get_or_insert(msg);
        }
    });
}

/// Counts of a subscriber.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SubscriberStats {
    /// Callbacks delivered to the closure.
    pub calls: u64,
    /// Of those, calls whose closure panicked.
    pub panics: u64,
}

/// Builds a [`Subscriber`]; from [`Subscriber::builder`].
#[derive(Debug, Clone, Default)]
#[must_use = "a builder does nothing until `subscribe` is called"]
pub struct SubscriberBuilder {
    name: Option<String>,
    library: Option<PathBuf>,
}

impl SubscriberBuilder {
    /// The name CUPTI 13 gives the subscription ("CUPTI for NAME"), shown to a tool that finds it taken; at
    /// most 53 bytes, no NUL. Default `gpu-tools`.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Loads `libcupti` from this path instead of the crate's search.
    pub fn library_path(mut self, path: impl Into<PathBuf>) -> Self {
        self.library = Some(path.into());
        self
    }

    /// Subscribes `callback`. No callback is enabled yet: see [`Subscriber::enable_domain`] and
    /// [`Subscriber::enable_driver`].
    ///
    /// Checked before CUPTI is asked: no other [`Subscriber`] of this crate exists
    /// ([`TracingError::AlreadySubscribed`]), the CUDA driver library loads ([`crate::cuda::Driver::load`], no
    /// `cuInit`), `libcupti` loads and has the Callback API. CUPTI's own refusal (another tool subscribed,
    /// `CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED`) is the same typed error, naming the holder where CUPTI
    /// 13 says who it is.
    pub fn subscribe<F>(self, callback: F) -> crate::Result<Subscriber>
    where
        F: for<'a> Fn(&CallbackEvent<'a>) + Send + Sync + 'static,
    {
        let name = self.name.unwrap_or_else(|| "gpu-tools".to_string());
        let name = CString::new(name.clone())
            .ok()
            .filter(|n| n.as_bytes().len() <= NAME_MAX)
            .ok_or(TracingError::InvalidName(name))?;
        if SUBSCRIBED
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
            .is_err()
        {
            return Err(TracingError::AlreadySubscribed {
                holder: Some("a gpu-tools Subscriber of this process".into()),
            }
            .into());
        }
        let subscribed = subscribe_claimed(self.library, &name, Box::new(callback));
        if subscribed.is_err() {
            SUBSCRIBED.store(false, Ordering::Release);
        }
        subscribed
    }
}

fn subscribe_claimed(
    library: Option<PathBuf>,
    name: &CString,
    callback: Box<EventFn>,
) -> crate::Result<Subscriber> {
    crate::cuda::Driver::load()?;
    let lib = match &library {
        Some(path) => CuptiLibrary::load_from(path)?,
        None => CuptiLibrary::load()?,
    };
    let fns = lib.callback.map_err(TracingError::MissingSymbol)?;
    let state = Box::into_raw(Box::new(State {
        callback,
        fns,
        calls: AtomicU64::new(0),
        panics: AtomicU64::new(0),
        pending_panic: Mutex::new(None),
        finalized: AtomicBool::new(false),
    }));
    // Routed before CUPTI may call: nothing is enabled yet, but the state must exist when it does.
    CURRENT.store(state, Ordering::SeqCst);
    let mut handle: sys::CUpti_SubscriberHandle = std::ptr::null_mut();
    let mut holder = [0 as c_char; HOLDER_LEN];
    let code = match fns.subscribe_v2 {
        Some(subscribe_v2) => {
            let mut params = sys::CUpti_SubscriberParams {
                structSize: std::mem::size_of::<sys::CUpti_SubscriberParams>(),
                subscriberName: name.as_ptr(),
                oldSubscriberName: holder.as_mut_ptr(),
                oldSubscriberSize: HOLDER_LEN,
            };
            // SAFETY: valid out-pointer and parameter block (the name and holder buffer outlive the call); the
            // callback is valid for the process and never unwinds.
            unsafe {
                subscribe_v2(
                    &mut handle,
                    Some(on_callback),
                    std::ptr::null_mut(),
                    &mut params,
                )
            }
        }
        // SAFETY: as above.
        None => unsafe { (fns.subscribe)(&mut handle, Some(on_callback), std::ptr::null_mut()) },
    };
    if code != sys::CUPTI_SUCCESS || handle.is_null() {
        CURRENT.store(std::ptr::null_mut(), Ordering::SeqCst);
        drain_and_free(state);
        if code == sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
            // SAFETY: CUPTI wrote a NUL-terminated name into the zeroed buffer, or left it zeroed.
            let named = unsafe { std::ffi::CStr::from_ptr(holder.as_ptr()) }
                .to_string_lossy()
                .into_owned();
            return Err(TracingError::AlreadySubscribed {
                holder: (!named.is_empty()).then_some(named),
            }
            .into());
        }
        let call = if fns.subscribe_v2.is_some() {
            "cuptiSubscribe_v2"
        } else {
            "cuptiSubscribe"
        };
        return Err(TracingError::Vendor {
            call,
            error: CuptiError::from_code(if code == sys::CUPTI_SUCCESS {
                sys::CUPTI_ERROR_UNKNOWN
            } else {
                code
            }),
        }
        .into());
    }
    log::debug!("CUPTI subscriber {handle:p} subscribed");
    Ok(Subscriber {
        handle,
        fns,
        state,
        enable_lock: Mutex::new(()),
        live: true,
    })
}

/// Waits for callbacks in flight (CURRENT already cleared), then frees the state; leaks it after
/// [`DRAIN_LIMIT`] rather than free memory a stuck callback still reads.
fn drain_and_free(state: *mut State) {
    let deadline = Instant::now() + DRAIN_LIMIT;
    while IN_FLIGHT.load(Ordering::SeqCst) != 0 {
        if Instant::now() >= deadline {
            log::warn!(
                "CUPTI callbacks still running after {DRAIN_LIMIT:?}; their state is leaked"
            );
            return;
        }
        std::thread::yield_now();
    }
    // SAFETY: `state` came from Box::into_raw, is no longer reachable through CURRENT, and no call that loaded
    // it is still running.
    drop(unsafe { Box::from_raw(state) });
}

/// The process's CUPTI callback subscriber (`cuptiSubscribe`); unsubscribes on drop.
///
/// The closure gets a [`CallbackEvent`] borrowed for the call, on the thread that made the API call; it must be
/// `Fn + Send + Sync` because API calls come from every thread at once. A panic in it is caught and counted
/// ([`take_panic`](Self::take_panic)); it never reaches CUPTI.
///
/// ```no_run
/// use gpu_tools::cupti::callback::{ApiSite, CallbackDomain, CallbackEvent, Subscriber};
/// use gpu_tools::cupti::DriverCbid;
/// # fn main() -> gpu_tools::Result<()> {
/// let sub = Subscriber::new(|event| {
///     if let CallbackEvent::Api(call) = event {
///         if call.site() == ApiSite::Enter {
///             println!("{} (correlation {})", call.cbid(), call.correlation_id());
///         }
///     }
/// })?;
/// sub.enable_driver(DriverCbid::LAUNCH_KERNEL)?;
/// sub.enable_domain(CallbackDomain::Resource)?;
/// // ... run CUDA work ...
/// sub.unsubscribe()?;
/// # Ok(()) }
/// ```
///
/// `Send` and `Sync`: CUPTI's handle is process-wide; enabling is serialised by the subscriber, as CUPTI asks.
pub struct Subscriber {
    handle: sys::CUpti_SubscriberHandle,
    fns: CallbackFns,
    state: *mut State,
    /// CUPTI asks that enable calls of one subscriber are serialised.
    enable_lock: Mutex<()>,
    live: bool,
}

// SAFETY: the handle is a process-wide CUPTI object usable from any thread; the state is shared with the callback
// under the CURRENT/IN_FLIGHT protocol and only read through `&`; enabling is serialised by `enable_lock`.
unsafe impl Send for Subscriber {}
// SAFETY: as above.
unsafe impl Sync for Subscriber {}

impl fmt::Debug for Subscriber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Subscriber")
            .field("handle", &self.handle)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Subscriber {
    /// A builder (name, library path).
    pub fn builder() -> SubscriberBuilder {
        SubscriberBuilder::default()
    }

    /// Subscribes `callback` with the defaults; see [`SubscriberBuilder::subscribe`].
    pub fn new<F>(callback: F) -> crate::Result<Self>
    where
        F: for<'a> Fn(&CallbackEvent<'a>) + Send + Sync + 'static,
    {
        Self::builder().subscribe(callback)
    }

    /// The vendor's handle, for CUPTI calls the crate does not wrap (valid while the subscriber lives).
    pub fn as_raw(&self) -> sys::CUpti_SubscriberHandle {
        self.handle
    }

    fn state(&self) -> &State {
        // SAFETY: the state lives until `unsubscribe`/drop, which take the subscriber.
        unsafe { &*self.state }
    }

    /// Enables or disables every callback of a domain (`cuptiEnableDomain`).
    pub fn set_domain(&self, domain: CallbackDomain, enable: bool) -> crate::Result<()> {
        let _serial = self.enable_lock.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: a live subscriber handle and a domain value.
        vendor("cuptiEnableDomain", unsafe {
            (self.fns.enable_domain)(u32::from(enable), self.handle, domain.raw())
        })?;
        Ok(())
    }

    /// Enables every callback of a domain.
    pub fn enable_domain(&self, domain: CallbackDomain) -> crate::Result<()> {
        self.set_domain(domain, true)
    }

    /// Disables every callback of a domain.
    pub fn disable_domain(&self, domain: CallbackDomain) -> crate::Result<()> {
        self.set_domain(domain, false)
    }

    /// Enables or disables one callback id of a domain (`cuptiEnableCallback`).
    pub fn set_callback(
        &self,
        domain: CallbackDomain,
        cbid: u32,
        enable: bool,
    ) -> crate::Result<()> {
        let _serial = self.enable_lock.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: a live subscriber handle; CUPTI checks the domain and id.
        vendor("cuptiEnableCallback", unsafe {
            (self.fns.enable_callback)(u32::from(enable), self.handle, domain.raw(), cbid)
        })?;
        Ok(())
    }

    /// Enables the callbacks of one driver API function.
    pub fn enable_driver(&self, cbid: DriverCbid) -> crate::Result<()> {
        self.set_callback(CallbackDomain::DriverApi, cbid.id(), true)
    }

    /// Enables the callbacks of one runtime API function.
    pub fn enable_runtime(&self, cbid: RuntimeCbid) -> crate::Result<()> {
        self.set_callback(CallbackDomain::RuntimeApi, cbid.id(), true)
    }

    /// Counts so far.
    pub fn stats(&self) -> SubscriberStats {
        let s = self.state();
        SubscriberStats {
            calls: s.calls.load(Ordering::Relaxed),
            panics: s.panics.load(Ordering::Relaxed),
        }
    }

    /// Whether CUPTI was finalised from this subscriber's callback ([`finalize_at_api_exit`]): its subscription
    /// ended then, and dropping it only frees what the crate kept.
    pub fn finalized(&self) -> bool {
        self.state().finalized.load(Ordering::SeqCst)
    }

    /// The message of the first panic of the closure not yet reported, clearing it.
    pub fn take_panic(&self) -> Option<String> {
        self.state()
            .pending_panic
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    /// Unsubscribes (`cuptiUnsubscribe`), waits for callbacks still running, and reports a panic of the closure
    /// not reported yet. Refused inside the subscriber's own callback.
    pub fn unsubscribe(mut self) -> crate::Result<()> {
        if in_subscriber_callback() {
            return Err(TracingError::InsideCallback.into());
        }
        let panic = self.take_panic();
        self.release()?;
        match panic {
            Some(msg) => Err(TracingError::CallbackPanicked(msg).into()),
            None => Ok(()),
        }
    }

    fn release(&mut self) -> Result<(), TracingError> {
        if !self.live {
            return Ok(());
        }
        self.live = false;
        let result = if self.state().finalized.load(Ordering::SeqCst) {
            // `cuptiFinalize` ended the subscription: the handle is no longer CUPTI's.
            Ok(())
        } else {
            // SAFETY: a live subscriber handle, released once.
            vendor("cuptiUnsubscribe", unsafe {
                (self.fns.unsubscribe)(self.handle)
            })
        };
        CURRENT.store(std::ptr::null_mut(), Ordering::SeqCst);
        drain_and_free(self.state);
        SUBSCRIBED.store(false, Ordering::Release);
        log::debug!("CUPTI subscriber {:p} unsubscribed", self.handle);
        result
    }
}

/// Detaches CUPTI from the running process (`cuptiFinalize`), from inside the subscriber's callback for `event`, a
/// driver or runtime API call at its exit: where CUPTI's header asks a client to call it in a process that goes on
/// running. CUPTI's resources in the process are freed and its hooks leave the driver, so the program's CUDA calls
/// cost what they cost without CUPTI (a launch flood that ran at 0.76 of its rate after a window of kernel records,
/// with every kind disabled again, ran at 0.93 after `cuptiFinalize`; docs/measurements.md). The subscription ends
/// with it: [`Subscriber::finalized`] says so, and dropping the subscriber then only frees its state. CUPTI
/// initialises itself again at its next use.
///
/// Checked before CUPTI is called: this thread runs the subscriber's callback, `event` is an API call at its exit,
/// and the loaded CUPTI has `cuptiFinalize` ([`TracingError::NotAtApiExit`], [`TracingError::MissingSymbol`]).
/// CUPTI is finalised once per subscription: a later call returns `Ok` without calling it.
///
/// # Safety
///
/// Nothing in the process uses CUPTI any more, this crate's objects or anyone's: no activity kind is enabled, every
/// activity buffer was flushed and handed back, and no activity tracer, PC sampling or profiler session is open;
/// another user of CUPTI in the process (a profiler of the program's) would lose its state without being told.
/// No other thread makes CUDA calls, and no CUDA graph instantiated while CUPTI was initialised is launched again:
/// on driver 580 (CUPTI 13.0, an H100), finalising at a running job's CUDA call after a trace window killed a
/// PyTorch job in CUPTI's callback inside its next `cudaLaunchKernel`, a `torch.compile` reduce-overhead job in
/// `cuGraphLaunch` and a C launch flood, and left a C job of four launching threads failing every launch
/// (`unspecified launch failure`) for the rest of its life; a program of one thread that finalised between its
/// own launches ran on, correct (docs/driver-notes.md, "CUPTI finalised in a running process").
pub unsafe fn finalize_at_api_exit(event: &CallbackEvent<'_>) -> crate::Result<()> {
    let at_exit = matches!(event, CallbackEvent::Api(call) if call.site() == ApiSite::Exit);
    if !at_exit || !in_subscriber_callback() {
        return Err(TracingError::NotAtApiExit.into());
    }
    let state = CURRENT.load(Ordering::SeqCst);
    if state.is_null() {
        return Err(TracingError::NotAtApiExit.into());
    }
    // SAFETY: this thread runs the subscriber's callback, so IN_FLIGHT counts it and a non-null CURRENT stays
    // allocated until it returns.
    let state = unsafe { &*state };
    let finalize = state
        .fns
        .finalize
        .ok_or(TracingError::MissingSymbol("cuptiFinalize"))?;
    // Once per subscription: another thread's exit callback, running beside the one that finalises, gets `Ok`
    // without calling CUPTI again.
    if state.finalized.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    // SAFETY: called at an API exit inside the subscriber's callback, as CUPTI asks; the caller guarantees that
    // nothing else uses CUPTI.
    if let Err(e) = vendor("cuptiFinalize", unsafe { finalize() }) {
        state.finalized.store(false, Ordering::SeqCst);
        return Err(e.into());
    }
    log::debug!("CUPTI finalised at an API exit");
    Ok(())
}

impl Drop for Subscriber {
    fn drop(&mut self) {
        if !self.live {
            return;
        }
        if in_subscriber_callback() {
            // Waiting for the callbacks in flight would wait for this one: stay subscribed.
            log::warn!("CUPTI subscriber dropped inside its own callback: left subscribed");
            return;
        }
        if let Err(e) = self.release() {
            log::warn!("CUPTI unsubscribe: {e}");
        }
    }
}
