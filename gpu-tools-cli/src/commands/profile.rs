//! `gpu-tools profile -- PROGRAM`: per-kernel metrics of a CUDA program, collected inside it by the injection
//! library (CUPTI's range profiler, one range per kernel, kernel replay; [`gpu_tools_injection::profile`]), printed as a row
//! per kernel name with the launch count and each metric's mean, minimum and maximum. With `--pc-sampling`, the
//! top stall reasons per function with their PC offsets. With `--pid`, of a running process (`profile_attach`);
//! where the range profiler ends at the program's first CUDA graph launch, the rest of the window from PM sampling
//! attribution (`pm`); each window judged (`window`).

use std::io::Write;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use gpu_tools::cupti::profiler::Method;
use gpu_tools::cupti::profiler::host::Catalog;
use gpu_tools::trace::NoticeLevel;
use gpu_tools_injection::env::GraphMode;
use gpu_tools_injection::profile::{
    self, KernelTable, ProfileProgress, ProfileRequest, StallTable,
};

use super::profile_attach::Collected;
use super::trace::GraphArg;
use crate::demangle::readable;
use crate::failure::{Failure, INCOMPLETE, Outcome};
use crate::inject_lib;
use crate::output::OutputFile;
use crate::progress::{self, Progress};
use gpu_tools::trace::analyze::words;

mod pm;
mod window;

use window::{MetricsWindow, PcWindow};

