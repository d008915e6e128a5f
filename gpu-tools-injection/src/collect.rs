//! The receiving end of trace streams: a Unix socket that the injected tool libraries connect to, one connection
//! per traced process (an exec'd or forked child connects on its own), each connection read on a thread of its
//! own. What arrives is decoded into records and, when asked, also handed on as the bytes were read, for a trace
//! file that keeps the stream as sent. Everything goes to one channel, so that one thread writes the outputs;
//! per connection, its bytes come before the records they hold and [`Delivery::Closed`] comes last.
//!
//! ```no_run
//! use std::os::unix::net::UnixListener;
//! use std::sync::atomic::{AtomicBool, AtomicUsize};
//! use std::sync::{Arc, mpsc};
//! use gpu_tools_injection::collect::{AcceptOptions, Delivery, accept_streams};
//!
//! let listener = UnixListener::bind("/tmp/trace.sock")?;
//! listener.set_nonblocking(true)?; // the loop checks `stop` between connections
//! let (tx, rx) = mpsc::channel::<Delivery>();
//! let stop = Arc::new(AtomicBool::new(false));
//! let accepted = Arc::new(AtomicUsize::new(0));
//! let (s, a) = (Arc::clone(&stop), Arc::clone(&accepted));
//! std::thread::spawn(move || accept_streams(listener, tx, s, a, AcceptOptions::default()));
//! for delivery in rx {
//!     if let Delivery::Item(connection, Ok(record)) = delivery {
//!         println!("{connection}: {record:?}");
//!     }
//! }
//! # Ok::<(), std::io::Error>(())
//! ```

use std::io::{ErrorKind, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use gpu_tools_trace::{Record, StreamHeader, StreamReader, WireError};

/// What the reading threads hand on, each about one connection (numbered in the order they were accepted).
#[derive(Debug)]
pub enum Delivery {
    /// Bytes of the connection as they were read (only with [`AcceptOptions::tee`]), before the records in them.
    Bytes(usize, Vec<u8>),
    /// The stream's header, once read, before its first record.
    Header(usize, StreamHeader),
    /// A record, or what was wrong with the bytes where one should be.
    Item(usize, Result<Record, WireError>),
    /// The connection closed: nothing more comes from it.
    Closed(usize),
}

/// Connections accepted so far, by every listener of one collection: each takes the next number.
pub type Accepted = Arc<AtomicUsize>;

/// Second handles on the accepted connections, to write back to the traced processes (an attached process's stop
/// byte, for one).
pub type Controls = Arc<Mutex<Vec<UnixStream>>>;

/// How a listener's connections are read.
#[derive(Debug, Clone, Default)]
pub struct AcceptOptions {
    /// Hand on each connection's bytes as they are read ([`Delivery::Bytes`]).
    pub tee: bool,
    /// Keep a second handle on each connection here.
    pub controls: Option<Controls>,
    /// Accept at most this many connections on the listener, then end (those accepted are read to their end;
    /// later ones wait, unaccepted, while the listener stays open elsewhere): `profile --pid` reads its process's
    /// one connection. `None`: until `stop`.
    pub most: Option<usize>,
}

/// Accepts connections on `listener` until `stop` is set (or [`AcceptOptions::most`] were accepted), numbering each from `accepted` and reading each on a
/// thread of its own, whose deliveries go to `tx`. The listener should be non-blocking, so that `stop` is seen
/// between connections; the reading threads end with their connections, or when `tx`'s receiver is gone.
pub fn accept_streams<M>(
    listener: UnixListener,
    tx: mpsc::Sender<M>,
    stop: Arc<AtomicBool>,
    accepted: Accepted,
    options: AcceptOptions,
) where
    M: From<Delivery> + Send + 'static,
{
    let mut taken = 0;
    while !stop.load(Ordering::Relaxed) && options.most.is_none_or(|most| taken < most) {
        match listener.accept() {
            Ok((stream, _)) => {
                taken += 1;
                let id = accepted.fetch_add(1, Ordering::SeqCst);
                if let Some(c) = &options.controls {
                    if let Ok(back) = stream.try_clone() {
                        c.lock().unwrap_or_else(|p| p.into_inner()).push(back);
                    }
                }
                let tx = tx.clone();
                let tee = options.tee;
                std::thread::spawn(move || read_stream(id, stream, tx, tee));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => {
                log::warn!("accept failed: {e}");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// A connection whose bytes are also handed on, as read.
struct Tee<M> {
    stream: UnixStream,
    id: usize,
    tx: Option<mpsc::Sender<M>>,
}

impl<M: From<Delivery>> Read for Tee<M> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = match self.stream.read(buf) {
            // The process closed its end with a control of ours unread (its stream ended on its own: a refused
            // window, its exit). Linux answers a Unix socket's reader so only once every byte the process sent was
            // read, so this is the stream's end; whether the stream was whole is for its frames and end record to say.
            Err(e) if e.kind() == ErrorKind::ConnectionReset => 0,
            read => read?,
        };
        if let Some(tx) = &self.tx {
            if n > 0
                && tx
                    .send(Delivery::Bytes(self.id, buf[..n].to_vec()).into())
                    .is_err()
            {
                self.tx = None;
            }
        }
        Ok(n)
    }
}

fn read_stream<M: From<Delivery>>(id: usize, stream: UnixStream, tx: mpsc::Sender<M>, tee: bool) {
    // An accepted connection inherits nothing from the non-blocking listener on Linux; made sure of here, since
    // the reader must block.
    let _ = stream.set_nonblocking(false);
    let mut reader = StreamReader::new(Tee {
        stream,
        id,
        tx: tee.then(|| tx.clone()),
    });
    let mut header_sent = false;
    while let Some(item) = reader.next() {
        if !header_sent {
            if let Some(h) = reader.header() {
                header_sent = true;
                if tx.send(Delivery::Header(id, *h).into()).is_err() {
                    return;
                }
            }
        }
        if tx.send(Delivery::Item(id, item).into()).is_err() {
            return;
        }
    }
    // A stream that ended cleanly after its header yields no item: its header (the process's pid) is said here.
    if !header_sent {
        if let Some(h) = reader.header() {
            if tx.send(Delivery::Header(id, *h).into()).is_err() {
                return;
            }
        }
    }
    let _ = tx.send(Delivery::Closed(id).into());
}

#[cfg(test)]
mod tests;
