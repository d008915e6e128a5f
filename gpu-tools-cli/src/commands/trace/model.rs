//! What both backends produce: one trace model, from which the listing, the summary and the Chrome trace are made.

use std::collections::HashMap;
use std::sync::Arc;

use gpu_tools::trace::EndReason;

/// What tells one traced process from another: its stream's number (the connection it sent its records on; 0 for
/// the debugger backend's one process). A pid does not: processes in two PID namespaces (containers), or a pid used
/// again over a long trace, share one, and their correlation ids both start at 1.
pub type ProcessKey = usize;

/// A kernel launch as a backend saw it.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Process that launched it.
    pub process: ProcessKey,
    /// Demangled name (or the name as reported where it is not a mangled C++ name).
    pub name: Arc<str>,
    /// Start and end on the device, ns; `None` where the backend cannot time kernels.
    pub start: Option<u64>,
    pub end: Option<u64>,
    pub device: u32,
    pub context: u64,
    /// Stream id; `None` where the backend does not know it (the debugger backend).
    pub stream: Option<u64>,
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub correlation: Option<u32>,
    /// Registers per thread and shared memory per block (static + dynamic), where known.
    pub registers: Option<u16>,
    pub shared_memory: Option<u32>,
}

impl Kernel {
    /// Duration in ns when timed.
    pub fn duration(&self) -> Option<u64> {
        Some(self.end?.saturating_sub(self.start?))
    }
}

/// What a transfer was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TransferKind {
    /// A copy, with its direction (`HtoD`, `DtoH`, ...).
    Memcpy(&'static str),
    /// A set.
    Memset,
}

/// A memory copy or set.
#[derive(Debug, Clone)]
pub struct Transfer {
    pub process: ProcessKey,
    pub kind: TransferKind,
    pub bytes: u64,
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub context: u64,
    pub stream: u64,
    pub correlation: u32,
    /// `pinned -> device async`, `value 0x5a device`, ...
    pub detail: String,
}

impl Transfer {
    pub fn duration(&self) -> u64 {
        self.end.saturating_sub(self.start)
    }
}

/// A host API call.
#[derive(Debug, Clone)]
pub struct ApiCall {
    pub process: ProcessKey,
    /// Its process's pid, for what is said of the process.
    pub pid: u32,
    pub name: Arc<str>,
    /// `cuda_runtime`, `cuda_driver`, `hip_api`, `hsa_api` or `marker`.
    pub category: &'static str,
    pub start: u64,
    pub end: u64,
    pub correlation: u32,
}

/// A traced process.
#[derive(Debug, Clone, Default)]
pub struct Process {
    /// Its stream: what the records of its kernels, transfers and calls carry as their `process`.
    pub key: ProcessKey,
    pub pid: u32,
    pub command: String,
    /// Its job labels (`rank 3 (local 1)`), empty where its launcher set none.
    pub label: String,
    /// The process's stream ended with its end record (a normal exit): everything it sent arrived.
    pub ended: bool,
    /// Why its stream ended, as its end record says; `None` without one (and for the debugger backend).
    pub end: Option<EndReason>,
    /// Records that arrived after its end record: a process that handled the fatal signal its stream ended at, and
    /// ran on. The end record does not count them.
    pub after_end: u64,
    /// Records the process said it sent, and records that arrived.
    pub sent: Option<u64>,
    pub received: u64,
    /// Records the vendor dropped (full buffers), as the process reported them.
    pub dropped: u64,
    /// Records of unfinished work its writer left out at the window's end (its notice said how many).
    pub unfinished: u64,
    /// Records of the stream that could not be read.
    pub stream_errors: u64,
    /// Record batches the process's library lost to a panic of its record callback, as its end record said.
    pub callback_panics: u64,
    /// Records of work (kernels, copies, sets, graph launches, API calls, synchronizations, NVTX): what a window
    /// that saw the process launch anything holds.
    pub activity: u64,
    /// When the first of them arrived.
    pub first_activity: Option<std::time::Instant>,
}

