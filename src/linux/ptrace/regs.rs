//! The registers of a stopped thread: the program counter and return value among the general registers, and the
//! x86 vector and floating-point state, saved and restored around a call. Calls and breakpoints are implemented for
//! x86-64 only; elsewhere the accessors answer values that no caller acts on.

#[cfg(target_arch = "x86_64")]
use nix::errno::Errno;

#[cfg(target_arch = "x86_64")]
use super::sys::raw_ptrace;

#[cfg(target_arch = "x86_64")]
pub(crate) fn pc_of(regs: libc::user_regs_struct) -> u64 {
    regs.rip
}

#[cfg(target_arch = "x86_64")]
pub(super) fn return_value(regs: libc::user_regs_struct) -> u64 {
    regs.rax
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn sp_of(regs: libc::user_regs_struct) -> u64 {
    regs.rsp
}

#[cfg(target_arch = "x86_64")]
pub(crate) fn bp_of(regs: libc::user_regs_struct) -> u64 {
    regs.rbp
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn bp_of(_regs: libc::user_regs_struct) -> u64 {
    u64::MAX
}

/// The system call a thread is stopped in: `orig_rax` holds its number there, and -1 outside one.
#[cfg(target_arch = "x86_64")]
pub(super) fn syscall_of(regs: libc::user_regs_struct) -> Option<u64> {
    (regs.orig_rax as i64 >= 0).then_some(regs.orig_rax)
}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn sp_of(_regs: libc::user_regs_struct) -> u64 {
    u64::MAX
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn syscall_of(_regs: libc::user_regs_struct) -> Option<u64> {
    None
}

#[cfg(target_arch = "x86_64")]
pub(super) fn set_pc(regs: &mut libc::user_regs_struct, pc: u64) {
    regs.rip = pc;
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn set_pc(_regs: &mut libc::user_regs_struct, _pc: u64) {}

#[cfg(not(target_arch = "x86_64"))]
pub(crate) fn pc_of(_regs: libc::user_regs_struct) -> u64 {
    u64::MAX
}

#[cfg(not(target_arch = "x86_64"))]
pub(super) fn return_value(_regs: libc::user_regs_struct) -> u64 {
    0
}

/// `NT_X86_XSTATE` of `<elf.h>` (the XSAVE area; `libc` does not name it).
#[cfg(target_arch = "x86_64")]
const NT_X86_XSTATE: usize = 0x202;
/// `NT_PRFPREG`: the legacy FXSAVE area.
#[cfg(target_arch = "x86_64")]
const NT_PRFPREG: usize = libc::NT_PRFPREG as usize;

/// The x86 vector and floating-point state of a thread (`NT_X86_XSTATE`, or the legacy FXSAVE area where the
/// kernel has no XSAVE state): which register set, and its bytes.
#[cfg(target_arch = "x86_64")]
pub(super) struct VectorState {
    set: usize,
    bytes: Vec<u8>,
}

#[cfg(target_arch = "x86_64")]
fn transfer(request: libc::c_uint, tid: u32, set: usize, bytes: &mut [u8]) -> Result<usize, Errno> {
    let mut iov = libc::iovec {
        iov_base: bytes.as_mut_ptr().cast(),
        iov_len: bytes.len(),
    };
    raw_ptrace(request, tid, set, std::ptr::from_mut(&mut iov) as usize)?;
    Ok(iov.iov_len)
}

#[cfg(target_arch = "x86_64")]
pub(super) fn save_vector_state(tid: u32) -> Result<VectorState, Errno> {
    // Large enough for every XSAVE component Linux exposes (AMX tile data included).
    let mut bytes = vec![0u8; 16 * 1024];
    let (set, len) = match transfer(libc::PTRACE_GETREGSET, tid, NT_X86_XSTATE, &mut bytes) {
        Ok(len) => (NT_X86_XSTATE, len),
        Err(Errno::EINVAL | Errno::ENODEV) => (
            NT_PRFPREG,
            transfer(libc::PTRACE_GETREGSET, tid, NT_PRFPREG, &mut bytes)?,
        ),
        Err(e) => return Err(e),
    };
    bytes.truncate(len);
    Ok(VectorState { set, bytes })
}

#[cfg(target_arch = "x86_64")]
pub(super) fn restore_vector_state(tid: u32, state: &VectorState) -> Result<(), Errno> {
    let mut bytes = state.bytes.clone();
    transfer(libc::PTRACE_SETREGSET, tid, state.set, &mut bytes).map(|_| ())
}
