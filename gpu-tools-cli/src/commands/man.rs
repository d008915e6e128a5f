//! `gpu-tools man`: the manual page of `gpu-tools` (roff), on standard output.

use crate::failure::{Failure, Outcome};

/// Print the manual page of gpu-tools (roff, section 1): `gpu-tools man | man -l -`, or
/// `gpu-tools man > /usr/local/share/man/man1/gpu-tools.1`.
///
/// It has the description, the options and a list of the subcommands; `gpu-tools SUBCOMMAND --help` has each in
/// full.
#[derive(Debug, clap::Args)]
pub struct Args {}

pub fn run(_args: Args) -> Outcome {
    let cli = crate::cli_command();
    let mut page = Vec::new();
    clap_mangen::Man::new(cli)
        .render(&mut page)
        .map_err(|e| Failure::error(format!("cannot render the manual page: {e}")))?;
    write_out(&page)?;
    Ok(0)
}

fn write_out(bytes: &[u8]) -> Result<(), Failure> {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    out.write_all(bytes)
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)
}