/// Per-kernel metrics of a CUDA program (CUPTI's range profiler, inside the program), as Nsight Compute reports
/// them.
///
/// `gpu-tools profile [--metrics a,b,c | --set basic] [--pc-sampling] [--csv|--json] -- PROGRAM ARGS...` runs
/// PROGRAM with the injection library this executable carries; each kernel is replayed until every metric is
/// collected, so the program runs slower (as under ncu). Metric names are checked against device 0's catalogue
/// before the program starts (unknown names get close ones; `gpu-tools metrics --method range` lists them).
/// Before the program runs, the CUDA driver, CUPTI and the injection library are checked: one that is missing is
/// named with its fix, and the program is not run.
/// Exit code: the program's own; 1 when nothing could be profiled, something it needs is missing or a request is
/// refused; 2 for a usage error; 127 when the program is not found, 126 when it cannot be run (as shells). With
/// --pid: 0 when the window gave stall records or per-kernel values; 1 when it gave none (PC sampling without a
/// stall record, kernel metrics without a kernel profiled), with what was enabled and what was seen; 3 when
/// --kernel-replay's kernel metrics ended at the program's first CUDA graph launch and PM sampling attribution of
/// the rest of the window gave no kernel (the range profiler's table is printed).
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Metrics, full names separated by commas (`dram__bytes_read.sum,...`).
    #[arg(long, conflicts_with = "set", value_name = "NAMES")]
    metrics: Option<String>,
    /// A named set of metrics: `basic` (time, DRAM read and write bytes, SM throughput) [default: basic].
    #[arg(long, value_name = "NAME")]
    set: Option<String>,
    /// Also sample PCs: top stall reasons per function, with PC offsets. With metrics, the program runs a second
    /// time for it (CUPTI gives no PC samples while the range profiler is on).
    #[arg(long)]
    pc_sampling: bool,
    /// Kernel launches between two decodes of the counter data.
    #[arg(long, default_value_t = profile::DEFAULT_MAX_RANGES, value_name = "N")]
    max_ranges: usize,
    /// Profile at most N launches of each kernel name (per context); later launches run unprofiled, without
    /// replay, so a loop that repeats its kernels costs little more than its first iterations [default: every
    /// launch; with --pid, the next 10 launches of each kernel].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    launches_per_kernel: Option<u32>,
    /// How CUDA graph launches are profiled, as ncu's `--graph-profiling`: `node`, each kernel of the graph as a
    /// launch of its kernel (named and counted with the kernel's other launches); `graph`, one result per graph
    /// launch, named after the graph (`graph 7 (12 kernels)`), its kernels' values combined: sums added, maxima and
    /// minima kept, averages, rates and percentages weighted by duration [default: node].
    #[arg(long, value_enum, value_name = "MODE")]
    graph_profiling: Option<GraphArg>,
    /// CSV instead of a table.
    #[arg(long, conflicts_with = "json")]
    csv: bool,
    /// JSON instead of a table.
    #[arg(long)]
    json: bool,
    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long, alias = "mangled")]
    raw_names: bool,
    /// Print the report and what went wrong only: no progress line, no summary of the run on stderr (what was
    /// done to an attached process beyond the profile, the PC sampling before its kernel metrics, is still said).
    #[arg(long, short)]
    quiet: bool,
    /// Write the report to FILE (whole, when the run succeeds) instead of standard output, where the program's
    /// own output goes too; `-` is standard output.
    #[arg(long, short, value_name = "FILE")]
    output: Option<PathBuf>,
    /// The injection library (libgpu_tools_inject.so). Default: $GPU_TOOLS_INJECT_LIB, then the one embedded in
    /// this executable.
    #[arg(long, value_name = "PATH")]
    inject_lib: Option<PathBuf>,
    /// Skip the check of metric names against device 0's catalogue.
    #[arg(long)]
    no_check: bool,
    /// A progress line on stderr while the program runs (kernel launches profiled so far), rewritten in place and
    /// cleared at the end.
    #[command(flatten)]
    progress: crate::progress::ProgressArgs,
    /// A running process: its PCs are sampled (--pc-sampling), or its kernels' metrics taken, for --duration seconds
    /// (at least 1 s) or until Ctrl-C. Kernel metrics come from PM sampling attribution: device-wide PM
    /// sampling in gpu-tools and a trace of the process's kernels, as `trace --pid --counters` takes them, in a table
    /// that says how each value was attributed and names the asked metrics PM sampling cannot give; nothing replays
    /// the program's launches. (CUPTI's range profiler, --kernel-replay, cannot run beside CUDA graph launches in a
    /// running process.) PC sampling and --kernel-replay stop the process twice, for milliseconds, at moments where
    /// none of its threads is inside the CUDA driver or CUPTI; one with a thread inside the driver at every stop (a
    /// long synchronisation, a hang) is refused within seconds, naming the thread. A window that gives nothing is an
    /// error (exit 1) saying what was enabled and what was seen (for PC sampling, CUPTI's sample counts); one whose
    /// samples were mostly in kernels CUPTI does not expose says that share. PC sampling of a running process has
    /// killed jobs inside CUPTI 13.0: four, each of SIGSEGV in CUPTI's reading out at a window's finish, on GPUs
    /// shared by 11 to 16 profiled jobs (driver 580); the cause inside CUPTI is not known.
    #[arg(long, value_name = "PID", conflicts_with = "program")]
    pid: Option<u32>,
    /// With --pid: how long to sample, in seconds [default: until Ctrl-C]. PC sampling runs at least 1 s (also when
    /// Ctrl-C comes sooner): a shorter window once left a job hung.
    #[arg(long, value_name = "S")]
    duration: Option<f64>,
    /// With --pid and metrics: CUPTI's range profiler in the process instead of PM sampling attribution (auto
    /// ranges, kernel replay: exact values per launch, for the next --launches-per-kernel launches of each kernel,
    /// reported as for a launched program). Only for a process that launches no CUDA graph: graph launches made
    /// while it is on lose their work, so it ends before the program's first one (or first stream capture), and
    /// ending it there has crashed a job inside CUPTI (`torch.cuda.graph` replays, CUPTI 13.0, driver 580). The rest
    /// of the window then goes to PM sampling attribution.
    #[arg(long, requires = "pid", conflicts_with = "pc_sampling")]
    kernel_replay: bool,
    /// With --pid: leave no flight recorder in the process. By default the attach leaves one, which stays after
    /// the window: CUPTI's callback at each kernel launch and synchronisation call of the process (no activity
    /// record, no driver call), keeping which launches have not finished. Once CUPTI has run in a process the CUDA
    /// driver refuses it the debugger, and `gpu-tools where` answers from the recorder instead; without one, `where`
    /// can no longer say where the job hangs. (A recorder an earlier attach left runs on.)
    #[arg(long)]
    no_flight_recorder: bool,
    /// With --pid, for kernel metrics: do not sample the process's PCs first. By default a process that has not run
    /// CUPTI for gpu-tools yet is PC-sampled for 1 s before its kernel metrics (nothing of it is kept): after a
    /// first CUPTI use that traced it (the metrics' attribution) or ran the range profiler (`--kernel-replay`),
    /// CUPTI 13.0 put every PC sample of the process outside its kernels, so a later `--pc-sampling` there would
    /// give nothing. The sampling carries PC sampling's risk (see --pid).
    #[arg(long)]
    no_pc_primer: bool,
    /// The program and its arguments.
    #[arg(
        last = true,
        required_unless_present = "pid",
        value_name = "PROGRAM ARGS"
    )]
    program: Vec<String>,
}

