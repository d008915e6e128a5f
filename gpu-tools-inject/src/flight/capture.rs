//! The program's stream captures, as the recorder saw them begin and end: while one is under way, the report asks
//! the driver nothing. A question about the capturing stream, or about any stream from a thread in the default
//! capture mode (`CU_STREAM_CAPTURE_MODE_GLOBAL`) while a capture of that mode runs, is an operation the driver
//! forbids during capture: it fails, and so does the capture, in the program's thread. On an H100 (driver 580) a
//! `where` during a `torch.cuda.graph` capture ended the job so: the recorder's `cuStreamQuery` got
//! `CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED`, the job `cudaErrorStreamCaptureInvalidated` at the capture's end.
//!
//! No capture the recorder sees begins while a question is out: the report raises [`ask`]'s flag before it looks at
//! the account, a capture's begin callback enters the account before it looks at the flag (both sequentially
//! consistent, so one of them sees the other), and the callback waits for the question to end. It waits
//! [`BEGIN_WAIT`] at most and never for a lock: a question may itself wait for a lock inside CUPTI that the
//! program's thread holds while CUPTI calls the recorder (a driver call made under a lock that a callback waited for
//! deadlocked a four-thread program, `crate::profiling`). In a hung process the driver answered a question in under
//! a millisecond (an H200, driver 580, `service`); how long one takes in a busy process was not measured.
//!
//! Captures begun while no recorder ran are not in the account: the report asks each stream whether it captures
//! (`cuStreamIsCapturing`, allowed during capture) before it asks about its work, and asks from a thread in the
//! relaxed capture mode, in which questions about other streams are allowed (`service`).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The longest a capture's begin waits for a question that is out.
pub(super) const BEGIN_WAIT: Duration = Duration::from_millis(50);

/// The streams capturing now, by handle (a capture the recorder saw begin and not yet end).
static STREAMS: Mutex<Vec<usize>> = Mutex::new(Vec::new());
/// How many: read without the lock by the report.
static CAPTURING: AtomicUsize = AtomicUsize::new(0);
/// A question about the program's streams is out.
static ASKING: AtomicBool = AtomicBool::new(false);

fn streams() -> MutexGuard<'static, Vec<usize>> {
    STREAMS.lock().unwrap_or_else(|p| p.into_inner())
}

/// A capture of `stream` begins (its begin call's entry, on the program's thread): it is in the account, and a
/// question out is let end first. True when it was not in the account already (a begin on a stream that captures
/// fails, and its failure must not end the capture under way).
pub(super) fn begins(stream: usize) -> bool {
    let new = {
        let mut s = streams();
        let new = !s.contains(&stream);
        if new {
            s.push(stream);
            CAPTURING.fetch_add(1, Ordering::SeqCst);
        }
        new
    };
    let since = Instant::now();
    while ASKING.load(Ordering::SeqCst) {
        if since.elapsed() > BEGIN_WAIT {
            log::warn!(
                "flight recorder: a capture of stream {stream:#x} began while the recorder's question about a stream \
                 was out for {BEGIN_WAIT:?}"
            );
            break;
        }
        std::thread::yield_now();
    }
    new
}

/// A capture of `stream` ended (its end call returned, whatever it returned), or its begin failed.
pub(super) fn ends(stream: usize) {
    let mut s = streams();
    let before = s.len();
    s.retain(|&c| c != stream);
    if s.len() < before {
        CAPTURING.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Whether `stream` captures now (a capture the recorder saw begin): its launches are a graph's nodes, not work.
pub(super) fn captures(stream: usize) -> bool {
    // No lock in the usual case, at each launch: no capture under way.
    CAPTURING.load(Ordering::SeqCst) != 0 && streams().contains(&stream)
}

/// Forgets every capture: when a recorder starts, those it did not see begin are found by asking each stream.
pub(super) fn forget() {
    let mut s = streams();
    s.clear();
    CAPTURING.store(0, Ordering::SeqCst);
}

/// A question about one of the program's streams may be asked while this lives.
#[derive(Debug)]
pub(super) struct Asking(());

impl Drop for Asking {
    fn drop(&mut self) {
        ASKING.store(false, Ordering::SeqCst);
    }
}

/// Leave to ask the driver about a stream, or the stream (the lowest handle) of a capture under way. One report asks
/// at a time (the socket's one thread).
pub(super) fn ask() -> Result<Asking, usize> {
    ASKING.store(true, Ordering::SeqCst);
    if CAPTURING.load(Ordering::SeqCst) == 0 {
        return Ok(Asking(()));
    }
    ASKING.store(false, Ordering::SeqCst);
    Err(streams().iter().copied().min().unwrap_or(0))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One test: the account is the process's.
    #[test]
    fn no_question_is_asked_from_a_captures_begin_to_its_end_and_a_begin_waits_for_one_out() {
        forget();
        assert!(ask().is_ok());
        assert!(begins(0x30));
        assert!(begins(0x20));
        assert!(!begins(0x20), "in the account already");
        assert_eq!(ask().unwrap_err(), 0x20);
        assert!(captures(0x20) && captures(0x30) && !captures(0x40));
        ends(0x20);
        assert!(!captures(0x20));
        assert_eq!(ask().unwrap_err(), 0x30);
        ends(0x40);
        assert_eq!(
            ask().unwrap_err(),
            0x30,
            "an end of a capture not seen begin changes nothing"
        );
        ends(0x30);
        assert!(ask().is_ok());
        begins(0x50);
        forget();

        // A begin while a question is out returns once it has ended (well inside BEGIN_WAIT here).
        static ENDED: AtomicBool = AtomicBool::new(false);
        let asking = ask().unwrap();
        let begun = std::thread::spawn(|| {
            begins(0x60);
            ENDED.load(Ordering::SeqCst)
        });
        std::thread::sleep(Duration::from_millis(5));
        ENDED.store(true, Ordering::SeqCst);
        drop(asking);
        assert!(
            begun.join().unwrap(),
            "the begin went on while the question was out"
        );
        assert_eq!(ask().unwrap_err(), 0x60);
        forget();
    }
}
