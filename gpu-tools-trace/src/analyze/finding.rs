//! What [`diagnose`](super::Trace::diagnose) returns: per GPU its window, busy and idle time and steps; the
//! findings, ranked by the GPU time they cost; and what the trace lacks to say more.

/// A GPU as one traced process used it: the stream it came in (file and stream number), its ordinal there, and
/// the process's pid, host and rank.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GpuId {
    /// The file number (the order the files were given, from 0).
    pub file: u32,
    /// The stream number in that file.
    pub stream: u32,
    /// The device ordinal, as the process numbered it.
    pub device: u32,
    /// The process id.
    pub pid: u32,
    /// The host name (empty where the stream did not say).
    pub host: String,
    /// The process's rank (`RANK`, `OMPI_COMM_WORLD_RANK`, ...), where it has one.
    pub rank: Option<u32>,
    /// Another traced process with device work has this one's pid, host and rank (two PID namespaces on one host,
    /// a pid used again): the text then names the file and stream too.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub shared: bool,
}

impl std::fmt::Display for GpuId {
    /// `GPU 0 of pid 1611 on vm`, `GPU 3 of rank 5 (pid 1005 on h2)`; where [`shared`](Self::shared), `GPU 0 of
    /// pid 1 on vm (file 0 stream 1)`, `GPU 3 of rank 5 (pid 1 on h2, file 0 stream 1)`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let on = if self.host.is_empty() {
            String::new()
        } else {
            format!(" on {}", self.host)
        };
        let stream = format!("file {} stream {}", self.file, self.stream);
        match (self.rank, self.shared) {
            (Some(rank), false) => write!(
                f,
                "GPU {} of rank {rank} (pid {}{on})",
                self.device, self.pid
            ),
            (Some(rank), true) => write!(
                f,
                "GPU {} of rank {rank} (pid {}{on}, {stream})",
                self.device, self.pid
            ),
            (None, false) => write!(f, "GPU {} of pid {}{on}", self.device, self.pid),
            (None, true) => write!(f, "GPU {} of pid {}{on} ({stream})", self.device, self.pid),
        }
    }
}

/// Where a GPU's steps came from.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(
    feature = "serde",
    serde(tag = "source", content = "name", rename_all = "snake_case")
)]
pub enum StepSource {
    /// An NVTX range that repeats (its name, numbers at its end left out: `ProfilerStep#12` is `ProfilerStep`).
    Nvtx(String),
    /// The launches of one CUDA graph (its name: `[CUDA graph 5]`).
    Graph(String),
    /// The repeating pattern of device operations: each step from one operation of this name to its next.
    Pattern(String),
    /// No step was found.
    None,
}

/// A GPU's steps.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Steps {
    /// Where they came from.
    pub source: StepSource,
    /// Steps analysed (the warm-up left out).
    pub count: u64,
    /// Leading steps left out as warm-up: each more than twice the median step.
    pub warmup: u64,
    /// Median step, ns.
    pub median: u64,
    /// 90th percentile (nearest rank), ns.
    pub p90: u64,
}

/// Why a GPU was idle: each idle gap of the analysed window has one cause, decided at the instant the GPU ran out
/// of work, from what the host thread that issued the next work was doing then.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum IdleCause {
    /// The host waited for the device: a synchronisation call, a blocking copy, an implicit synchronisation
    /// (`cudaFree`), a `.item()`-style read of a result.
    Sync,
    /// The host was in a copy from or to pageable (not page-locked) memory, or in the synchronisation after it.
    PageableCopy,
    /// The host was in a small copy (under 64 KiB), or in the synchronisation after it.
    SmallCopy,
    /// Inside a step, the host issued the next work only after the GPU had run out: launch calls and the host's
    /// own work between them (launch-bound).
    Launch,
    /// At a step's start, the host issued the step's first work only after the GPU had run out: work between
    /// steps (the input pipeline, logging, the loop itself).
    BetweenSteps,
    /// The next work had been issued before the GPU ran out, and waited on the device's side (an event, another
    /// stream, another process).
    Queued,
    /// No API record says who issued the next work.
    Unknown,
}

impl IdleCause {
    /// Every cause, in the order of this enum.
    pub const ALL: [IdleCause; 7] = [
        IdleCause::Sync,
        IdleCause::PageableCopy,
        IdleCause::SmallCopy,
        IdleCause::Launch,
        IdleCause::BetweenSteps,
        IdleCause::Queued,
        IdleCause::Unknown,
    ];

