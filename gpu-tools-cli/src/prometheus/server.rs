//! The HTTP server: a thread accepting connections and a thread per connection answering `GET /metrics` from the
//! shared [`State`] while the sampling loop updates it. Each connection gets one answer and is closed.
//!
//! It reads no request body and bounds what a client can hold: the request head's size, the time to send it and
//! to take the answer, and the connections answered at once. A client that stalls, sends a body it never
//! finishes or announces one of any size, or reads nothing, holds its own connection only.

use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_tools::counters::top::{TopGpu, TopRow, TopTotals};

use super::exposition::CONTENT_TYPE;
#[cfg(doc)]
use super::listen::bind;
use super::state::State;
use crate::failure::Failure;

/// The longest request head (request line and headers) read; a longer one is answered 431.
const MAX_HEAD: usize = 16 * 1024;
/// How long a client has to send its request head, and then to take its answer.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections answered at once; one more is closed unanswered.
const MAX_CONNECTIONS: usize = 64;

/// The HTTP server: a thread answering `GET /metrics` from the shared [`State`] until [`stop`](Self::stop).
pub struct Exporter {
    state: Arc<Mutex<State>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    addr: SocketAddr,
}

impl Exporter {
    /// Serves `state` on `listener` (already bound: see [`bind`]).
    pub fn start(listener: TcpListener, state: State) -> Result<Exporter, Failure> {
        let addr = listener
            .local_addr()
            .map_err(|e| Failure::new(1, format!("the exporter's socket: {e}")))?;
        // Non-blocking, so that a connection reset between the poll and the accept cannot hold up the stop.
        listener.set_nonblocking(true).map_err(|e| {
            Failure::new(1, format!("cannot serve Prometheus metrics on {addr}: {e}"))
        })?;
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&state), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("gpu-tools-prometheus".into())
            .spawn(move || serve(&listener, &s, &st))
            .map_err(|e| Failure::new(1, format!("cannot start the exporter's thread: {e}")))?;
        Ok(Exporter {
            state,
            stop,
            thread: Some(thread),
            addr,
        })
    }

    /// The address served (with the port chosen where 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Takes one refresh of the view.
    pub fn update(&self, rows: &[TopRow], totals: &[(TopGpu, TopTotals)]) {
        self.state
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .update(rows, totals, Instant::now());
    }

    /// Stops serving.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// The server's loop: accepts connections until `stop` (checked every 100 ms), each answered on a thread of its own.
fn serve(listener: &TcpListener, state: &Arc<Mutex<State>>, stop: &AtomicBool) {
    let open = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::SeqCst) {
        if !pending(listener, Duration::from_millis(100)) {
            continue;
        }
        let stream = match listener.accept() {
            Ok((stream, _)) => stream,
            Err(e) if e.kind() == ErrorKind::WouldBlock => continue,
            Err(e) => {
                // Out of file descriptors, say: the next connections may be accepted once some close.
                log::warn!("Prometheus exporter: {e}");
                std::thread::sleep(Duration::from_millis(100));
                continue;
            }
        };
        if open.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            open.fetch_sub(1, Ordering::SeqCst);
            continue;
        }
        let guard = Open(Arc::clone(&open));
        let state = Arc::clone(state);
        let spawned = std::thread::Builder::new()
            .name("gpu-tools-prometheus-client".into())
            .spawn(move || {
                let _guard = guard;
                answer(stream, &state);
            });
        if let Err(e) = spawned {
            log::warn!("Prometheus exporter: cannot answer a connection: {e}");
        }
    }
}

/// One connection being answered: counted down when its thread ends, however it ends.
struct Open(Arc<AtomicUsize>);

impl Drop for Open {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether a connection waits on `listener`, waiting up to `timeout` for one.
fn pending(listener: &TcpListener, timeout: Duration) -> bool {
    let mut fd = libc::pollfd {
        fd: listener.as_raw_fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    let ms = i32::try_from(timeout.as_millis()).unwrap_or(i32::MAX);
    // SAFETY: one pollfd, valid for the call; the listener outlives it.
    unsafe { libc::poll(&mut fd, 1, ms) > 0 }
}

/// Reads one request's head and answers it; errors of the connection are the client's and end it only.
fn answer(mut stream: TcpStream, state: &Mutex<State>) {
    let deadline = Instant::now() + CLIENT_TIMEOUT;
    if stream.set_nonblocking(false).is_err()
        || stream.set_write_timeout(Some(CLIENT_TIMEOUT)).is_err()
    {
        return;
    }
    let (code, body, content_type, head_only) = match read_head(&mut stream, deadline) {
        Ok(head) => route(&head, state),
        Err(Some(code)) => (code, String::new(), "text/plain; charset=utf-8", false),
        Err(None) => return,
    };
    let mut response = format!(
        "HTTP/1.1 {code} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n",
        reason(code),
        body.len()
    );
    if code == 405 {
        response.push_str("Allow: GET, HEAD\r\n");
    }
    response.push_str("\r\n");
    if !head_only {
        response.push_str(&body);
    }
    if let Err(e) = stream.write_all(response.as_bytes()) {
        log::debug!("Prometheus exporter: a scrape's answer: {e}");
        return;
    }
    let _ = stream.shutdown(Shutdown::Write);
    // Closing with unread bytes (a body, a pipelined request) resets the connection, which can discard the
    // answer before the client has read it: take what the client still sends until it closes, within bounds.
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let _ = std::io::copy(&mut (&stream).take(1 << 20), &mut std::io::sink());
}

/// The request head (up to its blank line), or the status to answer instead (`None`: close without one).
fn read_head(stream: &mut TcpStream, deadline: Instant) -> Result<Vec<u8>, Option<u16>> {
    let mut head = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(end) = head
            .windows(4)
            .position(|w| w == b"\r\n\r\n")
            .or_else(|| head.windows(2).position(|w| w == b"\n\n"))
        {
            head.truncate(end);
            return Ok(head);
        }
        if head.len() > MAX_HEAD {
            return Err(Some(431));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Some(408));
        }
        stream.set_read_timeout(Some(left)).map_err(|_| None)?;
        match stream.read(&mut buf) {
            Ok(0) => return Err(None),
            Ok(n) => head.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Some(408));
            }
            Err(_) => return Err(None),
        }
    }
}

/// The answer to a request head: status, body, content type, and whether to send the head only (HEAD).
fn route(head: &[u8], state: &Mutex<State>) -> (u16, String, &'static str, bool) {
    let text = "text/plain; charset=utf-8";
    let line = head.split(|&b| b == b'\n').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.trim_end_matches('\r').split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return (400, "bad request\n".into(), text, false);
    };
    if !version.starts_with("HTTP/1.") {
        return (400, "bad request\n".into(), text, false);
    }
    let head_only = method == "HEAD";
    if method != "GET" && !head_only {
        return (405, "only GET and HEAD\n".into(), text, false);
    }
    match target.split('?').next().unwrap_or("") {
        "/metrics" => {
            let body = state
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .body(Instant::now());
            (200, body, CONTENT_TYPE, head_only)
        }
        "/" => (
            200,
            "gpu-tools top: Prometheus metrics at /metrics\n".into(),
            text,
            head_only,
        ),
        _ => (
            404,
            "not found: the metrics are at /metrics\n".into(),
            text,
            head_only,
        ),
    }
}

fn reason(code: u16) -> &'static str {
    match code {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        _ => "",
    }
}
