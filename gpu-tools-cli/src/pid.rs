//! Process ids given on the command line, checked the same way by every subcommand that takes one, before it acts
//! on the process: one wording for a process that does not exist.
//!
//! This reads `/proc/PID` itself; the library's process-control module is to offer the same check.

use crate::failure::Failure;

/// Checks that `pid` names a live process; the error says so in the wording every subcommand uses.
pub fn check(pid: u32) -> Result<(), Failure> {
    if pid == 0 {
        return Err(Failure::new(1, "no process 0: PID 0 is not a process"));
    }
    if i32::try_from(pid).is_err() {
        return Err(Failure::new(
            1,
            format!("no process {pid}: PIDs are below 2^31"),
        ));
    }
    match std::fs::metadata(format!("/proc/{pid}")) {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            Err(Failure::new(1, format!("no process {pid}")))
        }
        Err(e) => Err(Failure::new(1, format!("process {pid}: {e}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(r: Result<(), Failure>) -> String {
        match r {
            Err(Failure::Message { code: 1, message }) => message,
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn live_and_missing_processes() {
        assert!(check(std::process::id()).is_ok());
        assert_eq!(message(check(0)), "no process 0: PID 0 is not a process");
        assert!(message(check(u32::MAX)).starts_with(&format!("no process {}", u32::MAX)));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let gone = child.id();
        child.wait().unwrap();
        assert_eq!(message(check(gone)), format!("no process {gone}"));
    }
}
