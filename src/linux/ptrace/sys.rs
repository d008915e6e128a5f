//! The low-level calls of the tracer (`ptrace` requests nix lacks, `tgkill`) and the ptrace event codes: what the
//! worker, its inferior calls and its breakpoints all use.

use nix::errno::Errno;

/// `PTRACE_EVENT_CLONE`: a thread started a thread (`status >> 16` of a ptrace stop).
pub(super) const EVENT_CLONE: i32 = 3;
/// `PTRACE_EVENT_EXEC`: the process ran `exec`.
pub(super) const EVENT_EXEC: i32 = 4;
/// `PTRACE_EVENT_STOP`: a group stop or `PTRACE_INTERRUPT` of a seized thread.
pub(super) const EVENT_STOP: i32 = 128;

/// Whether `signal` is one of job control's stop signals.
pub(super) fn is_stop_signal(signal: i32) -> bool {
    matches!(
        signal,
        libc::SIGSTOP | libc::SIGTSTP | libc::SIGTTIN | libc::SIGTTOU
    )
}

/// A `ptrace` request that nix does not wrap (or wraps with other argument types).
pub(crate) fn raw_ptrace(
    request: libc::c_uint,
    tid: u32,
    addr: usize,
    data: usize,
) -> Result<(), Errno> {
    // SAFETY: the requests made through here (CONT, LISTEN, DETACH, GETREGSET, SETREGSET) take plain integers, or a
    // pointer to an iovec that the caller keeps alive for the call.
    let rc = unsafe {
        libc::ptrace(
            request,
            tid as libc::pid_t,
            addr as *mut libc::c_void,
            data as *mut libc::c_void,
        )
    };
    if rc == -1 { Err(Errno::last()) } else { Ok(()) }
}

/// Sends `signal` to thread `tid` of process `pid`.
pub(super) fn tgkill(pid: u32, tid: u32, signal: i32) {
    // SAFETY: a plain system call with integer arguments.
    unsafe {
        libc::syscall(
            libc::SYS_tgkill,
            pid as libc::c_long,
            tid as libc::c_long,
            signal,
        )
    };
}
