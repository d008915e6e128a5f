//! `gpu-tools completions SHELL`: the shell's completion script for `gpu-tools`, on standard output.

use crate::failure::{Failure, Outcome};

/// Print the completion script of a shell for gpu-tools (subcommands, options, values).
///
/// `gpu-tools completions bash > ~/.local/share/bash-completion/completions/gpu-tools`;
/// `gpu-tools completions zsh > ~/.zfunc/_gpu-tools` (with `~/.zfunc` in `fpath`);
/// `gpu-tools completions fish > ~/.config/fish/completions/gpu-tools.fish`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

pub fn run(args: Args) -> Outcome {
    let mut cli = crate::cli_command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, "gpu-tools", &mut script);
    write_out(&script)?;
    Ok(0)
}

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)
}
