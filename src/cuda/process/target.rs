//! The target of a process checkpoint: its pid checked before any driver call, what `/proc` says about it, and
//! the registry that keeps two handles of one process from fighting over it.

use std::collections::BTreeSet;
use std::ffi::c_int;
use std::sync::{Mutex, PoisonError};

use super::ProcessCheckpointError;
use crate::linux::procfs::Process;

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
    let process = Process::new(pid.unsigned_abs());
    let absent = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    match process.stat() {
        Ok(stat) if stat.has_ended() => return ProcStatus::Exited,
        Ok(_) => {}
        Err(e) if absent(&e) => return ProcStatus::Absent,
        Err(_) => return ProcStatus::Unknown,
    }
    match process.owner() {
        Ok(owner) => ProcStatus::Alive { owner },
        Err(e) if absent(&e) => ProcStatus::Absent,
        Err(_) => ProcStatus::Unknown,
    }
}

/// The process's start time in clock ticks since boot (field 22 of `/proc/<pid>/stat`): with the pid, it names
/// one process, so a pid reused by a new process is told apart from the one that was held.
pub(super) fn start_time(pid: c_int) -> Option<u64> {
    Some(Process::new(pid.unsigned_abs()).stat().ok()?.start_time)
}

/// The effective uid of this process (the owner of `/proc/self`).
pub(super) fn own_uid() -> Option<u32> {
    Process::current().owner().ok()
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
