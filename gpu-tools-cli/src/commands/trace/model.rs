//! What both backends produce: one trace model, from which the listing, the summary and the Chrome trace are made.

use std::collections::HashMap;
use std::sync::Arc;

/// A kernel launch as a backend saw it.
#[derive(Debug, Clone)]
pub struct Kernel {
    /// Process that launched it.
    pub pid: u32,
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
    pub pid: u32,
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
    pub pid: u32,
    pub command: String,
    /// Its job labels (`rank 3 (local 1)`), empty where its launcher set none.
    pub label: String,
    /// The process's stream ended with its end record (a normal exit): everything it sent arrived.
    pub ended: bool,
    /// Records the process said it sent, and records that arrived.
    pub sent: Option<u64>,
    pub received: u64,
    /// Records the vendor dropped (full buffers), as the process reported them.
    pub dropped: u64,
    /// Records of the stream that could not be read.
    pub stream_errors: u64,
    /// Records of work (kernels, copies, sets, graph launches, API calls, synchronizations, NVTX): what a window
    /// that saw the process launch anything holds.
    pub activity: u64,
    /// When the first of them arrived.
    pub first_activity: Option<std::time::Instant>,
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

    /// The API call that issued each correlation id, per process: runtime calls win over the driver calls they
    /// make (the runtime call is what the program wrote).
    pub fn api_by_correlation(&self) -> HashMap<(u32, u32), &ApiCall> {
        let mut map: HashMap<(u32, u32), &ApiCall> = HashMap::new();
        for call in &self.api {
            let e = map.entry((call.pid, call.correlation)).or_insert(call);
            if e.category != "cuda_runtime" && call.category == "cuda_runtime" {
                *e = call;
            }
        }
        map
    }

    /// Earliest timestamp of the trace (0 when nothing is timed).
    pub fn origin(&self) -> u64 {
        let k = self.kernels.iter().filter_map(|k| k.start);
        let t = self.transfers.iter().map(|t| t.start);
        let a = self.api.iter().map(|a| a.start);
        k.chain(t).chain(a).min().unwrap_or(0)
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
