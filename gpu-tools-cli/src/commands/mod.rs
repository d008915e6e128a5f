//! The subcommands, one module each. A module has an `Args` struct (`clap::Args`; its doc comment is the
//! subcommand's `--help`) and `pub fn run(args: Args) -> Outcome`.
//!
//! To add a subcommand: write its module here (the library does the work; the module parses, checks arguments
//! before it acts, and prints), then add a variant to [`Command`] and an arm to [`Command::run`] and
//! [`Command::name`]; its tests go in `tests/<name>.rs` and run the `gpu-tools` binary.

mod analyze;
mod completions;
mod coredump;
mod diff;
mod doctor;
mod export;
mod freeze;
mod man;
mod metrics;
mod moved;
mod profile;
mod profile_attach;
mod stats;
mod top;
mod trace;
mod r#where;

use clap::Subcommand;

use crate::failure::Outcome;

/// A subcommand and its arguments.
#[derive(Debug, Subcommand)]
pub enum Command {
    Doctor(doctor::Args),
    // Boxed: the largest by far (every backend's options).
    Trace(Box<trace::Args>),
    Where(r#where::Args),
    Coredump(coredump::Args),
    Freeze(freeze::Args),
    /// Moved: the example `checkpoint_replay` of the gpu-tools library.
    #[command(hide = true)]
    Replay(moved::Args),
    /// Moved: `cargo xtask record` in the repository.
    #[command(hide = true)]
    Record(moved::Args),
    /// Moved: the example `rocprof_trace` of the gpu-tools library.
    #[command(hide = true)]
    Rocprof(moved::Args),
    Metrics(metrics::Args),
    Top(top::Args),
    Profile(profile::Args),
    Stats(stats::Args),
    Analyze(analyze::Args),
    Diff(diff::Args),
    Export(export::Args),
    Completions(completions::Args),
    Man(man::Args),
}

/// The tools' former names, each the name of an executable that ran what a subcommand runs now: `gpu-tools`
/// called by such a name (a link to it) runs that subcommand. The last three name subcommands that moved out of
/// the tool ([`moved`]): they say where.
pub const ALIASES: [(&str, &str); 7] = [
    ("cuda_trace", "trace"),
    ("cuda_where", "where"),
    ("cuda_coredump", "coredump"),
    ("cuda_freeze", "freeze"),
    ("checkpoint_replay", "replay"),
    ("cupti_record", "record"),
    ("rocprof_trace", "rocprof"),
];

impl Command {
    /// Runs the subcommand.
    pub fn run(self) -> Outcome {
        match self {
            Command::Doctor(args) => doctor::run(args),
            Command::Trace(args) => trace::run(*args),
            Command::Where(args) => r#where::run(args),
            Command::Coredump(args) => coredump::run(args),
            Command::Freeze(args) => freeze::run(args),
            Command::Replay(args) => moved::run("replay", args),
            Command::Record(args) => moved::run("record", args),
            Command::Rocprof(args) => moved::run("rocprof", args),
            Command::Metrics(args) => metrics::run(args),
            Command::Top(args) => top::run(args),
            Command::Profile(args) => profile::run(args),
            Command::Stats(args) => stats::run(args),
            Command::Analyze(args) => analyze::run(args),
            Command::Diff(args) => diff::run(args),
            Command::Export(args) => export::run(args),
            Command::Completions(args) => completions::run(args),
            Command::Man(args) => man::run(args),
        }
    }

    /// The subcommand's name, for messages.
    pub fn name(&self) -> &'static str {
        match self {
            Command::Doctor(_) => "doctor",
            Command::Trace(_) => "trace",
            Command::Where(_) => "where",
            Command::Coredump(_) => "coredump",
            Command::Freeze(_) => "freeze",
            Command::Replay(_) => "replay",
            Command::Record(_) => "record",
            Command::Rocprof(_) => "rocprof",
            Command::Metrics(_) => "metrics",
            Command::Top(_) => "top",
            Command::Profile(_) => "profile",
            Command::Stats(_) => "stats",
            Command::Analyze(_) => "analyze",
            Command::Diff(_) => "diff",
            Command::Export(_) => "export",
            Command::Completions(_) => "completions",
            Command::Man(_) => "man",
        }
    }
}

/// The command line as completions and the manual page offer it: without the hidden subcommands (those that moved
/// out, [`moved`]), which still answer when typed but are offered nowhere. (clap has no way to remove a
/// subcommand: the command is made again with the others.)
pub fn shown_command() -> clap::Command {
    let full = crate::cli_command();
    let mut shown = clap::Command::new("gpu-tools")
        .bin_name("gpu-tools")
        .version(env!("CARGO_PKG_VERSION"))
        .propagate_version(true)
        .subcommand_required(full.is_subcommand_required_set())
        .subcommands(
            full.get_subcommands()
                .filter(|s| !s.is_hide_set() && s.get_name() != "help")
                .cloned(),
        );
    if let Some(about) = full.get_about() {
        shown = shown.about(about.clone());
    }
    if let Some(long) = full.get_long_about() {
        shown = shown.long_about(long.clone());
    }
    shown
}

/// The clap command of subcommand `name`, for usage errors found after parsing.
pub fn clap_command(name: &str) -> clap::Command {
    let mut cli = crate::cli_command();
    cli.build();
    cli.find_subcommand(name).cloned().unwrap_or(cli)
}
