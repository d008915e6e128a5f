//! `gpu-tools trace [OPTIONS] -- PROGRAM ARGS...`: traces a CUDA program's kernels, memory copies and sets, and
//! the API calls they came from, then prints a summary per kernel (count, total, mean, min, max time).
//!
//! Two backends take the same command line and print the same summary:
//! - `--backend cupti` (the default where libcupti is found): the program runs with the injection library
//!   (`libgpu_tools_inject.so`, loaded by CUDA through `CUDA_INJECTION64_PATH`; see `crate::inject_lib`), which
//!   streams CUPTI activity records back over a Unix socket. Kernels with start, end, device, context, stream and
//!   the API call each came from; copies and sets with bytes, direction and duration.
//! - `--backend debugger`: the CUDA debugger API, as cuda-gdb uses it. Launches only (kernel names from the
//!   modules' ELF symbols); times only with `--blocking-launches`; every launch costs tens of microseconds.
//!
//! A third, `--backend rocm`, runs a HIP program with the rocprofiler-sdk tool library. The cupti and rocm backends
//! share `receiver` (launching the program with its tool library, accepting each process's stream, teeing it
//! into the trace file, decoding it); `attach` is the cupti backend on a running process; `backend_debugger` is
//! the debugger backend.
//!
//! `--counters` (cupti) also samples device counters (NVIDIA PM sampling) on every GPU the traced processes can
//! use, for the whole trace, into the trace file as a counter stream beside the processes' streams (`counters`).
//!
//! Kernel names are demangled (`void at::native::...`). `--chrome-trace FILE` writes a trace that Perfetto opens,
//! one track per device and stream. Bad input (a program that does not exist, one that never uses CUDA, a trace
//! file that cannot be written, no CUDA driver) is a message and a non-zero exit before the program runs where it
//! can be known then; a program that crashes still has what was received before the crash written out, and each
//! process whose trace ended at a fatal signal is said with it (`receiver`; a crash makes the trace incomplete:
//! exit 3 where the program's own status is 0, as for a process that crashed before it could end its stream).

mod attach;
mod backend_debugger;
mod cli;
pub mod counter_window;
mod counters;
pub(crate) use attach::describe as describe_inject_error;
pub(crate) use counters::{devices_of, held_devices, held_elsewhere};
mod interval;
mod message;
mod model;
pub(crate) mod pc_primer;
mod receiver;
mod report;
mod settings;

use std::io::{BufWriter, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::Arc;

use clap::error::ErrorKind;
use gpu_tools::trace::export::{ChromeWriter, Timeline};
use gpu_tools::trace::file::{TraceFileWriter, expand_output_name_with_rank};
use gpu_tools::trace::{KernelRecord, ProcessStart, Record};

use cli::Backend;
pub use cli::{Args, GraphArg};
use model::{Demangler, ProcessKey, Trace};

use super::clap_command;
use crate::failure::{Failure, INCOMPLETE, Outcome};
use crate::inject_lib;
use crate::output::OutputFile;
use receiver::{Sinks, Tool};

/// What a backend produced.
pub struct Traced {
    pub trace: Trace,
    /// The program's exit status, where known.
    pub status: Option<ExitStatus>,
    /// Attached processes whose window got no record although they ran: said last, and the exit code is 1.
    pub empty_windows: Vec<String>,
}

/// A program that could not be started: 127 when it does not exist, 126 when it cannot be run (as shells).
fn spawn_failure(program: &str, e: &std::io::Error) -> Failure {
    let code = match e.kind() {
        std::io::ErrorKind::NotFound => 127,
        _ => 126,
    };
    Failure::new(code, format!("cannot start {program}: {e}"))
}

/// This host's name, for `%h` in `-o`.
fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}

/// The rank for `%r` in `-o`: of the traced processes where attaching (their environment; several as `0-3` when
/// they follow one another, else `0,2,5`), else of this process (a launched program inherits it); where those
/// have none, this process's (`srun ... gpu-tools trace --job`: the step's task number). `None` where none is
/// known.
fn ranks_for_name(targets: &[u32], attaching: bool) -> Option<String> {
    let mut ranks: Vec<u32> = if attaching {
        targets
            .iter()
            .filter_map(|&pid| {
                let env = gpu_tools::linux::procfs::Process::new(pid)
                    .environment()
                    .ok();
                crate::job::rank_in(env.as_deref())
            })
            .collect()
    } else {
        Vec::new()
    };
    if ranks.is_empty() {
        ranks.extend(gpu_tools::trace::ProcessInfo::current().rank());
    }
    ranks.sort_unstable();
    ranks.dedup();
    rank_text(&ranks)
}