impl Process {
    /// Its records are known to be incomplete: its stream never ended (crashed or killed before the library could
    /// send its end record), records could not be read, batches were lost to a panic in the library, the end record
    /// counted other records than arrived, or the stream ended at a fatal signal (a crash: its work still in flight
    /// then, kernels queued or running and calls not yet returned, has no record; records that followed, where it
    /// ran on, are not counted by anything).
    pub fn incomplete(&self) -> bool {
        !self.ended
            || self.stream_errors > 0
            || self.callback_panics > 0
            // An end record counting other than what arrived: records were lost or came twice.
            || self.sent.is_some_and(|sent| sent + 1 != self.received)
            || matches!(self.end, Some(EndReason::Signal(_)))
    }
}

/// The counters of one device sampled beside the trace (`--counters`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterSummary {
    /// The device as the traced processes number it.
    pub device: u32,
    pub name: String,
    /// The sampling period: `1 ms`, `250 us`, `a number of clocks`.
    pub every: String,
    /// Samples written, within the trace's span.
    pub samples: u64,
    /// Samples the sampler lost.
    pub lost: u64,
    /// Stretches without samples where none was lost, and the time they cover.
    pub gaps: u64,
    pub gap_ns: u64,
    /// Why the device's sampling stopped before the trace's end, where it did.
    pub error: Option<String>,
}

/// Everything a run produced.
#[derive(Debug, Default)]
pub struct Trace {
    pub processes: Vec<Process>,
    pub kernels: Vec<Kernel>,
    pub transfers: Vec<Transfer>,
    pub api: Vec<ApiCall>,
    /// Dropped records per (pid, context, stream).
    pub dropped: Vec<(u32, u32, u32, u64)>,
    /// CUDA graph launches recorded as a whole (graph mode): their kernels are not in `kernels`.
    pub graph_launches: u64,
    /// NVTX ranges and marks recorded (each range once, at its start).
    pub nvtx: u64,
    /// Whether kernels carry start and end.
    pub kernel_times: bool,
    /// Whether the backend sees copies and sets at all.
    pub sees_transfers: bool,
    /// Whether API records were collected.
    pub sees_api: bool,
    /// What the backend wants the user to know (printed to stderr).
    pub warnings: Vec<String>,
    /// The devices sampled with `--counters`, in the traced processes' order of them.
    pub counters: Vec<CounterSummary>,
}

impl Trace {
    /// Total dropped records.
    pub fn dropped_total(&self) -> u64 {
        self.dropped.iter().map(|d| d.3).sum()
    }

    /// The API call that issued each correlation id, per process (its [`ProcessKey`], not its pid): runtime calls
    /// win over the driver calls they make (the runtime call is what the program wrote).
    pub fn api_by_correlation(&self) -> HashMap<(ProcessKey, u32), &ApiCall> {
        let mut map: HashMap<(ProcessKey, u32), &ApiCall> = HashMap::new();
        for call in &self.api {
            let e = map.entry((call.process, call.correlation)).or_insert(call);
            if e.category != "cuda_runtime" && call.category == "cuda_runtime" {
                *e = call;
            }
        }
        map
    }

