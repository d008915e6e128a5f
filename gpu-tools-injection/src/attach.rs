//! Attaching to processes that already run: the one `attach` under `gpu-tools trace --pid` / `--pid-tree` and
//! `gpu-tools profile --pid`. Feature `attach` (the tool's side: the injection libraries do not need ptrace).
//!
//! One session, in the order the target processes see it:
//!
//! 1. [`Listening::new`]: the private socket folder, where each process will connect (its mount namespace looked
//!    at, as [`Placement`] says), and the sockets listening; nothing is done to a process yet.
//! 2. [`Listening::attach`]: every process's attach argument is written first (a setting an attach cannot carry
//!    is refused before any process is touched); the connections are accepted from then on
//!    ([`crate::collect::accept_streams`], their deliveries to the caller's channel, as [`crate::launch`] hands
//!    them); then, one process after the other, the library is loaded and its entry called ([`start`]: through
//!    `gpu_tools::linux::inject`, which leaves the process as it was whatever happens), each [`Outcome`] handed to
//!    the caller as it comes (started, refused with its [`AttachStatus`], or the injection's error).
//! 3. [`Attached`]: the deliveries arrive on the caller's channel; [`Attached::send`] writes a control byte to
//!    every connection, [`Attached::stop`] the stop byte ([`crate::control::Control::Stop`]); dropping it stops
//!    accepting and removes the sockets.
//!
//! What differs between the two commands is a parameter, not a second loop:
//!
//! | step | `trace --pid` | `profile --pid` |
//! |---|---|---|
//! | where a process connects ([`Placement`]) | a socket per mount namespace (a container's in its own `/tmp`) | the private folder's socket, for every process |
//! | connections read ([`AcceptOptions::most`]) | every one until the end (a forked child's too) | the process's one (a later one waits unaccepted) |
//! | waiting for the connections | in its drain, by [`Attached::accepted`] | [`Attached::wait_for_connections`], 30 s, before its handshake |
//! | a refused process ([`Attached::outcomes`]) | said after the others were attached; the trace goes on with the rest | the command's error |
//! | the stop ([`AfterStop`]) | the stop byte; the connection stays open to its end | the stop byte, then the writing half closed |
//!
//! What the caller does between the attach and the stop stays the caller's: `trace` watches its window (time,
//! Ctrl-C, the processes' ends), `profile` waits for a quiet moment of the process (`gpu_tools::linux::quiesce`)
//! around each control byte. This crate prints nothing and starts no program.
//!
//! ```no_run
//! use std::sync::mpsc;
//! use gpu_tools_injection::attach::{AfterStop, Listening, Placement, Sockets};
//! use gpu_tools_injection::collect::{AcceptOptions, Delivery};
//! use gpu_tools_injection::settings::{Destination, Settings};
//!
//! let sockets = Sockets { prefix: "my-tracer-", name: "trace.sock", placement: Placement::PerMountNamespace };
//! let listening = Listening::new(&[1234], &sockets)?;
//! // The destination is each process's socket, written by the attach.
//! let settings = Settings::new(Destination::Socket("".into()));
//! let library = std::path::Path::new("/opt/libgpu_tools_inject.so");
//! let (tx, rx) = mpsc::channel::<Delivery>();
//! let attached = listening.attach(library, &settings, AcceptOptions::default(), tx, |_| {})?;
//! if attached.outcomes().iter().any(|o| o.result.is_ok()) {
//!     std::thread::sleep(std::time::Duration::from_secs(1));
//!     attached.stop(AfterStop::KeepOpen);
//!     while let Ok(delivery) = rx.recv_timeout(std::time::Duration::from_secs(1)) {
//!         println!("{delivery:?}");
//!     }
//! }
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::path::Path;

use gpu_tools::linux::inject::{InjectError, Injected, Injection};

#[cfg(doc)]
use crate::collect::AcceptOptions;
use crate::env::{self, AttachStatus};

mod listening;
mod session;

pub use listening::{Listening, Placement, SetupError, Sockets};
pub use session::{AfterStop, Attached, Outcome};

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
/// `argument` (the settings as [`Settings::attach_argument`](crate::settings::Settings::attach_argument) writes
/// them). `Ok` when the entry answered [`AttachStatus::Started`]: the library's thread then connects
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