/// Ranks as a file name part: `3`, `0-3` for a run, `0,2,5` otherwise; `None` for none.
fn rank_text(ranks: &[u32]) -> Option<String> {
    let (&first, &last) = (ranks.first()?, ranks.last()?);
    if ranks.len() == 1 {
        return Some(first.to_string());
    }
    if ranks.windows(2).all(|w| w[1] == w[0] + 1) {
        return Some(format!("{first}-{last}"));
    }
    Some(
        ranks
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(","),
    )
}

/// The debugger backend's processes and timed launches as records of a timeline (it has no record stream).
fn timeline_of<S: gpu_tools::trace::export::TimelineSink>(
    trace: &Trace,
    timeline: &mut Timeline<S>,
) -> std::io::Result<()> {
    // Each process on the stream of its key, not found by its pid (which another may share).
    let stream_of = |process: ProcessKey| u32::try_from(process).unwrap_or(u32::MAX);
    for p in &trace.processes {
        let start = ProcessStart {
            pid: p.pid,
            parent_pid: 0,
            time: 0,
            command: p.command.clone(),
        };
        timeline.add((0, stream_of(p.key)), &Record::ProcessStart(start))?;
    }
    for k in &trace.kernels {
        let (Some(start), Some(end)) = (k.start, k.end) else {
            continue;
        };
        let record = KernelRecord {
            start,
            end,
            device: k.device,
            context: u32::try_from(k.context).unwrap_or(u32::MAX),
            stream: k.stream.map_or(0, |s| u32::try_from(s).unwrap_or(u32::MAX)),
            correlation: k.correlation.unwrap_or(0),
            grid_id: 0,
            grid: k.grid,
            block: k.block,
            static_shared: k.shared_memory.unwrap_or(0),
            dynamic_shared: 0,
            registers: k.registers.unwrap_or(0),
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::clone(&k.name),
        };
        timeline.add((0, stream_of(k.process)), &Record::Kernel(record))?;
    }
    Ok(())
}

/// A usage error of `trace`.
fn usage(kind: ErrorKind, message: impl std::fmt::Display) -> Failure {
    Failure::usage(clap_command("trace"), kind, message)
}

/// Whether the executable `path` links the HIP runtime (`libamdhip64` among its ELF `DT_NEEDED` entries).
fn links_hip(path: &Path) -> bool {
    use object::read::elf::{Dyn, ElfFile64, FileHeader, SectionHeader};
    let Ok(data) = std::fs::read(path) else {
        return false;
    };
    let Ok(elf) = ElfFile64::<object::Endianness>::parse(&*data) else {
        return false;
    };
    let endian = elf.endian();
    let Ok(sections) = elf.elf_header().sections(endian, &*data) else {
        return false;
    };
    for section in sections.iter() {
        let Ok(Some((entries, link))) = section.dynamic(endian, &*data) else {
            continue;
        };
        let Ok(strings) = sections.strings(endian, &*data, link) else {
            continue;
        };
        for entry in entries {
            if entry.tag(endian) == object::elf::DT_NEEDED {
                if let Ok(name) = entry.string(endian, strings) {
                    if name.starts_with(b"libamdhip64") {
                        return true;
                    }
                }
            }
        }
    }
    false
}

