//! Standard output of the subcommands: every report line goes through [`outln!`] (or a writer whose errors go
//! through [`Failure::stdout`]), never `println!`, which panics when the reader of a pipe has gone away
//! (`gpu-tools stats t.gputrace | head`).
//!
//! A closed standard output is remembered here: later writes fail at once, and the tool exits with
//! [`BROKEN_PIPE`](crate::failure::BROKEN_PIPE), quietly, as a Unix tool killed by `SIGPIPE` is reported by the
//! shell. Code that can stop returns the error (`outln!(...)?`); code that must first put something back (a
//! frozen process, suspended GPUs) drops it and goes on, and the exit status still says that the output was cut.

use std::fmt;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crate::failure::{Failure, stdout_closed};

/// Whether standard output was found closed (its reader gone; remembered by [`Failure::stdout`]).
pub fn closed() -> bool {
    stdout_closed()
}

/// Set where standard output carries an output file (`--json -`): the lines of [`outln!`] go to stderr instead.
static TO_STDERR: AtomicBool = AtomicBool::new(false);

/// Sends the lines of [`outln!`] to stderr from now on: standard output carries an output file (an output option
/// given `-`), which they must not break into.
pub fn to_stderr() {
    TO_STDERR.store(true, Ordering::Relaxed);
}

/// Whether [`to_stderr`] was called: standard output carries an output file. A program that `trace` launches then
/// gets stderr as its standard output too.
pub fn carries_a_file() -> bool {
    TO_STDERR.load(Ordering::Relaxed)
}

/// Standard output for a child process: stderr where standard output carries an output file
/// ([`carries_a_file`]), else standard output itself.
pub fn for_child() -> std::process::Stdio {
    use std::os::fd::AsFd;
    if carries_a_file() {
        if let Ok(fd) = io::stderr().as_fd().try_clone_to_owned() {
            return std::process::Stdio::from(fd);
        }
    }
    std::process::Stdio::inherit()
}

/// Writes `text` to standard output (stderr after [`to_stderr`]); [`Failure::BrokenPipe`] once standard output's
/// reader is gone.
pub fn write(text: fmt::Arguments<'_>) -> Result<(), Failure> {
    if TO_STDERR.load(Ordering::Relaxed) {
        let _ = io::stderr().lock().write_fmt(text);
        return Ok(());
    }
    if closed() {
        return Err(Failure::BrokenPipe);
    }
    io::stdout().lock().write_fmt(text).map_err(Failure::stdout)
}

/// `println!` that returns `Result<(), Failure>` instead of panicking (see the module's documentation).
macro_rules! outln {
    () => {
        $crate::stdout::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::stdout::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}
pub(crate) use outln;

/// For a write to standard output whose failure must not cut the work short (files still to be written,
/// something to put back): a closed standard output is remembered and `Ok`, any other error is returned.
pub fn unless_closed(e: io::Error) -> Result<(), Failure> {
    match Failure::stdout(e) {
        Failure::BrokenPipe => Ok(()),
        failure => Err(failure),
    }
}