    /// The cause's name in machine-readable output: `sync`, `pageable_copy`, `small_copy`, `launch`,
    /// `between_steps`, `queued`, `unknown`.
    pub fn id(self) -> &'static str {
        match self {
            IdleCause::Sync => "sync",
            IdleCause::PageableCopy => "pageable_copy",
            IdleCause::SmallCopy => "small_copy",
            IdleCause::Launch => "launch",
            IdleCause::BetweenSteps => "between_steps",
            IdleCause::Queued => "queued",
            IdleCause::Unknown => "unknown",
        }
    }
}

/// One GPU's analysed window.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct GpuSummary {
    /// The GPU.
    pub gpu: GpuId,
    /// Start of the window analysed, ns on the stream's clock: the first step after the warm-up, or (without
    /// steps) the GPU's first operation.
    pub start: u64,
    /// Its end: the last step's end, or the GPU's last operation's.
    pub end: u64,
    /// Time in the window during which at least one operation (kernel, copy, set, graph) ran, ns.
    pub busy: u64,
    /// The rest of the window, ns.
    pub idle: u64,
    /// The GPU's steps.
    pub steps: Steps,
    /// The idle time by cause, ns; causes with none left out, the largest first.
    pub idle_by_cause: Vec<(IdleCause, u64)>,
    /// Time from the GPU's first operation to the window's start (start-up and warm-up, left out), ns.
    pub before: u64,
}

/// What a finding is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum FindingKind {
    /// The GPU idles while the host waits in synchronisation inside the step loop (idle cause `sync`).
    SyncStall,
    /// The GPU waits for the host to launch short kernels (idle cause `launch`).
    LaunchBound,
    /// The GPU idles between steps (idle cause `between_steps`).
    BetweenSteps,
    /// Copies from or to pageable memory stall the GPU (idle cause `pageable_copy`).
    PageableCopies,
    /// Small repeated copies stall the GPU (idle cause `small_copy`).
    SmallCopies,
    /// Work queued on the GPU waits on the device's side (idle cause `queued`).
    QueuedWork,
    /// One rank the others wait for in collectives.
    Straggler,
    /// Time waiting in collectives, without a single rank to blame.
    CollectiveWait,
    /// Collectives running with no computation beside them, beyond the wait.
    ExposedCommunication,
    /// Kernels bound by DRAM bandwidth (device counters).
    MemoryBound,
    /// Kernels bound by computation (device counters).
    ComputeBound,
    /// Kernels that leave the SMs idle much of their time (device counters).
    LowSmActivity,
}

impl FindingKind {
    /// The kind's name in machine-readable output: `sync_stall`, `launch_bound`, `between_steps`,
    /// `pageable_copies`, `small_copies`, `queued_work`, `straggler`, `collective_wait`, `exposed_communication`,
    /// `memory_bound`, `compute_bound`, `low_sm_activity`.
    pub fn id(self) -> &'static str {
        match self {
            FindingKind::SyncStall => "sync_stall",
            FindingKind::LaunchBound => "launch_bound",
            FindingKind::BetweenSteps => "between_steps",
            FindingKind::PageableCopies => "pageable_copies",
            FindingKind::SmallCopies => "small_copies",
            FindingKind::QueuedWork => "queued_work",
            FindingKind::Straggler => "straggler",
            FindingKind::CollectiveWait => "collective_wait",
            FindingKind::ExposedCommunication => "exposed_communication",
            FindingKind::MemoryBound => "memory_bound",
            FindingKind::ComputeBound => "compute_bound",
            FindingKind::LowSmActivity => "low_sm_activity",
        }
    }
}

/// What a piece of evidence names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[cfg_attr(feature = "serde", serde(rename_all = "snake_case"))]
#[non_exhaustive]
pub enum EvidenceKind {
    /// A kernel (its name as recorded).
    Kernel,
    /// An API function.
    Call,
    /// Copies (their direction and memory).
    Copy,
    /// A rank of a job.
    Rank,
    /// An NVTX range.
    Nvtx,
    /// The steps.
    Step,
    /// Device counters of a kernel.
    Counter,
    /// A GPU.
    Gpu,
    /// A repeating sequence of operations.
    Pattern,
    /// An idle gap, or the idle gaps of a cause.
    Gap,
}