/// The backend asked for, or the default: rocm for a program that links the HIP runtime, else cupti where
/// libcupti loads, else the debugger. Where none was asked for and CUPTI is missing, that is said before anything
/// else: options that need the cupti backend are refused (exit 1) with what is missing and its fix, rather than
/// blamed on the debugger backend; without such options the debugger backend is used, with a note saying why.
fn choose_backend(args: &Args, program: Option<&Path>) -> Result<Backend, Failure> {
    // `--attach` is the debugger backend's; `--pid` and `--pid-tree` attach through the injection library.
    if args.attach.is_some() && args.backend.is_none() {
        return Ok(Backend::Debugger);
    }
    if args.attaches_by_pid() && args.backend.is_none() {
        return Ok(Backend::Cupti);
    }
    if args.backend.is_none() && program.is_some_and(links_hip) {
        log::info!("the program links libamdhip64: using the rocm backend");
        return Ok(Backend::Rocm);
    }
    if let Some(backend) = args.backend {
        return Ok(backend);
    }
    let missing = match gpu_tools::cupti::CuptiLibrary::load() {
        Ok(_) => return Ok(Backend::Cupti),
        Err(e) => e,
    };
    if let Some(option) = args.misplaced_option(Backend::Debugger) {
        // Without a driver too, both are named: installing CUPTI alone would not do.
        let driver = match gpu_tools::cuda::Driver::load() {
            Ok(_) => String::new(),
            Err(e) => format!("\n(and the CUDA driver is not installed here either: {e})"),
        };
        return Err(Failure::new(
            1,
            format!(
                "{option} needs the cupti backend, and CUPTI was not found (the program was not run): {missing}. \
                 (`--backend cupti` still traces a program that loads its own CUPTI, as PyTorch's wheels do.){driver}"
            ),
        ));
    }
    // Both backends need the driver: say so once, with CUPTI's absence beside it.
    check_driver(Backend::Debugger, "the program was not run").map_err(|f| match f {
        Failure::Message { code, message } => Failure::Message {
            code,
            message: format!("{message}\n(and CUPTI was not found either: {missing})"),
        },
        other => other,
    })?;
    eprintln!(
        "gpu-tools trace: CUPTI was not found, so the debugger backend is used (kernel launches only: no copies, \
         sets or API calls, times only with --blocking-launches): {missing}. (`--backend cupti` traces a program \
         that loads its own CUPTI, as PyTorch's wheels do.)"
    );
    Ok(Backend::Debugger)
}

/// The program must exist and be executable (127 and 126 otherwise, as shells), checked before any backend starts.
/// Returns the file that will run.
pub(crate) fn check_program(program: &str) -> Result<PathBuf, Failure> {
    use std::os::unix::fs::PermissionsExt;
    if !program.contains('/') {
        return which::which(program)
            .map_err(|_| Failure::new(127, format!("cannot start {program}: not found in PATH")));
    }
    let path = Path::new(program);
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => {
            Failure::new(127, format!("cannot start {program}: not found"))
        }
        _ => spawn_failure(program, &e),
    })?;
    if meta.is_dir() || meta.permissions().mode() & 0o111 == 0 {
        return Err(Failure::new(
            126,
            format!("cannot start {program}: not an executable file"),
        ));
    }
    Ok(path.to_path_buf())
}

/// The cupti and debugger backends need the CUDA driver: without one the injection library is never loaded (and
/// the debugger API does not exist), so no record can come, whatever the program does.
fn check_driver(backend: Backend, untouched: &str) -> Result<(), Failure> {
    gpu_tools::cuda::Driver::load().map(drop).map_err(|e| {
        Failure::new(
            1,
            format!(
                "the CUDA driver is not installed here, and the {} backend needs it ({untouched}): {e}",
                backend.name()
            ),
        )
    })
}