    /// Per process, its kernel launches (runtime or driver calls that launch one kernel) and how many of them have
    /// no kernel record of their correlation id, for processes with launch records. Kernels of CUDA graphs carry
    /// their graph launch's id, and a launch into a stream that is being captured runs nothing: neither is a kernel
    /// launch here, or has a record. Launches made after the process's last launch whose kernel has a record are
    /// counted apart ([`LaunchCoverage::queued_at_end`]): the GPU runs a stream's kernels in order, behind the CPU,
    /// so these had most likely not run when the window closed (a graph job's queue holds hundreds of launches).
    pub fn launches_without_kernels(&self) -> Vec<LaunchCoverage> {
        // Kernel records per (process, correlation id).
        let mut kernels: HashMap<(ProcessKey, u32), u64> = HashMap::new();
        for k in &self.kernels {
            if let Some(c) = k.correlation {
                *kernels.entry((k.process, c)).or_default() += 1;
            }
        }
        let captures = self.capture_spans();
        let in_capture = |a: &ApiCall| {
            captures
                .get(&a.process)
                .is_some_and(|spans| spans.iter().any(|&(b, e)| b <= a.start && a.start <= e))
        };
        // Per correlation id, its launch calls: a runtime launch and the driver launch it makes share the id and are
        // one launch, so the launches of an id are the larger of its runtime and its driver calls. Counted, not
        // merged: launches that share an id (CUPTI gave several the same) are each a launch. The earliest start.
        #[derive(Default)]
        struct Calls {
            pid: u32,
            runtime: u64,
            driver: u64,
            start: u64,
        }
        let mut launches: HashMap<(ProcessKey, u32), Calls> = HashMap::new();
        for a in self.api.iter().filter(|a| {
            matches!(a.category, "cuda_runtime" | "cuda_driver")
                && launches_a_kernel(&a.name)
                && !in_capture(a)
        }) {
            let calls = launches
                .entry((a.process, a.correlation))
                .or_insert_with(|| Calls {
                    pid: a.pid,
                    start: a.start,
                    ..Calls::default()
                });
            calls.start = calls.start.min(a.start);
            if a.category == "cuda_runtime" {
                calls.runtime += 1;
            } else {
                calls.driver += 1;
            }
        }
        // Per process, the start of its last launch that has its kernel record.
        let mut last_run: HashMap<ProcessKey, u64> = HashMap::new();
        for (key, calls) in &launches {
            if kernels.contains_key(key) {
                let last = last_run.entry(key.0).or_insert(calls.start);
                *last = (*last).max(calls.start);
            }
        }
        let mut per_process: HashMap<ProcessKey, LaunchCoverage> = HashMap::new();
        for (&(process, correlation), calls) in &launches {
            let e = per_process.entry(process).or_insert(LaunchCoverage {
                process,
                pid: calls.pid,
                ..LaunchCoverage::default()
            });
            let n = calls.runtime.max(calls.driver);
            e.launches += n;
            let missing =
                n.saturating_sub(kernels.get(&(process, correlation)).copied().unwrap_or(0));
            if missing == 0 {
                continue;
            }
            // A process none of whose launches has a record: a loss, not a queue.
            match last_run.get(&process) {
                Some(&last) if calls.start > last => e.queued_at_end += missing,
                _ => e.without += missing,
            }
        }
        // Kernels CUPTI gave without an end time at the window's last flush were left out by the writer (it said
        // how many): their launches had work still queued or running, wherever they stand in the window.
        for p in &self.processes {
            if let Some(e) = per_process.get_mut(&p.key) {
                let moved = p.unfinished.min(e.without);
                e.without -= moved;
                e.queued_at_end += moved;
            }
        }
        let mut out: Vec<LaunchCoverage> = per_process.into_values().collect();
        out.sort_unstable_by_key(|c| (c.pid, c.process));
        out
    }

    /// Per process, the spans from each stream-capture begin call to the next end call after it: launches made then
    /// may have gone into the capture (which runs nothing). Any thread's capture covers every thread of its process
    /// here (the records carry no thread), so launches beside a capture are not judged either.
    fn capture_spans(&self) -> HashMap<ProcessKey, Vec<(u64, u64)>> {
        let is = |name: &str, what: &str| {
            (name.starts_with("cudaStream") || name.starts_with("cuStream")) && name.contains(what)
        };
        let mut begins: HashMap<ProcessKey, Vec<u64>> = HashMap::new();
        let mut ends: HashMap<ProcessKey, Vec<u64>> = HashMap::new();
        for a in &self.api {
            if is(&a.name, "BeginCapture") {
                begins.entry(a.process).or_default().push(a.start);
            } else if is(&a.name, "EndCapture") {
                ends.entry(a.process).or_default().push(a.end);
            }
        }
        let mut spans: HashMap<ProcessKey, Vec<(u64, u64)>> = HashMap::new();
        for (process, mut b) in begins {
            b.sort_unstable();
            let mut e = ends.remove(&process).unwrap_or_default();
            e.sort_unstable();
            for start in b {
                // A capture whose end the trace did not see runs to the trace's end.
                let end = e.iter().copied().find(|&t| t >= start).unwrap_or(u64::MAX);
                spans.entry(process).or_default().push((start, end));
            }
        }
        spans
    }

