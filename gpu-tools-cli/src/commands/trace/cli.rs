//! The command line: the same for both backends, with each backend's own options checked against the choice.

use std::path::PathBuf;

use clap::ValueEnum;
use clap::builder::{PossibleValuesParser, TypedValueParser};
use gpu_tools::cudbg::AttachProtocol;
use gpu_tools_injection::env::{ApiMode, GraphMode, TraceKind};

/// The kinds an attach leaves out unless asked for by name. With CUPTI 13.0 (driver 580, H200), turning copy or
/// set records on and off in a running process, as each attached trace does, stopped CUPTI's kernel records for
/// every `cudaLaunchKernel` of the process in a later attach (a C program launching in a loop, 9 attaches each:
/// with `--kinds kernel,runtime,memcpy` every window from the 3rd held 0 kernels for 67,423 to 110,500 launches;
/// with `memset` from the 6th; with kernel and runtime alone, driver or NVTX, none), and a PyTorch job lost about
/// half of its kernels in later windows, its own torch.profiler with them. The job runs on unharmed; only the
/// records are lost, so an attach does not turn these kinds on unless told to.
pub const COPY_KINDS: [TraceKind; 2] = [TraceKind::Memcpy, TraceKind::Memset];

/// Trace a CUDA program: its kernels, memory copies and sets, and the API calls they came from.
///
/// `gpu-tools trace [OPTIONS] -- PROGRAM ARGS...` runs PROGRAM, then prints a summary per kernel (count, total,
/// mean, min, max time), per copy direction and per API call; `--list` also lists every kernel, copy and set, one
/// line each (as nvprof's `--print-gpu-trace`), and `-o FILE` keeps every record for `gpu-tools stats` and
/// `gpu-tools export`. `--backend cupti` (the default where libcupti is found) runs the program with the injection library that this executable carries; `--backend debugger` uses the
/// CUDA debugger API (launches only; it can also attach to a running process with `--attach PID`).
///
/// `gpu-tools trace --pid PID[,PID...]` (or `--pid-tree PID`: every CUDA process under a launcher such as
/// torchrun) traces processes that already run, without restarting them: the injection library is loaded into
/// each, traces until `--duration` passes or Ctrl-C, then stops and leaves the process running as before.
///
/// Exit code: the program's own; 128 + N when signal N ended it; 127 when the program is not found, 126 when it
/// cannot be run; 3 when the program succeeded but the trace is incomplete (records dropped or lost, counter
/// samples lost, a traced process that crashed: its trace ended at a fatal signal, said as such); 1 when nothing
/// could be traced (no driver, a program that never uses CUDA, counters that cannot be sampled); 2 for a usage
/// error.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// How to trace: `cupti` (the program runs with an injected CUPTI library; default where libcupti is found) or
    /// `debugger` (the CUDA debugger API; launches only, slower).
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,

    /// Also write a Chrome trace (JSON) to FILE: one track per device and stream, and one per host thread; opens
    /// in Perfetto (https://ui.perfetto.dev). `-` is standard output (the summary, the listing, and the program's
    /// own standard output, then go to stderr).
    #[arg(long, value_name = "FILE")]
    pub chrome_trace: Option<PathBuf>,

    /// cupti, rocm: also save the trace to FILE in the crate's compact trace format, streamed as records arrive
    /// (`%h` becomes the host name, `%p` the tracer's process id, `%r` the rank: RANK, OMPI_COMM_WORLD_RANK,
    /// PMI_RANK or SLURM_PROCID of the traced processes, `0-3` for several in a row, else of this process; `%%` a
    /// `%`); read it later with `gpu-tools stats` and
    /// `gpu-tools export`. Written whole when the run ends (also when the program fails); `-` is standard output
    /// (the summary, the listing, and the program's own standard output, then go to stderr).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<String>,

    /// Also list every kernel, copy and set, one line each in start order, before the summary (the debugger
    /// backend: every launch and module load as it happens). Off by default, launched or attached, with or
    /// without -o: a launch-bound program makes tens of thousands of lines a second, which cost the tracer's host
    /// time and bury the summary; the trace file keeps every record (`gpu-tools stats`, `gpu-tools export`).
    #[arg(long, conflicts_with = "quiet")]
    pub list: bool,

    /// No notes or progress line, only the summary, what went wrong, and what was done to an attached process
    /// beyond the trace (the PC sampling before its first trace, or why not). The listing is off unless --list.
    #[arg(long, short)]
    pub quiet: bool,

    /// cupti, rocm: a progress line on stderr while the program runs (records and processes so far, the trace
    /// file's size), rewritten in place and cleared at the end.
    #[command(flatten)]
    pub progress: crate::progress::ProgressArgs,

    /// Keep kernel names as the driver reports them (mangled C++ names).
    #[arg(long)]
    pub raw_names: bool,

    // cupti backend
    /// cupti: the injection library (libgpu_tools_inject.so). Default: $GPU_TOOLS_INJECT_LIB, then the one
    /// embedded in this executable (written once to ~/.cache/gpu-tools/).
    #[arg(long, value_name = "PATH", help_heading = "cupti backend")]
    pub inject_lib: Option<PathBuf>,

    /// cupti: record kinds to collect, comma-separated; `all` for every kind [default:
    /// kernel,memcpy,memset,driver,runtime,nvtx; attached (`--pid`, `--pid-tree`, `--job`):
    /// kernel,driver,runtime,nvtx, as copies and sets recorded in a running process cost later windows their
    /// kernels]. With `nvtx` the program's NVTX ranges and marks are traced (free for a program that makes no NVTX
    /// call).
    #[arg(
        long,
        value_name = "KINDS",
        value_enum,
        value_delimiter = ',',
        help_heading = "cupti backend"
    )]
    pub kinds: Vec<KindArg>,

    /// cupti: leave out driver and runtime API records (cheaper; kernels then show no calling API); the same as
    /// `--api none`.
    #[arg(long, conflicts_with = "api", help_heading = "cupti backend")]
    pub no_api: bool,

    /// cupti: which API calls are recorded: `essential` (every call but host-side bookkeeping: getters such as
    /// `cudaGetDevice` and `cuKernelGetName`, error checks such as `cudaGetLastError`, the current device or
    /// context, capture-status queries; as Nsight Systems leaves out calls not critical for performance analysis
    /// unless `--cuda-trace-all-apis`), `all`, `launches` (only calls that launch work or move data: far fewer
    /// records on launch-bound programs), `none` [default: essential].
    #[arg(long, value_enum, value_name = "WHICH", help_heading = "cupti backend")]
    pub api: Option<ApiArg>,

    /// cupti: API functions never recorded, comma-separated (`cudaGetLastError,cuKernelGetName`).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        help_heading = "cupti backend"
    )]
    pub api_skip: Vec<String>,

    /// cupti: how CUDA graphs are traced: `graph` (one event per graph launch: 1.02x native on a CUDA-graph
    /// replay of PyTorch, H100) or `node` (each node's kernel, with graph and node id: 1.32x there) [default:
    /// graph].
    #[arg(long, value_enum, value_name = "LEVEL", help_heading = "cupti backend")]
    pub cuda_graph_trace: Option<GraphArg>,

    /// cupti: bytes of each CUPTI record buffer, suffix k or M allowed [default: 4M].
    #[arg(long, value_name = "BYTES", help_heading = "cupti backend")]
    pub buffer_size: Option<String>,

    /// cupti: most CUPTI buffers in use at once; past it CUPTI drops records, which are reported [default: 64].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..), help_heading = "cupti backend")]
    pub max_buffers: Option<u32>,

    /// cupti: milliseconds between flushes of completed buffers; a crash loses at most this much [default: 200].
    #[arg(long, value_name = "MS", help_heading = "cupti backend")]
    pub flush_ms: Option<u64>,

    /// cupti: after the program exits, how long to wait for traced processes to finish their streams
    /// [default: 5000].
    #[arg(long, value_name = "MS", help_heading = "cupti backend")]
    pub drain_timeout_ms: Option<u64>,

    /// cupti: also sample device counters (NVIDIA PM sampling, device-wide) on every GPU the traced processes can
    /// use, for the whole trace, into the trace file (-o) beside the processes' streams: a set (`default`, the
    /// set without a value: SM active, tensor pipes active, achieved occupancy, DRAM read and write bytes per
    /// second) or PM-sampling metric names, comma-separated (`gpu-tools metrics --method pm` lists them). Write
    /// `--counters -- PROGRAM` when no value follows. Samples name devices as the traced processes do (their
    /// CUDA_VISIBLE_DEVICES), on CLOCK_MONOTONIC. One PM client per GPU: where another tool holds the counters
    /// (`gpu-tools top`, ncu, DCGM, Nsight Systems' GPU metrics), trace refuses before the program runs rather
    /// than trace without counters; so it does for an unknown metric or one PM sampling cannot collect.
    #[arg(
        long,
        value_name = "SET|NAMES",
        num_args = 0..=1,
        default_missing_value = "default",
        help_heading = "counters"
    )]
    pub counters: Option<String>,

    /// cupti: the sampling period of --counters: `1ms` (default), `500us`, `0.25ms`; 100us at the shortest.
    #[arg(
        long,
        value_name = "DUR",
        value_parser = super::interval::parse_interval,
        help_heading = "counters"
    )]
    pub counter_interval: Option<std::time::Duration>,

    // debugger backend
    /// debugger: how long the session busy-waits for events before it sleeps.
    #[arg(long, value_name = "US", help_heading = "debugger backend")]
    pub spin_us: Option<u64>,

    /// debugger: keep context push/pop events (a program that pushes and pops its context per call stops twice
    /// more per call).
    #[arg(long, help_heading = "debugger backend")]
    pub push_pop: bool,

    /// debugger: turn launch events off (the driver then reports no launches; for measuring what events cost).
    #[arg(long, help_heading = "debugger backend")]
    pub defer_launches: bool,

    /// debugger: make each launch wait for its kernel, so kernels get durations (ready to finished, as the session
    /// saw them: an upper bound).
    #[arg(long, help_heading = "debugger backend")]
    pub blocking_launches: bool,
    /// debugger: attach to the running CUDA process PID instead of starting a program; trace its launches until
    /// it exits or Ctrl-C, then detach (it runs on).
    #[arg(
        long,
        value_name = "PID",
        conflicts_with = "program",
        help_heading = "debugger backend"
    )]
    pub attach: Option<u32>,

    /// debugger: how the attached process's driver is asked to start its debugger back end: `auto` (its attach
    /// descriptor where it has one, CUDA 13.1 on), `call` (call cudbgApiAttach in the process), `descriptor`.
    #[arg(
        long,
        value_name = "PROTOCOL",
        value_parser = PossibleValuesParser::new(AttachProtocol::NAMES)
            .map(|s| s.parse::<AttachProtocol>().unwrap_or_default()),
        help_heading = "debugger backend"
    )]
    pub attach_protocol: Option<AttachProtocol>,

    /// Trace these running processes (comma-separated PIDs) instead of starting a program: each is traced from
    /// now until --duration, Ctrl-C or SIGTERM, then left running as it was. Uses the cupti backend (the
    /// debugger backend's attach is `--backend debugger --pid PID`).
    #[arg(
        long,
        value_name = "PID[,PID...]",
        value_delimiter = ',',
        conflicts_with = "program"
    )]
    pub pid: Vec<u32>,

    /// Trace every process under PID that uses CUDA (a launcher: torchrun, srun, mpirun), PID included.
    #[arg(long, value_name = "PID", conflicts_with = "program")]
    pub pid_tree: Option<u32>,

    /// Trace the processes of a job on this host that use CUDA (the CUDA driver mapped, or an NVIDIA device
    /// open); the job's other processes (launchers) are named as skipped. SELECTOR: `slurm:JOBID` (SLURM_JOB_ID in
    /// the environment, or the job's cgroup), `torchrun:RUN_ID` (TORCHELASTIC_RUN_ID), `k8s:POD_UID` (the pod's
    /// cgroup), `cmd:REGEX` (the command line). Run it on every host of the job through the job's launcher:
    /// `srun --jobid=J --overlap --nodes=N --ntasks-per-node=1 gpu-tools trace --job slurm:J --start-at +5
    /// --duration 3 -o run-%h.gputrace`. No process of the job here: exit 1.
    #[arg(long, value_name = "SELECTOR", conflicts_with = "program")]
    pub job: Option<crate::job::Selector>,

    /// With --pid, --pid-tree or --job: start the window at this wall-clock instant, the same on every host:
    /// RFC 3339 (`2025-06-01T12:00:05Z`, `...+02:00`) or `+SECONDS` from now. The processes are selected at
    /// once, attached at that instant, and --duration counts from there. A time in the past is refused (exit 2).
    #[arg(long, value_name = "TIME", value_parser = crate::start_at::parse_now)]
    pub start_at: Option<crate::start_at::StartAt>,

    /// With --pid, --pid-tree or --job: stop after this many seconds (default: at Ctrl-C, SIGTERM, or when every
    /// traced process has ended).
    #[arg(long, value_name = "SECONDS")]
    pub duration: Option<f64>,

    /// With --pid, --pid-tree or --job: leave no flight recorder in the processes. By default an attach leaves one,
    /// which stays after the window: CUPTI's callback at each kernel launch and synchronisation call of the
    /// process (no activity record, no driver call), keeping which launches have not finished. Once CUPTI has run
    /// in a process the CUDA driver refuses it the debugger, and `gpu-tools where` answers from the recorder
    /// instead; without one, `where` can no longer say where a traced job hangs. (A recorder an earlier attach left
    /// runs on.) CUPTI stays initialised in a process after any window, with or without the recorder, and its CUDA
    /// calls pay for it (0.70-0.88 of a launch flood's rate on an H100 after a window without the recorder; 0.72 with
    /// it). Finalising CUPTI in the running process would give that back, but on driver 580 it killed jobs, so it
    /// is not done.
    #[arg(long)]
    pub no_flight_recorder: bool,

    /// With --pid, --pid-tree or --job: do not sample the PCs of a process before its first trace. By default a
    /// process that has not run CUPTI for gpu-tools yet is PC-sampled for 1 s first (nothing of it is kept): after
    /// a first CUPTI use that traced, CUPTI 13.0 puts every PC sample of the process outside its kernels for the rest
    /// of its life, so `profile --pid --pc-sampling` (and the program's own PC sampling) would give nothing there.
    /// Not done with --start-at, nor where another tool holds the GPU's counters, nor beside a profiler of the
    /// program's own (a torch.profiler that has run: a session starting during the sampling would lose its records).
    /// The sampling carries PC sampling's risk: one job (`torch.compile` reduce-overhead, 16 profiled jobs on one
    /// GPU) died of SIGSEGV inside CUPTI 13.0 reading it out, as jobs have in `profile --pid --pc-sampling`.
    #[arg(long)]
    pub no_pc_primer: bool,

    /// The program and its arguments (not with --attach, --pid, --pid-tree or --job).
    #[arg(
        required_unless_present_any = ["attach", "pid", "pid_tree", "job"],
        trailing_var_arg = true,
        value_name = "PROGRAM ARGS"
    )]
    pub program: Vec<String>,
}