/// The rocm backend needs the AMD GPU driver (`/dev/kfd`) and rocprofiler-sdk, which the program's HIP runtime
/// loads and which loads the AMD tool library. Where neither is on this machine, no record can come: refused with
/// both fixes. Where one is, the program runs (it may bring its own rocprofiler-sdk, as a CUDA program its CUPTI).
fn check_rocm(untouched: &str) -> Result<(), Failure> {
    let Err(driver) = gpu_tools::rocprofiler::amd_gpus() else {
        return Ok(());
    };
    let sdk = match gpu_tools::rocprofiler_sdk::SdkLibrary::load() {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    Err(Failure::new(
        1,
        format!(
            "the rocm backend needs the AMD GPU driver and rocprofiler-sdk, and neither is here ({untouched}): \
             {driver} (install the amdgpu driver with ROCm); {sdk}"
        ),
    ))
}

/// `gpu-tools trace`: every check that can be made before the work, then the backend's run, the reports, the
/// files, and the exit code.
pub fn run(mut args: Args) -> Outcome {
    let counter_request = check_options(&args)?;
    let program = args.program.first().map(|p| check_program(p)).transpose()?;
    // Every process named is checked before the backend (and the driver it needs) is looked for: a PID that names
    // no process is said as such, whatever this machine has.
    for pid in args.attach.iter().chain(&args.pid).chain(&args.pid_tree) {
        crate::pid::check(*pid)?;
    }
    let backend = choose_backend(&args, program.as_deref())?;
    let targets = select_targets(&mut args, backend)?;
    check_backend_options(&args, backend)?;
    // What a refusal before the work left alone: the program, or the processes to attach to.
    let untouched = if args.attach.is_some() || args.attaches_by_pid() {
        "nothing was attached"
    } else {
        "the program was not run"
    };
    if backend == Backend::Rocm {
        check_rocm(untouched)?;
    } else {
        check_driver(backend, untouched)?;
    }
    // The tool library, found before the program runs.
    let tool = match backend {
        Backend::Cupti => Some(Tool::Cuda),
        Backend::Rocm => Some(Tool::Rocm),
        Backend::Debugger => None,
    };
    let lib = tool
        .map(|tool| tool_library(tool, &args, untouched))
        .transpose()?;
    // Fail before the program runs if a trace cannot be written; nothing is written if no trace comes.
    let chrome_file = args
        .chrome_trace
        .as_deref()
        .map(|path| OutputFile::create(path, "the Chrome trace"))
        .transpose()?;
    let trace_file = args
        .output
        .as_deref()
        .map(|template| create_trace_file(template, &args, &targets))
        .transpose()?;
    // What the driver refuses after a first attach, and the PC sampling before it: before the counters' samplers
    // open, which hold the GPU's counters that PC sampling needs.
    if let (Some(Tool::Cuda), Some(lib)) = (tool, lib.as_deref()) {
        before_first_attach(&args, lib, &targets)?;
        // After the primer too, which may leave it on.
        refuse_pc_left_on(&targets)?;
    }
    // The counters' samplers, opened before the program is launched or attached: whatever keeps them from
    // sampling is said before anything runs.
    let opened = counter_request
        .as_ref()
        .map(|r| counters::open(r, &targets, counters::Asker::Trace))
        .transpose()?;
    if chrome_file.as_ref().is_some_and(OutputFile::is_stdout)
        && trace_file.as_ref().is_some_and(OutputFile::is_stdout)
    {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            "--chrome-trace and --output cannot both be standard output",
        ));
    }
    let run = Run {
        args: &args,
        backend,
        tool,
        lib: lib.as_deref(),
        targets: &targets,
    };
    let traced = run.trace_and_report(chrome_file.as_ref(), trace_file.as_ref(), opened)?;
    let trace = &traced.trace;
    // A run in which no process was traced failed: it leaves no trace file.
    if !trace.processes.is_empty() {
        for file in [chrome_file, trace_file].into_iter().flatten() {
            let path = file.path().display().to_string();
            file.commit()?;
            if args.output.is_some() {
                log::info!("wrote {path}");
            }
        }
    }
    let losses = say_warnings_and_losses(trace);
    // A process that crashed counts whether or not the library's signal handler sent its end record; the program's
    // own non-zero status (128 + N for a launched program that died of signal N) comes first.
    let incomplete = losses
        || trace.processes.is_empty()
        || trace.processes.iter().any(model::Process::incomplete);
    let code = program_exit_code(&traced, args.attach.is_some() || !targets.is_empty());
    if !traced.empty_windows.is_empty() {
        for e in &traced.empty_windows {
            eprintln!("gpu-tools trace: {e}");
        }
        return Ok(1);
    }
    if code == 0 && incomplete {
        if trace.processes.is_empty() {
            return Ok(1);
        }
        return Ok(INCOMPLETE);
    }
    Ok(code)
}