impl EvidenceKind {
    /// The kind's name in machine-readable output: `kernel`, `call`, `copy`, `rank`, `nvtx`, `step`, `counter`,
    /// `gpu`, `pattern`, `gap`.
    pub fn id(self) -> &'static str {
        match self {
            EvidenceKind::Kernel => "kernel",
            EvidenceKind::Call => "call",
            EvidenceKind::Copy => "copy",
            EvidenceKind::Rank => "rank",
            EvidenceKind::Nvtx => "nvtx",
            EvidenceKind::Step => "step",
            EvidenceKind::Counter => "counter",
            EvidenceKind::Gpu => "gpu",
            EvidenceKind::Pattern => "pattern",
            EvidenceKind::Gap => "gap",
        }
    }
}

/// One piece of evidence: what it names, how many, how long, and a sentence.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Evidence {
    /// What it names.
    pub kind: EvidenceKind,
    /// The name (a kernel's as recorded, an API function's, an NVTX range's, `rank 5`, ...).
    pub name: String,
    /// How many (calls, launches, copies, steps), where that counts.
    pub count: Option<u64>,
    /// How long, ns, where that counts (what the sentence says it is).
    pub time: Option<u64>,
    /// What it says, in words (names as recorded: a reader demangles them).
    pub text: String,
}

/// A time range a finding concerns, on the stream's clock of one GPU's process.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Span {
    /// File number.
    pub file: u32,
    /// Stream number in that file.
    pub stream: u32,
    /// Device ordinal.
    pub device: u32,
    /// Start, ns.
    pub start: u64,
    /// End, ns.
    pub end: u64,
}

/// Most spans a finding keeps: the longest.
pub const MAX_SPANS: usize = 256;

/// A finding: what costs GPU time, how much (an estimate and its basis), the evidence, and what to try.
#[derive(Debug, Clone, PartialEq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Finding {
    /// What it is about.
    pub kind: FindingKind,
    /// One line saying it.
    pub title: String,
    /// The GPU time it costs, ns: an estimate, summed over the GPUs it concerns.
    pub cost: u64,
    /// `cost` as a share of the GPU time analysed (the sum of every GPU's window), 0 to 1.
    pub share: f64,
    /// How `cost` was estimated.
    pub basis: String,
    /// What the trace shows, the most telling first.
    pub evidence: Vec<Evidence>,
    /// What to try.
    pub advice: Vec<String>,
    /// The time ranges it concerns (at most [`MAX_SPANS`], the longest), for a timeline.
    pub spans: Vec<Span>,
}

/// The analysis of one or more traces.
#[derive(Debug, Clone, PartialEq, Default)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct Diagnosis {
    /// Every GPU with device work, in (file, stream, device) order.
    pub gpus: Vec<GpuSummary>,
    /// The GPU time analysed: the sum of the GPUs' windows, ns.
    pub gpu_time: u64,
    /// The findings, the costliest first; none under [`MIN_SHARE`](super::MIN_SHARE) of `gpu_time`.
    pub findings: Vec<Finding>,
    /// What the trace lacks to say more, each said once.
    pub lacks: Vec<String>,
    /// Each traced process whose trace ended at a fatal signal (a crash), in (file, stream) order: said before the
    /// findings, which cannot see its work then in flight.
    pub ended_at_signal: Vec<SignalEnd>,
}

/// A traced process whose trace ended at a fatal signal: what it had recorded was flushed in the signal's handler,
/// but its work then in flight (kernels queued or running, calls not yet returned) has no record, so its idle time
/// and its last steps near the end are not whole.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
pub struct SignalEnd {
    /// The file it was read from (its number).
    pub file: u32,
    /// Its stream in that file.
    pub stream: u32,
    /// Its process id.
    pub pid: u32,
    /// Its host (empty where unknown).
    pub host: String,
    /// Its rank, where a rank variable was set.
    pub rank: Option<u32>,
    /// The signal's number.
    pub signal: u8,
    /// When its stream ended, ns on the stream's clock.
    pub time: u64,
    /// Said as a sentence: `the trace of pid 100 on vm ended at signal 11 (SIGSEGV), which was ending the process:
    /// ...`.
    pub text: String,
}