/// A tracing backend.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Backend {
    /// CUPTI activity records from an injected library.
    Cupti,
    /// The CUDA debugger API.
    Debugger,
    /// rocprofiler-sdk records from an AMD tool library (`ROCP_TOOL_LIBRARIES`): HIP programs.
    Rocm,
}

/// A value of `--api`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ApiArg {
    Essential,
    All,
    Launches,
    None,
}

/// A value of `--cuda-graph-trace`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum GraphArg {
    Node,
    Graph,
}

impl GraphArg {
    /// The library's mode.
    pub fn mode(self) -> GraphMode {
        match self {
            GraphArg::Node => GraphMode::Node,
            GraphArg::Graph => GraphMode::Graph,
        }
    }
}

impl Backend {
    /// Its name on the command line and in the summary.
    pub fn name(self) -> &'static str {
        match self {
            Backend::Cupti => "cupti",
            Backend::Debugger => "debugger",
            Backend::Rocm => "rocm",
        }
    }
}

/// A value of `--kinds`: a record kind under the crate's name for it ([`TraceKind::name`]), or `all`, as
/// `GPU_TOOLS_TRACE_KINDS` takes them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KindArg {
    Kind(TraceKind),
    All,
}

/// Every value: each kind, then `all`.
const KIND_ARGS: [KindArg; TraceKind::ALL.len() + 1] = {
    let mut args = [KindArg::All; TraceKind::ALL.len() + 1];
    let mut i = 0;
    while i < TraceKind::ALL.len() {
        args[i] = KindArg::Kind(TraceKind::ALL[i]);
        i += 1;
    }
    args
};