/// The options that go together, checked before anything else (clap skips `requires` on an option whose
/// requirement conflicts with the program given); the counters asked for, parsed.
fn check_options(args: &Args) -> Result<Option<counters::Request>, Failure> {
    if args.attach_protocol.is_some() && args.attach.is_none() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--attach-protocol applies only with --attach PID",
        ));
    }
    if args.duration.is_some() && !args.attaches_by_pid() && args.attach.is_none() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--duration applies only with --pid, --pid-tree or --job",
        ));
    }
    if args.start_at.is_some() && !args.attaches_by_pid() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--start-at applies only with --pid, --pid-tree or --job",
        ));
    }
    if args.no_pc_primer && !args.attaches_by_pid() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--no-pc-primer applies only with --pid, --pid-tree or --job (a launched program is not PC-sampled first)",
        ));
    }
    if args.no_flight_recorder && !args.attaches_by_pid() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--no-flight-recorder applies only with --pid, --pid-tree or --job (a launched program gets no recorder)",
        ));
    }
    if args.counter_interval.is_some() && args.counters.is_none() {
        return Err(usage(
            ErrorKind::MissingRequiredArgument,
            "--counter-interval applies only with --counters",
        ));
    }
    // The counters' names are checked against the chip's catalogue when the samplers open, before anything runs.
    let counter_request = args
        .counters
        .as_deref()
        .map(|value| {
            counters::metrics_of(value).map(|metrics| counters::Request {
                metrics,
                interval: args.counter_interval.unwrap_or(interval::DEFAULT_INTERVAL),
            })
        })
        .transpose()
        .map_err(|e| {
            usage(
                ErrorKind::ValueValidation,
                format!("invalid value for '--counters [<SET|NAMES>]': {e}"),
            )
        })?;
    if args.duration.is_some_and(|d| !(d.is_finite() && d > 0.0)) {
        return Err(usage(
            ErrorKind::ValueValidation,
            "--duration must be a positive number of seconds",
        ));
    }
    Ok(counter_request)
}

/// The processes to attach to: for the debugger backend its one `--pid` (moved to `--attach`, which it reads); for
/// the cupti backend those named by pid, then the job's CUDA processes on this host. None when a program is run.
fn select_targets(args: &mut Args, backend: Backend) -> Result<Vec<u32>, Failure> {
    if backend == Backend::Debugger && args.attaches_by_pid() {
        if args.pid.len() != 1 || args.pid_tree.is_some() {
            return Err(usage(
                ErrorKind::ArgumentConflict,
                "the debugger backend attaches to one process: --pid PID",
            ));
        }
        args.attach = args.pid.pop();
    }
    if backend != Backend::Cupti || !args.attaches_by_pid() {
        return Ok(Vec::new());
    }
    let mut targets = attach::targets(args)?;
    // The job's CUDA processes on this host, after those named by pid (exit 1 when there is none).
    if let Some(selector) = &args.job {
        for member in crate::job::select("trace", selector)? {
            if !targets.contains(&member.pid) {
                targets.push(member.pid);
            }
        }
    }
    Ok(targets)
}

/// The options that only the chosen backend takes, and their values.
fn check_backend_options(args: &Args, backend: Backend) -> Result<(), Failure> {
    if let Some(option) = args.misplaced_option(backend) {
        return Err(usage(
            ErrorKind::ArgumentConflict,
            format!("{option} does not apply to the {} backend", backend.name()),
        ));
    }
    if let Some(size) = &args.buffer_size {
        gpu_tools_injection::env::parse_size(size).map_err(|e| {
            usage(
                ErrorKind::ValueValidation,
                format!("invalid value '{size}' for '--buffer-size <BYTES>': {e}"),
            )
        })?;
    }
    Ok(())
}

/// The tool library the program or the processes will load (`--inject-lib`, the variable, or the embedded one).
fn tool_library(tool: Tool, args: &Args, untouched: &str) -> Result<PathBuf, Failure> {
    let explicit = args.inject_lib.as_deref();
    let (found, what) = match tool {
        Tool::Cuda => (inject_lib::find(explicit), "injection library"),
        Tool::Rocm => (inject_lib::find_rocm(explicit), "AMD tool library"),
    };
    let (lib, origin) = found.map_err(|m| Failure::new(1, format!("{m} ({untouched})")))?;
    log::debug!("{what} {} ({origin})", lib.display());
    Ok(lib)
}

