//! The attach itself and the session it returns: every argument written, the connections accepted, the library
//! started in each process in turn ([`Listening::attach`]); then the control bytes and the stop ([`Attached`]).

use std::io::{self, Write};
use std::net::Shutdown;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use gpu_tools::linux::inject::Injected;

use super::listening::{Listening, SetupError};
use super::{AttachError, start};
use crate::collect::{AcceptOptions, Accepted, Controls, Delivery, accept_streams};
use crate::control::Control;
use crate::settings::{Destination, SeenAs, Settings};

/// The attach argument of process `pid`, which connects to `socket`: `settings` with that destination, and the
/// process's pid and its parent's as this process sees them, which its stream then carries (a process in a PID
/// namespace of its own has other numbers there).
fn argument(settings: &Settings, pid: u32, socket: &Path) -> Result<String, SetupError> {
    let destination = Destination::Socket(socket.to_path_buf());
    let parent = gpu_tools::linux::procfs::Process::new(pid)
        .stat()
        .map_or(0, |s| s.parent);
    Settings {
        seen_as: Some(SeenAs { pid, parent }),
        ..settings.clone().with_destination(destination)
    }
    .attach_argument()
    .map_err(SetupError::Argument)
}

/// How one process's attach went.
#[derive(Debug)]
pub struct Outcome {
    /// The process.
    pub pid: u32,
    /// How long its injection took, from the first look at the process to the detach.
    pub took: Duration,
    /// Started (the library's thread then connects), refused by the entry, or not injected (the process was left
    /// as it was).
    pub result: Result<Injected, AttachError>,
}

/// What follows the stop byte ([`Attached::stop`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterStop {
    /// The connections stay open: each library ends its stream, then closes (`trace --pid`).
    KeepOpen,
    /// The writing half of each connection is closed after the byte (`profile --pid`).
    CloseWrites,
}

impl Listening {
    /// Attaches to the processes: writes every process's argument from `settings`, its destination each
    /// process's socket (refusing, before any process is touched, a setting an attach cannot carry), starts
    /// accepting their connections (read as `options` says, their deliveries to `tx`), then starts `library` in
    /// each process in the order given, handing each [`Outcome`] to `after_each` as it comes (the caller may take
    /// what arrived meanwhile). A process refused does not keep the others from being attached.
    pub fn attach<M>(
        mut self,
        library: &Path,
        settings: &Settings,
        options: AcceptOptions,
        tx: mpsc::Sender<M>,
        mut after_each: impl FnMut(&Outcome),
    ) -> Result<Attached, SetupError>
    where
        M: From<Delivery> + Send + 'static,
    {
        let arguments = self
            .endpoints
            .iter()
            .map(|e| argument(settings, e.pid, &e.in_target))
            .collect::<Result<Vec<String>, SetupError>>()?;
        let accepted: Accepted = Arc::default();
        let controls: Controls = options.controls.clone().unwrap_or_default();
        let stop = Arc::new(AtomicBool::new(false));
        let options = AcceptOptions {
            controls: Some(Arc::clone(&controls)),
            ..options
        };
        let threads = std::mem::take(&mut self.accepting)
            .into_iter()
            .map(|listener| {
                let (tx, stop, accepted) = (tx.clone(), Arc::clone(&stop), Arc::clone(&accepted));
                let options = options.clone();
                std::thread::spawn(move || accept_streams(listener, tx, stop, accepted, options))
            })
            .collect();
        drop(tx);
        let mut attached = Attached {
            outcomes: Vec::new(),
            accepted,
            controls,
            stop,
            threads,
            listening: self,
        };
        for (i, argument) in arguments.iter().enumerate() {
            let pid = attached.listening.endpoints[i].pid;
            let began = Instant::now();
            let result = start(pid, library, argument);
            let outcome = Outcome {
                pid,
                took: began.elapsed(),
                result,
            };
            after_each(&outcome);
            attached.outcomes.push(outcome);
        }
        Ok(attached)
    }
}

/// An attach session: the processes' outcomes, their connections being read, the way to write to them. Dropping
/// it stops accepting and removes the sockets; the processes are left as they are (a library that was not sent
/// the stop byte ends its session when its connection closes).
#[derive(Debug)]
pub struct Attached {
    outcomes: Vec<Outcome>,
    accepted: Accepted,
    controls: Controls,
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
    listening: Listening,
}

impl Attached {
    /// Each process's outcome, in the order given.
    pub fn outcomes(&self) -> &[Outcome] {
        &self.outcomes
    }

    /// The processes in which the library started.
    pub fn started(&self) -> Vec<u32> {
        self.outcomes
            .iter()
            .filter(|o| o.result.is_ok())
            .map(|o| o.pid)
            .collect()
    }

    /// Connections accepted so far (an attached process's library connects once; a forked child of it may too).
    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Waits until `count` connections were accepted, looking every 10 ms; after `limit`, the error is what
    /// accepting answered then (no connection waiting: `EAGAIN`).
    pub fn wait_for_connections(&self, count: usize, limit: Duration) -> io::Result<()> {
        let began = Instant::now();
        while self.accepted() < count {
            if began.elapsed() >= limit {
                return Err(io::Error::from_raw_os_error(libc::EAGAIN));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// Writes `control` ([`Control::ProfileStart`], ...) to every connection accepted so far; the first error,
    /// once each was tried.
    pub fn send(&self, control: Control) -> io::Result<()> {
        let mut first = Ok(());
        for c in self.lock_controls().iter_mut() {
            if let Err(e) = c.write_all(&[control.byte()]) {
                first = first.and(Err(e));
            }
        }
        first
    }

    /// Sends the stop byte ([`Control::Stop`]) to every connection: each library disables what it enabled,
    /// delivers its records and ends its stream, and its process runs on as before. A connection that is gone
    /// (its process ended) is passed over.
    pub fn stop(&self, after: AfterStop) {
        for c in self.lock_controls().iter_mut() {
            let _ = c.write_all(&[Control::Stop.byte()]);
            if after == AfterStop::CloseWrites {
                let _ = c.shutdown(Shutdown::Write);
            }
        }
    }

    /// Stops accepting connections and closes the sockets (the connections accepted are read to their end).
    pub fn stop_accepting(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
        self.listening.kept.clear();
    }

    fn lock_controls(&self) -> std::sync::MutexGuard<'_, Vec<std::os::unix::net::UnixStream>> {
        self.controls.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for Attached {
    fn drop(&mut self) {
        // On every way out, the accepting threads end; the sockets are removed with `listening`.
        self.stop_accepting();
    }
}

#[cfg(test)]
mod tests;
