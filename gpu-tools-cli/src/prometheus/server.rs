//! The HTTP server: a thread answering `GET /metrics` from the shared [`State`] while the sampling loop updates it.

use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_tools::counters::top::{TopGpu, TopRow, TopTotals};

use super::exposition::CONTENT_TYPE;
#[cfg(doc)]
use super::listen::bind;
use super::state::State;
use crate::failure::Failure;

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
        let server = tiny_http::Server::from_listener(listener, None).map_err(|e| {
            Failure::new(1, format!("cannot serve Prometheus metrics on {addr}: {e}"))
        })?;
        let state = Arc::new(Mutex::new(state));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (Arc::clone(&state), Arc::clone(&stop));
        let thread = std::thread::Builder::new()
            .name("gpu-tools-prometheus".into())
            .spawn(move || serve(&server, &s, &st))
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

/// The server's loop: answers requests until `stop` (checked every 100 ms).
fn serve(server: &tiny_http::Server, state: &Mutex<State>, stop: &AtomicBool) {
    while !stop.load(Ordering::SeqCst) {
        let request = match server.recv_timeout(Duration::from_millis(100)) {
            Ok(Some(r)) => r,
            Ok(None) => continue,
            Err(e) => {
                log::warn!("Prometheus exporter: {e}");
                continue;
            }
        };
        let path = request.url().split('?').next().unwrap_or("").to_string();
        let get = matches!(
            request.method(),
            tiny_http::Method::Get | tiny_http::Method::Head
        );
        let (code, body, content_type) = match (get, path.as_str()) {
            (true, "/metrics") => {
                let body = state
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .body(Instant::now());
                (200, body, CONTENT_TYPE)
            }
            (true, "/") => (
                200,
                "gpu-tools top: Prometheus metrics at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            (true, _) => (
                404,
                "not found: the metrics are at /metrics\n".to_string(),
                "text/plain; charset=utf-8",
            ),
            (false, _) => (
                405,
                "only GET and HEAD\n".to_string(),
                "text/plain; charset=utf-8",
            ),
        };
        let mut response = tiny_http::Response::from_string(body).with_status_code(code);
        if let Ok(h) = tiny_http::Header::from_bytes(&b"Content-Type"[..], content_type.as_bytes())
        {
            response = response.with_header(h);
        }
        if let Err(e) = request.respond(response) {
            log::debug!("Prometheus exporter: a scrape's answer: {e}");
        }
    }
}
