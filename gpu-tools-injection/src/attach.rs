//! Starting the injection library in a process that already runs: the one call of the attach entry
//! ([`env::ATTACH_ENTRY`]) that `gpu-tools trace --pid` and `gpu-tools profile --pid` make. The library is loaded
//! and its entry called through `gpu_tools::linux::inject` (which leaves the process as it was, whatever
//! happens); what the entry returned is read as an [`AttachStatus`], so that a caller never sees a bare code.
//! Feature `attach` (the tool's side: the injection libraries do not need ptrace).

use std::path::Path;

use gpu_tools::linux::inject::{InjectError, Injected, Injection};

use crate::env::{self, AttachStatus};

/// Why the injection library was not started in a process.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachError {
    /// Loading the library or calling its entry failed; the process was left as it was.
    #[error(transparent)]
    Inject(#[from] InjectError),
    /// The entry ran and did not start ([`AttachStatus::meaning`] says why).
    #[error("{}", .0.meaning())]
    Refused(AttachStatus),
    /// The entry returned a code this crate does not know (a library of another version).
    #[error("{}", env::attach_status_meaning(*.0))]
    UnknownStatus(i32),
}

/// Loads `library` into process `pid` (which must map the CUDA driver) and starts its attach entry with
/// `argument` (the settings as [`env::InjectionEnv::attach_argument`] writes them, perhaps followed by a profile
/// request's lines). `Ok` when the entry answered [`AttachStatus::Started`]: the library's thread then connects
/// to the socket the settings name.
pub fn start(pid: u32, library: &Path, argument: &str) -> Result<Injected, AttachError> {
    let done = Injection::new(pid, library, env::ATTACH_ENTRY)
        .argument(argument)
        .require_library("libcuda.so")
        .run()?;
    status(done.entry_result)?;
    Ok(done)
}

/// What an entry's return code means for the caller: `Ok` for [`AttachStatus::Started`].
fn status(code: i32) -> Result<(), AttachError> {
    match AttachStatus::from_code(code) {
        Some(AttachStatus::Started) => Ok(()),
        Some(refused) => Err(AttachError::Refused(refused)),
        None => Err(AttachError::UnknownStatus(code)),
    }
}

#[cfg(test)]
mod tests {
    use super::{AttachError, status};
    use crate::env::AttachStatus;

    #[test]
    fn only_started_is_ok_and_every_other_code_says_why() {
        assert!(status(AttachStatus::Started.code()).is_ok());
        let busy = status(AttachStatus::Busy.code()).unwrap_err();
        assert!(matches!(busy, AttachError::Refused(AttachStatus::Busy)));
        assert!(busy.to_string().contains("already traced"), "{busy}");
        let unknown = status(9).unwrap_err();
        assert!(matches!(unknown, AttachError::UnknownStatus(9)));
        assert_eq!(
            unknown.to_string(),
            "the injection library's entry point returned 9"
        );
    }
}