    /// Earliest timestamp of the trace (0 when nothing is timed).
    pub fn origin(&self) -> u64 {
        let k = self.kernels.iter().filter_map(|k| k.start);
        let t = self.transfers.iter().map(|t| t.start);
        let a = self.api.iter().map(|a| a.start);
        k.chain(t).chain(a).min().unwrap_or(0)
    }
}

/// A process's kernel launches against its kernel records ([`Trace::launches_without_kernels`]).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LaunchCoverage {
    /// The process, and its pid (which another process may share).
    pub process: ProcessKey,
    pub pid: u32,
    /// Kernel launches outside stream captures.
    pub launches: u64,
    /// Launches without a kernel record, made before the last launch that has one: records CUPTI did not give.
    pub without: u64,
    /// Launches without a kernel record after the last one that has one: most likely still queued on the GPU when
    /// the window closed (their kernels ran after it).
    pub queued_at_end: u64,
}

/// Whether an API function (as records name it, with or without its `_ptsz` or `_vNNNN` suffix) launches one
/// kernel.
pub fn launches_a_kernel(name: &str) -> bool {
    const LAUNCHES: [&str; 6] = [
        "cudaLaunchKernel",
        "cudaLaunchKernelExC",
        "cudaLaunchCooperativeKernel",
        "cuLaunchKernel",
        "cuLaunchKernelEx",
        "cuLaunchCooperativeKernel",
    ];
    let base = name.strip_suffix("_ptsz").unwrap_or(name);
    let base = match base.rsplit_once("_v") {
        Some((b, v)) if !v.is_empty() && v.bytes().all(|c| c.is_ascii_digit()) => b,
        _ => base,
    };
    let base = base.strip_suffix("_ptsz").unwrap_or(base);
    LAUNCHES.contains(&base)
}

/// How many kernel launches without a kernel record a trace takes as its edges (a kernel still running when the
/// trace stopped), before it says that records are missing: this many, or 1% of the launches.
pub const LAUNCHES_WITHOUT_KERNELS_TOLERATED: u64 = 100;

/// The warning for a process whose kernel launches lack their kernel records beyond the edges of the trace; `who`
/// names the process ([`Trace::who`]).
pub fn missing_kernels_warning(c: &LaunchCoverage, who: &str) -> Option<String> {
    let (launches, without) = (c.launches, c.without);
    if without <= LAUNCHES_WITHOUT_KERNELS_TOLERATED.max(launches / 100) {
        return None;
    }
    Some(format!(
        "{who}: {without} of its {launches} kernel launches have no kernel record: CUPTI did not record \
         those kernels (launches during a stream capture, which run nothing, are not counted; a capture begun \
         before the trace would be); the kernel reports are short by up to that many"
    ))
}

/// The note for a process whose last launches had not run when the window closed, where they are more than the
/// edges of a trace usually hold; `who` names the process ([`Trace::who`]).
pub fn queued_at_end_note(c: &LaunchCoverage, who: &str) -> Option<String> {
    (c.queued_at_end > LAUNCHES_WITHOUT_KERNELS_TOLERATED).then(|| {
        format!(
            "{who} (note): the last {} of its {} kernel launches had not run on the GPU when the window closed (no \
             later launch has a kernel record): their kernels ran after it and are not in the trace",
            c.queued_at_end, c.launches
        )
    })
}

