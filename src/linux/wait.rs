//! `waitid(2)` for one process or thread, decoded: exits, signal deaths and ptrace stops.
//!
//! `waitid` is used rather than `waitpid` because it can leave an exit unconsumed (`WNOWAIT`) and can wait for
//! stops without also consuming an exit (the reverse does not hold: for a tracee, `WEXITED` alone still reports
//! its ptrace stops); its status is decoded here rather than through a crate because
//! real-time signals (glibc's own among them) must survive the decoding.

use std::io;

/// Report exits.
pub(crate) const WEXITED: i32 = libc::WEXITED;
/// Report stops (for a tracee: every ptrace-stop).
pub(crate) const WSTOPPED: i32 = libc::WSTOPPED;
/// Leave the reported child waitable.
pub(crate) const WNOWAIT: i32 = libc::WNOWAIT;
/// Return at once when nothing is to be reported.
pub(crate) const WNOHANG: i32 = libc::WNOHANG;
/// Threads as well as processes.
pub(crate) const WALL: i32 = libc::__WALL;

/// What `waitid` reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Waited {
    /// Ended through `exit` with this code.
    Exited(i32),
    /// Ended by this signal.
    Signaled(i32),
    /// Stopped: the signal, and for a ptrace event stop the `PTRACE_EVENT_*` number (0 for a signal-delivery
    /// stop).
    Stopped {
        /// The stop signal.
        signal: i32,
        /// The ptrace event, 0 for none.
        event: i32,
    },
}

impl Waited {
    /// The raw wait status (`waitpid`'s encoding) of an end, for [`std::process::ExitStatus`].
    pub(crate) fn raw_status(self) -> Option<i32> {
        match self {
            Waited::Exited(code) => Some((code & 0xff) << 8),
            Waited::Signaled(signal) => Some(signal & 0x7f),
            Waited::Stopped { .. } => None,
        }
    }
}

/// Waits for `id` (a process or, with [`WALL`], a thread) as `options` say; `Ok(None)` when `WNOHANG` found
/// nothing.
pub(crate) fn wait_id(id: u32, options: i32) -> io::Result<Option<Waited>> {
    loop {
        // SAFETY: siginfo_t is plain data, for which all zero bytes is a valid value.
        let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
        // SAFETY: `info` is a writable siginfo_t; the call writes only into it.
        let rc = unsafe { libc::waitid(libc::P_PID, id, &mut info, options) };
        if rc != 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        // SAFETY: for waitid the kernel fills the child fields of the union (si_pid, si_status), or leaves them
        // zero when WNOHANG found nothing; both are read as the plain integers they are.
        let (pid, status) = unsafe { (info.si_pid(), info.si_status()) };
        if pid == 0 {
            return Ok(None);
        }
        return Ok(Some(match info.si_code {
            libc::CLD_EXITED => Waited::Exited(status),
            libc::CLD_KILLED | libc::CLD_DUMPED => Waited::Signaled(status),
            // For a ptrace-stop the status holds the signal in its low byte and the event above it.
            libc::CLD_TRAPPED | libc::CLD_STOPPED => Waited::Stopped {
                signal: status & 0xff,
                event: (status >> 8) & 0xff,
            },
            other => {
                return Err(io::Error::other(format!(
                    "waitid reported an unknown si_code {other}"
                )));
            }
        }));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn reports_an_exit_without_consuming_it_then_consumes_it() {
        let mut child = Command::new("sh").args(["-c", "exit 5"]).spawn().unwrap();
        let id = child.id();
        let peeked = wait_id(id, WEXITED | WNOWAIT).unwrap();
        assert_eq!(peeked, Some(Waited::Exited(5)));
        assert_eq!(peeked.and_then(Waited::raw_status), Some(5 << 8));
        assert_eq!(child.wait().unwrap().code(), Some(5), "still waitable");
    }

    #[test]
    fn nothing_to_report_is_none_and_a_kill_is_a_signal() {
        let mut child = Command::new("sleep").arg("30").spawn().unwrap();
        assert_eq!(wait_id(child.id(), WEXITED | WNOHANG).unwrap(), None);
        child.kill().unwrap();
        assert_eq!(
            wait_id(child.id(), WEXITED).unwrap(),
            Some(Waited::Signaled(9))
        );
        assert!(child.wait().is_err(), "consumed: the child is gone");
    }
}
