//! Knowing, without a system call, whether a process has ended and how: one atomic load.
//!
//! The debugger API needs this before every call that reaches its debuggee (on driver 580.159.04, a call after the
//! debuggee died from a signal crashed the debugger; see `cudbg::session`). For a child, a thread waits with
//! `waitid(WNOWAIT)`, which leaves it to be reaped by [`std::process::Child`], and publishes how it ended; for a
//! traced process, the thread that traces it publishes its end ([`ExitWatch::published`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use super::wait::{WEXITED, WNOWAIT, Waited, wait_id};

/// How the process stands, as far as the watch has seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChildState {
    /// Running (or not yet seen to end).
    Running,
    /// Exited through `exit`, with this code.
    Exited(i32),
    /// Ended by this signal.
    Signaled(i32),
    /// The watch could not tell (the child was reaped before the watch looked).
    Unknown,
}

const RUNNING: u64 = 0;
const EXITED: u64 = 1;
const SIGNALED: u64 = 2;
const UNKNOWN: u64 = 3;

fn encode(state: ChildState) -> u64 {
    let (tag, value) = match state {
        ChildState::Running => (RUNNING, 0),
        ChildState::Exited(code) => (EXITED, code),
        ChildState::Signaled(signal) => (SIGNALED, signal),
        ChildState::Unknown => (UNKNOWN, 0),
    };
    tag << 32 | u64::from(value as u32)
}

fn decode(raw: u64) -> ChildState {
    let value = raw as u32 as i32;
    match raw >> 32 {
        RUNNING => ChildState::Running,
        EXITED => ChildState::Exited(value),
        SIGNALED => ChildState::Signaled(value),
        _ => ChildState::Unknown,
    }
}

/// Blocks until child `pid` has ended, without reaping it.
fn wait_for_end(pid: u32) -> ChildState {
    // ECHILD (or any failure): reaped already, through the session's `Child`, which then knows the status itself.
    match wait_id(pid, WEXITED | WNOWAIT) {
        Ok(Some(Waited::Exited(code))) => ChildState::Exited(code),
        Ok(Some(Waited::Signaled(signal))) => ChildState::Signaled(signal),
        _ => ChildState::Unknown,
    }
}

/// The published end of one child.
#[derive(Debug, Clone)]
pub(crate) struct ExitWatch {
    state: Arc<AtomicU64>,
}

impl ExitWatch {
    /// Starts watching child `pid` (a child of this process).
    pub(crate) fn spawn(pid: u32) -> std::io::Result<Self> {
        let state = Arc::new(AtomicU64::new(encode(ChildState::Running)));
        let published = Arc::clone(&state);
        std::thread::Builder::new()
            .name("gpu-tools-exit-watch".into())
            .spawn(move || {
                let end = wait_for_end(pid);
                published.store(encode(end), Ordering::Release);
            })?;
        Ok(Self { state })
    }

    /// A watch that whoever holds the returned [`EndPublisher`] sets (the tracer of an attached process).
    pub(crate) fn published() -> (Self, EndPublisher) {
        let state = Arc::new(AtomicU64::new(encode(ChildState::Running)));
        (
            Self {
                state: Arc::clone(&state),
            },
            EndPublisher { state },
        )
    }

    /// What the watch has seen so far (one atomic load).
    pub(crate) fn state(&self) -> ChildState {
        decode(self.state.load(Ordering::Acquire))
    }
}

/// The writing end of an [`ExitWatch::published`] watch.
#[derive(Debug)]
pub(crate) struct EndPublisher {
    state: Arc<AtomicU64>,
}

impl EndPublisher {
    /// Publishes how the process ended.
    pub(crate) fn publish(&self, end: ChildState) {
        self.state.store(encode(end), Ordering::Release);
    }
}

impl ChildState {
    /// The `waitpid` status of an end (`None` while running or unknown).
    pub(crate) fn raw_status(self) -> Option<i32> {
        match self {
            ChildState::Exited(code) => Waited::Exited(code).raw_status(),
            ChildState::Signaled(signal) => Waited::Signaled(signal).raw_status(),
            ChildState::Running | ChildState::Unknown => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;
    use std::time::{Duration, Instant};

    #[test]
    fn states_round_trip() {
        for s in [
            ChildState::Running,
            ChildState::Exited(0),
            ChildState::Exited(255),
            ChildState::Signaled(9),
            ChildState::Unknown,
        ] {
            assert_eq!(decode(encode(s)), s);
        }
    }

    fn settle(watch: &ExitWatch) -> ChildState {
        let deadline = Instant::now() + Duration::from_secs(10);
        while watch.state() == ChildState::Running && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        watch.state()
    }

    #[test]
    fn sees_an_exit_code_and_leaves_the_child_to_be_reaped() {
        let mut child = Command::new("sh").args(["-c", "exit 7"]).spawn().unwrap();
        let watch = ExitWatch::spawn(child.id()).unwrap();
        assert_eq!(settle(&watch), ChildState::Exited(7));
        // Not reaped by the watch: the Child still gets the status.
        assert_eq!(child.wait().unwrap().code(), Some(7));
    }

    #[test]
    fn a_published_end_is_seen_with_its_status() {
        let (watch, publisher) = ExitWatch::published();
        assert_eq!(watch.state(), ChildState::Running);
        assert_eq!(watch.state().raw_status(), None);
        publisher.publish(ChildState::Signaled(6));
        assert_eq!(watch.state(), ChildState::Signaled(6));
        assert_eq!(watch.state().raw_status(), Some(6));
        publisher.publish(ChildState::Exited(3));
        assert_eq!(watch.state().raw_status(), Some(3 << 8));
    }

    #[test]
    fn sees_a_signal() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let watch = ExitWatch::spawn(child.id()).unwrap();
        assert_eq!(watch.state(), ChildState::Running);
        child.kill().unwrap();
        assert_eq!(settle(&watch), ChildState::Signaled(9));
        child.wait().unwrap();
    }
}
