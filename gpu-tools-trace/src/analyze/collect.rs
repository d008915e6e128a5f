//! What the analysis keeps of each traced process while the records are read: its device operations, its API
//! calls, its NVTX ranges and synchronisations (and, for a counter stream, its samples), compactly, names interned.

use std::collections::HashMap;
use std::sync::Arc;

use crate::record::{
    ApiRecord, CopyKind, KernelRecord, MarkerKind, MarkerRecord, MemcpyRecord, MemoryKind,
    ProcessInfo, Record,
};
use crate::report::collective_name;
use crate::{CounterGap, CounterSample};

/// Names (kernels, API functions, NVTX ranges, the identities of copies and sets) by a number.
#[derive(Debug, Default)]
pub(crate) struct Names {
    list: Vec<Arc<str>>,
    index: HashMap<Arc<str>, u32>,
}

impl Names {
    /// The number of `name`, given one on first sight.
    pub(crate) fn id(&mut self, name: &str) -> u32 {
        if let Some(&id) = self.index.get(name) {
            return id;
        }
        let id = u32::try_from(self.list.len()).unwrap_or(u32::MAX);
        let name: Arc<str> = Arc::from(name);
        self.list.push(Arc::clone(&name));
        self.index.insert(name, id);
        id
    }

    /// The name of number `id`, shared (an empty name for a number never given).
    pub(crate) fn arc(&self, id: u32) -> Arc<str> {
        self.list
            .get(id as usize)
            .map_or_else(|| Arc::from(""), Arc::clone)
    }

    /// The name of number `id` (`?` for a number never given).
    pub(crate) fn get(&self, id: u32) -> &str {
        self.list.get(id as usize).map_or("?", |n| n)
    }
}

/// What a device operation is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum What {
    /// A kernel; `nccl` where it is an NCCL collective; `blocks` in its grid.
    Kernel { nccl: bool, blocks: u64 },
    /// A copy.
    Copy {
        kind: CopyKind,
        src: MemoryKind,
        dst: MemoryKind,
        bytes: u64,
        blocking: bool,
    },
    /// A memory set.
    Set,
    /// A CUDA graph launch traced as one event (graph mode).
    Graph,
}

impl What {
    /// Whether a copy moves pageable (not page-locked) host memory.
    pub(crate) fn pageable(self) -> bool {
        matches!(self, What::Copy { src, dst, .. }
            if src == MemoryKind::Pageable || dst == MemoryKind::Pageable)
    }
}

/// A device operation: a kernel, copy, set or graph launch.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub start: u64,
    pub end: u64,
    pub device: u32,
    pub stream: u32,
    pub correlation: u32,
    /// What identifies it among the operations of a step: the kernel's name, `[CUDA memcpy HtoD 4096 B]`, ...
    pub name: u32,
    pub what: What,
}

/// How an API function bears on the device's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CallClass {
    /// Launches device work (kernels, graphs).
    Launch,
    /// An asynchronous copy or set (it blocks the host only for pageable memory).
    Copy,
    /// A copy that returns when it is done (`cudaMemcpy`).
    BlockingCopy,
    /// Waits for the device: `cudaDeviceSynchronize`, stream and event synchronisation, or an implicit one
    /// (`cudaFree`).
    Sync,
    /// Anything else.
    Other,
}

/// An API function's class from its name (CUDA runtime and driver, HIP), suffixes such as `_v2` and `_ptsz`
/// ignored.
pub(crate) fn call_class(name: &str) -> CallClass {
    let base = name
        .trim_end_matches("_ptsz")
        .trim_end_matches("_ptds")
        .trim_end_matches("_v2")
        .trim_end_matches("_v3");
    // Waits for the device by name; `cudaFree`, `cudaFreeHost` and their driver and HIP forms synchronise the
    // device implicitly (CUDA runtime documentation, "API synchronization behavior").
    const SYNC: [&str; 15] = [
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaThreadSynchronize",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "cudaFree",
        "cudaFreeHost",
        "cuMemFree",
        "cuMemFreeHost",
        "hipFree",
    ];
    if SYNC.contains(&base) {
        return CallClass::Sync;
    }
    let lower = base.to_ascii_lowercase();
    if lower.contains("memcpy") || lower.contains("memset") {
        return if lower.contains("async") || lower.contains("memset") {
            CallClass::Copy
        } else {
            CallClass::BlockingCopy
        };
    }
    if base.contains("Launch") {
        return CallClass::Launch;
    }
    CallClass::Other
}

/// A host API call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Call {
    pub start: u64,
    pub end: u64,
    pub thread: u32,
    pub name: u32,
    pub class: CallClass,
    pub correlation: u32,
}

/// A closed NVTX range.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Range {
    pub thread: u32,
    pub start: u64,
    pub end: u64,
    /// The name as recorded (domain-qualified).
    pub name: u32,
}

/// Most NVTX ranges kept open per stream; past it a range never closed is forgotten (a leak in the program's
/// markers).
const MAX_OPEN: usize = 1 << 16;

/// Most notices kept per stream.
const MAX_NOTICES: usize = 256;

