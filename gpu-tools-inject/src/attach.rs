//! Tracing a program that already runs: `gpu_tools::linux::inject` loads this library into it and calls
//! [`gpu_tools_inject_attach`] on one of its threads, at a moment where that thread holds no lock of the C library.
//!
//! The entry point only copies its argument and starts a thread: the thread that called it may hold a lock of the
//! CUDA driver, which CUPTI's set-up would wait for. The attach thread connects to the tracer, starts tracing with
//! the CUPTI library the program already maps (or the one the argument names), and then waits on the connection.
//! When the tracer sends its stop byte, or closes the connection, it stops tracing: what it enabled is disabled,
//! every record is delivered, and the stream ends. Nothing of the program's is changed: no signal handler, no
//! callback subscriber kept (a profiler inside the program may hold CUPTI's only one). CUPTI is never finalised: on
//! driver 580 (CUPTI 13.0), finalising it at a running job's CUDA call after a window killed jobs (a CUDA graph's
//! next launch, CUPTI's callback inside a later launch) and left another's context failing every launch
//! (docs/driver-notes.md, "CUPTI finalised in a running process").
//!
//! The library stays loaded afterwards, dormant (its code is pinned: CUPTI may still hold pointers into it, and
//! the exit handler registered at the first attach must stay valid); a second attach starts a new session in it.
//! If the program exits while attached, the exit handler ends the stream as in a launched trace.

use std::ffi::{CStr, c_char, c_int};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};

use gpu_tools::cupti::CuptiLibrary;
use gpu_tools::trace::EndReason;
use gpu_tools_injection::control::{Control, ControlReader};
use gpu_tools_injection::env::AttachStatus;
use gpu_tools_injection::message::Message;
use gpu_tools_injection::settings::{Destination, Settings};

use crate::session::{self, Mode, Session};

/// Set while an attach thread runs: a second attach meanwhile is refused.
static ATTACHED: AtomicBool = AtomicBool::new(false);

/// Starts tracing this process from a thread of its own. `argument`: the settings, one `NAME=value` line per
/// variable, as `Settings::attach_argument` writes them. Returns an `AttachStatus`.
///
/// # Safety
///
/// `argument` must be null or point to a NUL-terminated string that stays valid for the call (it is copied).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpu_tools_inject_attach(argument: *const c_char) -> c_int {
    let text = if argument.is_null() {
        String::new()
    } else {
        // SAFETY: the caller passes a NUL-terminated string valid for the call; it is copied at once.
        unsafe { CStr::from_ptr(argument) }
            .to_string_lossy()
            .into_owned()
    };
    match std::panic::catch_unwind(move || start(text)) {
        Ok(status) => status.code() as c_int,
        Err(payload) => {
            // Dropping a panic payload could panic again, here where nothing may unwind into the caller.
            std::mem::forget(payload);
            AttachStatus::Panicked.code() as c_int
        }
    }
}

fn start(text: String) -> AttachStatus {
    let config = match Settings::from_attach_argument(&text) {
        Ok(c) => c,
        Err(_) => return AttachStatus::BadArgument,
    };
    if !matches!(config.destination, Destination::Socket(_)) {
        // The tracer's stop byte arrives on the connection: a file has none.
        return AttachStatus::BadArgument;
    }
    let cupti = config.cupti.clone();
    if session::is_running() || ATTACHED.swap(true, Ordering::SeqCst) {
        return AttachStatus::Busy;
    }
    session::pin_this_library();
    // PC sampling or kernel metrics of the running process (`gpu-tools profile --pid`) instead of a trace.
    let profile = config.profile.clone().filter(|r| !r.is_empty());
    let thread = std::thread::Builder::new()
        .name("gpu-tools-attach".into())
        .spawn(move || {
            crate::signals::block_in_this_thread();
            let run = std::panic::catch_unwind(|| {
                if let Some(request) = &profile {
                    if let Some(level) = config.log {
                        crate::logger::init(level);
                    }
                    crate::pc_attach::run(&config, cupti.as_deref(), request);
                } else {
                    run(config, cupti);
                }
            });
            if let Err(payload) = run {
                std::mem::forget(payload);
            }
            ATTACHED.store(false, Ordering::SeqCst);
        });
    match thread {
        Ok(_) => AttachStatus::Started,
        Err(_) => {
            ATTACHED.store(false, Ordering::SeqCst);
            AttachStatus::NoThread
        }
    }
}

/// Why a trace after a PC sampling window starts no recorder (said after "no flight recorder: ").
const NO_RECORDER_AFTER_PC: &str = "PC sampling has run in this process, and the recorder's callbacks enabled while \
     the program launched, after a PC sampling window, crashed a job; a `profile --pid --pc-sampling` window starts \
     one inside its finish, with the program's threads held";

/// The attach thread: trace until the tracer says stop.
fn run(config: Settings, cupti: Option<PathBuf>) {
    if let Some(level) = config.log {
        crate::logger::init(level);
    }
    let Some(sink) = session::open_sink(&config) else {
        return;
    };
    let control = sink.control_stream();
    // Noted once the attach reaches CUPTI: one that ended before does not count as the first.
    crate::first_attach::note(crate::first_attach::Kind::Trace);
    session::use_mapped_libraries();
    // A program that maps no CUPTI gets the one the tracer found (the same search a launched trace makes).
    let mapped = gpu_tools::linux::procfs::Process::current()
        .mapped_library("libcupti.so")
        .is_some();
    if !mapped {
        if let Some(path) = &cupti {
            if let Err(e) = CuptiLibrary::load_from(path) {
                log::warn!("CUPTI {} did not load: {e}", path.display());
            }
        }
    }
    // The recorder first, so that its redirect of the program's `cuptiSubscribe` is under the session's. A trace
    // enables its callbacks while the program launches; after a PC sampling window in the process that crashed a job
    // (CUPTI's launch callback, SIGSEGV, on an H200), so there only a PC sampling window's finish, with the program
    // held, starts one.
    let flight = config.flight_recorder.then(|| {
        if crate::first_attach::pc_sampled() && !crate::flight::is_running() {
            Err(NO_RECORDER_AFTER_PC.to_string())
        } else {
            crate::flight::start()
        }
    });
    let Some(session) = Session::start(&config, sink, Mode::Attached) else {
        return;
    };
    if let Some(started) = flight {
        let (level, text) = crate::flight::notice(started);
        session.notice(level, text);
    }
    session.message(&Message::Attached {
        cupti_mapped: mapped,
    });
    if let Err(session) = session::install(session) {
        // A launched session started meanwhile (it cannot: the program already ran its cuInit); end ours.
        session.finish(EndReason::Stopped);
        return;
    }
    session::register_exit_handler();
    // Wait for the tracer's stop byte, or the end of the connection (the tracer went away); the profiling controls
    // mean nothing to a trace.
    if let Some(control) = control {
        for asked in ControlReader::new(control) {
            if asked == Control::Stop {
                break;
            }
        }
    }
    // Beside a profiler on a schedule, the stop's flushes fall between its sessions (its kinds then off, none kept).
    crate::coexist::wait_for_session_gap("stop", None);
    session::finish_running(EndReason::Stopped);
}