/// What profiling needs here, checked before the program runs: the CUDA driver (the program's CUDA is what the
/// injection library profiles), CUPTI (the range profiler and PC sampling are CUPTI's), and the injection library.
fn check_prerequisites(explicit_lib: Option<&std::path::Path>) -> Result<PathBuf, Failure> {
    gpu_tools::cuda::Driver::load().map_err(|e| {
        Failure::new(
            1,
            format!("the CUDA driver is not installed here, and profile needs it (the program was not run): {e}"),
        )
    })?;
    gpu_tools::cupti::CuptiLibrary::load().map_err(|e| {
        Failure::new(
            1,
            format!("CUPTI was not found, and profile needs it (the program was not run): {e}"),
        )
    })?;
    let (lib, origin) = inject_lib::find(explicit_lib)
        .map_err(|m| Failure::new(1, format!("{m} (the program was not run)")))?;
    log::debug!("injection library {} ({origin})", lib.display());
    Ok(lib)
}

/// The options that apply only with `--pid`, refused without it. Checked here, as `trace` does: clap skips
/// `requires` on an option whose requirement conflicts with the program given.
fn check_pid_options(args: &Args) -> Result<(), Failure> {
    if args.duration.is_some() && args.pid.is_none() {
        return Err(Failure::usage(
            super::clap_command("profile"),
            clap::error::ErrorKind::MissingRequiredArgument,
            "--duration applies only with --pid",
        ));
    }
    if args.kernel_replay && args.pid.is_none() {
        return Err(Failure::usage(
            super::clap_command("profile"),
            clap::error::ErrorKind::MissingRequiredArgument,
            "--kernel-replay applies only with --pid (a launched program's kernel metrics are always replayed)",
        ));
    }
    if args.no_pc_primer && args.pid.is_none() {
        return Err(Failure::usage(
            super::clap_command("profile"),
            clap::error::ErrorKind::MissingRequiredArgument,
            "--no-pc-primer applies only with --pid (a launched program is not PC-sampled first)",
        ));
    }
    if args.no_flight_recorder && args.pid.is_none() {
        return Err(Failure::usage(
            super::clap_command("profile"),
            clap::error::ErrorKind::MissingRequiredArgument,
            "--no-flight-recorder applies only with --pid (a launched program gets no recorder)",
        ));
    }
    Ok(())
}

/// `profile --pid PID`: the request for a running process, its options checked first.
fn run_attached(args: &Args, pid: u32, metrics: Vec<String>) -> Outcome {
    if !args.kernel_replay && (args.launches_per_kernel.is_some() || args.graph_profiling.is_some())
    {
        return Err(Failure::usage(
            super::clap_command("profile"),
            clap::error::ErrorKind::ArgumentConflict,
            if args.pc_sampling {
                "--launches-per-kernel and --graph-profiling apply to the range profiler, not to PC sampling"
            } else {
                "--launches-per-kernel and --graph-profiling apply to the range profiler: with --pid, add \
                 --kernel-replay (kernel metrics of a running process otherwise come from PM sampling attribution, \
                 which covers every launch and profiles no graph apart)"
            },
        ));
    }
    crate::pid::check(pid)?;
    if args.pc_sampling && !metrics.is_empty() {
        return Err(Failure::new(
            1,
            "a running process gets PC sampling or kernel metrics, one at a time (CUPTI gives no PC samples \
             while the range profiler is on)",
        ));
    }
    let request = ProfileRequest {
        metrics,
        pc_sampling: args.pc_sampling,
        max_ranges: args.max_ranges,
        launches_per_kernel: Some(
            args.launches_per_kernel
                .unwrap_or(ATTACHED_LAUNCHES_PER_KERNEL),
        ),
        graph_profiling: args.graph_profiling.map_or(GraphMode::Node, GraphArg::mode),
        primer: false,
    };
    attached(args, pid, &request)
}