/// The trace file of `-o TEMPLATE`, created now: its name with the host, the tracer's pid and the traced ranks
/// (`%r`, refused where no traced process has a rank).
fn create_trace_file(template: &str, args: &Args, targets: &[u32]) -> Result<OutputFile, Failure> {
    let rank = ranks_for_name(targets, args.attaches_by_pid());
    let host = host_name();
    let pid = std::process::id();
    // `%r` is used where a rank changes the name (`%%r` is a `%` and an `r`).
    let names_rank = expand_output_name_with_rank(template, &host, pid, None)
        != expand_output_name_with_rank(template, &host, pid, Some("0"));
    if names_rank && rank.is_none() {
        return Err(usage(
            ErrorKind::ValueValidation,
            format!(
                "--output {template}: %r stands for the rank, and {} (RANK, OMPI_COMM_WORLD_RANK, \
                 PMI_RANK, SLURM_PROCID) in its environment",
                if args.attaches_by_pid() {
                    "no traced process has a rank variable"
                } else {
                    "this process has no rank variable"
                }
            ),
        ));
    }
    let path = expand_output_name_with_rank(template, &host, pid, rank.as_deref());
    OutputFile::create(Path::new(&path), "the trace file")
}

/// The CUPTI this tool would use, for attached processes that map none (loaded by bare name: where the loader
/// found it).
fn cupti_for_attach() -> Option<PathBuf> {
    gpu_tools::cupti::CuptiLibrary::load().ok().and_then(|l| {
        l.path()
            .map(Path::to_path_buf)
            .or_else(|| gpu_tools::linux::procfs::Process::current().mapped_library("libcupti.so"))
    })
}

/// Refuses to attach to processes in which gpu-tools left PC sampling on (its `cuptiPCSamplingDisable` failed,
/// `pc_left_on`): CUPTI then refuses the activity records a trace enables (`cuptiActivityEnable(CONCURRENT_KERNEL)`
/// gave `CUPTI_ERROR_NOT_COMPATIBLE` in every window after a primer's failed disable on an H100), so the window would
/// attach, share CUPTI with the program and hold nothing. Said before anything is touched.
fn refuse_pc_left_on(targets: &[u32]) -> Result<(), Failure> {
    match pc_left_on_refusal(&crate::pc_left_on::processes(), targets) {
        Some(why) => Err(Failure::new(1, why)),
        None => Ok(()),
    }
}

/// [`refuse_pc_left_on`]'s refusal for the processes noted (`left`), where any of them is a target.
fn pc_left_on_refusal(left: &[crate::pc_left_on::LeftOn], targets: &[u32]) -> Option<String> {
    let held: Vec<String> = left
        .iter()
        .filter(|l| targets.contains(&l.pid))
        .map(|l| format!("process {} (since {} s ago)", l.pid, l.ago.as_secs()))
        .collect();
    (!held.is_empty()).then(|| {
        format!(
            "not traced: gpu-tools left PC sampling on in {}: its cuptiPCSamplingDisable failed, and CUPTI refuses a \
             trace's activity records beside it (CUPTI_ERROR_NOT_COMPATIBLE) until that process ends; nothing was \
             attached",
            held.join(", ")
        )
    })
}

/// Before the first CUPTI attach to any of `targets`: what the CUDA driver refuses it from then on, then its PCs
/// sampled (`pc_primer`), and for those not sampled, that PC sampling after the trace gives nothing.
fn before_first_attach(args: &Args, lib: &Path, targets: &[u32]) -> Result<(), Failure> {
    let first = crate::cupti_or_debugger::before_first_cupti(targets);
    if first.is_empty() {
        return Ok(());
    }
    if !args.quiet {
        eprintln!(
            "gpu-tools trace: {}",
            crate::cupti_or_debugger::cupti_note(&first, args.flight_recorder())
        );
    }
    let unprimed: Vec<u32> = if args.pc_primer() {
        let cupti = cupti_for_attach();
        let outcomes = pc_primer::prime(
            "trace",
            &first,
            lib,
            cupti.as_deref(),
            args.flight_recorder(),
            args.quiet,
        )?;
        // Said under --quiet too: the sampling is something done to the process beyond the trace asked for, and
        // where it was not done, later PC sampling windows give nothing.
        for (pid, primed) in &outcomes {
            eprintln!("gpu-tools trace: {}", pc_primer::said(*pid, primed));
        }
        outcomes
            .into_iter()
            .filter(|(_, p)| {
                !matches!(
                    p,
                    pc_primer::Primed::Yes { .. } | pc_primer::Primed::EmptyWhileRunning { .. }
                )
            })
            .map(|(pid, _)| pid)
            .collect()
    } else {
        first
    };
    if !unprimed.is_empty() && !args.quiet {
        eprintln!(
            "gpu-tools trace: {}",
            crate::cupti_or_debugger::pc_sampling_note(&unprimed)
        );
    }
    Ok(())
}

