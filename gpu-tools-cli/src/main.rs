//! `gpu-tools`: the gpu-tools library's tools as one command with subcommands (`gpu-tools doctor`,
//! `gpu-tools trace -- PROGRAM`, ...). Each subcommand is a module of [`commands`], a thin layer over the library.
//!
//! The tools' former names still work where the executable is called by them (a link named `cuda_trace` to
//! `gpu-tools` runs `gpu-tools trace`): see [`commands::ALIASES`].

mod commands;
mod demangle;
mod failure;
mod gpu_memory;
mod inject_lib;
mod output;
mod pid;
mod prometheus;

use std::ffi::OsString;
use std::path::Path;
use std::process::ExitCode;

use clap::Parser;

use commands::Command;
use failure::Failure;

/// GPU tools on the command line: trace CUDA programs, see where a hung CUDA job is, read CUDA core dumps, freeze
/// and restore a CUDA process, and check what this machine has.
///
/// Run `gpu-tools doctor` first: it says which vendor libraries and GPUs this machine has. `RUST_LOG=debug` shows
/// the library's log (each library loaded, each vendor call that failed).
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
    let cli = Cli::parse_from(arguments(std::env::args_os()));
    let name = cli.command.name();
    match cli.command.run() {
        Ok(code) => ExitCode::from(code),
        Err(Failure::Usage(e)) => e.exit(),
        Err(Failure::Message { code, message }) => {
            eprintln!("gpu-tools {name}: {message}");
            ExitCode::from(code)
        }
    }
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
    use clap::CommandFactory;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
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