pub fn run(args: Args) -> Outcome {
    check_pid_options(&args)?;
    let spec = match (&args.metrics, &args.set) {
        (Some(m), _) => m.clone(),
        (None, Some(s)) => {
            if profile::named_set(s).is_none() {
                return Err(Failure::new(1, format!("unknown set {s:?}; known: basic")));
            }
            s.clone()
        }
        (None, None) if args.pc_sampling => String::new(),
        (None, None) => "basic".to_string(),
    };
    let metrics = ProfileRequest::parse_metrics(&spec).map_err(|m| Failure::new(1, m))?;
    if let Some(pid) = args.pid {
        return run_attached(&args, pid, metrics);
    }
    // The program (127, 126), then what profiling needs: nothing runs when one is missing.
    super::trace::check_program(&args.program[0])?;
    let lib = check_prerequisites(args.inject_lib.as_deref())?;
    if !metrics.is_empty() && !args.no_check {
        match Catalog::for_device(0) {
            Ok(catalog) => {
                catalog
                    .resolve_all(&metrics, Method::RangeProfiler)
                    .map_err(Failure::error)?;
            }
            // No driver or no device here: the program's own attempt reports why.
            Err(e @ (gpu_tools::Error::Load(_) | gpu_tools::Error::Cuda(_))) => {
                eprintln!("gpu-tools profile: metric names not checked: {e}")
            }
            Err(e) => return Err(e.into()),
        }
    }
    // Checked before the program runs: nothing is written when the run fails.
    let output = args
        .output
        .as_deref()
        .map(|p| OutputFile::create(p, "the report"))
        .transpose()?;
    let request = ProfileRequest {
        metrics,
        pc_sampling: args.pc_sampling,
        max_ranges: args.max_ranges,
        launches_per_kernel: args.launches_per_kernel,
        graph_profiling: args.graph_profiling.map_or(GraphMode::Node, GraphArg::mode),
        primer: false,
    };
    let mut cmd = Command::new(&args.program[0]);
    cmd.args(&args.program[1..]);
    let mut line = Progress::new(args.progress.enabled(args.quiet));
    let run = profile::run_with_progress(cmd, &lib, &request, &mut |p| {
        let elapsed = line.elapsed();
        line.update(|| progress_text(p, elapsed));
    });
    line.clear();
    let run = run?;
    if run.runs > 1 && !args.quiet {
        eprintln!(
            "gpu-tools profile: PC sampling ran in a second run of the program (CUPTI gives no PC samples while \
             kernel metrics are collected)"
        );
    }
    let mut failed = false;
    for n in &run.notices {
        failed |= n.level == NoticeLevel::Error;
        eprintln!("gpu-tools profile: {}", n.text);
    }
    for l in &run.losses {
        eprintln!(
            "gpu-tools profile: context {}: {} {:?} lost",
            l.context, l.count, l.kind
        );
    }
    if run.dropped_records > 0 {
        eprintln!(
            "gpu-tools profile: CUPTI dropped {} kernel records (their durations; the metrics are whole)",
            run.dropped_records
        );
    }
    let count = |n: usize, one: &str, many: &str| words::count(n as u64, one, many);
    let idle = if run.idle_processes > 0 {
        format!(" ({} ran no kernel)", run.idle_processes)
    } else {
        String::new()
    };
    let (one, many, graphs) = match request.graph_profiling {
        GraphMode::Node => ("kernel launch", "kernel launches", ""),
        GraphMode::Graph => ("launch", "launches", " (a graph launch counts once)"),
    };
    if !args.quiet {
        eprintln!(
            "gpu-tools profile: {}{idle}, {}{graphs} profiled ({}), {}, {}",
            count(run.processes, "process", "processes"),
            count(run.metrics.len(), one, many),
            count(run.kernels.len(), "kernel record", "kernel records"),
            count(run.stalls.len(), "stall record", "stall records"),
            count(run.wire_errors, "unreadable frame", "unreadable frames"),
        );
    }
    emit(output, |out| report(&args, &run, out))?;
    let status = run.status.and_then(|s| s.code()).unwrap_or(1);
    if status != 0 {
        return Ok(u8::try_from(status).unwrap_or(1));
    }
    Ok(if failed && run.metrics.is_empty() {
        1
    } else {
        0
    })
}

/// A kernel name as the report shows it: demangled, unless `--raw-names`.
fn kernel_name(args: &Args, name: &str) -> String {
    if args.raw_names {
        name.to_string()
    } else {
        readable(name)
    }
}

/// Writes the report to `output` (whole, when it succeeds), or to standard output.
fn emit(
    output: Option<OutputFile>,
    write: impl Fn(&mut dyn Write) -> std::io::Result<()>,
) -> Result<(), Failure> {
    match output {
        Some(file) => file.write_with(|w| write(w))?,
        None => {
            let mut out = std::io::BufWriter::new(std::io::stdout().lock());
            write(&mut out)
                .and_then(|()| out.flush())
                .map_err(Failure::stdout)?;
        }
    }
    Ok(())
}

