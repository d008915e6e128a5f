//! `gpu-tools export FILE... (--perfetto OUT | --chrome OUT[.gz])`: saved traces as a timeline that Perfetto and
//! chrome://tracing open, streamed through [`gpu_tools::trace::export`] (no event is held in memory).

use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};

use gpu_tools::trace::analyze::Diagnosis;
use gpu_tools::trace::export::{
    ChromeWriter, CounterTrack, CounterValue, PerfettoWriter, Slice, Timeline, TimelineSink, Track,
};
use gpu_tools::trace::report::{HostAlignment, Job};

use crate::demangle::demangle;
use crate::failure::{Failure, Outcome};
use crate::job_files::{traced_twice, warn_gaps};
use crate::output::OutputFile;
use crate::trace_input::{Reading, check_output, open_all};

/// Convert saved traces into a timeline: Perfetto's protobuf trace, or Chrome's JSON trace (either
/// gzip-compressed when OUT ends with `.gz`).
///
/// One track per device and stream, one per host thread (runtime, driver, NVTX rows), flow arrows from API calls to the
/// work they issued; for a trace recorded with `trace --counters`, a group per device with a counter track per metric
/// (a track reads 0 where no sample says anything; a `counter gaps` slice marks lost samples); open it at
/// https://ui.perfetto.dev. Several files are merged on one timeline: the hosts on their clock anchors, then on the
/// job's NCCL collectives (a first reading of the files finds each host's move, said on stderr); a rank's groups are
/// named with its host and rank (`h7 rank 13 (local 5): process 4242 python train.py`, `GPU 5 (h7 rank 13, pid
/// 4242)`) and sort by host, then rank (in Perfetto too: the export asks it for that order); ranks without a trace
/// and hosts whose windows do not overlap are warned about. Kernel names are demangled as `trace` shows them (`--raw-names` keeps them as recorded).
/// `--findings` also draws what `gpu-tools analyze` finds: in each GPU's group, first, a track per finding
/// (`finding 1: launch_bound`) with a slice over each time range it concerns, named by the finding's title, its
/// estimate, basis and advice as arguments.
/// Several files are merged on one timeline; FILE `-` is standard input. OUT is written whole, and only when the export
/// succeeds: an existing OUT is left as it was otherwise (a symbolic link is followed and stays a link); `-` (standard
/// output), a FIFO or a device is written as the export goes. Exit code: 0; 1 when a file cannot be read at all (not a
/// trace, another format version, cut short before its first record), fails a checksum (a changed byte: the message
/// says at which byte), has a final chunk that disagrees with what was read or is given twice, a rank is traced
/// twice (in two files or streams), or OUT cannot be written or is one of the inputs; 3 when an input was cut short, was not finished by its writer (the tracer killed)
/// or is corrupt part-way (OUT then holds what was read before); 2 for a usage error. A file of format 2 or 3 is
/// read, with a line on stderr saying what it cannot show.
#[derive(Debug, clap::Args)]
#[command(group = clap::ArgGroup::new("out").required(true))]
pub struct Args {
    /// The trace files; `-` is standard input.
    #[arg(required = true, value_name = "FILE")]
    files: Vec<PathBuf>,
    /// Write a Perfetto trace (protobuf) to OUT; gzip-compressed when OUT ends with `.gz`; `-` is standard
    /// output.
    #[arg(long, value_name = "OUT", group = "out")]
    perfetto: Option<PathBuf>,
    /// Write a Chrome trace (JSON) to OUT; gzip-compressed when OUT ends with `.gz`; `-` is standard output.
    #[arg(long, value_name = "OUT", group = "out")]
    chrome: Option<PathBuf>,
    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long)]
    raw_names: bool,
    /// Also draw what `gpu-tools analyze` finds: each finding a track in the group of each GPU it concerns,
    /// with a slice over each time range it concerns (its estimate, basis and advice as arguments). Reads the
    /// files twice: not with standard input.
    #[arg(long)]
    findings: bool,
}

pub fn run(args: Args) -> Outcome {
    let (path, what) = match (&args.perfetto, &args.chrome) {
        (Some(p), _) => (p, "the Perfetto trace"),
        (None, Some(c)) => (c, "the Chrome trace"),
        (None, None) => unreachable!("clap requires one of --perfetto and --chrome"),
    };
    // Checked before any work; nothing appears at OUT unless the export succeeds.
    check_output(path, what, &args.files)?;
    let findings = match args.findings {
        true => Some(diagnose(&args.files)?),
        false => None,
    };
    let job = first_reading(&args.files)?;
    let output = OutputFile::create(path, what)?;
    let inputs = open_all(&args.files)?;
    let mut reading = Reading::default();
    let written = {
        let w = output.writer();
        let raw = args.raw_names;
        // gzip for either format when OUT ends with `.gz`.
        if is_gzip(path) {
            let gz = flate2::write::GzEncoder::new(w, flate2::Compression::default());
            if args.perfetto.is_some() {
                let sink = KernelNames::new(PerfettoWriter::new(gz), raw);
                export(
                    sink,
                    &args.files,
                    &job,
                    inputs,
                    &mut reading,
                    findings.as_ref(),
                )
                .and_then(|sink| sink.inner.into_inner()?.finish()?.flush())
            } else {
                let sink = KernelNames::new(ChromeWriter::new(gz), raw);
                export(
                    sink,
                    &args.files,
                    &job,
                    inputs,
                    &mut reading,
                    findings.as_ref(),
                )
                .and_then(|sink| sink.inner.into_inner()?.finish()?.flush())
            }
        } else if args.perfetto.is_some() {
            let sink = KernelNames::new(PerfettoWriter::new(w), raw);
            export(
                sink,
                &args.files,
                &job,
                inputs,
                &mut reading,
                findings.as_ref(),
            )
            .and_then(|sink| sink.inner.into_inner()?.flush())
        } else {
            let sink = KernelNames::new(ChromeWriter::new(w), raw);
            export(
                sink,
                &args.files,
                &job,
                inputs,
                &mut reading,
                findings.as_ref(),
            )
            .and_then(|sink| sink.inner.into_inner()?.flush())
        }
    };
    reading.check()?;
    written.map_err(|e| output.error(e))?;
    output.commit()?;
    Ok(reading.code())
}

