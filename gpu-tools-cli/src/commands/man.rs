//! `gpu-tools man`: the manual page of `gpu-tools` (roff), on standard output.

use std::io::Write;

use crate::failure::{Failure, Outcome};

/// Print the manual page of gpu-tools (roff, section 1): `gpu-tools man | man -l -`, or
/// `gpu-tools man > /usr/local/share/man/man1/gpu-tools.1`.
///
/// It has the description, the options, a list of the subcommands and the exit statuses; `gpu-tools SUBCOMMAND
/// --help` has each subcommand in full.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// The exit statuses (README.md, "Exit codes"; `crate::failure`).
const EXIT_STATUS: [(&str, &str); 8] = [
    ("0", "Done."),
    (
        "1",
        "The job could not be done; the message on stderr says why (gpu-tools SUBCOMMAND: ...); trace --pid, \
         profile --pid: a window that got nothing of a process that ran (no record of work, no stall record, no \
         kernel profiled).",
    ),
    ("2", "A usage error, with the subcommand's usage line."),
    (
        "3",
        "The job ran, but its result is incomplete or its check failed: trace lost records or counter samples, or \
         a traced process crashed (its trace ended at a fatal signal); stats or export read a file that was cut \
         short or is corrupt part-way (the output covers what was read before); top lost samples; profile --pid --kernel-replay: kernel metrics ended at the program's first \
         CUDA graph launch and PM sampling attribution of the rest of the window gave no kernel.",
    ),
    (
        "N",
        "trace, profile: the traced or profiled program's own exit code.",
    ),
    (
        "126, 127",
        "trace, profile: the program cannot be run, or is not found (as shells say).",
    ),
    ("128 + N", "trace: signal N ended the program."),
    (
        "141",
        "Standard output was closed by its reader (gpu-tools stats run.gputrace | head), as a shell reports a tool \
         that SIGPIPE ended (128 + 13): no message. Files written with -o, --json, --perfetto, ... are not affected.",
    ),
];

pub fn run(_args: Args) -> Outcome {
    let mut page = Vec::new();
    render(&mut page).map_err(|e| Failure::error(format!("cannot render the manual page: {e}")))?;
    write_out(&page)?;
    Ok(0)
}

/// The page: clap_mangen's title, name, synopsis, description and options; then the subcommands as commands of
/// this page (clap_mangen names a page `gpu-tools-SUBCOMMAND(1)` for each, and none is installed), the exit
/// statuses, a SEE ALSO that names what exists, and the version.
fn render(w: &mut dyn Write) -> std::io::Result<()> {
    let cli = super::shown_command();
    let man = clap_mangen::Man::new(cli.clone());
    man.render_title(w)?;
    man.render_name_section(w)?;
    man.render_synopsis_section(w)?;
    man.render_description_section(w)?;
    man.render_options_section(w)?;
    writeln!(w, ".SH SUBCOMMANDS")?;
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        writeln!(w, ".TP")?;
        writeln!(w, "\\fBgpu\\-tools {}\\fR", roff(sub.get_name()))?;
        if let Some(about) = sub.get_about() {
            writeln!(w, "{}", roff(&about.to_string()))?;
        }
    }
    writeln!(w, ".SH \"EXIT STATUS\"")?;
    for (code, meaning) in EXIT_STATUS {
        writeln!(w, ".TP")?;
        writeln!(w, "\\fB{}\\fR", roff(code))?;
        writeln!(w, "{}", roff(meaning))?;
    }
    writeln!(w, ".SH \"SEE ALSO\"")?;
    writeln!(
        w,
        "\\fBgpu\\-tools\\fR \\fISUBCOMMAND\\fR \\fB\\-\\-help\\fR for each subcommand in full; README.md of the \
         gpu\\-tools repository, {}.",
        roff(env!("CARGO_PKG_REPOSITORY"))
    )?;
    man.render_version_section(w)
}

/// `text` as roff reads it literally: backslashes and hyphens escaped, and a line that would start with a control
/// character (`.`, `'`) guarded.
fn roff(text: &str) -> String {
    let escaped = text.replace('\\', "\\e").replace('-', "\\-");
    escaped
        .lines()
        .map(|line| {
            if line.starts_with('.') || line.starts_with('\'') {
                format!("\\&{line}")
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roff_text_is_taken_literally() {
        assert_eq!(roff("a-b \\n"), "a\\-b \\en");
        assert_eq!(roff(".TH x\n'y"), "\\&.TH x\n\\&'y");
    }
}