/// Launches of each kernel profiled in a running process unless `--launches-per-kernel` says otherwise: a live
/// job's kernels repeat, and each profiled launch is replayed once per pass.
const ATTACHED_LAUNCHES_PER_KERNEL: u32 = 10;

/// `profile --pid PID`: stall reasons per function, or per-kernel metrics, of a running process.
fn attached(args: &Args, pid: u32, request: &ProfileRequest) -> Outcome {
    if !crate::pid::uses_cuda(pid) {
        return Err(Failure::new(
            1,
            format!("process {pid} does not use CUDA (it has not initialised the CUDA driver)"),
        ));
    }
    let lib = check_prerequisites(args.inject_lib.as_deref())?;
    let output = args
        .output
        .as_deref()
        .map(|p| OutputFile::create(p, "the report"))
        .transpose()?;
    let cupti = gpu_tools::cupti::CuptiLibrary::get().and_then(|l| l.path());
    let flight_recorder = !args.no_flight_recorder;
    if request.pc_sampling {
        counters_free_for_pc_sampling(pid)?;
    }
    // Said before the first CUPTI attach to the process: from then on the driver refuses it the debugger; and
    // where that attach traces (kernel metrics by PM sampling attribution), that PC sampling after it gives nothing.
    let attributed = !request.pc_sampling && !args.kernel_replay;
    let first = !crate::cupti_or_debugger::before_first_cupti(&[pid]).is_empty();
    if !args.quiet && first {
        eprintln!(
            "gpu-tools profile: {}",
            crate::cupti_or_debugger::cupti_note(&[pid], flight_recorder)
        );
    }
    if !request.pc_sampling && first {
        // Kernel metrics (the attribution traces the process; `--kernel-replay` runs the range profiler) as a first
        // CUPTI use: PC sampling after either gave no stall record. Its PCs sampled first, so that it still works.
        let primed = if args.no_pc_primer {
            None
        } else {
            let outcomes = super::trace::pc_primer::prime(
                "profile",
                &[pid],
                &lib,
                cupti,
                flight_recorder,
                args.quiet,
            )?;
            outcomes.into_iter().next().map(|(_, p)| p)
        };
        // Said under --quiet too, as trace does: done to the process beyond what was asked for.
        if let Some(p) = &primed {
            eprintln!(
                "gpu-tools profile: {}",
                super::trace::pc_primer::said(pid, p)
            );
        }
        if !matches!(primed, Some(super::trace::pc_primer::Primed::Yes { .. })) && !args.quiet {
            eprintln!(
                "gpu-tools profile: {}",
                crate::cupti_or_debugger::pc_sampling_note(&[pid])
            );
        }
    }
    if attributed {
        return attributed_metrics(args, pid, request, (&lib, cupti), output);
    }
    let mut duration = args.duration;
    if request.pc_sampling {
        let min = super::profile_attach::MIN_PC_WINDOW.as_secs_f64();
        if duration.is_some_and(|d| d < min) {
            eprintln!(
                "gpu-tools profile: process {pid}: PC sampling runs at least {min} s: a 0.1 s window's finish got \
                 no answer and left the job hung (H200, CUPTI 13.0), and no window shorter than 1 s is known not to \
                 hang"
            );
            duration = Some(min);
        }
    }
    let window = super::profile_attach::Window {
        who: "profile",
        duration,
        flight_recorder,
        start_search: super::profile_attach::SEARCH_LIMIT,
    };
    let got = super::profile_attach::run(pid, &lib, cupti, request, &window)?;
    // For whoever is refused the counters next: the holder named.
    got.note_pc_left_on(pid);
    for (_, text) in &got.notices {
        eprintln!("gpu-tools profile: process {pid}: {text}");
    }
    for l in &got.losses {
        eprintln!(
            "gpu-tools profile: process {pid}: context {}: {} {:?} lost",
            l.context, l.count, l.kind
        );
    }
    if request.pc_sampling {
        return attached_stalls(args, pid, &got, output);
    }
    attached_metrics(args, pid, request, &got, (&lib, cupti), output)
}

