//! The functions the program's redirected CUPTI calls reach. Each keeps the C signature of the call it stands
//! for, never unwinds, and calls CUPTI itself when no session shares it (a slot read just before the session
//! ended), or while the attach watches the program's calls before the sharing starts (`watch`).

use std::ffi::c_void;

use gpu_tools::sys::cupti as sys;

use super::clock::{ClockMap, ProgramClock};
use super::{Real, bit, handover, watch, with_mux};

/// Runs a hook's body; a panic (none is expected) becomes `CUPTI_ERROR_UNKNOWN` instead of unwinding into the
/// program.
fn guarded(body: impl FnOnce(&Real) -> sys::CUptiResult) -> sys::CUptiResult {
    let run = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // The session's, resolved at its start; without a session (a slot read just before it ended), again.
        match with_mux(|m| m.real).or_else(|| super::resolve().ok()) {
            Some(real) => body(&real),
            None => sys::CUPTI_ERROR_UNKNOWN,
        }
    }));
    match run {
        Ok(code) => code,
        Err(payload) => {
            std::mem::forget(payload);
            sys::CUPTI_ERROR_UNKNOWN
        }
    }
}

/// `cuptiActivityRegisterCallbacks`.
pub(super) unsafe extern "C" fn register_callbacks(
    request: sys::CUpti_BuffersCallbackRequestFunc,
    complete: sys::CUpti_BuffersCallbackCompleteFunc,
) -> sys::CUptiResult {
    guarded(|real| {
        let _inside = wait_for_the_probe("registers its buffer callbacks");
        // SAFETY: in both calls, the real function with the program's arguments.
        let call = || unsafe { (real.register_callbacks)(request, complete) };
        if let Some(code) = watch::pass(call, |w| w.callbacks = Some((request, complete))) {
            return code;
        }
        if with_mux(|_| ()).is_none() {
            return call();
        }
        log::debug!("the program registers its buffer callbacks");
        // Once the tracer has stopped, they go to CUPTI at once, as without the trace (the end then registers none
        // in the middle of the session the program begins now).
        let direct = with_mux(|m| m.tracer_done || m.callbacks_given).unwrap_or(true);
        if !direct {
            // The records made so far are not the program's: they go out before it starts a session.
            // SAFETY: the real flush, outside the state's lock (the completion callback takes it).
            unsafe { (real.flush_all)(sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED) };
        }
        // Its open buffer goes back to the callbacks it came from.
        handover::close();
        let kept = with_mux(|m| {
            m.program.request = request;
            m.program.complete = complete;
            m.program.registered = true;
            m.callbacks_given = direct;
            // From now on its kinds are the ones it enables through the sharing.
            m.program.probed = false;
            m.program.draining = 0;
            m.program.disabled_at.clear();
            m.program.enabled_at.clear();
        });
        match (kept, direct) {
            (Some(()), false) => sys::CUPTI_SUCCESS,
            // To CUPTI now, or the session ended meanwhile.
            _ => call(),
        }
    })
}

/// While the attach's probe looks for the program's callbacks, a flush or registration of the program's waits for
/// it, and the probe waits for one already inside CUPTI: the call is counted there while the returned guard lives
/// (`probe::enter_program_call`).
fn wait_for_the_probe(what: &str) -> super::probe::ProgramCall {
    let (call, waited) = super::probe::enter_program_call();
    if !waited.is_zero() {
        log::debug!(
            "the program {what} while its callbacks were looked for: waited {:.2} ms",
            waited.as_secs_f64() * 1e3
        );
    }
    call
}

/// What a hook decided under the state's lock.
enum Decision {
    Done(sys::CUptiResult),
    CallCupti,
    /// A kind the trace records, which its tracer has not enabled yet (the moments between the sharing's start and
    /// the tracer's): CUPTI enables it for the program now, as without the trace. Left to the tracer, the program's
    /// records of it until then were lost (on an H200, a torch.profiler cycle begun then kept 9 of 141 records).
    EnableBeforeTracer,
}