/// Most characters of a command that tells a process from others of its pid ([`Trace::who`]).
const MAX_WHO_COMMAND: usize = 40;

impl Trace {
    /// How what is said of process `key` names it: `process PID` where no other traced process has its pid; else
    /// with what tells it from those that do (two PID namespaces, a pid used again): its job labels (`process 1
    /// [rank 3]`), else its command (`process 100 [python eval.py]`, cut at 40 characters), else its stream's
    /// number (`process 100 [stream 2]`: its connection, the stream of its Chrome trace groups).
    pub fn who(&self, key: ProcessKey) -> String {
        let Some(p) = self.processes.iter().find(|p| p.key == key) else {
            return format!("the process of stream {key}");
        };
        let others: Vec<&Process> = self
            .processes
            .iter()
            .filter(|o| o.pid == p.pid && o.key != key)
            .collect();
        if others.is_empty() {
            return format!("process {}", p.pid);
        }
        let apart = |of: fn(&Process) -> &str| {
            let mine = of(p);
            (!mine.is_empty() && others.iter().all(|o| of(o) != mine)).then_some(mine)
        };
        if let Some(label) = apart(|q| &q.label) {
            return format!("process {} [{label}]", p.pid);
        }
        if let Some(command) = apart(|q| &q.command) {
            let cut: String = if command.chars().count() > MAX_WHO_COMMAND {
                let mut c: String = command.chars().take(MAX_WHO_COMMAND - 1).collect();
                c.push('…');
                c
            } else {
                command.to_string()
            };
            return format!("process {} [{cut}]", p.pid);
        }
        format!("process {} [stream {key}]", p.pid)
    }
}

/// Demangles C++ names once each, as torch.profiler prints them (`void at::native::...(...)`).
#[derive(Debug, Default)]
pub struct Demangler {
    raw: bool,
    cache: HashMap<Arc<str>, Arc<str>>,
}

impl Demangler {
    /// `raw`: keep names as reported.
    pub fn new(raw: bool) -> Self {
        Demangler {
            raw,
            cache: HashMap::new(),
        }
    }

