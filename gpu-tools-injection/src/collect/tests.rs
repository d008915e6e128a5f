//! The receiving end (`collect`) over a real Unix socket: every connection's header, records in order, bytes as
//! sent (with `tee`), and its close last; a damaged stream's error; handles for writing back; `stop` ends the loop.

use std::collections::HashMap;
use std::io::{Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::collect::{AcceptOptions, Accepted, Delivery, accept_streams};
use gpu_tools_testing::records::kernel;
use gpu_tools_trace::{Encoder, Record, StreamHeader, TimestampClock};

struct Listening {
    socket: PathBuf,
    rx: mpsc::Receiver<Delivery>,
    stop: Arc<AtomicBool>,
    accepted: Accepted,
    thread: JoinHandle<()>,
}

fn listen(name: &str, options: AcceptOptions) -> Listening {
    let dir = std::env::temp_dir().join(format!("gpu-tools-collect-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("trace.sock");
    let listener = UnixListener::bind(&socket).unwrap();
    listener.set_nonblocking(true).unwrap();
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let accepted: Accepted = Arc::default();
    let (s, a) = (Arc::clone(&stop), Arc::clone(&accepted));
    let thread = std::thread::spawn(move || accept_streams(listener, tx, s, a, options));
    Listening {
        socket,
        rx,
        stop,
        accepted,
        thread,
    }
}

fn stream(pid: u32, records: &[Record]) -> Vec<u8> {
    let mut e = Encoder::new(&StreamHeader::new(pid, 0, TimestampClock::Monotonic));
    for r in records {
        e.push(r);
    }
    e.bytes().to_vec()
}

/// Everything delivered until `connections` connections have closed, per connection number.
fn until_closed(
    rx: &mpsc::Receiver<Delivery>,
    connections: usize,
) -> HashMap<usize, Vec<Delivery>> {
    let mut by_id: HashMap<usize, Vec<Delivery>> = HashMap::new();
    let mut closed = 0;
    while closed < connections {
        let d = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("a delivery within 10 s");
        let id = match &d {
            Delivery::Bytes(id, _) | Delivery::Header(id, _) | Delivery::Item(id, _) => *id,
            Delivery::Closed(id) => {
                closed += 1;
                *id
            }
        };
        by_id.entry(id).or_default().push(d);
    }
    by_id
}

/// Writes `bytes` back through the first connection's handle, once the connection is accepted.
fn write_back(controls: &crate::collect::Controls, bytes: &[u8]) {
    let mut waited = 0;
    while controls.lock().unwrap().is_empty() {
        assert!(waited < 1000, "accepted within 10 s");
        std::thread::sleep(Duration::from_millis(10));
        waited += 1;
    }
    controls.lock().unwrap()[0].write_all(bytes).unwrap();
}

fn finish(l: Listening) {
    l.stop.store(true, Ordering::SeqCst);
    l.thread
        .join()
        .expect("the accepting loop ends when stopped");
    let _ = std::fs::remove_dir_all(l.socket.parent().unwrap());
}

#[test]
fn each_connection_delivers_its_header_records_and_bytes_then_closes() {
    let l = listen(
        "tee",
        AcceptOptions {
            tee: true,
            controls: None,
            most: None,
        },
    );
    let sent: Vec<(u32, Vec<Record>)> = vec![
        (
            100,
            (0..50)
                .map(|i| kernel("a", i * 10, i * 10 + 5, i as u32))
                .collect(),
        ),
        (
            200,
            (0..3).map(|i| kernel("b", i, i + 1, i as u32)).collect(),
        ),
    ];
    let writers: Vec<_> = sent
        .iter()
        .map(|(pid, records)| {
            let bytes = stream(*pid, records);
            let socket = l.socket.clone();
            std::thread::spawn(move || {
                let mut c = UnixStream::connect(socket).unwrap();
                // In pieces, as a traced process flushes its buffers.
                for piece in bytes.chunks(97) {
                    c.write_all(piece).unwrap();
                }
            })
        })
        .collect();
    for w in writers {
        w.join().unwrap();
    }
    let by_id = until_closed(&l.rx, 2);
    assert_eq!(by_id.len(), 2);
    assert_eq!(l.accepted.load(Ordering::SeqCst), 2);
    let mut seen_pids = Vec::new();
    for deliveries in by_id.values() {
        let Some(Delivery::Header(_, header)) = deliveries
            .iter()
            .find(|d| matches!(d, Delivery::Header(..)))
        else {
            panic!("no header: {deliveries:?}");
        };
        let (pid, records) = sent
            .iter()
            .find(|(p, _)| *p == header.pid)
            .expect("a pid that was sent");
        seen_pids.push(*pid);
        let got: Vec<&Record> = deliveries
            .iter()
            .filter_map(|d| match d {
                Delivery::Item(_, Ok(r)) => Some(r),
                Delivery::Item(_, Err(e)) => panic!("a clean stream read with an error: {e}"),
                _ => None,
            })
            .collect();
        assert_eq!(
            got,
            records.iter().collect::<Vec<_>>(),
            "pid {pid}: every record, in order"
        );
        let bytes: Vec<u8> = deliveries
            .iter()
            .filter_map(|d| match d {
                Delivery::Bytes(_, b) => Some(b.as_slice()),
                _ => None,
            })
            .flatten()
            .copied()
            .collect();
        assert_eq!(bytes, stream(*pid, records), "pid {pid}: the bytes as sent");
        assert!(
            matches!(deliveries.last(), Some(Delivery::Closed(_))),
            "closed last"
        );
        // The header comes before the first record.
        let first_item = deliveries
            .iter()
            .position(|d| matches!(d, Delivery::Item(..)));
        let header_at = deliveries
            .iter()
            .position(|d| matches!(d, Delivery::Header(..)));
        assert!(header_at < first_item);
    }
    seen_pids.sort_unstable();
    assert_eq!(seen_pids, [100, 200]);
    finish(l);
}

#[test]
fn without_tee_no_bytes_and_a_damaged_stream_ends_with_its_error() {
    let l = listen("plain", AcceptOptions::default());
    let mut bytes = stream(7, &[kernel("k", 1, 2, 1), kernel("k", 3, 4, 2)]);
    let n = bytes.len();
    // Cut inside the last record: the reader says so when the connection ends there.
    bytes.truncate(n - 3);
    {
        let mut c = UnixStream::connect(&l.socket).unwrap();
        c.write_all(&bytes).unwrap();
    }
    let by_id = until_closed(&l.rx, 1);
    let deliveries = &by_id[&0];
    assert!(
        !deliveries.iter().any(|d| matches!(d, Delivery::Bytes(..))),
        "{deliveries:?}"
    );
    let oks = deliveries
        .iter()
        .filter(|d| matches!(d, Delivery::Item(_, Ok(_))))
        .count();
    let errors = deliveries
        .iter()
        .filter(|d| matches!(d, Delivery::Item(_, Err(_))))
        .count();
    assert_eq!((oks, errors), (1, 1), "{deliveries:?}");
    assert!(matches!(deliveries.last(), Some(Delivery::Closed(0))));
    finish(l);
}

#[test]
fn a_stream_of_its_header_alone_still_delivers_the_header() {
    let l = listen("header-only", AcceptOptions::default());
    {
        let mut c = UnixStream::connect(&l.socket).unwrap();
        c.write_all(&stream(11, &[])).unwrap();
    }
    let by_id = until_closed(&l.rx, 1);
    assert!(
        matches!(
            by_id[&0].as_slice(),
            [Delivery::Header(0, h), Delivery::Closed(0)] if h.pid == 11
        ),
        "{:?}",
        by_id[&0]
    );
    finish(l);
}

#[test]
fn controls_write_back_to_the_connected_process() {
    let controls = Arc::default();
    let l = listen(
        "controls",
        AcceptOptions {
            tee: false,
            controls: Some(Arc::clone(&controls)),
            most: None,
        },
    );
    let mut c = UnixStream::connect(&l.socket).unwrap();
    c.write_all(&stream(9, &[])).unwrap();
    // The handle is kept once the connection is accepted.
    write_back(&controls, b"S");
    let mut byte = [0u8; 1];
    c.read_exact(&mut byte).unwrap();
    assert_eq!(&byte, b"S");
    drop(c);
    controls.lock().unwrap().clear();
    let by_id = until_closed(&l.rx, 1);
    assert!(matches!(by_id[&0].last(), Some(Delivery::Closed(0))));
    finish(l);
}

#[test]
fn a_process_that_closes_with_a_control_unread_ends_its_stream_cleanly() {
    // The library may end its stream on its own (a refused window, the process's exit) while a control this side
    // wrote is still unread: the kernel then resets the connection, after everything the library sent was read.
    let controls = Arc::default();
    let l = listen(
        "reset",
        AcceptOptions {
            tee: false,
            controls: Some(Arc::clone(&controls)),
            most: None,
        },
    );
    let mut c = UnixStream::connect(&l.socket).unwrap();
    c.write_all(&stream(5, &[kernel("k", 1, 2, 1), kernel("k", 3, 4, 2)]))
        .unwrap();
    write_back(&controls, b"S");
    drop(c);
    controls.lock().unwrap().clear();
    let by_id = until_closed(&l.rx, 1);
    let deliveries = &by_id[&0];
    let oks = deliveries
        .iter()
        .filter(|d| matches!(d, Delivery::Item(_, Ok(_))))
        .count();
    let errors: Vec<_> = deliveries
        .iter()
        .filter(|d| matches!(d, Delivery::Item(_, Err(_))))
        .collect();
    assert_eq!(oks, 2, "every record read: {deliveries:?}");
    assert!(
        errors.is_empty(),
        "a reset after the last byte is the stream's end: {errors:?}"
    );
    assert!(matches!(deliveries.last(), Some(Delivery::Closed(0))));
    finish(l);
}