/// `cuptiActivityEnable`.
pub(super) unsafe extern "C" fn enable(kind: sys::CUpti_ActivityKind) -> sys::CUptiResult {
    guarded(|real| {
        log::debug!("the program enables kind {kind}");
        // SAFETY: the real function with the program's kind.
        if let Some(code) = watch::pass(|| unsafe { (real.enable)(kind) }, |w| w.enabled(kind)) {
            return code;
        }
        let b = bit(kind);
        let decision = with_mux(|m| {
            if b != 0 && m.session_kinds & b != 0 {
                m.program.enabled |= b;
                m.program.draining &= !b;
                m.program.enabled_at.retain(|e| e.kind != kind);
                m.program.enabled_at.push(handover::Enabled::now(kind));
                if m.layout.is_none() {
                    Decision::EnableBeforeTracer
                } else {
                    Decision::Done(sys::CUPTI_SUCCESS)
                }
            } else {
                Decision::CallCupti
            }
        });
        let code = match decision {
            Some(Decision::Done(code)) => code,
            // SAFETY: the real function with the program's kind.
            Some(Decision::EnableBeforeTracer) => unsafe { (real.enable)(kind) },
            Some(Decision::CallCupti) => {
                // After the tracer's stop, its first enable finds its callbacks in CUPTI (`give_back_callbacks`
                // does nothing when they are back already, or while the tracer runs).
                if with_mux(|m| m.tracer_done).unwrap_or(false) {
                    super::give_back_callbacks();
                }
                // SAFETY: the real function with the program's kind.
                let code = unsafe { (real.enable)(kind) };
                if code == sys::CUPTI_SUCCESS {
                    with_mux(|m| {
                        m.program.enabled |= b;
                        m.program.draining &= !b;
                        m.program.only_program |= b;
                    });
                }
                code
            }
            // SAFETY: as above.
            None => return unsafe { (real.enable)(kind) },
        };
        // CUPTI holds a buffer of the program's while it records for it: Kineto flushes only then.
        handover::ensure_open();
        code
    })
}

/// `cuptiActivityDisable`.
pub(super) unsafe extern "C" fn disable(kind: sys::CUpti_ActivityKind) -> sys::CUptiResult {
    guarded(|real| {
        log::debug!("the program disables kind {kind}");
        // SAFETY: the real function with the program's kind.
        if let Some(code) = watch::pass(|| unsafe { (real.disable)(kind) }, |w| w.disabled(kind)) {
            return code;
        }
        let b = bit(kind);
        let decision = with_mux(|m| {
            if m.program.probed
                && b != 0
                && (m.program.enabled | m.program.draining | m.program.unseen_said) & b == 0
            {
                // A session open since before the attach, with a kind the probe did not see it record: that kind's
                // records of the window went to the trace alone (they are told apart only by who enabled them).
                m.program.unseen_said |= b;
                m.link.writer.notice(
                    gpu_tools::trace::NoticeLevel::Warning,
                    format!(
                        "the program's own profiler had CUPTI activity kind {kind} on since before the attach, \
                         though it recorded none while the attach watched it: its records of that kind made \
                         during this window, until its session ended now, went to the trace and not to it"
                    ),
                );
            }
            if m.program.enabled & b != 0 {
                m.program.enabled &= !b;
                m.program.draining |= b;
                m.program.disabled_at.retain(|d| d.kind != kind);
                m.program.disabled_at.push(handover::Disabled::now(kind));
            }
            if b != 0 && m.session_kinds & b != 0 {
                Decision::Done(sys::CUPTI_SUCCESS)
            } else {
                Decision::CallCupti
            }
        });
        match decision {
            Some(Decision::Done(code)) => code,
            // SAFETY: the real function with the program's kind.
            Some(Decision::CallCupti | Decision::EnableBeforeTracer) | None => unsafe {
                (real.disable)(kind)
            },
        }
    })
}

/// How long the program's forced flush waits for batches on their way to it on other threads (a buffer is decoded,
/// handed over and written in milliseconds; the bound keeps a flush from waiting long on one that waits in turn for
/// something of the program's).
const DISPATCH_WAIT: std::time::Duration = std::time::Duration::from_millis(200);

/// `cuptiActivityFlushAll`.
pub(super) unsafe extern "C" fn flush_all(flag: u32) -> sys::CUptiResult {
    guarded(|real| {
        log::debug!("the program flushes (flag {flag})");
        let _inside = wait_for_the_probe("flushes");
        // SAFETY: the real flush; the trace's completion callback hands the program its records meanwhile.
        let code = unsafe { (real.flush_all)(flag) };
        if flag & sys::CUPTI_ACTIVITY_FLAG_FLUSH_FORCED != 0 {
            // While the probe watches: its buffers went back by this flush (`probe`'s watch's end).
            watch::note_forced_flush();
            // Batches on their way to it on other threads reach its open buffer before that goes back.
            match handover::wait_for_dispatches(DISPATCH_WAIT) {
                handover::DispatchWait::None => {}
                handover::DispatchWait::Ended(waited) => log::debug!(
                    "the program's forced flush waited {:.3} ms for batches on their way to it on other threads",
                    waited.as_secs_f64() * 1e3
                ),
                handover::DispatchWait::TimedOut(left) => log::warn!(
                    "the program's forced flush waited {} ms for batches on their way to it on other threads, in \
                     vain ({left} completions and hand-overs still under way): their records may not reach it",
                    DISPATCH_WAIT.as_millis()
                ),
            }
            // As CUPTI's forced flush does, the partly filled buffer goes back too.
            let last = handover::close();
            // Everything of the kinds it disabled has reached it now.
            let none_on = with_mux(|m| {
                m.handed.buffers += last.buffers;
                let drained = m.program.draining;
                m.program.draining = 0;
                m.program.disabled_at.clear();
                m.program.only_program &= !drained | m.program.enabled;
                m.program.enabled == 0
            })
            .or_else(watch::no_kind_on);
            if none_on == Some(true) && code == sys::CUPTI_SUCCESS {
                // Its session ended: a window starts and stops in the gap before its next (`gap`).
                super::gap::session_ended();
            }
        }
        code
    })
}

