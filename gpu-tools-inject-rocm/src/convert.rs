//! The SDK's buffer records as the crate's owned trace records.

use std::collections::HashMap;
use std::sync::Arc;

use gpu_tools::rocprofiler_sdk::{
    Agent, ApiCall, ApiKind, CopyDirection, KernelDispatch, MemoryCopy, Record, SdkLibrary,
};
use gpu_tools::trace::{self, ApiDomain, CopyKind, MemoryKind, NameTable};

use crate::roctx::{Notes, Ranges, Source};

/// ROCTx as ranges: where they come from, the notes that name them, the ranges open.
struct Roctx {
    source: Source,
    notes: Arc<Notes>,
    ranges: Ranges,
}

/// Names and numbering kept across batches.
pub struct Converter {
    lib: &'static SdkLibrary,
    names: NameTable,
    kernels: HashMap<u64, Arc<str>>,
    operations: HashMap<(u32, i32), Arc<str>>,
    /// Agent id → the GPU's index (its HIP device ordinal).
    devices: HashMap<u64, u32>,
    /// Queue handle → small stream number, in order of first use.
    queues: HashMap<u64, u32>,
    pid: u32,
    /// Whether ROCTx calls are written as API calls (the runtime kind asks for them).
    marker_calls: bool,
    roctx: Option<Roctx>,
}

impl Converter {
    pub fn new(lib: &'static SdkLibrary, agents: &[Agent], marker_calls: bool) -> Converter {
        Converter {
            lib,
            names: NameTable::new(),
            kernels: HashMap::new(),
            operations: HashMap::new(),
            devices: agents
                .iter()
                .filter(|a| a.is_gpu())
                .map(|a| (a.id, u32::try_from(a.logical_node_type_id).unwrap_or(0)))
                .collect(),
            queues: HashMap::new(),
            pid: std::process::id(),
            marker_calls,
            roctx: None,
        }
    }

    /// Writes ROCTx ranges and marks from `source`'s records, named by `notes`.
    pub fn follow_roctx(&mut self, source: Source, notes: Arc<Notes>) {
        let domain = self.names.intern("");
        self.roctx = Some(Roctx {
            source,
            notes,
            ranges: Ranges::new(self.pid, domain),
        });
    }

    /// A kernel's name, as registered (the `.kd` suffix of its descriptor removed).
    pub fn kernel_symbol(&mut self, id: u64, name: &str) {
        let name = name.strip_suffix(".kd").unwrap_or(name);
        let name = self.names.intern(name);
        self.kernels.insert(id, name);
    }

    fn device(&self, agent: u64) -> u32 {
        self.devices.get(&agent).copied().unwrap_or(u32::MAX)
    }

    /// Writes the trace records of `record` to `emit`; false when there are none (a kind the format does not
    /// carry).
    pub fn convert(&mut self, record: &Record<'_>, emit: &mut dyn FnMut(trace::Record)) -> bool {
        match record {
            Record::KernelDispatch(k) => emit(self.kernel(k)),
            Record::MemoryCopy(c) => emit(self.copy(c)),
            Record::Api(a) if a.marker_call().is_some() => return self.marker_call(a, emit),
            Record::Api(a) => match self.api(a) {
                Some(r) => emit(r),
                None => return false,
            },
            Record::MarkerRange(r) => {
                return match &mut self.roctx {
                    Some(x) if x.source == Source::Ranges => {
                        let note = x.notes.take(r.correlation_id());
                        x.ranges.range(r, note, emit)
                    }
                    _ => false,
                };
            }
            _ => return false,
        }
        true
    }

    /// A ROCTx call: an API call where the runtime kind asks for them; a range's start or end, or a mark, where
    /// the ranges come from the calls. One record may be both (a call, and a range's end), never either twice.
    fn marker_call(&mut self, a: &ApiCall<'_>, emit: &mut dyn FnMut(trace::Record)) -> bool {
        let mut any = false;
        if self.marker_calls {
            if let Some(r) = self.api(a) {
                emit(r);
                any = true;
            }
        }
        if let Some(x) = self.roctx.as_mut().filter(|x| x.source == Source::Calls) {
            let note = x.notes.take(a.correlation_id());
            any |= x.ranges.call(a, note, emit);
        }
        any
    }