impl ValueEnum for KindArg {
    fn value_variants<'a>() -> &'a [Self] {
        &KIND_ARGS
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(match self {
            KindArg::Kind(k) => k.name(),
            KindArg::All => "all",
        }))
    }
}

impl Args {
    /// Whether API records are left out (`--no-api`, `--api none`).
    fn no_api_records(&self) -> bool {
        self.no_api || self.api == Some(ApiArg::None)
    }

    /// Which API calls are recorded, for the injection library.
    pub fn api_mode(&self) -> ApiMode {
        match self.api {
            Some(ApiArg::Launches) => ApiMode::Launches,
            Some(ApiArg::All) => ApiMode::All,
            Some(ApiArg::Essential | ApiArg::None) | None => ApiMode::Essential,
        }
    }

    /// Kinds to collect, defaults and `--no-api` applied.
    pub fn effective_kinds(&self) -> Vec<TraceKind> {
        let given: Vec<TraceKind> = if self.kinds.is_empty() {
            let mut kinds = TraceKind::DEFAULT.to_vec();
            kinds.push(TraceKind::Nvtx);
            if self.attaches_by_pid() {
                kinds.retain(|k| !COPY_KINDS.contains(k));
            }
            kinds
        } else {
            self.kinds
                .iter()
                .flat_map(|k| match k {
                    KindArg::Kind(k) => std::slice::from_ref(k),
                    KindArg::All => &TraceKind::ALL[..],
                })
                .copied()
                .collect()
        };
        let mut kinds: Vec<TraceKind> = Vec::new();
        for k in given {
            if !(kinds.contains(&k) || (self.no_api_records() && k.is_api())) {
                kinds.push(k);
            }
        }
        kinds
    }

