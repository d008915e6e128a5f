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

/// The executable's name, which has a hyphen.
const BIN: &str = "gpu-tools";

pub fn run(args: Args) -> Outcome {
    let mut cli = super::shown_command();
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut cli, BIN, &mut script);
    if args.shell == clap_complete::Shell::Bash {
        script = fix_bash(&String::from_utf8_lossy(&script)).into_bytes();
    }
    write_out(&script)?;
    Ok(0)
}

/// clap_complete's bash script for a name with a hyphen keeps track of the subcommand typed in `cmd` as
/// `gpu__tools__subcmd__stats`, but names the arm of each subcommand's options `gpu__subcmd__tools__subcmd__stats`
/// (the hyphen made a subcommand separator): no arm matches, and no option of a subcommand is ever completed.
/// The arms are renamed to what `cmd` holds.
fn fix_bash(script: &str) -> String {
    let held = BIN.replace('-', "__");
    let named = BIN.replace('-', "__subcmd__");
    script
        .lines()
        .map(|line| {
            let arm = line.trim_start();
            let is_arm = arm.ends_with(')') && !arm.contains(' ');
            match arm.strip_prefix(named.as_str()) {
                Some(rest) if is_arm && (rest == ")" || rest.starts_with("__subcmd__")) => {
                    let indent = &line[..line.len() - arm.len()];
                    format!("{indent}{held}{rest}")
                }
                _ => line.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_arm_is_named_as_the_subcommand_is_held() {
        let mut cli = super::super::shown_command();
        let mut script = Vec::new();
        clap_complete::generate(clap_complete::Shell::Bash, &mut cli, BIN, &mut script);
        let fixed = fix_bash(&String::from_utf8_lossy(&script));
        assert!(!fixed.contains("gpu__subcmd__tools"), "{fixed}");
        assert!(
            fixed.contains("        gpu__tools__subcmd__stats)\n"),
            "{fixed}"
        );
        assert!(
            fixed.contains("cmd=\"gpu__tools__subcmd__stats\""),
            "{fixed}"
        );
    }
}
