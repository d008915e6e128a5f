//! The flight recorder: after an attach has run CUPTI in a process, the CUDA driver refuses the debugger there for
//! the rest of the process's life (driver 580), so `gpu-tools where` can no longer show a hung job's warps. The
//! library, which stays loaded, keeps instead an account of the program's launches (`book`): from CUPTI's launch
//! callbacks, each kernel or graph launch's stream, kernel name, thread and time; from its synchronisation calls
//! (stream, event and context synchronisations and queries, event records), which launches have finished. `where`
//! asks for it over a socket (`service`): the launches not known to have finished, per stream, since when, on which
//! thread, and the threads waiting in a synchronisation. The program's stream captures are followed too: their
//! launches are a graph's nodes, not work, and while one is under way the report asks the driver nothing, since a
//! question then would end the capture (`capture`). Kernels are not timed on the GPU and no activity record
//! is made: the cost is a callback at each launch and synchronisation call, with no driver call there (a graph's
//! instantiation reads the graph through the driver, once). On an H200, after a trace window left it on, a C
//! launch flood ran at 0.99 of its rate before and a PyTorch flood of tiny kernels at 0.78 (`docs/measurements.md`,
//! "Tracers side by side"; measured before the recorder's per-launch work was cut).
//!
//! It holds CUPTI's one callback subscriber (CUPTI 13.0 gives one). A profiler of the program that asks for it
//! (`cuptiSubscribe`, which is redirected to [`subscribe_hook`] while the recorder runs) gets it: the recorder steps
//! aside, says so in its next report, and records no more. `profile --pid`'s kernel metrics need the subscriber too:
//! it stops the recorder for its window and starts it again after. A process where the subscriber is held already
//! (a program that ran torch.profiler keeps its own) gets no recorder, and the stream says so.

mod book;
mod capture;
mod service;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

use gpu_tools::cupti::activity::Clock;
use gpu_tools::cupti::callback::{
    ApiEvent, ApiSite, CallbackDomain, CallbackEvent, CaptureCall, ResourceEvent, ResourceKind,
    Subscriber, SyncCall,
};
use gpu_tools::cupti::{ApiCbid, DriverCbid};
use gpu_tools::sys::cupti as sys;
use gpu_tools::trace::NoticeLevel;

use book::{Book, SyncTarget};

/// The account, while a recorder ran in this process (kept after it stops, for the reports).
static BOOK: Mutex<Option<Book>> = Mutex::new(None);
/// The running recorder: its subscriber, and the program's `cuptiSubscribe` slots redirected to [`subscribe_hook`].
static RUNNING: Mutex<Option<Running>> = Mutex::new(None);

struct Running {
    subscriber: Subscriber,
    redirects: Vec<crate::imports::Redirect>,
}

fn book() -> MutexGuard<'static, Option<Book>> {
    BOOK.lock().unwrap_or_else(|p| p.into_inner())
}

fn running() -> MutexGuard<'static, Option<Running>> {
    RUNNING.lock().unwrap_or_else(|p| p.into_inner())
}

fn now_ns() -> u64 {
    Clock::Monotonic.now_ns()
}

fn thread_id() -> u32 {
    thread_local! {
        static TID: Cell<u32> = const { Cell::new(0) };
    }
    TID.with(|t| {
        if t.get() == 0 {
            // SAFETY: gettid has no preconditions.
            t.set(u32::try_from(unsafe { libc::gettid() }).unwrap_or(0));
        }
        t.get()
    })
}

/// The driver calls whose callbacks the recorder reads.
fn driver_calls() -> impl Iterator<Item = DriverCbid> {
    DriverCbid::all().filter(|c| {
        c.name().is_some_and(|n| {
            crate::profiling::LAUNCHES.contains(&n)
                || crate::profiling::GRAPH_LAUNCHES.contains(&n)
                || SyncCall::NAMES.contains(&n)
                || CaptureCall::BEGINS.contains(&n)
                || CaptureCall::ENDS.contains(&n)
        })
    })
}