    /// At the end of the stream: the ranges that opened and never closed, as starts.
    pub fn finish(&mut self, emit: &mut dyn FnMut(trace::Record)) {
        let Some(x) = &mut self.roctx else { return };
        let left = x.notes.take_all();
        if x.source == Source::Ranges {
            x.ranges.never_closed(left, emit);
        }
        if x.notes.lost() > 0 {
            log::warn!(
                "{} ROCTx names were not kept (too many ranges open at once): those ranges have no name",
                x.notes.lost()
            );
        }
    }

    fn kernel(&mut self, k: &KernelDispatch<'_>) -> trace::Record {
        let next = self.queues.len() as u32;
        let stream = *self.queues.entry(k.queue_id()).or_insert(next);
        let name = match self.kernels.get(&k.kernel_id()) {
            Some(n) => Arc::clone(n),
            None => self.names.intern(&format!("kernel {}", k.kernel_id())),
        };
        trace::Record::Kernel(trace::KernelRecord {
            start: k.time().start,
            end: k.time().end,
            device: self.device(k.agent_id()),
            context: 0,
            stream,
            correlation: k.correlation_id() as u32,
            grid_id: k.dispatch_id(),
            grid: k.workgroups(),
            block: k.workgroup_size(),
            static_shared: k.group_segment_size(),
            dynamic_shared: 0,
            registers: 0,
            graph_id: 0,
            graph_node_id: 0,
            name,
        })
    }

    fn copy(&self, c: &MemoryCopy<'_>) -> trace::Record {
        let (src_agent, dst_agent) = c.agents();
        let (kind, src, dst) = match c.direction() {
            // The SDK says DEVICE_TO_DEVICE for a copy between two GPUs too; the format calls that PtoP.
            CopyDirection::DeviceToDevice if src_agent != dst_agent => {
                (CopyKind::PtoP, MemoryKind::Device, MemoryKind::Device)
            }
            CopyDirection::HostToDevice => {
                (CopyKind::HtoD, MemoryKind::Unknown, MemoryKind::Device)
            }
            CopyDirection::DeviceToHost => {
                (CopyKind::DtoH, MemoryKind::Device, MemoryKind::Unknown)
            }
            CopyDirection::DeviceToDevice => {
                (CopyKind::DtoD, MemoryKind::Device, MemoryKind::Device)
            }
            CopyDirection::HostToHost => (CopyKind::HtoH, MemoryKind::Unknown, MemoryKind::Unknown),
            _ => (CopyKind::Unknown, MemoryKind::Unknown, MemoryKind::Unknown),
        };
        let device = match kind {
            CopyKind::DtoH => self.device(src_agent),
            _ => self.device(dst_agent),
        };
        trace::Record::Memcpy(trace::MemcpyRecord {
            start: c.time().start,
            end: c.time().end,
            device,
            context: 0,
            stream: 0,
            correlation: c.correlation_id() as u32,
            bytes: c.bytes(),
            kind,
            src,
            dst,
            is_async: false,
        })
    }

    fn api(&mut self, a: &ApiCall<'_>) -> Option<trace::Record> {
        let domain = match a.api()? {
            ApiKind::Hip => ApiDomain::Hip,
            ApiKind::Hsa => ApiDomain::Hsa,
            ApiKind::Marker => ApiDomain::Marker,
            _ => return None,
        };
        let key = (a.kind(), a.operation());
        let lib = self.lib;
        let names = &mut self.names;
        let name = Arc::clone(self.operations.entry(key).or_insert_with(|| {
            names.intern(&lib.operation_name(key.0, key.1).unwrap_or_default())
        }));
        Some(trace::Record::Api(trace::ApiRecord {
            start: a.time().start,
            end: a.time().end,
            domain,
            cbid: a.operation() as u32,
            name,
            correlation: a.correlation_id() as u32,
            process: self.pid,
            thread: a.thread_id() as u32,
            return_value: 0,
        }))
    }
}
