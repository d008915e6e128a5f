//! `gpu-tools analyze FILE...`: what slows a traced job, ranked by the GPU time it costs, with the evidence and
//! what to try ([`gpu_tools::trace::analyze`]); as text (the first three findings; `--top N`), or as JSON
//! (`--json`, every finding; its fields below).
//!
//! **JSON** (`--json`): one object, its field names stable (new fields may be added, none renamed or removed):
//!
//! | field | what it holds |
//! |---|---|
//! | `files` | the files read, in order (their number is `file` below) |
//! | `gpu_time_ns` | the GPU time analysed: the sum of the GPUs' windows |
//! | `gpus[]` | every GPU of every traced process with device work: `file`, `stream`, `device`, `pid`, `host`, `rank` (or `null`), `start_ns` and `end_ns` (the window, on the stream's clock), `window_ns`, `busy_ns`, `idle_ns`, `before_ns` (start-up and warm-up left out), `steps` (`source`: `nvtx`, `graph`, `pattern` or `none`; `name`: the range, graph or operation; `count`, `warmup`, `median_ns`, `p90_ns`), `idle_by_cause` (a list of `cause`, `ns`: causes `sync`, `pageable_copy`, `small_copy`, `launch`, `between_steps`, `queued`, `unknown`) |
//! | `findings[]` | the findings, the costliest first: `rank` (1 for the first), `kind` (`sync_stall`, `launch_bound`, `between_steps`, `pageable_copies`, `small_copies`, `queued_work`, `straggler`, `collective_wait`, `exposed_communication`, `memory_bound`, `compute_bound`, `low_sm_activity`), `title`, `cost_ns` (the estimate), `share` (of `gpu_time_ns`, 0 to 1), `basis` (how the estimate was made), `evidence[]` (`kind`: `kernel`, `call`, `copy`, `rank`, `nvtx`, `step`, `counter`, `gpu`, `pattern` or `gap`; `name`, `count` and `time_ns` where they apply, else `null`; `text`), `advice[]` (what to try), `spans[]` (the time ranges concerned, the longest 256: `file`, `stream`, `device`, `start_ns`, `end_ns` on the stream's clock) |
//! | `lacks[]` | what the trace lacks to say more, each said once |
//! | `ended_at_signal[]` | each traced process whose trace ended at a fatal signal (a crash; said first in the text): `file`, `stream`, `pid`, `host`, `rank` (or `null`), `signal` (its number), `end_ns` (on the stream's clock), `text` |

mod json;
mod text;

pub(crate) use text::short;

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use gpu_tools::trace::analyze::{Diagnosis, Trace};
use gpu_tools::trace::file::TraceFileError;

use crate::demangle::demangle;
use crate::failure::{Failure, Outcome};
use crate::job_files::traced_twice;
use crate::trace_input::{Reading, open_all};

/// What slows a traced job: findings ranked by the GPU time they cost, each with its evidence and what to try.
///
/// Reads saved traces (`gpu-tools trace -o FILE`, several files of one job together; `-` is standard input) and
/// answers, for the engineer on call for a slow training or serving job, where the GPU time goes: the GPU idle and
/// why (waiting on synchronisation such as `.item()` or `cudaDeviceSynchronize`, copies of pageable memory, small
/// copies, a host that launches short kernels one by one, work between steps, work queued behind a dependency),
/// the time ranks wait in collectives and the straggler they wait for (from the `stragglers` report),
/// communication not overlapped with computation, and, for a trace recorded with `trace --counters`, the kernels
/// bound by memory or computation. Each finding says what it costs (an estimate, with its basis), the evidence
/// (kernels, calls, copies, ranks, NVTX ranges, times) and what to try; what the trace lacks to say more is said
/// once. Steps come from an NVTX range that repeats (one named `step` or `iter` first), else from the repeating
/// pattern of graph launches and operations; the warm-up steps and the start-up before them are left out.
///
/// The text shows the first three findings (`--top N`); `--json` gives every finding, every GPU and the time ranges
/// each finding concerns, with the field names listed in gpu-tools-cli/README.md ("analyze"). `gpu-tools export
/// --findings` draws the findings on the timeline. Kernel names are demangled (`--raw-names` keeps them as
/// recorded). Exit code: 0; 1 when a file cannot be read at all (not a trace, another format version, cut short
/// before its first record), fails a checksum (the message says at which byte), has a final chunk that disagrees
/// with what was read, is given twice, or holds a rank traced twice; 3 when one was cut short, was not finished by
/// its writer or is corrupt part-way (the analysis then covers what was read before); 2 for a usage error.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace files (several files of one job together); `-` is standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write JSON (every finding, every GPU, the time ranges) instead of text.
    #[arg(long)]
    json: bool,
    /// How many findings the text shows; 0 for all.
    // The JSON has every finding: a count given with it would be dropped without a word.
    #[arg(long, value_name = "N", default_value_t = 3, conflicts_with = "json")]
    top: usize,
    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long)]
    raw_names: bool,
}

pub fn run(args: Args) -> Outcome {
    let (trace, reading) = read("analyze", &args.files)?;
    let mut diagnosis = trace.diagnose();
    if !args.raw_names {
        demangle_names(&mut diagnosis);
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    let written = if args.json {
        json::write(&mut out, &args.files, &diagnosis)
    } else {
        text::write(&mut out, &diagnosis, args.top)
    };
    written
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)?;
    Ok(reading.code())
}

/// Reads the files into one [`Trace`], as `command`: each file's errors said (a file that cannot be read at all is
/// a failure), a rank traced twice refused.
pub(crate) fn read(command: &str, files: &[PathBuf]) -> Result<(Trace, Reading), Failure> {
    let (trace, errors) = read_quietly(files)?;
    let mut reading = Reading::default();
    for (i, (path, errors)) in files.iter().zip(errors).enumerate() {
        let file = u32::try_from(i).unwrap_or(u32::MAX);
        reading.take(
            command,
            path,
            trace.file_version(file),
            trace.records(file),
            &errors,
        );
    }
    reading.check()?;
    trace
        .job()
        .check()
        .map_err(|twice| traced_twice(files, &twice))?;
    Ok((trace, reading))
}

/// Reads the files into one [`Trace`], file `i` as file number `i`, with each file's reading errors, unsaid.
pub(crate) fn read_quietly(
    files: &[PathBuf],
) -> Result<(Trace, Vec<Vec<TraceFileError>>), Failure> {
    let mut trace = Trace::new();
    let errors = open_all(files)?
        .into_iter()
        .enumerate()
        .map(|(i, input)| trace.read(u32::try_from(i).unwrap_or(u32::MAX), input))
        .collect();
    Ok((trace, errors))
}

/// Kernel names as people read them, in the evidence, its sentences and the steps' sources.
pub(crate) fn demangle_names(d: &mut Diagnosis) {
    use gpu_tools::trace::analyze::StepSource;
    for g in &mut d.gpus {
        if let StepSource::Pattern(name) = &mut g.steps.source {
            if let Some(readable) = demangle(name) {
                *name = readable;
            }
        }
    }
    for f in &mut d.findings {
        for e in &mut f.evidence {
            if let Some(readable) = demangle(&e.name) {
                e.text = e.text.replace(&e.name, &readable);
                e.name = readable;
            }
        }
    }
}