/// Starts recording (after an attached session), unless it runs already. `Err`: why there is no recorder, to say
/// in the stream.
pub fn start() -> Result<(), String> {
    let mut slot = running();
    if slot.is_some() {
        return Ok(());
    }
    let subscriber = Subscriber::builder()
        .name("gpu-tools-flight")
        .subscribe(on_event)
        .map_err(|e| format!("CUPTI's callback subscriber could not be had ({e})"))?;
    let enabled = driver_calls()
        .try_for_each(|c| subscriber.enable_driver(c))
        .and_then(|()| subscriber.enable_domain(CallbackDomain::Resource));
    if let Err(e) = enabled {
        let _ = subscriber.unsubscribe();
        return Err(format!("the launch callbacks could not be enabled ({e})"));
    }
    // Captures under way now were not seen begin: the report finds them by asking each stream.
    capture::forget();
    {
        let mut b = book();
        match b.as_mut() {
            // Started again: the account goes on (launches made while it was off are not in it: said).
            Some(b) => b.stopped = None,
            None => *b = Some(Book::new(now_ns())),
        }
    }
    // SAFETY: the hook has `cuptiSubscribe`'s C signature and stays valid for the process's life (the library is
    // pinned).
    let redirects = unsafe {
        crate::imports::redirect(
            &[("cuptiSubscribe", subscribe_hook as *const () as usize)],
            &crate::imports::not_cupti_or_this_library,
        )
    };
    *slot = Some(Running {
        subscriber,
        redirects,
    });
    drop(slot);
    service::listen();
    Ok(())
}

/// Whether a recorder runs now.
pub fn is_running() -> bool {
    running().is_some()
}

/// What the stream says of a [`start`]: the recorder runs, or why not.
pub fn notice(started: Result<(), String>) -> (NoticeLevel, String) {
    match started {
        Ok(()) => (
            NoticeLevel::Info,
            "a flight recorder runs in the process from now on: CUPTI has run here, so the CUDA driver refuses the \
             debugger for the rest of the process's life, and `gpu-tools where` answers from the recorder instead \
             (the kernels launched and not finished, per stream, and the threads waiting for them); it costs a \
             callback at each launch and synchronisation (`--no-flight-recorder` leaves none)"
                .into(),
        ),
        Err(why) => (
            NoticeLevel::Warning,
            format!(
                "no flight recorder: {why}. CUPTI has run here, so the CUDA driver refuses the debugger for the rest \
                 of the process's life: `gpu-tools where` cannot say where it hangs"
            ),
        ),
    }
}

/// Stops recording (the account stays, for later reports), saying why. True when a recorder ran.
pub fn stop(why: &str) -> bool {
    let Some(r) = running().take() else {
        return false;
    };
    crate::imports::restore(r.redirects);
    if let Err(e) = r.subscriber.unsubscribe() {
        log::warn!("flight recorder: unsubscribe: {e}");
    }
    if let Some(b) = book().as_mut() {
        b.stopped = Some(format!("{why} (at {} ns)", now_ns()));
    }
    true
}

/// Gives CUPTI's subscriber up to the program's profiler, which asked for it: true when the recorder held it.
pub fn step_aside() -> bool {
    stop(
        "the program's own profiler asked for CUPTI's callback subscriber, which the recorder gave up",
    )
}

type SubscribeFn = unsafe extern "C" fn(
    *mut sys::CUpti_SubscriberHandle,
    sys::CUpti_CallbackFunc,
    *mut c_void,
) -> sys::CUptiResult;

/// CUPTI's own `cuptiSubscribe`, in the CUPTI the program maps (looked up at each call: a program subscribes once
/// per profiler session, if that).
fn real_subscribe() -> Option<SubscribeFn> {
    let p = crate::nvtx_attach::cupti_symbol("cuptiSubscribe").ok()?;
    // SAFETY: CUPTI's function of this C signature (cupti_callbacks.h).
    Some(unsafe { std::mem::transmute::<*mut c_void, SubscribeFn>(p) })
}

/// `cuptiSubscribe` while the recorder runs: the program's profiler gets the subscriber, and the recorder stops.
///
/// # Safety
/// As `cuptiSubscribe`: called by the program with its own arguments.
unsafe extern "C" fn subscribe_hook(
    subscriber: *mut sys::CUpti_SubscriberHandle,
    callback: sys::CUpti_CallbackFunc,
    userdata: *mut c_void,
) -> sys::CUptiResult {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(real) = real_subscribe() else {
            return sys::CUPTI_ERROR_UNKNOWN;
        };
        // SAFETY: the real function with the program's arguments.
        let code = unsafe { real(subscriber, callback, userdata) };
        if code == sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED && step_aside() {
            // SAFETY: as above.
            unsafe { real(subscriber, callback, userdata) }
        } else {
            code
        }
    }));
    run.unwrap_or_else(|payload| {
        std::mem::forget(payload);
        sys::CUPTI_ERROR_UNKNOWN
    })
}

/// The subscriber's callback, on the program's threads, inside its driver calls: it records and returns; it
/// never calls the driver while it holds the account.
fn on_event(event: &CallbackEvent<'_>) {
    match event {
        CallbackEvent::Api(a) => on_api(a),
        CallbackEvent::Resource(r) => on_resource(r),
        _ => {}
    }
}

