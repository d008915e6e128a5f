//! Knowing, without a system call, whether the debuggee has ended and how.
//!
//! On driver 580.159.04, once a debuggee has died from a signal (killed, or crashed) the driver's debugger side in
//! this process is left broken: `getNextEvent` then segfaulted in every trial, and `finalize` in most. So every call
//! that reaches the debuggee first looks at this watch. A thread per session waits for the child with
//! `waitid(WNOWAIT)`, which leaves it to be reaped by [`std::process::Child`], and publishes how it ended.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// How the debuggee stands, as far as the watch has seen.
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

/// `siginfo_t` of Linux, as far as `waitid` fills it for a child (the same on x86-64 and aarch64).
#[repr(C)]
struct SigInfo {
    signo: i32,
    errno: i32,
    code: i32,
    _pad: i32,
    pid: i32,
    uid: u32,
    status: i32,
    _rest: [u8; 100],
}

unsafe extern "C" {
    /// glibc's wrapper of the `waitid` system call.
    fn waitid(idtype: u32, id: u32, info: *mut SigInfo, options: i32) -> i32;
}

const P_PID: u32 = 1;
const WEXITED: i32 = 4;
const WNOWAIT: i32 = 0x0100_0000;
const CLD_EXITED: i32 = 1;
const CLD_KILLED: i32 = 2;
const CLD_DUMPED: i32 = 3;

/// Blocks until child `pid` has ended, without reaping it.
fn wait_for_end(pid: u32) -> ChildState {
    loop {
        let mut info = SigInfo {
            signo: 0,
            errno: 0,
            code: 0,
            _pad: 0,
            pid: 0,
            uid: 0,
            status: 0,
            _rest: [0; 100],
        };
        // SAFETY: `info` is a writable siginfo_t-sized buffer; WNOWAIT leaves the child for `Child::wait`.
        let rc = unsafe { waitid(P_PID, pid, &mut info, WEXITED | WNOWAIT) };
        if rc == 0 {
            return match info.code {
                CLD_EXITED => ChildState::Exited(info.status),
                CLD_KILLED | CLD_DUMPED => ChildState::Signaled(info.status),
                _ => ChildState::Unknown,
            };
        }
        if std::io::Error::last_os_error().kind() != std::io::ErrorKind::Interrupted {
            // ECHILD: reaped already, through the session's `Child`, which then knows the status itself.
            return ChildState::Unknown;
        }
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

    /// What the watch has seen so far (one atomic load).
    pub(crate) fn state(&self) -> ChildState {
        decode(self.state.load(Ordering::Acquire))
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
    fn sees_a_signal() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        let watch = ExitWatch::spawn(child.id()).unwrap();
        assert_eq!(watch.state(), ChildState::Running);
        child.kill().unwrap();
        assert_eq!(settle(&watch), ChildState::Signaled(9));
        child.wait().unwrap();
    }
}