/// Refuses PC sampling of process `pid` where another client holds the counters of a GPU it uses: PC sampling
/// started beside one (a range profiler left on in another job, one H200, 2026-12-02) got `CUPTI_ERROR_UNKNOWN`
/// from `cuptiPCSamplingGetData`, and the CUDA-graph jobs sampled so died at their next launches ("unspecified
/// launch failure", SIGSEGV in `cuGraphLaunch`). Where the check cannot be made (no CUPTI in gpu-tools' own
/// process), it is said and the profile goes on.
fn counters_free_for_pc_sampling(pid: u32) -> Result<(), Failure> {
    match super::trace::held_elsewhere(pid) {
        Ok(held) if held.is_empty() => Ok(()),
        Ok(held) => {
            let gpus = super::trace::held_devices(&held);
            Err(Failure::new(
                1,
                format!(
                    "process {pid}: not sampled: the performance counters of {} are held by another tool ({}); PC \
                     sampling beside it fails in CUPTI and has crashed CUDA-graph jobs. The process was left as it \
                     was; stop that tool first{}",
                    gpus,
                    gpu_tools::cupti::profiler::LIKELY_HOLDERS,
                    crate::pc_left_on::said(Some(pid))
                ),
            ))
        }
        Err(why) => {
            eprintln!(
                "gpu-tools profile: process {pid}: whether another tool holds its GPU's counters could not be told \
                 ({why}); PC sampling beside such a tool fails"
            );
            Ok(())
        }
    }
}

/// The stall report of a PC-sampling window; a window without a stall record is an error saying what was enabled
/// and what CUPTI counted.
fn attached_stalls(args: &Args, pid: u32, got: &Collected, output: Option<OutputFile>) -> Outcome {
    if !args.quiet {
        eprintln!(
            "gpu-tools profile: process {pid}: {} stall records from {:.1} s of sampling; to start and to finish, \
             the process was stopped where no thread was inside the CUDA driver or CUPTI (after {} and {} stops, \
             with {} and {} runs of a thread alone to leave them) and runs on",
            got.stalls.len(),
            got.sampled.as_secs_f64(),
            got.tries[0].0,
            got.tries[1].0,
            got.tries[0].1,
            got.tries[1].1
        );
    }
    let window = PcWindow {
        pid,
        contexts: got.contexts,
        sampled: got.sampled,
        records: got.stalls.len(),
        messages: &got.messages,
        errors: got
            .notices
            .iter()
            .filter(|(level, _)| *level == NoticeLevel::Error)
            .map(|(_, text)| text.as_str())
            .collect(),
        jax: gpu_tools::linux::procfs::Process::new(pid)
            .mapped_library("xla_cuda_plugin")
            .is_some(),
    };
    if let Some(message) = window.empty_error() {
        return Err(Failure::new(1, message));
    }
    if let Some(note) = window.non_user_note() {
        eprintln!("gpu-tools profile: {note}");
    }
    let name = |n: &str| kernel_name(args, n);
    emit(output, |mut out| {
        writeln!(out, "PC sampling: top stall reasons per function")?;
        StallTable::from_records(&got.stalls).write_text(&mut out, name, 3)
    })?;
    Ok(0)
}

/// The per-kernel tables of a kernel-metrics window: the range profiler's, and, where it ended at the program's
/// first CUDA graph launch (or stream capture), PM sampling attribution's for the rest of the window. A window in
/// which no kernel was profiled is an error saying what was enabled and seen; one whose rest could not be
/// attributed is incomplete (exit 3).
fn attached_metrics(
    args: &Args,
    pid: u32,
    request: &ProfileRequest,
    got: &Collected,
    (lib, cupti): (&std::path::Path, Option<&std::path::Path>),
    output: Option<OutputFile>,
) -> Outcome {
    let attributed = got
        .ended_early
        .and_then(|after| attribute_rest(args, pid, request, (lib, cupti), after));
    let window = MetricsWindow {
        pid,
        contexts: got.contexts,
        window: got.sampled + attributed.as_ref().map_or(Duration::ZERO, |a| a.window),
        metrics: &request.metrics,
        launches_per_kernel: request.launches_per_kernel,
        named: got.metrics.len(),
        messages: &got.messages,
        attributed: attributed.as_ref().map(|a| (a.kernels(), a.seen.clone())),
    };
    if let Some(message) = window.empty_error() {
        return Err(Failure::new(1, message));
    }
    if !args.quiet && !got.metrics.is_empty() {
        let before = window
            .ended()
            .map(|e| format!(" before {}", e.before.what()))
            .unwrap_or_default();
        eprintln!(
            "gpu-tools profile: process {pid}: {} kernel launches profiled in {:.1} s{before} (at most {} per \
             kernel); to start and to finish, the process was stopped where no thread was inside the CUDA driver \
             or CUPTI (after {} and {} stops) and runs on",
            got.metrics.len(),
            got.sampled.as_secs_f64(),
            request.launches_per_kernel.unwrap_or(0),
            got.tries[0].0,
            got.tries[1].0,
        );
    }
    let table = KernelTable::from_records(&got.metrics);
    let pm_table = attributed.as_ref().and_then(|a| a.table.as_ref());
    // Machine-readable outputs hold the range profiler's table alone; the attribution then goes to stderr as text.
    let text = !(args.json || args.csv);
    if let (false, Some(t)) = (text, pm_table) {
        let mut err = std::io::stderr().lock();
        t.write_text(&mut err, |n| kernel_name(args, n))
            .map_err(|e| Failure::new(1, format!("cannot write to stderr: {e}")))?;
    }
    emit(output, |out| {
        if !got.metrics.is_empty() {
            write_kernels(args, &table, out)?;
        }
        if let (true, Some(t)) = (text, pm_table) {
            if !got.metrics.is_empty() {
                writeln!(out)?;
            }
            t.write_text(out, |n| kernel_name(args, n))?;
        }
        Ok(())
    })?;
    Ok(match &attributed {
        Some(a) if a.table.as_ref().is_none_or(|t| t.rows.is_empty()) => INCOMPLETE,
        _ => 0,
    })
}

