//! Records at a crash: on SIGSEGV, SIGBUS, SIGFPE, SIGABRT, SIGTERM and SIGINT the library flushes what CUPTI holds
//! and, when the signal will end the process, sends its end record, then hands the signal on as the program would
//! have had it: to the program's own handler, or to the default action (the process dies of the same signal), or
//! nowhere if the program ignores it.
//!
//! A signal handler may not lock, allocate or call CUPTI (the thread it interrupted may hold any of those locks).
//! So the handler only writes the signal's number into a pipe and waits (`poll`, bounded by [`WAIT`]) for the
//! answer of a thread started for this, which does the flush and the end record. If the interrupted thread holds a
//! lock the flush needs, the wait runs out and the signal goes on without the records: never a hang.
//!
//! Which signals end the process: SIGSEGV, SIGBUS, SIGFPE and SIGABRT always (a program that recovers from them
//! gets an end record early, and its later records are not sent: nothing may follow the end record, and the
//! library's log counts them, `writer`); SIGTERM and SIGINT when the program left them at the default action. A
//! program's own SIGTERM or SIGINT handler (Python's, which raises `KeyboardInterrupt`) may carry on: then only
//! completed records are flushed, nothing ends, and the exit handler ends the stream later.
//!
//! A program that installs its own handler after the library (after its first CUDA call) replaces the library's:
//! its handler then runs alone, and records not flushed yet are lost to a crash (at most one flush period).
//!
//! SIGKILL cannot be caught: what a SIGKILL loses is at most the periodic flush's interval (`GPU_TOOLS_TRACE_FLUSH_MS`).