    pub fn name(&mut self, mangled: &Arc<str>) -> Arc<str> {
        if self.raw {
            return Arc::clone(mangled);
        }
        if let Some(n) = self.cache.get(mangled) {
            return Arc::clone(n);
        }
        let demangled: Arc<str> =
            crate::demangle::demangle(mangled).map_or_else(|| Arc::clone(mangled), Arc::from);
        self.cache
            .insert(Arc::clone(mangled), Arc::clone(&demangled));
        demangled
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_launch_calls_are_told_apart_from_others() {
        for n in [
            "cudaLaunchKernel",
            "cudaLaunchKernel_v7000",
            "cudaLaunchKernel_ptsz",
            "cudaLaunchKernelExC_v11060",
            "cuLaunchKernel",
            "cuLaunchKernelEx_ptsz",
            "cudaLaunchCooperativeKernel",
        ] {
            assert!(launches_a_kernel(n), "{n}");
        }
        for n in [
            "cudaLaunchHostFunc",
            "cudaGraphLaunch",
            "cuGraphLaunch",
            "cudaMemsetAsync",
            "cuLaunchKernel_vx",
        ] {
            assert!(!launches_a_kernel(n), "{n}");
        }
    }

    /// A call of process `pid` (its own process: one stream per pid here).
    fn api(pid: u32, name: &str, category: &'static str, correlation: u32) -> ApiCall {
        ApiCall {
            process: pid as ProcessKey,
            pid,
            name: Arc::from(name),
            category,
            start: 0,
            end: 0,
            correlation,
        }
    }

    fn kernel(pid: u32, correlation: u32) -> Kernel {
        Kernel {
            process: pid as ProcessKey,
            name: Arc::from("k"),
            start: Some(0),
            end: Some(1),
            device: 0,
            context: 1,
            stream: Some(7),
            grid: [1, 1, 1],
            block: [1, 1, 1],
            correlation: Some(correlation),
            registers: None,
            shared_memory: None,
        }
    }

    #[test]
    fn launches_without_their_kernel_record_are_counted_per_process() {
        let mut t = Trace::default();
        // Process 1: 300 launches (runtime call and its driver call share the id), 150 kernels recorded.
        for c in 0..300 {
            t.api.push(api(1, "cudaLaunchKernel", "cuda_runtime", c));
            t.api.push(api(1, "cuLaunchKernel", "cuda_driver", c));
            if c % 2 == 0 {
                t.kernels.push(kernel(1, c));
            }
        }
        // Process 2: every launch has its kernel; other calls are not launches.
        for c in 0..50 {
            t.api.push(api(2, "cuLaunchKernelEx", "cuda_driver", c));
            t.api
                .push(api(2, "cudaMemsetAsync", "cuda_runtime", 1000 + c));
            t.kernels.push(kernel(2, c));
        }
        let cov = |pid: u32, launches, without, queued_at_end| LaunchCoverage {
            process: pid as ProcessKey,
            pid,
            launches,
            without,
            queued_at_end,
        };
        assert_eq!(
            t.launches_without_kernels(),
            [cov(1, 300, 150, 0), cov(2, 50, 0, 0)]
        );
        let w = missing_kernels_warning(&cov(1, 300, 150, 0), "process 1")
            .expect("150 of 300 is past the edges");
        assert!(
            w.starts_with("process 1: 150 of its 300 kernel launches"),
            "{w}"
        );
        assert_eq!(
            missing_kernels_warning(&cov(2, 50, 0, 0), "process 2"),
            None
        );
        // Launches inside a stream capture run nothing: they are not judged.
        let mut c = Trace::default();
        let mut begin = api(4, "cudaStreamBeginCapture_v10000", "cuda_runtime", 10_000);
        begin.start = 100;
        begin.end = 110;
        let mut end = api(4, "cudaStreamEndCapture", "cuda_runtime", 10_001);
        end.start = 5_000;
        end.end = 5_010;
        c.api.extend([begin, end]);
        for i in 0..500u32 {
            let mut l = api(4, "cudaLaunchKernel", "cuda_runtime", i);
            l.start = 200 + u64::from(i);
            c.api.push(l);
        }
        let mut after = api(4, "cudaLaunchKernel", "cuda_runtime", 9_000);
        after.start = 6_000;
        c.api.push(after);
        // No launch of process 4 has its record: a loss, not a queue.
        assert_eq!(c.launches_without_kernels(), [cov(4, 1, 1, 0)]);
        // A few at the edges of a long trace are not a loss.
        assert_eq!(
            missing_kernels_warning(&cov(3, 1_000_000, 5_000, 0), "process 3"),
            None
        );
        assert!(missing_kernels_warning(&cov(3, 1_000_000, 20_000, 0), "process 3").is_some());
    }

    #[test]
    fn launches_that_share_a_correlation_id_are_each_counted() {
        // 300 runtime launches with kernels, and 3,000 whose records all carry one id and no kernel: the shared id
        // must not make them one launch.
        let mut t = Trace::default();
        for c in 1..=300u32 {
            let mut a = api(6, "cudaLaunchKernel", "cuda_runtime", c);
            a.start = 10 * u64::from(c);
            t.api.push(a);
            t.kernels.push(kernel(6, c));
        }
        for i in 0..3_000u64 {
            let mut a = api(6, "cudaLaunchKernel", "cuda_runtime", 0);
            a.start = 5 + 10 * (i % 290);
            t.api.push(a);
        }
        let got = t.launches_without_kernels();
        assert_eq!(
            got,
            [LaunchCoverage {
                process: 6,
                pid: 6,
                launches: 3_300,
                without: 3_000,
                queued_at_end: 0
            }]
        );
        assert!(missing_kernels_warning(&got[0], "process").is_some());
    }

    #[test]
    fn a_capture_or_unfinished_count_of_one_process_does_not_excuse_another_with_its_pid() {
        // Two processes with pid 4 (streams 1 and 2): the first captures a stream from 100 to 5,010 and left 500
        // kernels out unfinished; the second launches 500 kernels in that time and none has a record.
        let mut t = Trace::default();
        let mut begin = api(4, "cudaStreamBeginCapture_v10000", "cuda_runtime", 10_000);
        (begin.process, begin.start, begin.end) = (1, 100, 110);
        let mut end = api(4, "cudaStreamEndCapture", "cuda_runtime", 10_001);
        (end.process, end.start, end.end) = (1, 5_000, 5_010);
        t.api.extend([begin, end]);
        for i in 0..500u32 {
            let mut l = api(4, "cudaLaunchKernel", "cuda_runtime", i + 1);
            (l.process, l.start) = (2, 200 + u64::from(i));
            t.api.push(l);
        }
        t.processes.push(Process {
            key: 1,
            pid: 4,
            unfinished: 500,
            ..Process::default()
        });
        let got = t.launches_without_kernels();
        assert_eq!(
            got,
            [LaunchCoverage {
                process: 2,
                pid: 4,
                launches: 500,
                without: 500,
                queued_at_end: 0
            }]
        );
        assert!(missing_kernels_warning(&got[0], "process").is_some());
    }

    #[test]
    fn kernels_left_out_unfinished_are_not_taken_for_missing_records() {
        // 1000 launches; 760 of those before the last recorded kernel have no record: the writer left 760 kernels
        // out that CUPTI gave without an end time (its notice said so).
        let mut t = Trace::default();
        for c in 0..1000u32 {
            let mut a = api(7, "cudaLaunchKernel", "cuda_runtime", c);
            a.start = 10 * u64::from(c);
            t.api.push(a);
            if !(200..960).contains(&c) {
                t.kernels.push(kernel(7, c));
            }
        }
        assert!(missing_kernels_warning(&t.launches_without_kernels()[0], "process").is_some());
        t.processes.push(Process {
            key: 7,
            pid: 7,
            unfinished: 760,
            ..Process::default()
        });
        let got = t.launches_without_kernels();
        assert_eq!(
            got,
            [LaunchCoverage {
                process: 7,
                pid: 7,
                launches: 1000,
                without: 0,
                queued_at_end: 760
            }]
        );
        assert_eq!(missing_kernels_warning(&got[0], "process"), None);
    }

    #[test]
    fn launches_after_the_last_one_that_ran_are_queued_not_lost() {
        let mut t = Trace::default();
        // 1000 launches 10 ns apart; kernels recorded for 0..=799 except 100..=149; 800.. had not run.
        for c in 0..1000u32 {
            let mut a = api(5, "cudaLaunchKernel", "cuda_runtime", c);
            a.start = 10 * u64::from(c);
            t.api.push(a);
            if c < 800 && !(100..150).contains(&c) {
                t.kernels.push(kernel(5, c));
            }
        }
        let got = t.launches_without_kernels();
        assert_eq!(
            got,
            [LaunchCoverage {
                process: 5,
                pid: 5,
                launches: 1000,
                without: 50,
                queued_at_end: 200
            }]
        );
        assert_eq!(missing_kernels_warning(&got[0], "process"), None);
        let n = queued_at_end_note(&got[0], "process").expect("200 queued launches are said");
        assert!(n.contains("last 200 of its 1000"), "{n}");
    }

    #[test]
    fn the_demangler_caches_and_can_be_turned_off() {
        let mangled: Arc<str> = Arc::from("_Z7add_onePji");
        let mut d = Demangler::new(false);
        let a = d.name(&mangled);
        let b = d.name(&mangled);
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "add_one(unsigned int*, int)");
        assert_eq!(&*Demangler::new(true).name(&mangled), "_Z7add_onePji");
    }
}