/// The rest of a kernel-metrics window whose range profiler ended early, attributed by PM sampling; `None` where
/// there is no rest to attribute (Ctrl-C, or the process ended), said.
fn attribute_rest(
    args: &Args,
    pid: u32,
    request: &ProfileRequest,
    (lib, cupti): (&std::path::Path, Option<&std::path::Path>),
    after: Duration,
) -> Option<Attributed> {
    let said = |m: String| eprintln!("gpu-tools profile: process {pid}: {m}");
    if crate::interrupt::stop_flag().load(std::sync::atomic::Ordering::SeqCst) {
        said(
            "stopped (Ctrl-C) before the rest of the window could be attributed by PM sampling"
                .into(),
        );
        return None;
    }
    if !gpu_tools::linux::procfs::Process::new(pid).exists() {
        said("ended before the rest of the window could be attributed by PM sampling".into());
        return None;
    }
    // The rest of --duration, at least a second; without one, until Ctrl-C.
    let rest = args
        .duration
        .map(|d| (d - after.as_secs_f64()).max(MIN_ATTRIBUTED_S));
    let plan = pm::Plan::new(&request.metrics, pm::fits_on_device_0());
    if !args.quiet {
        said(format!(
            "the range profiler ended after {:.1} s; the rest of the window ({}) goes to PM sampling attribution: \
             device-wide PM sampling in gpu-tools ({}) and a trace of the process's kernels",
            after.as_secs_f64(),
            rest.map_or_else(|| "until Ctrl-C".to_string(), |s| format!("{s:.1} s")),
            plan.sampled().join(", ")
        ));
    }
    Some(attribute(args, pid, &plan, (lib, cupti), rest))
}

/// Per-kernel values of process `pid` from PM sampling attribution for `rest` seconds (`None`: until Ctrl-C): what
/// `plan` samples, attributed to the kernels of a trace of the process taken meanwhile.
fn attribute(
    args: &Args,
    pid: u32,
    plan: &pm::Plan,
    (lib, cupti): (&std::path::Path, Option<&std::path::Path>),
    rest: Option<f64>,
) -> Attributed {
    let said = |m: String| eprintln!("gpu-tools profile: process {pid}: {m}");
    let mut sampled = plan.sampled();
    if sampled.is_empty() {
        // Durations alone: the samples are still taken, for the window's account of them.
        sampled.push(gpu_tools::trace::counters::SM_ACTIVE.to_string());
    }
    let began = std::time::Instant::now();
    let got = super::trace::counter_window::run(
        super::trace::counter_window::Target::Pid(pid),
        lib,
        cupti,
        &sampled,
        rest,
        !args.no_flight_recorder,
    );
    let window = began.elapsed();
    match got {
        Ok(w) => {
            for warning in &w.warnings {
                said(warning.clone());
            }
            let attribution = w.analysis.counter_attribution();
            let table = pm::AttributedTable::new(plan, &attribution);
            let seen = format!(
                "PM sampling attribution for {:.1} s: {} kernel records of {} kernel names; {}",
                window.as_secs_f64(),
                w.kernels,
                table.rows.len(),
                w.counter_lines.join("; ")
            );
            if !args.quiet || table.rows.is_empty() {
                said(seen.clone());
            }
            Attributed {
                table: Some(table),
                seen,
                window,
            }
        }
        Err(f) => {
            let seen = format!("PM sampling attribution failed: {}", f.text());
            said(seen.clone());
            Attributed {
                table: None,
                seen,
                window,
            }
        }
    }
}

