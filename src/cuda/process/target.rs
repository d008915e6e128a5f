//! The target of a process checkpoint: its pid checked before any driver call, what `/proc` says about it, and
//! the registry that keeps two handles of one process from fighting over it.

use std::collections::BTreeSet;
use std::ffi::c_int;
use std::os::unix::fs::MetadataExt;
use std::sync::{Mutex, PoisonError};

use super::ProcessCheckpointError;

/// A pid the driver can be asked about: positive, within `c_int`. The calling process itself is refused where a
/// call would lock it (`allow_self` false): its own CUDA calls would then block.
pub(super) fn checked_pid(pid: u32, allow_self: bool) -> Result<c_int, ProcessCheckpointError> {
    let raw = c_int::try_from(pid).map_err(|_| ProcessCheckpointError::InvalidPid { pid })?;
    if raw <= 0 {
        return Err(ProcessCheckpointError::InvalidPid { pid });
    }
    if !allow_self && pid == std::process::id() {
        return Err(ProcessCheckpointError::OwnProcess { pid });
    }
    Ok(raw)
}

/// What `/proc` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum ProcStatus {
    /// No `/proc/<pid>`: no such process (or it was reaped).
    Absent,
    /// Exited but not reaped yet (state `Z` or `X`).
    Exited,
    /// Alive, owned by this uid.
    Alive { owner: u32 },
    /// `/proc` could not tell (not mounted, or unreadable).
    Unknown,
}

/// Reads `/proc/<pid>/stat` and the owner of `/proc/<pid>`.
pub(super) fn proc_status(pid: c_int) -> ProcStatus {
    let dir = format!("/proc/{pid}");
    let stat = match std::fs::read_to_string(format!("{dir}/stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return ProcStatus::Absent,
        Err(_) => return ProcStatus::Unknown,
    };
    match stat_fields(&stat).and_then(|f| f.first().copied()) {
        Some("Z" | "X" | "x") => return ProcStatus::Exited,
        Some(_) => {}
        None => return ProcStatus::Unknown,
    }
    match std::fs::metadata(&dir) {
        Ok(m) => ProcStatus::Alive { owner: m.uid() },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => ProcStatus::Absent,
        Err(_) => ProcStatus::Unknown,
    }
}

/// The fields of a `/proc/<pid>/stat` line after the command name (which may hold spaces and parentheses, so
/// the split is at the last `)`): index 0 is the state, index 19 the start time.
fn stat_fields(stat: &str) -> Option<Vec<&str>> {
    let after = stat.get(stat.rfind(')')? + 1..)?;
    Some(after.split_whitespace().collect())
}

/// The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`): with the pid, it names
/// one process, so a pid reused by a new process is told apart from the one that was held.
pub(super) fn start_time(pid: c_int) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_fields(&stat)?.get(19)?.parse().ok()
}

/// The effective uid of this process (the owner of `/proc/self`).
pub(super) fn own_uid() -> Option<u32> {
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

/// Pids held by a live handle of this process.
static HELD: Mutex<BTreeSet<c_int>> = Mutex::new(BTreeSet::new());

/// A pid held by one handle; released on drop.
#[derive(Debug)]
pub(super) struct Hold(c_int);

impl Hold {
    /// Takes `pid`, or [`ProcessCheckpointError::AlreadyHeld`] when another handle of this process holds it.
    pub(super) fn take(pid: c_int) -> Result<Self, ProcessCheckpointError> {
        let mut held = HELD.lock().unwrap_or_else(PoisonError::into_inner);
        if held.insert(pid) {
            Ok(Hold(pid))
        } else {
            Err(ProcessCheckpointError::AlreadyHeld {
                pid: pid.unsigned_abs(),
            })
        }
    }
}

impl Drop for Hold {
    fn drop(&mut self) {
        HELD.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pids_outside_the_kernel_range_are_refused() {
        for pid in [0, u32::MAX, 1 << 31] {
            assert!(matches!(
                checked_pid(pid, true),
                Err(ProcessCheckpointError::InvalidPid { pid: p }) if p == pid
            ));
        }
        assert_eq!(checked_pid(1, false).ok(), Some(1));
        let me = std::process::id();
        assert!(matches!(
            checked_pid(me, false),
            Err(ProcessCheckpointError::OwnProcess { .. })
        ));
        assert!(checked_pid(me, true).is_ok());
    }

    #[test]
    fn stat_fields_split_after_the_last_parenthesis() {
        let line = "42 (a (b) c) S 1 42 42 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 98765 1000 10";
        let f = stat_fields(line).unwrap();
        assert_eq!(f[0], "S");
        assert_eq!(f[19], "98765");
        assert_eq!(stat_fields("no parenthesis"), None);
    }

    /// The command name in a stat line is chosen by the process (`prctl(PR_SET_NAME)`): spaces, parentheses and
    /// any bytes. Random lines built from such pieces never make the split panic, and a line whose name ends at
    /// the last `)` always yields the fields after it.
    #[test]
    fn arbitrary_stat_lines_split_without_panicking() {
        let pieces = [
            "(",
            ")",
            " ",
            "S",
            "Z",
            "42",
            "\u{e9}",
            "x)y",
            "\n",
            "",
            "(a b)",
            "18446744073709551616",
        ];
        let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
        for _ in 0..200_000 {
            let mut line = String::new();
            for _ in 0..(seed % 24) {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                line.push_str(pieces[(seed % pieces.len() as u64) as usize]);
            }
            if let Some(fields) = stat_fields(&line) {
                let tail = &line[line.rfind(')').unwrap() + 1..];
                assert_eq!(fields, tail.split_whitespace().collect::<Vec<_>>());
            } else {
                assert!(!line.contains(')'));
            }
        }
    }

    #[test]
    fn this_process_is_alive_and_its_own() {
        let me = std::process::id() as c_int;
        assert_eq!(
            proc_status(me),
            ProcStatus::Alive {
                owner: own_uid().unwrap()
            }
        );
        assert!(start_time(me).is_some());
        assert_eq!(proc_status(c_int::MAX), ProcStatus::Absent);
    }

    #[test]
    fn a_pid_is_held_once() {
        let a = Hold::take(-7).unwrap();
        assert!(matches!(
            Hold::take(-7),
            Err(ProcessCheckpointError::AlreadyHeld { pid: 7 })
        ));
        drop(a);
        assert!(Hold::take(-7).is_ok());
    }
}
