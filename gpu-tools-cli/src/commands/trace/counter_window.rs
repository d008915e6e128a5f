//! One window of `trace --pid PID --counters` for another command: `profile --pid`, where CUPTI's range profiler
//! cannot give per-kernel values (beside CUDA graph launches in a running process), gets them from PM sampling
//! attribution instead. The window is the trace's own, run as `trace --pid PID --kinds kernel --cuda-graph-trace node
//! --counters METRICS --duration S` would run it: the samplers opened on every GPU the process uses before anything
//! is attached (`counters::open`), the attach and its window (`attach::run`), the trace file (here a temporary one)
//! with the counter stream beside the process's, an empty window said as `trace` says it. The file is then read
//! back into an [`Analysis`], whose [`counter_attribution`](Analysis::counter_attribution) the caller reports.
//! Nothing is printed here; the caller says what the window gave.

use std::io::{BufReader, BufWriter, Write};
use std::path::Path;

use clap::Parser;
use gpu_tools::trace::file::TraceFileWriter;
use gpu_tools::trace::report::Analysis;

use super::cli::Args;
use super::model::Demangler;
use super::receiver::Sinks;
use super::{attach, check_options, counters, report};
use crate::failure::Failure;

/// What is traced.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A running process (`profile --pid`).
    Pid(u32),
    /// A program launched as `trace --counters -- PROGRAM` launches it: the same window where no process can be
    /// attached (the tests, without a GPU).
    #[cfg_attr(not(test), allow(dead_code))]
    Program(&'a [String]),
}

/// What the window gave.
pub struct CounterWindow {
    /// The trace file read back: the process's kernels and the counter stream.
    pub analysis: Analysis,
    /// Kernel records received.
    pub kernels: usize,
    /// `counters: N samples on GPU 0 every 1 ms, 0 lost, 0 gaps`, a line per device sampled.
    pub counter_lines: Vec<String>,
    /// What `trace` would say after the window: its warnings, each device's sampling error, lost samples, and a
    /// window without a record of work from a process that ran (`trace --pid` exits 1 for it).
    pub warnings: Vec<String>,
}

/// The command line of `trace` that runs this window.
#[derive(Parser)]
#[command(name = "trace")]
struct Line {
    #[command(flatten)]
    args: Args,
}

/// The arguments of `trace` for the window: kernels only, each node of a CUDA graph as its kernel (the attribution
/// needs every kernel's time), names as recorded, nothing printed; `--no-flight-recorder` unless `flight_recorder`
/// (a process attached to).
fn trace_args(
    target: Target<'_>,
    lib: &Path,
    metrics: &[String],
    duration: Option<f64>,
    flight_recorder: bool,
) -> Result<Args, Failure> {
    let mut argv: Vec<String> = [
        "trace",
        "--backend",
        "cupti",
        "--quiet",
        "--no-progress",
        "--raw-names",
        "--kinds",
        "kernel",
        "--cuda-graph-trace",
        "node",
    ]
    .map(String::from)
    .to_vec();
    argv.push("--counters".into());
    argv.push(metrics.join(","));
    argv.push("--inject-lib".into());
    argv.push(lib.display().to_string());
    if let Some(d) = duration {
        argv.extend(["--duration".into(), d.to_string()]);
    }
    match target {
        Target::Pid(pid) => {
            // The caller (`profile --pid`) said what a first attach does, and sampled PCs first where it does.
            argv.extend(["--pid".into(), pid.to_string(), "--no-pc-primer".into()]);
            if !flight_recorder {
                argv.push("--no-flight-recorder".into());
            }
        }
        Target::Program(program) => {
            argv.push("--".into());
            argv.extend(program.iter().cloned());
        }
    }
    Line::try_parse_from(&argv)
        .map(|l| l.args)
        .map_err(|e| Failure::new(1, format!("the counters' trace window: {e}")))
}

/// Traces `target`'s kernels with `metrics` sampled by PM sampling on every GPU it uses, for `duration` seconds (or
/// until Ctrl-C), and reads the result back. `cupti`: the CUPTI to load into a process that maps none. Fails where
/// `trace --pid --counters` would fail before or during the window (the counters held by another tool, an unknown
/// metric, the attach refused), with its message; the samplers' refusal is worded for `profile`'s metrics
/// ([`counters::Asker::ProfileMetrics`]). `flight_recorder`: whether a process attached to is left one.
pub fn run(
    target: Target<'_>,
    lib: &Path,
    cupti: Option<&Path>,
    metrics: &[String],
    duration: Option<f64>,
    flight_recorder: bool,
) -> Result<CounterWindow, Failure> {
    let args = trace_args(target, lib, metrics, duration, flight_recorder)?;
    let Some(request) = check_options(&args)? else {
        return Err(Failure::new(1, "the counters' trace window: no metric"));
    };
    let pids: Vec<u32> = match target {
        Target::Pid(pid) => vec![pid],
        Target::Program(_) => Vec::new(),
    };
    let opened = counters::open(&request, &pids, counters::Asker::ProfileMetrics)?;
    let file = tempfile::Builder::new()
        .prefix("gpu-tools-profile-counters-")
        .suffix(".gputrace")
        .tempfile()
        .map_err(|e| {
            Failure::new(
                1,
                format!("the counters' trace window: a temporary file: {e}"),
            )
        })?;
    let written = |e: std::io::Error| {
        Failure::new(
            1,
            format!(
                "the counters' trace window: writing {}: {e}",
                file.path().display()
            ),
        )
    };
    let out = file.reopen().map_err(written)?;
    let mut sinks = Sinks {
        file: Some(
            TraceFileWriter::new(Box::new(BufWriter::new(out)) as Box<dyn Write>)
                .map_err(written)?,
        ),
        chrome: None,
    };
    let mut demangler = Demangler::new(true);
    let traced = match target {
        Target::Pid(pid) => attach::run(
            &args,
            &mut demangler,
            lib,
            &mut sinks,
            &[pid],
            cupti,
            Some(opened),
        )?,
        Target::Program(_) => super::receiver::run(
            &args,
            &mut demangler,
            super::receiver::Tool::Cuda,
            lib,
            &mut sinks,
            Some(opened),
        )?,
    };
    if let Some(w) = sinks.file.take() {
        w.finish().and_then(|mut w| w.flush()).map_err(written)?;
    }
    let mut analysis = Analysis::new();
    let input = std::fs::File::open(file.path()).map_err(written)?;
    let errors = analysis.read(0, BufReader::new(input));
    if let Some(e) = errors.first() {
        return Err(Failure::new(
            1,
            format!("the counters' trace window: its trace file reads back with an error: {e}"),
        ));
    }
    let trace = traced.trace;
    // Its dropped records said too: kernels missing from the window leave their counters unattributed.
    let (mut warnings, _) = super::warnings_and_losses(&trace);
    warnings.extend(traced.empty_windows);
    Ok(CounterWindow {
        analysis,
        kernels: trace.kernels.len(),
        counter_lines: trace.counters.iter().map(report::counter_line).collect(),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_window_of_a_process_leaves_a_recorder_as_its_caller_says() {
        let lib = Path::new("/lib/libgpu_tools_inject.so");
        let metrics = ["sm__cycles_active.avg".to_string()];
        let with = trace_args(Target::Pid(7), lib, &metrics, Some(1.0), true).unwrap();
        assert!(with.flight_recorder());
        let without = trace_args(Target::Pid(7), lib, &metrics, Some(1.0), false).unwrap();
        assert!(!without.flight_recorder());
        assert_eq!(without.pid, [7]);
    }
}
