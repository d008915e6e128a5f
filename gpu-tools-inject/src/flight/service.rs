//! The recorder's socket: `/tmp/gpu-tools-flight-PID.sock` (`gpu_tools_injection::flight::socket_file_name`), mode
//! 0600, served by a thread of its own from the recorder's first start until the process ends. A connection that
//! sends `REQUEST` gets the report and is closed; anything else is closed unanswered.
//!
//! Making the report asks the driver, for each stream with launches not known to have finished, whether the stream
//! has work left (`cuStreamQuery`, on this thread, with the stream's context pushed): in a hung process it answers
//! at once (seen on an H200, driver 580: `CUDA_ERROR_NOT_READY` in under a millisecond while a kernel spun and the
//! main thread waited in `cudaStreamSynchronize`). A stream the program destroys between the account's snapshot and
//! the question is the one case where the question names a stale handle; the account marks streams destroyed as
//! their destruction starts, and a process hung in a synchronisation does not destroy streams.
//!
//! No question is asked that would end a CUDA graph capture of the program's (`super::capture`): none while a capture
//! the recorder saw begin is under way; none about a stream that captures (asked first, with `cuStreamIsCapturing`);
//! and each from this thread in the relaxed capture mode, put back after. The per-thread default stream is the
//! asking thread's own, so the program's is not asked.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::Once;
use std::time::Duration;

use gpu_tools_injection::flight::{REQUEST, StreamState, socket_file_name};

use super::{book, now_ns};
use crate::mapped_library::MappedLibrary;

/// `CUDA_SUCCESS`, `CUDA_ERROR_NOT_READY`.
const CUDA_SUCCESS: i32 = 0;
const CUDA_ERROR_NOT_READY: i32 = 600;

/// `CU_STREAM_CAPTURE_MODE_RELAXED` (cuda.h's `CUstreamCaptureMode`).
const CU_STREAM_CAPTURE_MODE_RELAXED: i32 = 2;
/// `CU_STREAM_PER_THREAD` (cuda.h): the calling thread's default stream.
const CU_STREAM_PER_THREAD: usize = 0x2;

type StreamQueryFn = unsafe extern "C" fn(*mut std::ffi::c_void) -> i32;
type ExchangeModeFn = unsafe extern "C" fn(*mut i32) -> i32;

fn socket_path() -> PathBuf {
    PathBuf::from("/tmp").join(socket_file_name(std::process::id()))
}

/// Starts the socket's thread, once per process.
pub(super) fn listen() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let path = socket_path();
        let _ = std::fs::remove_file(&path);
        let listener = match UnixListener::bind(&path) {
            Ok(l) => l,
            Err(e) => {
                log::warn!("flight recorder: no socket at {}: {e}", path.display());
                return;
            }
        };
        if let Err(e) = std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)) {
            log::warn!("flight recorder: {}: {e}", path.display());
        }
        remove_at_exit();
        let spawned = std::thread::Builder::new()
            .name("gpu-tools-flight".into())
            .spawn(move || {
                crate::signals::block_in_this_thread();
                for conn in listener.incoming() {
                    let Ok(conn) = conn else { continue };
                    let served =
                        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| serve(conn)));
                    if let Err(payload) = served {
                        std::mem::forget(payload);
                    }
                }
            });
        if let Err(e) = spawned {
            log::warn!("flight recorder: no thread for its socket: {e}");
        }
    });
}

fn serve(mut conn: UnixStream) {
    let _ = conn.set_read_timeout(Some(Duration::from_secs(2)));
    let mut byte = [0u8; 1];
    if !matches!(conn.read(&mut byte), Ok(1)) || byte[0] != REQUEST {
        return;
    }
    let report = report();
    if let Err(e) = conn.write_all(report.as_bytes()) {
        log::debug!("flight recorder: the report was not taken: {e}");
    }
}

/// The report as of now.
fn report() -> String {
    let asked = book().as_ref().map(|b| b.to_ask()).unwrap_or_default();
    let mut states = HashMap::new();
    let query = Query::resolve();
    let relaxed = query.as_ref().map(Query::relaxed);
    for (stream, context, seq) in asked {
        let state = match (&query, &relaxed) {
            (Some(q), Some(Ok(_))) => match super::capture::ask() {
                Ok(_asking) => q.ask(context, stream),
                Err(capturing) => StreamState::NotAsked(format!(
                    "the program is capturing a CUDA graph on stream {capturing:#x}, and a question now \
                     would end its capture"
                )),
            },
            (Some(_), Some(Err(e))) => StreamState::NotAsked(format!(
                "the recorder's thread could not be put in the relaxed capture mode ({e}), and a question could end a \
                 capture of the program's"
            )),
            _ => StreamState::NotAsked(
                "cuStreamQuery or cuThreadExchangeStreamCaptureMode is not available".into(),
            ),
        };
        if state == StreamState::Idle {
            if let Some(b) = book().as_mut() {
                b.idle_at(stream, seq);
            }
        }
        states.insert(stream, state);
    }
    drop(relaxed);
    let guard = book();
    match guard.as_ref() {
        Some(b) => b.report(std::process::id(), now_ns(), &states).encode(),
        None => gpu_tools_injection::flight::FlightReport {
            pid: std::process::id(),
            now_ns: now_ns(),
            stopped: Some("the recorder never started".into()),
            ..Default::default()
        }
        .encode(),
    }
}