/// A sink whose kernel slices carry their demangled names, as `trace --chrome-trace` writes them (unless `raw`);
/// each name is demangled once.
struct KernelNames<S> {
    inner: S,
    raw: bool,
    names: HashMap<String, Option<String>>,
}

impl<S: TimelineSink> KernelNames<S> {
    fn new(inner: S, raw: bool) -> Self {
        KernelNames {
            inner,
            raw,
            names: HashMap::new(),
        }
    }
}

impl<S: TimelineSink> TimelineSink for KernelNames<S> {
    fn track(&mut self, track: &Track) -> io::Result<()> {
        self.inner.track(track)
    }

    fn slice(&mut self, slice: &Slice<'_>) -> io::Result<()> {
        if self.raw || slice.category != "kernel" {
            return self.inner.slice(slice);
        }
        if !self.names.contains_key(slice.name) {
            self.names
                .insert(slice.name.to_string(), demangle(slice.name));
        }
        match self.names.get(slice.name) {
            Some(Some(readable)) => self.inner.slice(&Slice {
                name: readable,
                ..slice.clone()
            }),
            _ => self.inner.slice(slice),
        }
    }

    fn counter_track(&mut self, track: &CounterTrack) -> io::Result<()> {
        self.inner.counter_track(track)
    }

    fn counter(&mut self, value: &CounterValue) -> io::Result<()> {
        self.inner.counter(value)
    }

    fn finish(&mut self) -> io::Result<()> {
        self.inner.finish()
    }
}

/// Whether OUT names a gzip file.
fn is_gzip(path: &Path) -> bool {
    path.extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
}

/// What a first reading of the files of a job gives the export: each host's move on the job's collectives, and the
/// ranks by host (the order of their groups).
#[derive(Debug, Default)]
struct FirstReading {
    moves: Vec<HostAlignment>,
    ranks: Vec<(String, u32)>,
}

/// A first reading, where there are several files and none is standard input (which cannot be read twice: then
/// the clock anchors alone, said): each host's move on the collectives and what the merge lacks (missing ranks,
/// windows that do not overlap) said on stderr; a rank traced twice refused (exit 1), before OUT is touched.
fn first_reading(paths: &[PathBuf]) -> Result<FirstReading, Failure> {
    if paths.len() < 2 {
        return Ok(FirstReading::default());
    }
    if paths.iter().any(|p| p.as_os_str() == "-") {
        eprintln!(
            "gpu-tools export: standard input is read once: hosts aligned on their clock anchors only, not on \
             their collectives"
        );
        return Ok(FirstReading::default());
    }
    // Reading errors are said by the export's own reading.
    let Ok(inputs) = open_all(paths) else {
        return Ok(FirstReading::default());
    };
    let mut job = Job::new();
    for (i, input) in inputs.into_iter().enumerate() {
        job.read(u32::try_from(i).unwrap_or(u32::MAX), input);
    }
    job.check().map_err(|twice| traced_twice(paths, &twice))?;
    let alignment = job.collective_alignment();
    if alignment.hosts.len() > 1 {
        for note in &alignment.notes {
            eprintln!("gpu-tools export: {note}");
        }
    }
    warn_gaps("export", &job, &alignment);
    Ok(FirstReading {
        ranks: job.process_ranks(),
        moves: alignment.hosts,
    })
}

/// The findings of `gpu-tools analyze` for `--findings`, from a reading of their own (standard input, which cannot
/// be read twice, is refused as a usage error).
fn diagnose(paths: &[PathBuf]) -> Result<Diagnosis, Failure> {
    if paths.iter().any(|p| p.as_os_str() == "-") {
        return Err(Failure::usage(
            crate::commands::clap_command("export"),
            clap::error::ErrorKind::ArgumentConflict,
            "--findings reads the files twice: standard input (`-`) cannot be given with it",
        ));
    }
    // Reading errors are said by the export's own reading.
    let (trace, _) = super::analyze::read_quietly(paths)?;
    Ok(trace.diagnose())
}

fn export<S: TimelineSink>(
    sink: S,
    paths: &[PathBuf],
    first: &FirstReading,
    inputs: Vec<impl BufRead>,
    reading: &mut Reading,
    findings: Option<&Diagnosis>,
) -> std::io::Result<S> {
    let mut timeline = Timeline::new(sink);
    for host in &first.moves {
        timeline.correct(&host.host, &host.boot_id, host.correction);
    }
    timeline.order_ranks(first.ranks.iter().cloned());
    for (i, (path, input)) in paths.iter().zip(inputs).enumerate() {
        let file = u32::try_from(i).unwrap_or(u32::MAX);
        let errors = timeline.read(file, input)?;
        reading.take(
            "export",
            path,
            timeline.file_version(file),
            timeline.records(file),
            &errors,
        );
    }
    if let Some(d) = findings {
        timeline.annotate(d)?;
    }
    let misnested = timeline.misnested();
    if misnested > 0 {
        let slices = if misnested == 1 { "slice" } else { "slices" };
        eprintln!(
            "gpu-tools export: {misnested} {slices} went to an overfull track's last lane and may nest wrongly there"
        );
    }
    timeline.finish()
}
