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

type StreamQueryFn = unsafe extern "C" fn(*mut std::ffi::c_void) -> i32;

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
    for (stream, context, seq) in asked {
        let state = match &query {
            Some(q) => q.ask(context, stream),
            None => StreamState::Answer("cuStreamQuery is not available".into()),
        };
        if state == StreamState::Idle {
            if let Some(b) = book().as_mut() {
                b.idle_at(stream, seq);
            }
        }
        states.insert(stream, state);
    }
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
/// `session::use_mapped_libraries`) for the context, and its `cuStreamQuery`, which the crate's table lacks.
struct Query {
    api: &'static gpu_tools::cuda::DriverApi,
    query: StreamQueryFn,
}

impl Query {
    fn resolve() -> Option<Query> {
        let driver = gpu_tools::cuda::Driver::get()?;
        let c = std::ffi::CString::new(driver.path()?.as_os_str().as_encoded_bytes()).ok()?;
        // The copy the crate loaded, already mapped.
        let query = MappedLibrary::find(&c)?.symbol(c"cuStreamQuery")?;
        Some(Query {
            api: driver.api(),
            // SAFETY: the driver's function of this C signature (cuda.h).
            query: unsafe { std::mem::transmute::<*mut std::ffi::c_void, StreamQueryFn>(query) },
        })
    }

    /// Whether `stream` of `context` has work left.
    fn ask(&self, context: usize, stream: usize) -> StreamState {
        // SAFETY: a context the program launched in (recorded at its launch callback), made current on this thread
        // for one question and popped after.
        if unsafe { (self.api.cu_ctx_push_current)(context as gpu_tools::cuda::RawContext) } != 0 {
            return StreamState::Answer("its context could not be made current".into());
        }
        // SAFETY: a stream the program launched on and has not begun to destroy (see the module doc).
        let code = unsafe { (self.query)(stream as *mut std::ffi::c_void) };
        let mut popped = std::ptr::null_mut();
        // SAFETY: balances the push above.
        let _ = unsafe { (self.api.cu_ctx_pop_current)(&mut popped) };
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
