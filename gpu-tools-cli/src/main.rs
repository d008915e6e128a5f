//! `gpu-tools`: the gpu-tools library's tools as one command with subcommands (`gpu-tools doctor`,
//! `gpu-tools trace -- PROGRAM`, ...). Each subcommand is a module of [`commands`], a thin layer over the library.
//!
//! The tools' former names still work where the executable is called by them (a link named `cuda_trace` to
//! `gpu-tools` runs `gpu-tools trace`): see [`commands::ALIASES`].

// Standard output is written through `stdout::outln!`: `println!` panics when a pipe's reader has gone away.
#![warn(clippy::print_stdout)]
// No unwrap or expect outside tests: a panic here would cross into the program or the vendor's code, or end the
// tool without the error's words (CI's clippy, -D warnings, holds it).
#![cfg_attr(not(test), warn(clippy::unwrap_used, clippy::expect_used))]

mod commands;
mod cupti_or_debugger;
mod debugger_lock;
mod demangle;
mod failure;
mod gpu_memory;
mod inject_lib;
mod interrupt;
mod job;
mod job_files;
mod output;
mod pc_left_on;
mod pid;
mod private_dir;
mod progress;
mod prometheus;
mod start_at;
mod stdout;
mod trace_input;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::{CommandFactory, FromArgMatches, Parser};

use commands::Command;
use failure::Failure;

/// GPU tools on the command line: trace CUDA programs, see where a hung CUDA job is, read CUDA core dumps, freeze
/// and restore a CUDA process, and check what this machine has.
///
/// Run `gpu-tools doctor` first: it says which vendor libraries and GPUs this machine has. `RUST_LOG=gpu_tools=debug`
/// shows the library's log (each library loaded, each vendor call that failed).
#[derive(Debug, Parser)]
#[command(
    name = "gpu-tools",
    bin_name = "gpu-tools",
    version,
    propagate_version = true
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

fn main() -> ExitCode {
    env_logger::init();
    let args = arguments(std::env::args_os());
    let mut command = cli_command();
    // The vendor libraries are looked for only when the version is asked for.
    if asks_for_version(&args) {
        command = command.version(&*Box::leak(version().into_boxed_str()));
    }
    let matches = match command.try_get_matches_from(args) {
        Ok(m) => m,
        Err(e) => return clap_exit(&e),
    };
    let cli = match Cli::from_arg_matches(&matches) {
        Ok(cli) => cli,
        Err(e) => return clap_exit(&e),
    };
    let name = cli.command.name();
    match cli.command.run() {
        // Standard output closed by its reader: quietly, also where the subcommand went on to finish its work.
        Err(Failure::BrokenPipe) => ExitCode::from(failure::BROKEN_PIPE),
        Ok(_) if stdout::closed() => ExitCode::from(failure::BROKEN_PIPE),
        Ok(code) => ExitCode::from(code),
        Err(Failure::Usage(e)) => clap_exit(&e),
        Err(Failure::Message { code, message }) => {
            eprintln!("gpu-tools {name}: {message}");
            ExitCode::from(code)
        }
    }
}

/// What clap stops at: a usage error (on stderr, exit 2), or `--help` and `--version` (on standard output, exit 0;
/// 141 where standard output was closed by its reader, as for every report: clap's own `exit` says 0 then).
fn clap_exit(e: &clap::Error) -> ExitCode {
    match e.print() {
        Err(written) if !e.use_stderr() && written.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::from(failure::BROKEN_PIPE)
        }
        _ => ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)),
    }
}

/// The command line's definition. A subcommand's `--version` names the tool (`gpu-tools 0.1.0`), not a program
/// of its own (clap's `gpu-tools-doctor 0.1.0`).
fn cli_command() -> clap::Command {
    Cli::command().mut_subcommands(|sub| sub.display_name("gpu-tools"))
}

/// Whether the command line asks for the version (`--version` or `-V` before a `--`).
fn asks_for_version(args: &[OsString]) -> bool {
    args.iter()
        .skip(1)
        .take_while(|a| *a != "--")
        .any(|a| a == "--version" || a == "-V")
}

