//! How a subcommand fails: a message for the user and an exit code, or a usage error that clap prints with the
//! subcommand's usage line.
//!
//! Exit codes across the tool (README.md, "Exit codes"): 0 success; 1 the job could not be done (the message says
//! why); 2 a usage error; 3 the job ran but its result is incomplete or a check failed (`trace`: records lost, or a
//! traced process crashed; `stats`, `export`: a file cut short after some of its records, which still count; one
//! that holds no record is 1); `trace` and `profile` also exit with the program's own code, 126 and 127 when the
//! program cannot be run or is not found (as shells), and `trace` with 128 + N when signal N ended it; 141 when
//! standard output was closed by its reader ([`BROKEN_PIPE`]), `--help` and `--version` included. `gpu-tools man`
//! lists them (EXIT STATUS).

use std::fmt::Display;
use std::sync::atomic::{AtomicBool, Ordering};

/// A subcommand's failure.
#[derive(Debug)]
pub enum Failure {
    /// A message and an exit code.
    Message { code: u8, message: String },
    /// A usage error found after parsing (options that conflict in a way clap cannot express), printed by clap.
    Usage(clap::Error),
    /// Standard output was closed by its reader (`gpu-tools ... | head`): the tool exits with [`BROKEN_PIPE`],
    /// printing nothing.
    BrokenPipe,
}

/// Exit code of a job that ran but whose result is incomplete, or whose check failed.
pub const INCOMPLETE: u8 = 3;

/// Exit code when standard output was closed by its reader: 128 + `SIGPIPE`, what a shell reports for a tool that
/// `SIGPIPE` ended.
pub const BROKEN_PIPE: u8 = 128 + 13;

impl Failure {
    /// A failure with exit code `code`.
    pub fn new(code: u8, message: impl Into<String>) -> Self {
        Failure::Message {
            code,
            message: message.into(),
        }
    }

    /// The job could not be done (exit code 1); the message is the error's `Display` text.
    pub fn error(e: impl Display) -> Self {
        Failure::new(1, e.to_string())
    }

    /// A usage error of subcommand `command` (exit code 2, with its usage line).
    pub fn usage(
        mut command: clap::Command,
        kind: clap::error::ErrorKind,
        message: impl Display,
    ) -> Self {
        Failure::Usage(command.error(kind, message))
    }

    /// What the failure says, for a caller that goes on and says it in a line of its own.
    pub fn text(&self) -> String {
        match self {
            Failure::Message { message, .. } => message.clone(),
            Failure::Usage(e) => e.to_string(),
            Failure::BrokenPipe => "standard output was closed".to_string(),
        }
    }

    /// Writing to standard output failed: [`Failure::BrokenPipe`] when its reader has gone away (remembered, see
    /// [`crate::stdout`]), else a failure that says why.
    pub fn stdout(e: std::io::Error) -> Self {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            STDOUT_CLOSED.store(true, Ordering::Relaxed);
            return Failure::BrokenPipe;
        }
        Failure::new(1, format!("cannot write the output: {e}"))
    }
}

impl From<gpu_tools::Error> for Failure {
    fn from(e: gpu_tools::Error) -> Self {
        Failure::error(e)
    }
}

impl From<gpu_tools_injection::profile::ProfileError> for Failure {
    fn from(e: gpu_tools_injection::profile::ProfileError) -> Self {
        Failure::error(e)
    }
}

impl From<gpu_tools::LoadError> for Failure {
    fn from(e: gpu_tools::LoadError) -> Self {
        Failure::error(e)
    }
}

/// What a subcommand returns: its exit code, or why it failed.
pub type Outcome = Result<u8, Failure>;

/// Standard output was found closed (its reader gone): remembered here, where the failure is made, so that later
/// writes ([`crate::stdout`]) fail at once.
static STDOUT_CLOSED: AtomicBool = AtomicBool::new(false);

/// Whether standard output was found closed.
pub fn stdout_closed() -> bool {
    STDOUT_CLOSED.load(Ordering::Relaxed)
}