/// What one trace runs with, once every check before it passed.
struct Run<'a> {
    args: &'a Args,
    backend: Backend,
    tool: Option<Tool>,
    lib: Option<&'a Path>,
    /// The processes to attach to; empty when a program is run.
    targets: &'a [u32],
}

impl Run<'_> {
    /// Runs the backend with the files as sinks, prints the listing and the summary, and finishes the files (not
    /// yet committed).
    fn trace_and_report(
        &self,
        chrome_file: Option<&OutputFile>,
        trace_file: Option<&OutputFile>,
        opened: Option<counters::Opened>,
    ) -> Result<Traced, Failure> {
        let args = self.args;
        let mut demangler = Demangler::new(args.raw_names);
        // The listing and the summary go to standard output, unless a trace goes there (`-o -`): then to stderr.
        let to_stderr = [chrome_file, trace_file]
            .into_iter()
            .flatten()
            .any(OutputFile::is_stdout);
        if to_stderr {
            // The program's own output too.
            crate::stdout::to_stderr();
        }
        let mut out = BufWriter::new(if to_stderr {
            Box::new(std::io::stderr().lock()) as Box<dyn Write>
        } else {
            Box::new(std::io::stdout().lock())
        });
        let written = |e, what: &str| write_failure(to_stderr, e, what);
        let mut sinks = Sinks {
            file: trace_file
                .map(|f| TraceFileWriter::new(Box::new(f.writer()) as Box<dyn Write + '_>))
                .transpose()
                .map_err(|e| written(e, "the trace file"))?,
            chrome: chrome_file.map(|f| {
                Timeline::new(ChromeWriter::new(
                    Box::new(f.writer()) as Box<dyn Write + '_>
                ))
            }),
        };
        let traced = match self.run_backend(&mut demangler, &mut sinks, opened, &mut out) {
            Ok(t) => t,
            Err(f) => {
                let _ = out.flush();
                return Err(f);
            }
        };
        let trace = &traced.trace;
        if args.list && self.backend != Backend::Debugger {
            report::listing(trace, &mut out).or_else(crate::stdout::unless_closed)?;
        }
        report::summary(trace, self.backend.name(), &mut out)
            .or_else(crate::stdout::unless_closed)?;
        out.flush().or_else(crate::stdout::unless_closed)?;
        if self.backend == Backend::Debugger {
            // The debugger backend's launches, as records, for the Chrome trace.
            if let Some(timeline) = sinks.chrome.as_mut() {
                timeline_of(trace, timeline).map_err(|e| written(e, "the Chrome trace"))?;
            }
        }
        let Sinks { file, chrome } = sinks;
        if let Some(file) = file {
            // The final chunk: without it the file reads as not finished by its writer.
            file.finish()
                .and_then(|mut w| w.flush())
                .map_err(|e| written(e, "the trace file"))?;
        }
        if let Some(timeline) = chrome {
            timeline
                .finish()
                .and_then(|sink| sink.into_inner())
                .and_then(|mut w| w.flush())
                .map_err(|e| written(e, "the Chrome trace"))?;
        }
        Ok(traced)
    }

    /// The backend's run: attaching (cupti, processes named), launching with a tool library (cupti, rocm), or the
    /// debugger.
    fn run_backend(
        &self,
        demangler: &mut Demangler,
        sinks: &mut Sinks<'_>,
        opened: Option<counters::Opened>,
        out: &mut impl Write,
    ) -> Result<Traced, Failure> {
        let args = self.args;
        match (self.tool, self.lib) {
            (Some(Tool::Cuda), Some(lib)) if !self.targets.is_empty() => {
                let cupti = cupti_for_attach();
                let live = self.live_at_start()?;
                attach::run(args, demangler, lib, sinks, &live, cupti.as_deref(), opened)
            }
            (Some(tool), Some(lib)) => receiver::run(args, demangler, tool, lib, sinks, opened),
            _ => backend_debugger::run(args, demangler, out),
        }
    }

    /// The targets still running once `--start-at` comes (every host of the job starts its window at the same
    /// instant); a process that ended meanwhile is said and left out. All of them without `--start-at`.
    fn live_at_start(&self) -> Result<Vec<u32>, Failure> {
        let mut live = self.targets.to_vec();
        let Some(start) = &self.args.start_at else {
            return Ok(live);
        };
        crate::start_at::wait(start, &crate::interrupt::stop_flag(), "trace")?;
        live.retain(|&pid| {
            let running = gpu_tools::linux::procfs::Process::new(pid)
                .stat()
                .is_ok_and(|s| !s.has_ended());
            if !running {
                eprintln!(
                    "gpu-tools trace: process {pid} ended before --start-at {}: not traced",
                    start.given
                );
            }
            running
        });
        if live.is_empty() {
            return Err(Failure::new(
                1,
                format!(
                    "every process selected ended before --start-at {}: nothing was attached",
                    start.given
                ),
            ));
        }
        Ok(live)
    }
}

/// A write to the trace file or the Chrome trace failed. On a standard output whose reader went away (`-o -`), the
/// run ends as any closed standard output does.
fn write_failure(to_stderr: bool, e: std::io::Error, what: &str) -> Failure {
    if to_stderr && e.kind() == std::io::ErrorKind::BrokenPipe {
        Failure::stdout(e)
    } else {
        Failure::new(1, format!("cannot write {what}: {e}"))
    }
}

/// Says the trace's warnings, its counters' errors and lost samples, and its dropped records; true when counters
/// or records were lost (the trace is incomplete).
fn say_warnings_and_losses(trace: &Trace) -> bool {
    let (lines, incomplete) = warnings_and_losses(trace);
    for line in lines {
        eprintln!("gpu-tools trace: {line}");
    }
    incomplete
}

/// The trace's warnings, its counters' errors and lost samples, and its dropped records, a line each; true when
/// counters or records were lost (the trace is incomplete).
pub(crate) fn warnings_and_losses(trace: &Trace) -> (Vec<String>, bool) {
    let mut lines = trace.warnings.clone();
    let mut incomplete = false;
    for c in &trace.counters {
        if let Some(e) = &c.error {
            lines.push(e.clone());
            incomplete = true;
        }
        if c.lost > 0 {
            lines.push(format!(
                "{} counter samples of device {} were lost (the PM sampler's buffer overflowed)",
                c.lost, c.device
            ));
            incomplete = true;
        }
    }
    let dropped = trace.dropped_total();
    if dropped > 0 {
        lines.push(format!(
            "{dropped} activity records were dropped (CUPTI's buffers were full); raise --buffer-size or \
             --max-buffers"
        ));
        incomplete = true;
    }
    (lines, incomplete)
}

/// The program's own exit code; 128 + N when signal N ended it, as shells report it. An attached process that was
/// left running has none: the trace ended as asked (0).
fn program_exit_code(traced: &Traced, attached: bool) -> u8 {
    match traced.status {
        None if attached => 0,
        Some(s) => match (s.code(), s.signal()) {
            (Some(code), _) => u8::try_from(code).unwrap_or(1),
            (None, Some(signal)) => {
                eprintln!("gpu-tools trace: the program was ended by signal {signal}");
                u8::try_from(128 + signal).unwrap_or(1)
            }
            (None, None) => 1,
        },
        None => 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranks_name_a_file_as_one_a_run_or_a_list() {
        assert_eq!(rank_text(&[]), None);
        assert_eq!(rank_text(&[3]).as_deref(), Some("3"));
        assert_eq!(rank_text(&[0, 1, 2, 3]).as_deref(), Some("0-3"));
        assert_eq!(rank_text(&[0, 2, 5]).as_deref(), Some("0,2,5"));
    }

    #[test]
    fn a_process_left_with_pc_sampling_on_is_not_traced_and_says_why() {
        use crate::pc_left_on::LeftOn;
        let left = [LeftOn {
            pid: 627,
            ago: std::time::Duration::from_secs(4),
        }];
        assert_eq!(pc_left_on_refusal(&left, &[600, 601]), None, "another's");
        assert_eq!(pc_left_on_refusal(&[], &[627]), None);
        let why = pc_left_on_refusal(&left, &[600, 627]).expect("refused");
        assert!(why.contains("process 627 (since 4 s ago)"), "{why}");
        assert!(why.contains("CUPTI_ERROR_NOT_COMPATIBLE"), "{why}");
        assert!(why.contains("nothing was attached"), "{why}");
    }
}