/// `cuptiActivityEnableRuntimeApi` and `cuptiActivityEnableDriverApi`: the program's choice filters its copies.
fn api_choice(
    runtime: bool,
    cbid: sys::CUpti_CallbackId,
    enable: u8,
    real: &Real,
) -> sys::CUptiResult {
    let kept = with_mux(|m| {
        let list = if runtime {
            &mut m.program.skip_runtime
        } else {
            &mut m.program.skip_driver
        };
        list.retain(|&c| c != cbid);
        if enable == 0 {
            list.push(cbid);
        }
    });
    let f = if runtime {
        real.enable_runtime_api
    } else {
        real.enable_driver_api
    };
    match (kept, f) {
        (Some(()), _) => sys::CUPTI_SUCCESS,
        // SAFETY: the real function with the program's arguments.
        (None, Some(f)) => unsafe { f(cbid, enable) },
        (None, None) => sys::CUPTI_ERROR_NOT_SUPPORTED,
    }
}

/// `cuptiActivityEnableRuntimeApi`.
pub(super) unsafe extern "C" fn enable_runtime_api(
    cbid: sys::CUpti_CallbackId,
    enable: u8,
) -> sys::CUptiResult {
    guarded(|real| api_choice(true, cbid, enable, real))
}

/// `cuptiActivityEnableDriverApi`.
pub(super) unsafe extern "C" fn enable_driver_api(
    cbid: sys::CUpti_CallbackId,
    enable: u8,
) -> sys::CUptiResult {
    guarded(|real| api_choice(false, cbid, enable, real))
}

/// `cuptiSubscribe`: where the trace holds CUPTI's one subscriber and can do without it, it lets go first.
pub(super) unsafe extern "C" fn subscribe(
    subscriber: *mut sys::CUpti_SubscriberHandle,
    callback: sys::CUpti_CallbackFunc,
    userdata: *mut c_void,
) -> sys::CUptiResult {
    guarded(|real| {
        // SAFETY: the real function with the program's arguments.
        let code = unsafe { (real.subscribe)(subscriber, callback, userdata) };
        if code != sys::CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED {
            return code;
        }
        // What the session gave the sharing, taken out of its lock: giving the subscriber up calls CUPTI.
        let Some((writer, slot)) = with_mux(|m| {
            (
                std::sync::Arc::clone(&m.link.writer),
                std::sync::Arc::clone(&m.link.subscriber),
            )
        }) else {
            return code;
        };
        // The session's subscriber (a launched trace's), or the flight recorder's (an attached process's).
        if super::step_aside(&writer, &slot) || crate::flight::step_aside() {
            // SAFETY: as above.
            unsafe { (real.subscribe)(subscriber, callback, userdata) }
        } else {
            writer.notice(
                gpu_tools::trace::NoticeLevel::Info,
                "the program's own profiler asked for CUPTI's callback subscriber, which the range profiler holds \
                 and this CUPTI gives to one: it got none, and records no CUDA activity (`gpu-tools trace` gives \
                 it up instead)"
                    .into(),
            );
            code
        }
    })
}

/// `cuptiActivityRegisterTimestampCallback`: CUPTI keeps the trace's clock; the program's copies get its own.
pub(super) unsafe extern "C" fn register_timestamp(
    source: sys::CUpti_TimestampCallbackFunc,
) -> sys::CUptiResult {
    guarded(|real| {
        log::debug!("the program registers a timestamp source");
        if log::log_enabled!(log::Level::Debug) {
            if let Some(f) = source {
                // SAFETY: the program's timestamp callback, which CUPTI would call from any thread.
                let reads = unsafe { f() };
                log::debug!(
                    "its source {f:p} reads {reads}; the trace's clock reads {}",
                    super::clock::monotonic_ns()
                );
            }
        }
        let kept = with_mux(|m| {
            m.program.timestamp = source;
            m.clock = ClockMap::new(source.map_or(m.clock_before, ProgramClock::Callback));
            // Once its clock is back in CUPTI or the tracer has stopped, CUPTI takes the program's as without the
            // trace, and the sharing's end has none to register: registered there, it came in the middle of the
            // program's next session (torch.profiler registers its clock at each cycle's start).
            m.clock_given.is_none() && !m.tracer_done
        });
        match (kept, real.register_timestamp) {
            (Some(true), _) => sys::CUPTI_SUCCESS,
            (Some(false), Some(f)) => {
                // SAFETY: the real function with the program's argument.
                let code = unsafe { f(source) };
                with_mux(|m| m.clock_given = Some(code == sys::CUPTI_SUCCESS));
                code
            }
            // SAFETY: the real function with the program's argument.
            (None, Some(f)) => unsafe { f(source) },
            (_, None) => sys::CUPTI_ERROR_NOT_SUPPORTED,
        }
    })
}