/// `profile --pid PID` with metrics: per-kernel values from PM sampling attribution for the window (at least
/// 1 s), nothing started in the process but the trace that names its kernels. A window that attributed no kernel
/// is an error saying what was enabled and seen.
fn attributed_metrics(
    args: &Args,
    pid: u32,
    request: &ProfileRequest,
    libs: (&std::path::Path, Option<&std::path::Path>),
    output: Option<OutputFile>,
) -> Outcome {
    let plan = pm::Plan::new(&request.metrics, pm::fits_on_device_0());
    let rest = args.duration.map(|d| d.max(MIN_ATTRIBUTED_S));
    if !args.quiet {
        eprintln!(
            "gpu-tools profile: process {pid}: kernel metrics from PM sampling attribution ({}), {}: device-wide PM \
             sampling in gpu-tools ({}) and a trace of the process's kernels; nothing replays its launches \
             (--kernel-replay runs CUPTI's range profiler instead, for a process that launches no CUDA graph)",
            request.metrics.join(", "),
            rest.map_or_else(|| "until Ctrl-C".to_string(), |s| format!("{s:.1} s")),
            plan.sampled().join(", ")
        );
    }
    let got = attribute(args, pid, &plan, libs, rest);
    let table = match got.table {
        Some(t) if !t.rows.is_empty() => t,
        _ => {
            return Err(Failure::new(
                1,
                format!(
                    "process {pid}: no kernel was profiled in the {:.1} s window. Enabled: PM sampling attribution \
                     ({}). Seen: {}",
                    got.window.as_secs_f64(),
                    request.metrics.join(", "),
                    got.seen
                ),
            ));
        }
    };
    emit(output, |out| {
        let name = |n: &str| kernel_name(args, n);
        if args.json {
            table.write_json(out, name)
        } else if args.csv {
            table.write_csv(out, name)
        } else {
            table.write_text(out, name)
        }
    })?;
    Ok(0)
}

/// The shortest rest of a window given to PM sampling attribution, in seconds.
const MIN_ATTRIBUTED_S: f64 = 1.0;

/// What PM sampling attribution gave for the rest of a window.
struct Attributed {
    /// `None` where it failed.
    table: Option<pm::AttributedTable>,
    /// What it saw, in a sentence (or why it failed).
    seen: String,
    window: Duration,
}

impl Attributed {
    fn kernels(&self) -> usize {
        self.table.as_ref().map_or(0, |t| t.rows.len())
    }
}

/// `gpu-tools profile: 4,096 kernel launches profiled (4,102 kernels run) in 2 processes, 35 s`.
fn progress_text(p: &ProfileProgress, elapsed: std::time::Duration) -> String {
    let run = if p.run > 1 {
        " (second run: PC sampling)"
    } else {
        ""
    };
    format!(
        "gpu-tools profile{run}: {} kernel launches profiled ({} kernels run) in {} {}, {:.0} s",
        progress::thousands(p.launches_profiled),
        progress::thousands(p.kernels),
        p.processes,
        if p.processes == 1 {
            "process"
        } else {
            "processes"
        },
        elapsed.as_secs_f64()
    )
}

fn report(args: &Args, run: &profile::ProfileRun, mut out: &mut dyn Write) -> std::io::Result<()> {
    write_kernels(args, &KernelTable::from_records(&run.metrics), out)?;
    if args.pc_sampling && !args.json && !args.csv {
        writeln!(out, "\nPC sampling: top stall reasons per function")?;
        StallTable::from_records(&run.stalls).write_text(&mut out, |n| kernel_name(args, n), 3)?;
    }
    Ok(())
}

/// The per-kernel table as text, CSV or JSON.
fn write_kernels(args: &Args, table: &KernelTable, mut out: &mut dyn Write) -> std::io::Result<()> {
    let name = |n: &str| kernel_name(args, n);
    if args.json {
        table.write_json(&mut out, name)
    } else if args.csv {
        table.write_csv(&mut out, name)
    } else {
        table.write_text(&mut out, name)
    }
}
