//! Which thread id CUPTI writes into activity records (`cuptiGetThreadIdType`, `cuptiSetThreadIdType`).
//!
//! By default CUPTI writes the POSIX thread id (`pthread_self()`, an address on glibc) cut to 32 bits into the
//! thread field of API, marker and other host-side records ([`ThreadIdKind::Posix`]). With
//! [`ThreadIdKind::System`] it writes the kernel's thread id (`gettid()`): the number `top -H`, `ps -L`,
//! `/proc/PID/task/` and py-spy show. The setting is the process's, not a tracer's: a profiler inside the program
//! that reads the same records (PyTorch's Kineto) sees the change too. Kineto keys its thread table by both ids and
//! shows the system id either way, so its traces look the same; another tool that matches CUPTI's thread field
//! against `pthread_self()` would not find its threads.
//!
//! Both calls need the CUDA driver, as tracing does: without one, CUPTI refuses them (13.0 with
//! `CUPTI_ERROR_UNKNOWN`, 12.9 with `CUPTI_ERROR_NOT_INITIALIZED`, seen with NVIDIA's wheels), so the driver is
//! looked for first and its absence is the loader's error. An injection library calls them from
//! `InitializeInjection`, inside the program's first `cuInit`, where tracing starts too.

use crate::cupti::{CuptiError, CuptiLibrary, TracingError};
use crate::sys::cupti as sys;

/// `Ok` for success, else [`TracingError::Vendor`] naming `call`.
fn vendor(call: &'static str, code: u32) -> Result<(), TracingError> {
    CuptiError::check(code).map_err(|error| TracingError::Vendor { call, error })
}

/// What the thread field of CUPTI's records holds. The setting is the process's: a profiler inside the program
/// that reads the same records (PyTorch's Kineto) sees a change too. Kineto keys its thread table by the
/// POSIX-based id and shows the system id, and keeps a record's own id where the table has none, so its traces look
/// the same under [`ThreadIdKind::System`]; another tool that matches CUPTI's thread field against `pthread_self()`
/// would not find its threads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ThreadIdKind {
    /// `pthread_self()` cut to 32 bits (`CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT`).
    Posix,
    /// The kernel's thread id, `gettid()` (`CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM`).
    System,
    /// A value a newer CUPTI defines.
    Unrecognized(u32),
}

impl ThreadIdKind {
    /// From CUPTI's `CUpti_ActivityThreadIdType` value.
    pub fn from_code(code: u32) -> Self {
        match code {
            sys::CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT => ThreadIdKind::Posix,
            sys::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM => ThreadIdKind::System,
            c => ThreadIdKind::Unrecognized(c),
        }
    }

    /// CUPTI's `CUpti_ActivityThreadIdType` value.
    pub fn code(self) -> u32 {
        match self {
            ThreadIdKind::Posix => sys::CUPTI_ACTIVITY_THREAD_ID_TYPE_DEFAULT,
            ThreadIdKind::System => sys::CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM,
            ThreadIdKind::Unrecognized(c) => c,
        }
    }
}

/// The thread id the loaded CUPTI writes into records now (`cuptiGetThreadIdType`), loading CUPTI with the crate's
/// search where no copy is loaded yet.
pub fn thread_id_kind() -> crate::Result<ThreadIdKind> {
    crate::cuda::Driver::load()?;
    let lib = CuptiLibrary::load()?;
    let fns = lib.activity.map_err(TracingError::MissingSymbol)?;
    let get = fns
        .get_thread_id_type
        .ok_or(TracingError::MissingSymbol("cuptiGetThreadIdType"))?;
    let mut code: sys::CUpti_ActivityThreadIdType = 0;
    // SAFETY: a valid out-pointer to a local; the call only reads a setting.
    vendor("cuptiGetThreadIdType", unsafe { get(&mut code) })?;
    Ok(ThreadIdKind::from_code(code))
}

/// Makes the loaded CUPTI write `kind` into the records it writes from now on (`cuptiSetThreadIdType`), for the
/// whole process: see [`ThreadIdKind`] for what that changes for another profiler of the process.
pub fn set_thread_id_kind(kind: ThreadIdKind) -> crate::Result<()> {
    crate::cuda::Driver::load()?;
    let lib = CuptiLibrary::load()?;
    let fns = lib.activity.map_err(TracingError::MissingSymbol)?;
    let set = fns
        .set_thread_id_type
        .ok_or(TracingError::MissingSymbol("cuptiSetThreadIdType"))?;
    // SAFETY: a plain setting passed by value; CUPTI checks the value.
    vendor("cuptiSetThreadIdType", unsafe { set(kind.code()) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip() {
        for k in [
            ThreadIdKind::Posix,
            ThreadIdKind::System,
            ThreadIdKind::Unrecognized(7),
        ] {
            assert_eq!(ThreadIdKind::from_code(k.code()), k);
        }
        assert_eq!(ThreadIdKind::from_code(0), ThreadIdKind::Posix);
        assert_eq!(ThreadIdKind::from_code(1), ThreadIdKind::System);
    }
}