fn on_api(a: &ApiEvent<'_>) {
    let ApiCbid::Driver(cbid) = a.cbid() else {
        return;
    };
    if let Some(c) = a.capture_call() {
        on_capture(a, c);
        return;
    }
    let call = cbid.name().unwrap_or("?");
    match a.site() {
        ApiSite::Enter => {
            if let Some(stream) = a.launch_stream() {
                if capture::captures(stream as usize) {
                    // Captured into a graph, not run: the graph's launch is the work.
                    return;
                }
                let graph = a.graph_exec().map_or(0, |g| g as usize);
                let kernel = a.symbol_name();
                let at = now_ns();
                if let Some(b) = book().as_mut() {
                    b.launch(
                        stream as usize,
                        a.context() as usize,
                        a.context_uid(),
                        thread_id(),
                        a.correlation_id(),
                        at,
                        graph,
                        kernel,
                    );
                }
                return;
            }
            let Some(sync) = a.sync_call() else { return };
            let at = now_ns();
            let mut guard = book();
            let Some(b) = guard.as_mut() else { return };
            let (target, query) = match sync {
                SyncCall::EventRecord { event, stream } => {
                    b.event_recorded(event as usize, stream as usize);
                    return;
                }
                SyncCall::StreamSynchronize(s) => (SyncTarget::Stream(s as usize), false),
                SyncCall::StreamQuery(s) => (SyncTarget::Stream(s as usize), true),
                SyncCall::EventSynchronize(e) => (SyncTarget::Event(e as usize), false),
                SyncCall::EventQuery(e) => (SyncTarget::Event(e as usize), true),
                SyncCall::ContextSynchronize(ctx) => {
                    let ctx = ctx.unwrap_or_else(|| a.context());
                    (SyncTarget::Context(ctx as usize), false)
                }
            };
            b.sync_enter(thread_id(), call, target, query, at);
        }
        ApiSite::Exit => {
            if matches!(a.sync_call(), None | Some(SyncCall::EventRecord { .. })) {
                return;
            }
            if let Some(b) = book().as_mut() {
                b.sync_exit(thread_id(), a.return_value() == Some(0));
            }
        }
    }
}

/// A capture's begin and end: no question about the program's streams is asked in between (`capture`).
fn on_capture(a: &ApiEvent<'_>, call: CaptureCall) {
    thread_local! {
        /// The stream this thread's begin call under way put in the account (its entry and exit callbacks come on
        /// the calling thread, with no other begin of that thread between them).
        static BEGUN: Cell<Option<usize>> = const { Cell::new(None) };
    }
    match (call, a.site()) {
        (CaptureCall::Begin(stream), ApiSite::Enter) => {
            let stream = stream as usize;
            BEGUN.with(|b| b.set(capture::begins(stream).then_some(stream)));
        }
        (CaptureCall::Begin(stream), ApiSite::Exit) => {
            let begun = BEGUN.with(Cell::take);
            // A failed begin ends nothing, unless it put its stream in the account itself.
            if a.return_value().is_some_and(|r| r != 0) && begun == Some(stream as usize) {
                capture::ends(stream as usize);
            }
        }
        (CaptureCall::End(stream), ApiSite::Exit) => capture::ends(stream as usize),
        _ => {}
    }
}

fn on_resource(r: &ResourceEvent<'_>) {
    match r.kind() {
        ResourceKind::StreamDestroyStarting => {
            if let (Some(s), Some(b)) = (r.stream(), book().as_mut()) {
                b.stream_destroyed(s as usize);
            }
        }
        ResourceKind::ContextDestroyStarting => {
            if let Some(b) = book().as_mut() {
                b.context_destroyed(r.context() as usize);
            }
        }
        ResourceKind::GraphExecCreated => {
            // Read before the account is locked: reading the graph calls the driver.
            let kernels = crate::profiling::graph_kernels(r);
            let Some(exec) = r.graph().map(|g| g.graph_exec as usize) else {
                return;
            };
            let names = match kernels {
                Ok(g) => {
                    let names: Vec<&str> = g
                        .kernels
                        .iter()
                        .map(|k| k.as_deref().unwrap_or("?"))
                        .collect();
                    format!("graph of {} kernels: {}", names.len(), names.join("; "))
                }
                Err(e) => format!("graph (its kernels could not be read: {e})"),
            };
            if let Some(b) = book().as_mut() {
                b.graph_made(exec, &names);
            }
        }
        ResourceKind::GraphExecDestroyStarting => {
            if let (Some(g), Some(b)) = (r.graph(), book().as_mut()) {
                b.graph_destroyed(g.graph_exec as usize);
            }
        }
        _ => {}
    }
}
