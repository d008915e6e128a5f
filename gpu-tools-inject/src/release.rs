//! Giving CUPTI back once an attached trace window has ended, where nothing in the process needs it any more.
//!
//! CUPTI stays initialised in a process after its last activity kind is disabled, and the program's CUDA calls go
//! on paying for it. On an H100 (driver 580, CUPTI 13.0) a flood of tiny launches ran at 0.71-0.93 of its rate
//! before an in-process window of records once the kinds were disabled and flushed, and at 0.91-1.07 after
//! `cuptiFinalize`; attached, after a window with nothing left running, a C flood ran at 0.70-0.88 of its rate
//! before and a PyTorch flood at 0.75, for the rest of their lives (docs/measurements.md, "The recorder's cost, and a job slower after any
//! window"). CUPTI's header gives `cuptiFinalize`, called at the exit of a driver or runtime API call, as the way
//! to detach it from a process that goes on running.
//!
//! After a window, CUPTI is finalised only where nothing else has a use for it ([`kept_because`]):
//! - no flight recorder runs (it holds CUPTI's subscriber);
//! - no PC sampling ran in the process: the recorder's callbacks, enabled while the program launched after a PC
//!   sampling window, crashed a job, and this needs the same callbacks (so a window whose PC sampling primer ran
//!   keeps CUPTI: `--no-pc-primer`);
//! - no profiling API ran here (one initialised again after a finalisation is untried);
//! - the program was never seen using CUPTI itself (`coexist::program_used_cupti`); a profiler of the program's
//!   that holds CUPTI's one callback subscriber turns the subscription down.
//!
//! Then the library subscribes, enables the driver and runtime API callbacks, and the first API exit on any program
//! thread finalises CUPTI (`gpu_tools::cupti::callback::finalize_at_api_exit`): 3.0-3.2 ms after the window in
//! PyTorch jobs on an H100, which then ran on at their rate before the window. A program that makes no CUDA call
//! for [`RELEASE_WAIT`] keeps CUPTI, as before. The next attach says what happened (`last_outcome`); CUPTI
//! initialises itself again at its next use, a later window's or the program's own profiler's. Finalising does not
//! give the process the debugger back (driver 580 refuses it for the process's life).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::time::{Duration, Instant};

use gpu_tools::cupti::callback::{
    ApiSite, CallbackDomain, CallbackEvent, Subscriber, finalize_at_api_exit,
};

/// How long a window's end waits for a CUDA call of the program's to finalise CUPTI at.
pub const RELEASE_WAIT: Duration = Duration::from_secs(1);

/// How long the end waits for a finalisation that a program thread has begun.
const FINALIZE_LIMIT: Duration = Duration::from_secs(10);

/// The subscription's state: armed (the first API exit finalises), claimed by a program thread that finalises now,
/// done (its result in [`RESULT`]), or cancelled by the window's end (no call came).
const ARMED: u8 = 0;
const FINALIZING: u8 = 1;
const DONE: u8 = 2;
const CANCELLED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(CANCELLED);
/// The finalisation's result, kept by the program thread that made it: `Err` with CUPTI's refusal.
static RESULT: Mutex<Option<Result<(), String>>> = Mutex::new(None);
/// What the last window's end did with CUPTI, for the next attach to say.
static LAST: Mutex<Option<String>> = Mutex::new(None);
/// Held by a window's end while it releases CUPTI: a new attach waits for it before it uses CUPTI.
static RELEASING: Mutex<()> = Mutex::new(());
/// Set by a new attach while it waits for [`RELEASING`]: the window's end gives up at once.
static CANCEL: AtomicBool = AtomicBool::new(false);

/// What a window's end did with CUPTI.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// CUPTI was finalised at an API exit of the program's, this long after the end asked.
    Finalized(Duration),
    /// CUPTI stays: why.
    Kept(String),
}

impl Outcome {
    /// The outcome, as the next attach's stream says it.
    pub fn text(&self) -> String {
        match self {
            Outcome::Finalized(after) => format!(
                "the last window gave CUPTI back: finalised at a CUDA call of the program's {:.1} ms after the \
                 window's end, so that its CUDA calls ran without CUPTI until this attach",
                after.as_secs_f64() * 1e3
            ),
            Outcome::Kept(why) => format!(
                "the last window left CUPTI initialised in the process ({why}): its CUDA calls went on paying for \
                 CUPTI until this attach"
            ),
        }
    }
}

/// Why CUPTI stays in the process after this window, or `None` where the window's end finalises it.
pub fn kept_because() -> Option<&'static str> {
    if crate::flight::is_running() {
        Some("the flight recorder holds CUPTI's subscriber; `--no-flight-recorder` leaves none")
    } else if crate::first_attach::pc_sampled() {
        Some(
            "PC sampling has run in this process, and callbacks enabled while the program launched after a PC \
             sampling window crashed a job",
        )
    } else if crate::profiling::profiling_ran() {
        Some(
            "CUPTI's profiling APIs have run in this process; a profiler initialised again after CUPTI was \
             finalised has not been tried",
        )
    } else if crate::coexist::program_used_cupti() {
        Some("the program uses CUPTI itself")
    } else {
        None
    }
}

/// At a window's end, after its stream ended: finalises CUPTI at the program's next CUDA call if nothing needs it
/// ([`kept_because`]), waiting up to [`RELEASE_WAIT`] for that call. The outcome is kept for the next attach.
pub fn after_window() -> Outcome {
    let _releasing = RELEASING.lock().unwrap_or_else(|p| p.into_inner());
    let outcome = match kept_because() {
        Some(why) => Outcome::Kept(why.to_string()),
        None if CANCEL.load(Ordering::SeqCst) => {
            Outcome::Kept("another attach came at once".into())
        }
        None => finalize_at_next_call(),
    };
    log::debug!("after the window: {outcome:?}");
    *LAST.lock().unwrap_or_else(|p| p.into_inner()) = Some(outcome.text());
    outcome
}