/// `--version`'s text: the crate's version, and the CUPTI and CUDA driver this `gpu-tools` would use (found with
/// the library's loaders; "not found" where one is missing).
fn version() -> String {
    let cupti = match gpu_tools::cupti::CuptiLibrary::load() {
        Ok(l) => match l.api_version() {
            Ok(v) => v.to_string(),
            Err(e) => match driverless_cupti() {
                Some(hint) => format!("error: {e}: {hint}"),
                None => format!("error: {e}"),
            },
        },
        Err(_) => "not found".to_string(),
    };
    let driver = match gpu_tools::cuda::Driver::load() {
        Ok(d) => match d.version() {
            Ok(v) => format!("CUDA {}.{}", v / 1000, v % 1000 / 10),
            Err(e) => format!("error: {e}"),
        },
        Err(_) => "not found".to_string(),
    };
    format!(
        "{} (CUPTI: {cupti}; CUDA driver: {driver})",
        env!("CARGO_PKG_VERSION")
    )
}

/// Why CUPTI failed, where the likely reason is a CUPTI that needs the driver on a machine without one.
const DRIVERLESS_CUPTI: &str = "this CUPTI answers no call without the NVIDIA driver, which is not found here: \
     CUPTI 13.2 and later need it even for cuptiGetVersion; nvidia-cuda-cupti 13.0 and 13.1 run without one";

/// [`DRIVERLESS_CUPTI`] when the loaded CUPTI cannot even tell its version and no CUDA driver is found (CUPTI 13.3
/// to 13.5 answer `CUPTI_ERROR_UNKNOWN` to every call then; docs/driver-notes.md). `None` where no CUPTI is loaded.
fn driverless_cupti() -> Option<&'static str> {
    let cupti = gpu_tools::cupti::CuptiLibrary::get()?;
    (cupti.version().is_err() && gpu_tools::cuda::Driver::load().is_err())
        .then_some(DRIVERLESS_CUPTI)
}

/// The command line, with the subcommand inserted where the executable was called by one of the tools' former
/// names.
fn arguments(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut args: Vec<OsString> = args.into_iter().collect();
    let called = args
        .first()
        .and_then(|a| Path::new(a).file_name())
        .and_then(|n| n.to_str())
        .map(str::to_owned);
    if let Some((_, subcommand)) = called
        .as_deref()
        .and_then(|c| commands::ALIASES.iter().find(|(alias, _)| *alias == c))
    {
        args[0] = "gpu-tools".into();
        args.insert(1, (*subcommand).into());
    }
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_is_asked_for_before_the_program_only() {
        let args = |v: &[&str]| v.iter().map(OsString::from).collect::<Vec<_>>();
        assert!(asks_for_version(&args(&["gpu-tools", "--version"])));
        assert!(asks_for_version(&args(&["gpu-tools", "-V"])));
        assert!(asks_for_version(&args(&[
            "gpu-tools",
            "doctor",
            "--version"
        ])));
        assert!(!asks_for_version(&args(&[
            "gpu-tools",
            "trace",
            "--",
            "app",
            "--version"
        ])));
        assert!(!asks_for_version(&args(&["gpu-tools", "doctor"])));
    }

    #[test]
    fn the_command_line_is_consistent() {
        cli_command().debug_assert();
    }

    #[test]
    fn former_names_run_their_subcommand() {
        let args = |v: &[&str]| -> Vec<String> {
            arguments(v.iter().map(OsString::from))
                .into_iter()
                .map(|a| a.into_string().unwrap())
                .collect()
        };
        assert_eq!(
            args(&["/usr/bin/cuda_trace", "--quiet", "--", "a.out"]),
            ["gpu-tools", "trace", "--quiet", "--", "a.out"]
        );
        assert_eq!(
            args(&["cuda_coredump", "core"]),
            ["gpu-tools", "coredump", "core"]
        );
        assert_eq!(args(&["gpu-tools", "doctor"]), ["gpu-tools", "doctor"]);
        for (alias, subcommand) in commands::ALIASES {
            assert!(
                Cli::command().find_subcommand(subcommand).is_some(),
                "{alias} names no subcommand"
            );
        }
    }

    #[test]
    fn every_subcommand_describes_itself() {
        let cli = Cli::command();
        for sub in cli.get_subcommands() {
            let about = sub.get_about().map(|a| a.to_string()).unwrap_or_default();
            assert!(!about.is_empty(), "{} has no description", sub.get_name());
            assert_ne!(
                about,
                env!("CARGO_PKG_DESCRIPTION"),
                "{} shows the crate's description",
                sub.get_name()
            );
        }
    }
}
