//! Saved traces given to `stats` and `export`: opened before any work, and their reading errors sorted into those
//! that make a file unreadable as a whole (not a trace, another format version, a checksum that fails, a final
//! chunk that disagrees with what was read) and those that cut it short (truncated, not finished by its writer,
//! corrupt part-way in a version 2 file), after which what was read before still counts. A file of an older
//! format, which cannot show all of that, is said once.

use std::fs::File;
use std::io::BufReader;
use std::os::fd::AsFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use gpu_tools::trace::file::{TraceFileError, format_limits};

use crate::failure::{Failure, INCOMPLETE};

/// The name of standard input among the files: `-`.
fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// Standard input, as a file of its own (a duplicate of its descriptor).
fn stdin_file() -> std::io::Result<File> {
    Ok(File::from(std::io::stdin().as_fd().try_clone_to_owned()?))
}

/// What makes a file itself whatever the path to it (`a`, `./a`, a hard or symbolic link, `-` for standard input
/// where that is the file): its device and inode.
fn identity(path: &Path) -> Option<(u64, u64)> {
    let meta = if is_stdin(path) {
        stdin_file().and_then(|f| f.metadata())
    } else {
        std::fs::metadata(path)
    };
    meta.ok().map(|m| (m.dev(), m.ino()))
}

/// The input files, each opened (`-` is standard input); a file given twice (under any path) is refused: its records
/// would count twice.
pub fn open_all(paths: &[PathBuf]) -> Result<Vec<BufReader<File>>, Failure> {
    for (i, path) in paths.iter().enumerate() {
        let Some(id) = identity(path) else { continue };
        if let Some(first) = paths[..i].iter().find(|p| identity(p) == Some(id)) {
            let message = if first == path {
                format!(
                    "{} is given twice: its records would count twice",
                    path.display()
                )
            } else {
                format!(
                    "{} and {} are the same file: its records would count twice",
                    first.display(),
                    path.display()
                )
            };
            return Err(Failure::new(1, message));
        }
    }
    paths
        .iter()
        .map(|p| {
            if is_stdin(p) {
                return stdin_file()
                    .map(BufReader::new)
                    .map_err(|e| Failure::new(1, format!("cannot read standard input: {e}")));
            }
            if p.is_dir() {
                return Err(Failure::new(1, format!("{}: is a folder", p.display())));
            }
            File::open(p)
                .map(BufReader::new)
                .map_err(|e| Failure::new(1, format!("cannot read {}: {e}", p.display())))
        })
        .collect()
}

/// Refuses an output (`what`, at `path`) that is one of the inputs, under any path: it would be overwritten.
/// (Standard output, `-`, is not a file of its own.)
pub fn check_output(path: &Path, what: &str, inputs: &[PathBuf]) -> Result<(), Failure> {
    if path.as_os_str() == "-" {
        return Ok(());
    }
    let Some(id) = identity(path) else {
        return Ok(());
    };
    match inputs.iter().find(|p| identity(p) == Some(id)) {
        Some(input) => Err(Failure::new(
            1,
            format!(
                "cannot write {what} {}: it is the input {}, which would be overwritten",
                path.display(),
                input.display()
            ),
        )),
        None => Ok(()),
    }
}

/// Whether an error makes the whole input unreadable (nothing of it was read), or untrustworthy: a checksum
/// failed, so a byte of it changed after it was written (what was read before is right, but the numbers of a
/// report without the rest would be numbers of another run).
fn refuses_input(e: &TraceFileError) -> bool {
    matches!(
        e,
        TraceFileError::Empty
            | TraceFileError::NotATrace { .. }
            | TraceFileError::UnsupportedVersion { .. }
            | TraceFileError::BadHeaderLength { .. }
            | TraceFileError::BadFileHeader { .. }
            | TraceFileError::ChunkHeaderChecksum { .. }
            | TraceFileError::ChunkChecksum { .. }
            | TraceFileError::FinalChunkMismatch { .. }
    )
}

/// What reading the inputs gave, summed over files.
#[derive(Debug, Default)]
pub struct Reading {
    /// The first input that is not a readable trace at all, with why.
    refused: Option<String>,
    /// An input was cut short or part of it was unreadable.
    partial: bool,
}

impl Reading {
    /// Takes the errors of reading `path` (of file format `version`, `None` for a single stream), of which
    /// `records` records were read (printing each error), as `command` met them. A file whose reading failed
    /// before its first record holds nothing to report: it is refused as a whole, as a file that is not a trace
    /// is. A file of an older format is said once: what it cannot show.
    pub fn take(
        &mut self,
        command: &str,
        path: &Path,
        version: Option<u16>,
        records: u64,
        errors: &[TraceFileError],
    ) {
        if let Some(limits) = version.and_then(format_limits) {
            eprintln!("gpu-tools {command}: {}: {limits}", path.display());
        }
        for e in errors {
            if refuses_input(e) {
                self.refused
                    .get_or_insert_with(|| format!("{}: {e}", path.display()));
            } else if records == 0 {
                self.refused
                    .get_or_insert_with(|| format!("{} holds no records: {e}", path.display()));
            } else {
                eprintln!("gpu-tools {command}: {}: {e}", path.display());
                self.partial = true;
            }
        }
    }

    /// A failure when an input could not be read at all (nothing is then written).
    pub fn check(&self) -> Result<(), Failure> {
        match &self.refused {
            Some(why) => Err(Failure::new(1, why.clone())),
            None => Ok(()),
        }
    }

    /// The exit code once the output is written: [`INCOMPLETE`] when part of an input could not be read.
    pub fn code(&self) -> u8 {
        if self.partial { INCOMPLETE } else { 0 }
    }
}
