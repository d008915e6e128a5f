//! `record`, `replay` and `rocprof`, which left the tool: hidden subcommands that say where each went and exit 2.
//! They keep the old command lines answering for one release (CHANGELOG.md, "Unreleased").

use std::ffi::OsString;

use crate::failure::{Failure, Outcome};

/// Exit status of a command that moved: a usage error, as for a subcommand that does not exist.
const MOVED: u8 = 2;

/// Moved out of `gpu-tools`; prints where it went.
#[derive(Debug, clap::Args)]
#[command(disable_help_flag = true)]
pub struct Args {
    /// Whatever the old command line held: not read.
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, hide = true)]
    rest: Vec<OsString>,
}

/// Where the subcommand `name` went.
pub fn new_home(name: &str) -> &'static str {
    match name {
        "record" => {
            "it records test fixtures and is a repository task now: `cargo xtask record --out DIR`"
        }
        "replay" => {
            "it is the library's example `checkpoint_replay` now: `cargo run --release --example \
             checkpoint_replay -- --replays 10`"
        }
        "rocprof" => {
            "it is the library's example `rocprof_trace` now: `cargo run --release --example rocprof_trace -- \
             --output rocprof_trace.json`"
        }
        _ => "it is no longer part of gpu-tools",
    }
}

pub fn run(name: &str, _args: Args) -> Outcome {
    Err(Failure::Message {
        code: MOVED,
        message: format!("moved out of gpu-tools: {}", new_home(name)),
    })
}