use std::ffi::c_int;
use std::sync::atomic::{AtomicBool, AtomicI32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use gpu_tools::cupti::activity::{ActivityTracer, Clock, FlushMode};
use gpu_tools::trace::{ClockAnchor, EndReason, Record};

use crate::writer::{EndCounts, Writer};

/// The signals handled.
pub const SIGNALS: [c_int; 6] = [
    libc::SIGSEGV,
    libc::SIGBUS,
    libc::SIGFPE,
    libc::SIGABRT,
    libc::SIGTERM,
    libc::SIGINT,
];

/// How long the handler waits for the flush.
const WAIT: Duration = Duration::from_secs(5);

/// The program's actions before the library's, in [`SIGNALS`] order. A static because a signal handler is
/// given no value of ours; it is the program's state kept to chain to, read only by this module's handler, not a
/// table through which another module is called.
static OLD: OnceLock<[libc::sigaction; 6]> = OnceLock::new();
/// Write end of the request pipe, read end of the answer pipe.
static REQUEST: AtomicI32 = AtomicI32::new(-1);
static ANSWER: AtomicI32 = AtomicI32::new(-1);
/// A handler is running (a second signal during it goes straight on).
static BUSY: AtomicBool = AtomicBool::new(false);
/// The process that installed the handlers (a forked child passes signals straight on).
static OWNER: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

/// Blocks the handled asynchronous signals in the calling thread: the library's own threads must never be the
/// one a process-directed SIGTERM or SIGINT is delivered to (the handler would wait for itself).
pub fn block_in_this_thread() {
    // SAFETY: builds a signal set on the stack and changes only this thread's mask.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn pipe() -> std::io::Result<(c_int, c_int)> {
    let mut fds = [0 as c_int; 2];
    // SAFETY: a valid array of two descriptors.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// Installs the handlers and starts the thread that flushes for them.
pub fn install(writer: Arc<Writer>, tracer: Arc<ActivityTracer>) -> std::io::Result<()> {
    let (req_read, req_write) = pipe()?;
    let (ans_read, ans_write) = pipe()?;
    std::thread::Builder::new()
        .name("gpu-tools-signal".into())
        .spawn(move || {
            block_in_this_thread();
            loop {
                let mut b = [0u8; 1];
                // SAFETY: reads one byte into a local buffer from the pipe this thread owns.
                let n = unsafe { libc::read(req_read, b.as_mut_ptr().cast(), 1) };
                if n <= 0 {
                    if n < 0
                        && std::io::Error::last_os_error().kind() == std::io::ErrorKind::Interrupted
                    {
                        continue;
                    }
                    return;
                }
                let fatal = b[0] & 0x80 != 0;
                let signal = b[0] & 0x7f;
                let mode = if fatal {
                    FlushMode::Forced
                } else {
                    FlushMode::Completed
                };
                if let Err(e) = tracer.flush_all(mode) {
                    log::warn!("flush at signal {signal}: {e}");
                }
                if fatal {
                    let s = tracer.stats();
                    writer.push(&Record::ClockAnchor(ClockAnchor::now()));
                    writer.end(
                        EndReason::Signal(signal),
                        EndCounts {
                            dropped: s.dropped_records,
                            callback_panics: s.callback_panics,
                        },
                        Clock::Monotonic.now_ns(),
                    );
                }
                // SAFETY: writes one byte from a local buffer to the answer pipe.
                unsafe { libc::write(ans_write, b.as_ptr().cast(), 1) };
            }
        })?;
    REQUEST.store(req_write, Ordering::SeqCst);
    ANSWER.store(ans_read, Ordering::SeqCst);
    OWNER.store(std::process::id(), Ordering::SeqCst);
    let mut old: [libc::sigaction; 6] = [
        // SAFETY: sigaction is plain data; all zeros is SIG_DFL with an empty mask.
        unsafe { std::mem::zeroed() }; 6
    ];
    for (i, &sig) in SIGNALS.iter().enumerate() {
        // SAFETY: reads the current action into a valid struct.
        unsafe { libc::sigaction(sig, std::ptr::null(), &mut old[i]) };
    }
    if OLD.set(old).is_err() {
        return Ok(());
    }
    for &sig in &SIGNALS {
        // SAFETY: a handler that follows the rules of signal handlers (see `handler`); the mask blocks nothing
        // extra; SA_ONSTACK uses the program's alternate stack where it set one (stack overflows).
        unsafe {
            let mut act: libc::sigaction = std::mem::zeroed();
            act.sa_sigaction = handler as *const () as usize;
            act.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK | libc::SA_RESTART;
            libc::sigemptyset(&mut act.sa_mask);
            libc::sigaction(sig, &act, std::ptr::null_mut());
        }
    }
    Ok(())
}

/// Whether the action is a handler function (not the default or ignore).
fn is_function(a: &libc::sigaction) -> bool {
    a.sa_sigaction != libc::SIG_DFL && a.sa_sigaction != libc::SIG_IGN
}

/// Waits until `fd` is readable or `ms` milliseconds have passed, through interruptions by other signals.
/// Async-signal-safe: poll and clock_gettime only.
fn wait_readable(fd: c_int, ms: i64) {
    let now_ms = || {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: clock_gettime is async-signal-safe and writes the local timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
        ts.tv_sec * 1000 + ts.tv_nsec / 1_000_000
    };
    let deadline = now_ms() + ms;
    loop {
        let left = deadline - now_ms();
        if left <= 0 {
            return;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: poll is async-signal-safe; `pfd` is a valid local.
        let n = unsafe { libc::poll(&mut pfd, 1, left.min(c_int::MAX as i64) as c_int) };
        // SAFETY: reads this thread's errno.
        if n != -1 || unsafe { *libc::__errno_location() } != libc::EINTR {
            return;
        }
    }
}

/// The signal handler: async-signal-safe calls only (atomics, write, poll, read, clock_gettime,
/// sigaction, raise, getpid); errno is saved and restored around them.
extern "C" fn handler(sig: c_int, info: *mut libc::siginfo_t, context: *mut libc::c_void) {
    let Some(old) = OLD.get() else { return };
    let Some(i) = SIGNALS.iter().position(|&s| s == sig) else {
        return;
    };
    let old = old[i];
    // SAFETY: getpid is async-signal-safe.
    let owner = OWNER.load(Ordering::SeqCst) == unsafe { libc::getpid() } as u32;
    let ignored = old.sa_sigaction == libc::SIG_IGN;
    let fault = matches!(
        sig,
        libc::SIGSEGV | libc::SIGBUS | libc::SIGFPE | libc::SIGABRT
    );
    if owner && (!ignored || fault) && !BUSY.swap(true, Ordering::SeqCst) {
        let fatal = fault || old.sa_sigaction == libc::SIG_DFL;
        let byte = [(sig as u8 & 0x7f) | if fatal { 0x80 } else { 0 }];
        let (req, ans) = (
            REQUEST.load(Ordering::SeqCst),
            ANSWER.load(Ordering::SeqCst),
        );
        // SAFETY: __errno_location returns this thread's errno; the calls below change it, and the interrupted
        // code must find it as it left it.
        let saved_errno = unsafe { *libc::__errno_location() };
        // SAFETY: write, poll, read and clock_gettime are async-signal-safe; the buffers are on this stack.
        unsafe {
            // An answer left over from an earlier signal whose wait ran out must not answer this one.
            let mut stale = [0u8; 8];
            let mut pfd = libc::pollfd {
                fd: ans,
                events: libc::POLLIN,
                revents: 0,
            };
            while libc::poll(&mut pfd, 1, 0) == 1
                && libc::read(ans, stale.as_mut_ptr().cast(), 8) > 0
            {}
            if libc::write(req, byte.as_ptr().cast(), 1) == 1 {
                wait_readable(ans, WAIT.as_millis() as i64);
                let mut b = [0u8; 1];
                pfd.revents = 0;
                if libc::poll(&mut pfd, 1, 0) == 1 {
                    libc::read(ans, b.as_mut_ptr().cast(), 1);
                }
            }
            *libc::__errno_location() = saved_errno;
        }
        if !fatal {
            BUSY.store(false, Ordering::SeqCst);
        }
    }
    // Hand the signal on as the program had it.
    if is_function(&old) {
        if old.sa_flags & libc::SA_SIGINFO != 0 {
            // SAFETY: the program registered this function for SA_SIGINFO delivery with these arguments.
            let f: extern "C" fn(c_int, *mut libc::siginfo_t, *mut libc::c_void) =
                unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig, info, context);
        } else {
            // SAFETY: the program registered this function as a plain handler.
            let f: extern "C" fn(c_int) = unsafe { std::mem::transmute(old.sa_sigaction) };
            f(sig);
        }
        return;
    }
    if ignored {
        return;
    }
    // The default action: put it back and let it happen (the signal is blocked until this handler returns, then
    // delivered again under the default action; a fault re-executes and faults again).
    // SAFETY: sigaction and raise are async-signal-safe; `old` is the default action read at install.
    unsafe {
        libc::sigaction(sig, &old, std::ptr::null_mut());
        libc::raise(sig);
    }
}
