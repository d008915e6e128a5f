//! `gpu-tools diff A B`: two traces of the same program side by side ([`gpu_tools::trace::diff`]): step time, GPU
//! busy and idle (idle by cause), the kernels whose time and count changed most, kernels new and gone, API time,
//! copies; as text or JSON (`--json`, its fields below).
//!
//! **JSON** (`--json`): one object, its field names stable (new fields may be added, none renamed or removed):
//!
//! | field | what it holds |
//! |---|---|
//! | `a`, `b` | each side: `file`, `select` (`all`, `rank=N`, `pid=N` or `stream=N`), `processes[]` (`pid`, `rank`, `stream`: its stream in the file), `gpus`, `steps`, `step_median_ns`, `step_p90_ns`, `window_ns`, `busy_ns`, `idle_ns`, `idle_by_cause` (an object: cause to ns, the causes of `analyze`), `kernel_ns`, `api_ns` (summed over the windows) |
//! | `per_step` | whether the changes below are ranked per step (both sides have steps), else by totals |
//! | `kernels_by_time[]`, `kernels_by_count[]`, `new_kernels[]`, `gone_kernels[]`, `api[]`, `copies[]` | each a change: `name`, `a_count`, `b_count`, `a_ns`, `b_ns` (totals over each side's windows), `a_per_step_ns`, `b_per_step_ns` (`null` for a side without steps) |

mod json;
mod text;

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use gpu_tools::trace::diff::{Profile, Select, SelectError, diff};

use super::analyze::read;
use crate::demangle::readable;
use crate::failure::{Failure, Outcome};

/// Two traces side by side: step time, GPU busy and idle, the kernels and API calls that changed most.
///
/// A and B are saved traces of the same program (before and after a change, two hosts), or the same file twice with
/// `--a-process` and `--b-process` naming two of its processes (two ranks: `--a-process rank=0 --b-process
/// rank=1`; `pid=N`, or `stream=N` for the process of stream N of the file, as `stats --report processes` lists
/// them: a pid two processes share, in two containers or used again, is refused). Each side is analysed as `gpu-tools analyze` does (its steps found, the warm-up and start-up left out)
/// and compared: the median and 90th-percentile step, the GPU's busy and idle time (idle by cause), the kernels
/// whose time changed most and those whose count did, kernels new in B and gone from A, the API functions whose
/// time changed most, the copies by kind; the numbers side by side, per step where both sides have steps. Kernel
/// names are demangled (`--raw-names` keeps them as recorded). Exit code: 0; 1 when a file cannot be read at all or
/// a side selects no process with device work; 3 when a file was cut short or is corrupt part-way (the comparison
/// covers what was read); 2 for a usage error.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The first trace (before); `-` is standard input.
    #[arg(value_name = "A")]
    a: PathBuf,
    /// The second trace (after); may be A again with other processes selected.
    #[arg(value_name = "B")]
    b: PathBuf,
    /// Only this process of A: `rank=N`, `pid=N` or `stream=N` [default: every process with device work].
    #[arg(long, value_name = "SEL", value_parser = parse_select)]
    a_process: Option<Select>,
    /// Only this process of B: `rank=N`, `pid=N` or `stream=N`.
    #[arg(long, value_name = "SEL", value_parser = parse_select)]
    b_process: Option<Select>,
    /// How many kernels and API functions each list shows; 0 for all.
    #[arg(long, value_name = "N", default_value_t = 10)]
    top: usize,
    /// Write JSON instead of text.
    #[arg(long)]
    json: bool,
    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long)]
    raw_names: bool,
}

/// `rank=N`, `pid=N` or `stream=N` (of the side's one file).
fn parse_select(s: &str) -> Result<Select, String> {
    let bad = || format!("{s:?} is none of rank=N, pid=N and stream=N");
    let (what, n) = s.split_once('=').ok_or_else(bad)?;
    let n: u32 = n.trim().parse().map_err(|_| bad())?;
    match what.trim() {
        "rank" => Ok(Select::Rank(n)),
        "pid" => Ok(Select::Pid(n)),
        "stream" => Ok(Select::Stream { file: 0, stream: n }),
        _ => Err(bad()),
    }
}

/// `all`, `rank=N`, `pid=N`, `stream=N`.
pub(crate) fn select_text(s: Select) -> String {
    match s {
        Select::Rank(r) => format!("rank={r}"),
        Select::Pid(p) => format!("pid={p}"),
        Select::Stream { stream, .. } => format!("stream={stream}"),
        _ => "all".to_string(),
    }
}

pub fn run(args: Args) -> Outcome {
    if args.a.as_os_str() == "-" && args.b.as_os_str() == "-" {
        return Err(Failure::usage(
            crate::commands::clap_command("diff"),
            clap::error::ErrorKind::ArgumentConflict,
            "standard input (`-`) can be read once: give it as A or B, not both",
        ));
    }
    let (ta, ra) = read("diff", std::slice::from_ref(&args.a))?;
    let (tb, rb) = read("diff", std::slice::from_ref(&args.b))?;
    let (sa, sb) = (
        args.a_process.unwrap_or(Select::All),
        args.b_process.unwrap_or(Select::All),
    );
    let side = |t, s, path: &PathBuf| {
        Profile::of(t, s).map_err(|e| {
            let how = match e {
                SelectError::Several(..) => " (stream=N)",
                SelectError::Nothing(_) => "",
            };
            Failure::new(1, format!("{}: {e}{how}", path.display()))
        })
    };
    let (pa, pb) = (side(&ta, sa, &args.a)?, side(&tb, sb, &args.b)?);
    // 0 is all, as `analyze --top 0` is: taken as a count it emptied every list without a word.
    let top = if args.top == 0 { usize::MAX } else { args.top };
    // Every change, cut to `top` when written: the text says how many each list leaves out.
    let mut d = diff(&pa, &pb, usize::MAX);
    if !args.raw_names {
        for c in d
            .kernels_by_time
            .iter_mut()
            .chain(&mut d.kernels_by_count)
            .chain(&mut d.new_kernels)
            .chain(&mut d.gone_kernels)
        {
            c.name = readable(&c.name);
        }
    }
    let sides = [(&args.a, sa), (&args.b, sb)];
    let mut out = BufWriter::new(std::io::stdout().lock());
    let written = if args.json {
        for list in [
            &mut d.kernels_by_time,
            &mut d.kernels_by_count,
            &mut d.new_kernels,
            &mut d.gone_kernels,
            &mut d.api,
        ] {
            list.truncate(top);
        }
        json::write(&mut out, sides, &d)
    } else {
        text::write(&mut out, sides, &d, top)
    };
    written
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)?;
    Ok(ra.code().max(rb.code()))
}