/// Before an attach uses CUPTI (on its own thread, never one of the program's): a window's end still waiting for a
/// CUDA call to finalise CUPTI at gives up, and this returns once that end is over (at once where none waits).
pub fn cancel_pending() {
    CANCEL.store(true, Ordering::SeqCst);
    drop(RELEASING.lock().unwrap_or_else(|p| p.into_inner()));
    CANCEL.store(false, Ordering::SeqCst);
}

/// What the last window's end did with CUPTI, once (the next attach's stream says it).
pub fn last_outcome() -> Option<String> {
    LAST.lock().unwrap_or_else(|p| p.into_inner()).take()
}

/// The subscriber's closure: the first API exit that finds the subscription armed finalises CUPTI.
fn on_event(event: &CallbackEvent<'_>) {
    if !matches!(event, CallbackEvent::Api(call) if call.site() == ApiSite::Exit) {
        return;
    }
    if STATE
        .compare_exchange(ARMED, FINALIZING, Ordering::SeqCst, Ordering::SeqCst)
        .is_err()
    {
        return;
    }
    // SAFETY: the window's tracer stopped with every kind disabled and its buffers flushed and handed back, no
    // recorder, PC sampling or profiler runs or ran here (`kept_because`), and the program was never seen using
    // CUPTI.
    let result = unsafe { finalize_at_api_exit(event) };
    *RESULT.lock().unwrap_or_else(|p| p.into_inner()) = Some(result.map_err(|e| e.to_string()));
    STATE.store(DONE, Ordering::SeqCst);
}

fn finalize_at_next_call() -> Outcome {
    *RESULT.lock().unwrap_or_else(|p| p.into_inner()) = None;
    let subscriber = match Subscriber::builder()
        .name("gpu-tools-release")
        .subscribe(on_event)
    {
        Ok(s) => s,
        Err(e) => {
            return Outcome::Kept(format!("CUPTI's callback subscriber could not be had: {e}"));
        }
    };
    STATE.store(ARMED, Ordering::SeqCst);
    let asked = Instant::now();
    let enabled = subscriber
        .enable_domain(CallbackDomain::DriverApi)
        .and_then(|()| subscriber.enable_domain(CallbackDomain::RuntimeApi));
    if let Err(e) = enabled {
        return cancel(
            subscriber,
            asked,
            format!("its API callbacks could not be enabled: {e}"),
        );
    }
    while STATE.load(Ordering::SeqCst) == ARMED
        && !CANCEL.load(Ordering::SeqCst)
        && asked.elapsed() < RELEASE_WAIT
    {
        std::thread::sleep(Duration::from_millis(1));
    }
    if STATE.load(Ordering::SeqCst) == ARMED {
        let why = if CANCEL.load(Ordering::SeqCst) {
            "another attach came before a CUDA call of the program's".to_string()
        } else {
            format!(
                "the program made no CUDA call in the {} ms after the window",
                RELEASE_WAIT.as_millis()
            )
        };
        return cancel(subscriber, asked, why);
    }
    // A program thread claimed the finalisation: its result comes within moments.
    while STATE.load(Ordering::SeqCst) != DONE && asked.elapsed() < RELEASE_WAIT + FINALIZE_LIMIT {
        std::thread::sleep(Duration::from_millis(1));
    }
    let after = asked.elapsed();
    let result = RESULT.lock().unwrap_or_else(|p| p.into_inner()).take();
    let finalized = subscriber.finalized();
    if finalized {
        // The subscription ended with CUPTI: dropping the subscriber frees the crate's state only.
        drop(subscriber);
        return Outcome::Finalized(after);
    }
    let why = match result {
        Some(Err(e)) => format!("cuptiFinalize failed: {e}"),
        _ => "cuptiFinalize did not return in time".to_string(),
    };
    if STATE.load(Ordering::SeqCst) == DONE {
        return cancel(subscriber, asked, why);
    }
    // A program thread is still inside cuptiFinalize: the subscriber is left as it is, not unsubscribed under it.
    std::mem::forget(subscriber);
    Outcome::Kept(why)
}

/// Ends the subscription unused (`why`: the outcome), unless a program thread claimed it meanwhile.
fn cancel(subscriber: Subscriber, asked: Instant, why: String) -> Outcome {
    let claimed = STATE
        .compare_exchange(ARMED, CANCELLED, Ordering::SeqCst, Ordering::SeqCst)
        .is_err();
    if claimed && STATE.load(Ordering::SeqCst) == FINALIZING {
        // Claimed between the check and here: wait for its result, then decide as the end of a claimed one does.
        let started = Instant::now();
        while STATE.load(Ordering::SeqCst) == FINALIZING && started.elapsed() < FINALIZE_LIMIT {
            std::thread::sleep(Duration::from_millis(1));
        }
        if STATE.load(Ordering::SeqCst) == FINALIZING {
            std::mem::forget(subscriber);
            return Outcome::Kept("cuptiFinalize did not return in time".into());
        }
    }
    if subscriber.finalized() {
        drop(subscriber);
        return Outcome::Finalized(asked.elapsed());
    }
    if let Err(e) = subscriber.unsubscribe() {
        log::warn!("after the window: unsubscribe: {e}");
    }
    Outcome::Kept(why)
}