/// What is kept of one stream (a traced process, or the tracer's counter stream).
#[derive(Debug, Default)]
pub(crate) struct Process {
    pub pid: u32,
    pub header_pid: Option<u32>,
    pub started: bool,
    pub info: Option<ProcessInfo>,
    pub command: String,
    pub ops: Vec<Op>,
    pub calls: Vec<Call>,
    pub ranges: Vec<Range>,
    open: HashMap<u32, (u32, u64, u32)>,
    /// Synchronisation records: (start, end, correlation of the call).
    pub syncs: Vec<(u64, u64, u32)>,
    /// Records the vendor dropped.
    pub dropped: u64,
    /// CUDA graphs traced as whole launches (graph mode).
    pub graph_launches: u64,
    pub samples: Vec<CounterSample>,
    pub gaps: Vec<CounterGap>,
    pub counter_records: bool,
    /// The texts of its notices (the first [`MAX_NOTICES`]): a counter stream names its devices there.
    pub notices: Vec<String>,
    /// Whether its end record was read.
    pub ended: bool,
    /// Its (first) end record's reason and time.
    pub end: Option<(crate::record::EndReason, u64)>,
}

impl Process {
    /// A counter stream: its header says so, or (read without a header) it holds counter records and no process
    /// start.
    pub(crate) fn is_counters(&self) -> bool {
        !self.started
            && (self.header_pid == Some(crate::counters::COUNTER_STREAM_PID)
                || self.counter_records)
    }

    /// Takes one record; names go to `names`.
    pub(crate) fn add(&mut self, record: &Record, names: &mut Names) {
        match record {
            Record::ProcessStart(p) => {
                self.pid = p.pid;
                self.started = true;
                self.command = p.command.clone();
            }
            Record::ProcessEnd(e) => {
                self.ended = true;
                self.end.get_or_insert((e.reason, e.time));
            }
            Record::ProcessInfo(i) => self.info = Some(i.clone()),
            Record::Dropped(d) => self.dropped = self.dropped.saturating_add(d.count),
            Record::Kernel(k) => self.kernel(k, names),
            Record::Memcpy(m) => self.copy(m, names),
            Record::Memset(m) => {
                let name = names.id(&format!("[CUDA memset {} B]", m.bytes));
                self.op(
                    m.start,
                    m.end,
                    m.device,
                    m.stream,
                    m.correlation,
                    name,
                    What::Set,
                );
            }
            Record::GraphLaunch(g) => {
                self.graph_launches += 1;
                let name = names.id(&format!("[CUDA graph {}]", g.graph_id));
                self.op(
                    g.start,
                    g.end,
                    g.device,
                    g.stream,
                    g.correlation,
                    name,
                    What::Graph,
                );
            }
            Record::Api(a) => self.call(a, names),
            Record::Synchronization(s) => {
                self.syncs
                    .push((s.start, s.end.max(s.start), s.correlation))
            }
            Record::Marker(m) => self.marker(m, names),
            Record::CounterSample(c) => {
                self.counter_records = true;
                self.samples.push(c.clone());
            }
            Record::Notice(n) if self.notices.len() < MAX_NOTICES => {
                self.notices.push(n.text.clone())
            }
            Record::CounterGap(g) => {
                self.counter_records = true;
                self.gaps.push(*g);
            }
            _ => {}
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn op(
        &mut self,
        start: u64,
        end: u64,
        device: u32,
        stream: u32,
        correlation: u32,
        name: u32,
        what: What,
    ) {
        self.ops.push(Op {
            start,
            end: end.max(start),
            device,
            stream,
            correlation,
            name,
            what,
        });
    }

    fn kernel(&mut self, k: &KernelRecord, names: &mut Names) {
        let nccl = collective_name(&k.name).is_some();
        let blocks = k.grid.iter().map(|&d| u64::from(d)).product();
        let name = names.id(&k.name);
        let what = What::Kernel { nccl, blocks };
        self.op(
            k.start,
            k.end,
            k.device,
            k.stream,
            k.correlation,
            name,
            what,
        );
    }

    fn copy(&mut self, m: &MemcpyRecord, names: &mut Names) {
        let name = names.id(&format!("[CUDA memcpy {} {} B]", m.kind.name(), m.bytes));
        let what = What::Copy {
            kind: m.kind,
            src: m.src,
            dst: m.dst,
            bytes: m.bytes,
            blocking: !m.is_async,
        };
        self.op(
            m.start,
            m.end,
            m.device,
            m.stream,
            m.correlation,
            name,
            what,
        );
    }

    fn call(&mut self, a: &ApiRecord, names: &mut Names) {
        let name = if a.name.is_empty() {
            names.id(&format!("{} cbid {}", a.domain.name(), a.cbid))
        } else {
            names.id(&a.name)
        };
        let class = if a.name.is_empty() {
            CallClass::Other
        } else {
            call_class(&a.name)
        };
        self.calls.push(Call {
            start: a.start,
            end: a.end.max(a.start),
            thread: a.thread,
            name,
            class,
            correlation: a.correlation,
        });
    }

    fn marker(&mut self, m: &MarkerRecord, names: &mut Names) {
        match m.kind {
            MarkerKind::Start if self.open.len() < MAX_OPEN => {
                let full = if m.domain.is_empty() {
                    names.id(&m.name)
                } else {
                    names.id(&format!("{}:{}", m.domain, m.name))
                };
                self.open.insert(m.id, (m.thread, m.time, full));
            }
            MarkerKind::End => {
                if let Some((thread, start, name)) = self.open.remove(&m.id) {
                    self.ranges.push(Range {
                        thread,
                        start,
                        end: m.time.max(start),
                        name,
                    });
                }
            }
            _ => {}
        }
    }
}
