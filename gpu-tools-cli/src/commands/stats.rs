//! `gpu-tools stats FILE...`: the summary reports of saved traces ([`gpu_tools::trace::report`]), as Nsight
//! Systems' `nsys stats` prints them.

use std::io::{BufWriter, Write};
use std::path::PathBuf;

use clap::builder::PossibleValuesParser;
use gpu_tools::trace::report::{Analysis, Cell, Format, Table, write_tables};

use crate::demangle::demangle;
use crate::failure::{Failure, Outcome};
use crate::job_files::{traced_twice, warn_gaps};
use crate::trace_input::{Reading, open_all};

/// Summary reports of saved traces: kernels, API calls, memory operations, CUDA graphs, NVTX ranges, processes,
/// and device counters per kernel.
///
/// FILE is what `gpu-tools trace -o FILE` wrote (or the injection library with `GPU_TOOLS_TRACE_FILE`); `-` is
/// standard input (`gpu-tools trace -o - ... | gpu-tools stats -`). Several files are merged on one timeline, hosts
/// aligned on their wall clocks. The reports are those of `nsys stats`,
/// under its names (`cuda_gpu_kern_sum`, `cuda_api_sum`, `nvtx_sum`, `nvtx_gpu_proj_sum`, ...); a trace recorded
/// with `trace --counters` also gets `cuda_gpu_kern_counters_sum`: per kernel name, the share of its time the
/// samples covered, SM active, tensor active and occupancy over that time, the DRAM bytes it read and wrote there,
/// and whether the row rests on samples shared with other kernels (statistical) or on kernels that overlapped;
/// with a line per sampled device. `--report stragglers` is the job-wide report of a multi-rank job (all ranks'
/// files given together, `run-*.gputrace`): a row per rank (host, pid, steps with their median and 90th
/// percentile, the device time of a step's own work, time in NCCL kernels and waiting there, GPU idle, how often it
/// enters collectives last) and, first, the rank the others wait for, named with its host; hosts are aligned on
/// their clock anchors, then on the job's NCCL collectives (each host's move and the residual are said), and
/// missing ranks and hosts whose windows do not overlap are named (in its notes, and as warnings on stderr). It holds only a summary of each rank, so it is
/// best asked for alone on large jobs. Kernel names are demangled as `trace` shows them (`--raw-names` keeps them as
/// recorded). Exit code: 0; 1 when a file cannot be read at all (not a trace, another format version, cut short
/// before its first record), fails a checksum (a changed byte: the message says at which byte), has a final chunk
/// that disagrees with what was read (whole chunks left out or repeated) or is given twice (under any path), or
/// when one rank is in two streams (a rank traced twice: its time would count twice); 3
/// when one was cut short, was not finished by its writer (the tracer killed) or is corrupt part-way (the reports
/// then cover what was read before); 2 for a usage error. A file of format 2 or 3 is read, with a line on stderr
/// saying what it cannot show (format 2: a changed byte or a cut; format 3: a cut at a chunk boundary).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// The trace files; `-` is standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// How the reports are written.
    #[arg(long, default_value = "text", value_parser = PossibleValuesParser::new(Format::NAMES))]
    format: String,
    /// Only these reports, comma-separated or repeated [default: every report; the counters per kernel where the
    /// trace holds counter samples].
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAME",
        value_parser = PossibleValuesParser::new(Analysis::REPORT_NAMES)
    )]
    report: Vec<String>,
    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long)]
    raw_names: bool,
}

pub fn run(args: Args) -> Outcome {
    let format: Format = args
        .format
        .parse()
        .map_err(|m: String| Failure::new(2, m))?;
    let inputs = open_all(&args.files)?;
    // What the reports asked for need, only: a job-wide report of 512 ranks holds a summary of each.
    let mut analysis = if args.report.is_empty() {
        Analysis::new()
    } else {
        Analysis::for_reports(&args.report)
    };
    let mut reading = Reading::default();
    for (i, (path, input)) in args.files.iter().zip(inputs).enumerate() {
        let file = u32::try_from(i).unwrap_or(u32::MAX);
        let errors = analysis.read(file, input);
        reading.take(
            "stats",
            path,
            analysis.file_version(file),
            analysis.records(file),
            &errors,
        );
    }
    reading.check()?;
    if let Some(job) = analysis.job() {
        job.check()
            .map_err(|twice| traced_twice(&args.files, &twice))?;
        warn_gaps("stats", job, &job.collective_alignment());
    } else {
        analysis
            .check_ranks()
            .map_err(|twice| traced_twice(&args.files, &twice))?;
    }
    // Every report that has something to say, or those asked for (in the usual order), whatever they hold.
    let mut tables: Vec<Table> = if args.report.is_empty() {
        analysis.reports()
    } else {
        Analysis::REPORT_NAMES
            .iter()
            .filter(|name| args.report.iter().any(|r| r == *name))
            .filter_map(|name| analysis.report(name))
            .collect()
    };
    if !args.raw_names {
        demangle_kernels(&mut tables);
    }
    let mut out = BufWriter::new(std::io::stdout().lock());
    write_tables(&tables, format, &mut out)
        .and_then(|()| out.flush())
        .map_err(Failure::stdout)?;
    Ok(reading.code())
}

/// The reports whose `Name` column holds kernel names.
const KERNEL_TABLES: [&str; 2] = ["cuda_gpu_kern_sum", "cuda_gpu_kern_counters_sum"];

/// Kernel names as `trace` shows them: demangled (`copy(float const*, float*, unsigned long)`).
fn demangle_kernels(tables: &mut [Table]) {
    for t in tables
        .iter_mut()
        .filter(|t| KERNEL_TABLES.contains(&t.name))
    {
        let Some(column) = t.columns.iter().position(|c| *c == "Name") else {
            continue;
        };
        for row in &mut t.rows {
            if let Some(Cell::Text(name)) = row.get_mut(column) {
                if let Some(readable) = demangle(name) {
                    *name = readable;
                }
            }
        }
    }
}