/// The driver functions the report asks: the crate's driver (the one the program maps,
/// `session::use_mapped_libraries`) for the context and a stream's capture status, and its `cuStreamQuery` and
/// `cuThreadExchangeStreamCaptureMode`, which the crate's table lacks.
struct Query {
    driver: &'static gpu_tools::cuda::Driver,
    query: StreamQueryFn,
    exchange_mode: ExchangeModeFn,
}

/// This thread in the relaxed capture mode, until dropped: the mode it had goes back.
struct Relaxed {
    exchange_mode: ExchangeModeFn,
    previous: i32,
}

impl Drop for Relaxed {
    fn drop(&mut self) {
        let mut mode = self.previous;
        // SAFETY: the driver's function, with a valid pointer to a mode it gave.
        let _ = unsafe { (self.exchange_mode)(&mut mode) };
    }
}

impl Query {
    fn resolve() -> Option<Query> {
        let driver = gpu_tools::cuda::Driver::get()?;
        let c = std::ffi::CString::new(driver.path()?.as_os_str().as_encoded_bytes()).ok()?;
        // The copy the crate loaded, already mapped.
        let library = MappedLibrary::find(&c)?;
        let query = library.symbol(c"cuStreamQuery")?;
        let exchange_mode = library.symbol(c"cuThreadExchangeStreamCaptureMode")?;
        Some(Query {
            driver,
            // SAFETY: the driver's function of this C signature (cuda.h).
            query: unsafe { std::mem::transmute::<*mut std::ffi::c_void, StreamQueryFn>(query) },
            // SAFETY: as above.
            exchange_mode: unsafe {
                std::mem::transmute::<*mut std::ffi::c_void, ExchangeModeFn>(exchange_mode)
            },
        })
    }

    /// This thread in the relaxed capture mode, in which its questions about streams that do not capture are allowed
    /// while a capture of the program's runs. `Err`: the driver's refusal.
    fn relaxed(&self) -> Result<Relaxed, String> {
        let mut mode = CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: the driver's function with a valid pointer; it swaps this thread's mode with ours.
        match unsafe { (self.exchange_mode)(&mut mode) } {
            CUDA_SUCCESS => Ok(Relaxed {
                exchange_mode: self.exchange_mode,
                previous: mode,
            }),
            other => Err(format!("CUresult {other}")),
        }
    }

    /// Whether `stream` of `context` has work left.
    fn ask(&self, context: usize, stream: usize) -> StreamState {
        if stream == CU_STREAM_PER_THREAD {
            return StreamState::NotAsked(
                "the per-thread default stream would be the asking thread's own".into(),
            );
        }
        let api = self.driver.api();
        // SAFETY: a context the program launched in (recorded at its launch callback), made current on this thread
        // for one question and popped after.
        if unsafe { (api.cu_ctx_push_current)(context as gpu_tools::cuda::RawContext) } != 0 {
            return StreamState::NotAsked("its context could not be made current".into());
        }
        let state = self.ask_current(stream);
        let mut popped = std::ptr::null_mut();
        // SAFETY: balances the push above.
        let _ = unsafe { (api.cu_ctx_pop_current)(&mut popped) };
        state
    }

    /// [`ask`](Self::ask), with the stream's context current.
    fn ask_current(&self, stream: usize) -> StreamState {
        // SAFETY: a stream the program launched on and has not begun to destroy (see the module doc), or the
        // legacy stream.
        match unsafe { gpu_tools::cuda::graph::stream_is_capturing(self.driver, stream as _) } {
            Ok(false) => {}
            Ok(true) => {
                return StreamState::NotAsked(
                    "the stream is capturing a CUDA graph (its launches since the capture began are \
                     in the graph, not run), and a question would end its capture"
                        .into(),
                );
            }
            Err(e) => {
                return StreamState::NotAsked(format!(
                    "whether it captures a CUDA graph could not be read ({e})"
                ));
            }
        }
        // SAFETY: as above.
        let code = unsafe { (self.query)(stream as *mut std::ffi::c_void) };
        match code {
            CUDA_SUCCESS => StreamState::Idle,
            CUDA_ERROR_NOT_READY => StreamState::Busy,
            other => StreamState::Answer(format!("CUresult {other}")),
        }
    }
}

/// The socket file goes with the process (a killed process leaves it; the next recorder in a process of the same
/// pid replaces it, and `where` finds nothing listening in a stale one).
fn remove_at_exit() {
    extern "C" fn remove() {
        let run = std::panic::catch_unwind(|| {
            let _ = std::fs::remove_file(socket_path());
        });
        // A panic's payload is not dropped here: its drop could panic again, inside the C library's exit.
        if let Err(payload) = run {
            std::mem::forget(payload);
        }
    }
    // SAFETY: registers a function that stays valid for the process (the library is pinned) and never unwinds.
    if unsafe { libc::atexit(remove) } != 0 {
        log::debug!("flight recorder: its socket stays after the exit");
    }
}