    /// Attached with copy or set records asked for by name (`--kinds memcpy` or `memset`, or `all`): these are
    /// left out of an attach by default ([`COPY_KINDS`]).
    pub fn attach_records_copies(&self) -> bool {
        self.attaches_by_pid()
            && !self.kinds.is_empty()
            && self
                .effective_kinds()
                .iter()
                .any(|k| COPY_KINDS.contains(k))
    }

    /// Whether an attach leaves a flight recorder in the processes (unless `--no-flight-recorder`).
    pub fn flight_recorder(&self) -> bool {
        !self.no_flight_recorder
    }

    /// Whether a process's PCs are sampled before its first trace (unless `--no-pc-primer`, or with `--start-at`,
    /// whose instant comes first).
    pub fn pc_primer(&self) -> bool {
        !self.no_pc_primer && self.start_at.is_none()
    }

    /// Whether running processes are traced (`--pid`, `--pid-tree`, `--job`) rather than a program started.
    pub fn attaches_by_pid(&self) -> bool {
        !self.pid.is_empty() || self.pid_tree.is_some() || self.job.is_some()
    }

    /// An option of the other backend, if one was given (a usage error).
    pub fn misplaced_option(&self, backend: Backend) -> Option<&'static str> {
        use Backend::{Cupti, Debugger, Rocm};
        // Each option given, and the backends it applies to (the rocm tool library reads the kinds, the buffer
        // size and the socket; the record stream's options apply where there is one).
        let attaching = self.attaches_by_pid();
        let options: [(bool, &'static str, &[Backend]); 25] = [
            (self.pid_tree.is_some(), "--pid-tree", &[Cupti]),
            (self.no_flight_recorder, "--no-flight-recorder", &[Cupti]),
            (self.no_pc_primer, "--no-pc-primer", &[Cupti]),
            (self.job.is_some(), "--job", &[Cupti]),
            (self.start_at.is_some(), "--start-at", &[Cupti]),
            (
                self.duration.is_some() && attaching,
                "--duration",
                &[Cupti, Debugger],
            ),
            (self.spin_us.is_some(), "--spin-us", &[Debugger]),
            (self.push_pop, "--push-pop", &[Debugger]),
            (self.defer_launches, "--defer-launches", &[Debugger]),
            (self.blocking_launches, "--blocking-launches", &[Debugger]),
            (self.attach.is_some(), "--attach", &[Debugger]),
            (
                self.attach_protocol.is_some(),
                "--attach-protocol",
                &[Debugger],
            ),
            (self.output.is_some(), "--output", &[Cupti, Rocm]),
            (self.inject_lib.is_some(), "--inject-lib", &[Cupti, Rocm]),
            (!self.kinds.is_empty(), "--kinds", &[Cupti, Rocm]),
            (self.no_api, "--no-api", &[Cupti, Rocm]),
            (self.api.is_some(), "--api", &[Cupti]),
            (!self.api_skip.is_empty(), "--api-skip", &[Cupti]),
            (
                self.cuda_graph_trace.is_some(),
                "--cuda-graph-trace",
                &[Cupti],
            ),
            (self.buffer_size.is_some(), "--buffer-size", &[Cupti, Rocm]),
            (self.max_buffers.is_some(), "--max-buffers", &[Cupti]),
            (self.flush_ms.is_some(), "--flush-ms", &[Cupti]),
            (
                self.drain_timeout_ms.is_some(),
                "--drain-timeout-ms",
                &[Cupti, Rocm],
            ),
            (self.counters.is_some(), "--counters", &[Cupti]),
            (
                self.counter_interval.is_some(),
                "--counter-interval",
                &[Cupti],
            ),
        ];
        options
            .iter()
            .find(|(given, _, applies)| *given && !applies.contains(&backend))
            .map(|(_, name, _)| *name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn kinds(value: &str) -> Vec<TraceKind> {
        Cli::try_parse_from(["trace", "--kinds", value, "--", "true"])
            .unwrap()
            .args
            .effective_kinds()
    }

    #[test]
    fn kinds_take_a_list_or_all() {
        assert_eq!(
            kinds("kernel,memcpy"),
            [TraceKind::Kernel, TraceKind::Memcpy]
        );
        assert_eq!(kinds("all"), TraceKind::ALL);
        // The default adds NVTX (free without NVTX calls); --api none leaves the API kinds out.
        let default = Cli::try_parse_from(["trace", "--", "true"])
            .unwrap()
            .args
            .effective_kinds();
        assert!(default.contains(&TraceKind::Nvtx) && default.contains(&TraceKind::Runtime));
        let none = Cli::try_parse_from(["trace", "--api", "none", "--", "true"])
            .unwrap()
            .args
            .effective_kinds();
        assert!(!none.iter().any(|k| k.is_api()), "{none:?}");
        assert_eq!(kinds("memcpy,all"), {
            let mut v = vec![TraceKind::Memcpy];
            v.extend(TraceKind::ALL.iter().filter(|k| **k != TraceKind::Memcpy));
            v
        });
        assert!(Cli::try_parse_from(["trace", "--kinds", "kernels", "--", "true"]).is_err());
        // Every kind of the crate can be named.
        for k in TraceKind::ALL {
            assert_eq!(kinds(k.name()), [k]);
        }
    }

    #[test]
    fn an_attach_leaves_copies_and_sets_out_unless_named() {
        let args = |argv: &[&str]| Cli::try_parse_from(argv).unwrap().args;
        let launched = args(&["trace", "--", "true"]);
        assert!(launched.effective_kinds().contains(&TraceKind::Memcpy));
        assert!(!launched.attach_records_copies());
        let attached = args(&["trace", "--pid", "1"]);
        let kinds = attached.effective_kinds();
        assert!(!kinds.iter().any(|k| COPY_KINDS.contains(k)), "{kinds:?}");
        assert!(kinds.contains(&TraceKind::Kernel) && kinds.contains(&TraceKind::Runtime));
        assert!(!attached.attach_records_copies());
        let named = args(&["trace", "--pid", "1", "--kinds", "kernel,memset"]);
        assert_eq!(
            named.effective_kinds(),
            [TraceKind::Kernel, TraceKind::Memset]
        );
        assert!(named.attach_records_copies());
    }

    #[test]
    fn an_attach_leaves_a_flight_recorder_unless_told_not_to() {
        let args = |argv: &[&str]| Cli::try_parse_from(argv).unwrap().args;
        assert!(args(&["trace", "--pid", "1"]).flight_recorder());
        let without = args(&["trace", "--pid", "1", "--no-flight-recorder"]);
        assert!(!without.flight_recorder());
        assert_eq!(without.misplaced_option(Backend::Cupti), None);
        assert_eq!(
            without.misplaced_option(Backend::Debugger),
            Some("--no-flight-recorder")
        );
    }

    #[test]
    fn a_first_trace_samples_pcs_first_unless_told_not_to_or_started_at_an_instant() {
        let args = |argv: &[&str]| Cli::try_parse_from(argv).unwrap().args;
        assert!(args(&["trace", "--pid", "1"]).pc_primer());
        let without = args(&["trace", "--pid", "1", "--no-pc-primer"]);
        assert!(!without.pc_primer());
        assert_eq!(without.misplaced_option(Backend::Cupti), None);
        assert_eq!(
            without.misplaced_option(Backend::Debugger),
            Some("--no-pc-primer")
        );
        assert!(!args(&["trace", "--pid", "1", "--start-at", "+5"]).pc_primer());
    }
}
