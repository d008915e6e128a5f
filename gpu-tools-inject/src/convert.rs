//! From CUPTI's borrowed activity records to the owned trace records of `gpu_tools::trace`, which the writer
//! encodes and streams to the tracer (the rocprofiler-sdk counterpart is `gpu-tools-inject-rocm`'s `convert`).
//! Public in the `rlib` for the converter's test and bench; the `cdylib` exports only the entry points.

use gpu_tools::cupti::ApiDomain;
use gpu_tools::cupti::activity::{
    Activity, ActivityObject, ApiCall, CopyKind, GraphTrace, Kernel, Marker, MarkerData,
    MarkerPayloadValue, Memcpy, MemoryKind, Memset, Overhead, PeerCopy, SyncType, Synchronization,
};
use std::sync::Arc;

use gpu_tools::trace::{self, NameTable, Record};

/// Converts activity records into [`Record`]s, sharing one allocation per distinct name (kernel and function
/// names), so converting a kernel launched a million times allocates its name once.
#[derive(Debug, Default)]
pub struct TraceConverter {
    names: NameTable,
    /// API function names by (domain, callback id), so an API record needs no string lookup.
    functions: Vec<Option<Arc<str>>>,
}

impl TraceConverter {
    /// A converter with no names yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The owned record of `activity`, or `None` for kinds the trace format does not carry (contexts, streams,
    /// devices, names, external correlation, memory, and unknown kinds).
    pub fn convert(&mut self, activity: &Activity<'_>) -> Option<Record> {
        Some(match activity {
            Activity::Kernel(k) => Record::Kernel(self.kernel(k)),
            Activity::Memcpy(m) => Record::Memcpy(memcpy(m)),
            Activity::PeerCopy(p) => Record::Memcpy(peer_copy(p)),
            Activity::Memset(m) => Record::Memset(memset(m)),
            Activity::Api(a) => Record::Api(self.api(a)),
            Activity::Synchronization(s) => Record::Synchronization(synchronization(s)),
            Activity::Overhead(o) => Record::Overhead(overhead(o)),
            Activity::GraphTrace(g) => Record::GraphLaunch(graph_launch(g)),
            Activity::Marker(m) => Record::Marker(self.marker(m)),
            Activity::MarkerData(d) => Record::MarkerData(marker_data(d)),
            _ => return None,
        })
    }

    fn kernel(&mut self, k: &Kernel<'_>) -> trace::KernelRecord {
        let t = k.time();
        let (grid, block) = (k.grid(), k.block());
        trace::KernelRecord {
            start: t.start,
            end: t.end,
            device: k.device_id(),
            context: k.context_id(),
            stream: k.stream_id(),
            correlation: k.correlation_id(),
            grid_id: u64::try_from(k.grid_id()).unwrap_or(0),
            grid: [grid.x, grid.y, grid.z],
            block: [block.x, block.y, block.z],
            static_shared: k.static_shared_memory(),
            dynamic_shared: k.dynamic_shared_memory(),
            registers: k.registers_per_thread(),
            graph_id: k.graph_id(),
            graph_node_id: k.graph_node_id(),
            name: match k.name() {
                Some(n) => self.names.intern_bytes(n.to_bytes()),
                None => self.names.intern(""),
            },
        }
    }

    fn api(&mut self, a: &ApiCall<'_>) -> trace::ApiRecord {
        let t = a.time();
        trace::ApiRecord {
            start: t.start,
            end: t.end,
            domain: match a.domain() {
                ApiDomain::Driver => trace::ApiDomain::Driver,
                ApiDomain::Runtime => trace::ApiDomain::Runtime,
            },
            cbid: a.cbid().id(),
            name: self.function(a),
            correlation: a.correlation_id(),
            process: a.process_id(),
            thread: a.thread_id(),
            return_value: a.return_value(),
        }
    }
}

impl TraceConverter {
    fn marker(&mut self, m: &Marker<'_>) -> trace::MarkerRecord {
        use trace::MarkerKind as K;
        let kind = if m.is_start() {
            K::Start
        } else if m.is_end() {
            K::End
        } else if m.is_instantaneous() {
            K::Instant
        } else {
            K::Other(u8::try_from(m.raw().flags).unwrap_or(u8::MAX))
        };
        let (process, thread) = match m.object() {
            ActivityObject::Thread { pid, tid } => (pid, tid),
            ActivityObject::Process { pid } => (pid, 0),
            _ => (0, 0),
        };
        trace::MarkerRecord {
            time: m.timestamp(),
            kind,
            id: m.id(),
            process,
            thread,
            domain: match m.domain() {
                Some(d) => self.names.intern_bytes(d.to_bytes()),
                None => self.names.intern(""),
            },
            name: m
                .name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        }
    }

    /// The shared name of an API record's function, cached by callback id.
    fn function(&mut self, a: &ApiCall<'_>) -> Arc<str> {
        let cbid = a.cbid().id() as usize;
        // Driver ids at even slots, runtime ids at odd ones; ids past the table are looked up each time.
        let slot = cbid * 2 + usize::from(a.domain() == ApiDomain::Runtime);
        if slot >= 1 << 14 {
            return self.names.intern(a.function_name().unwrap_or(""));
        }
        if slot >= self.functions.len() {
            self.functions.resize(slot + 1, None);
        }
        if let Some(n) = &self.functions[slot] {
            return Arc::clone(n);
        }
        let n = self.names.intern(a.function_name().unwrap_or(""));
        self.functions[slot] = Some(Arc::clone(&n));
        n
    }
}

fn graph_launch(g: &GraphTrace<'_>) -> trace::GraphLaunchRecord {
    let t = g.time();
    trace::GraphLaunchRecord {
        start: t.start,
        end: t.end,
        device: g.device_id(),
        context: g.context_id(),
        stream: g.stream_id(),
        correlation: g.correlation_id(),
        graph_id: g.graph_id(),
        end_device: g.end_device_id(),
        end_context: g.end_context_id(),
    }
}

fn marker_data(d: &MarkerData<'_>) -> trace::MarkerData {
    use trace::MarkerPayload as P;
    trace::MarkerData {
        id: d.id(),
        color: d.color(),
        category: d.category(),
        payload: match d.payload() {
            MarkerPayloadValue::Unsigned(v) => P::Unsigned(v),
            MarkerPayloadValue::Signed(v) => P::Signed(v),
            MarkerPayloadValue::Double(v) => P::Float(v),
            // An NVTX extended payload, or a kind this crate does not know: kept raw.
            MarkerPayloadValue::Other(k, bits) => {
                P::Other(u8::try_from(k).unwrap_or(u8::MAX), bits)
            }
            // A kind the library names after this table (none today): kept raw as well.
            _ => {
                // SAFETY: every member of the union is 8 plain bytes; any bits are valid for each.
                let bits = unsafe { d.raw().payload.metricValueUint64 };
                P::Other(u8::try_from(d.raw().payloadKind).unwrap_or(u8::MAX), bits)
            }
        },
    }
}

fn copy_kind(k: CopyKind) -> trace::CopyKind {
    use trace::CopyKind as T;
    match k {
        CopyKind::HtoD => T::HtoD,
        CopyKind::DtoH => T::DtoH,
        CopyKind::HtoA => T::HtoA,
        CopyKind::AtoH => T::AtoH,
        CopyKind::AtoA => T::AtoA,
        CopyKind::AtoD => T::AtoD,
        CopyKind::DtoA => T::DtoA,
        CopyKind::DtoD => T::DtoD,
        CopyKind::HtoH => T::HtoH,
        CopyKind::PtoP => T::PtoP,
        CopyKind::Unknown(0) => T::Unknown,
        CopyKind::Unknown(c) => T::Other(c),
        // A direction the library names after this table (none today): "other", without its code.
        _ => T::Other(u8::MAX),
    }
}

fn memory_kind(k: MemoryKind) -> trace::MemoryKind {
    use trace::MemoryKind as T;
    match k {
        MemoryKind::Pageable => T::Pageable,
        MemoryKind::Pinned => T::Pinned,
        MemoryKind::Device => T::Device,
        MemoryKind::Array => T::Array,
        MemoryKind::Managed => T::Managed,
        MemoryKind::DeviceStatic => T::DeviceStatic,
        MemoryKind::ManagedStatic => T::ManagedStatic,
        MemoryKind::Unknown(0) => T::Unknown,
        // The wire carries a byte; a code past it (none in 13.0) is "other" without its value.
        MemoryKind::Unknown(c) => T::Other(u8::try_from(c).unwrap_or(u8::MAX)),
        // A kind the library names after this table (none today): "other", without its code.
        _ => T::Other(u8::MAX),
    }
}

fn memcpy(m: &Memcpy<'_>) -> trace::MemcpyRecord {
    let t = m.time();
    trace::MemcpyRecord {
        start: t.start,
        end: t.end,
        device: m.device_id(),
        context: m.context_id(),
        stream: m.stream_id(),
        correlation: m.correlation_id(),
        bytes: m.bytes(),
        kind: copy_kind(m.copy_kind()),
        src: memory_kind(m.src_kind()),
        dst: memory_kind(m.dst_kind()),
        is_async: m.is_async(),
    }
}

fn peer_copy(p: &PeerCopy<'_>) -> trace::MemcpyRecord {
    let t = p.time();
    trace::MemcpyRecord {
        start: t.start,
        end: t.end,
        device: p.device_id(),
        context: p.context_id(),
        stream: p.stream_id(),
        correlation: p.correlation_id(),
        bytes: p.bytes(),
        kind: copy_kind(p.copy_kind()),
        src: trace::MemoryKind::Device,
        dst: trace::MemoryKind::Device,
        is_async: p.is_async(),
    }
}

fn memset(m: &Memset<'_>) -> trace::MemsetRecord {
    let t = m.time();
    trace::MemsetRecord {
        start: t.start,
        end: t.end,
        device: m.device_id(),
        context: m.context_id(),
        stream: m.stream_id(),
        correlation: m.correlation_id(),
        bytes: m.bytes(),
        value: m.value(),
        memory: memory_kind(m.memory_kind()),
        is_async: m.is_async(),
    }
}

fn synchronization(s: &Synchronization<'_>) -> trace::SyncRecord {
    use trace::SyncKind as T;
    let t = s.time();
    trace::SyncRecord {
        start: t.start,
        end: t.end,
        kind: match s.sync_type() {
            SyncType::EventSynchronize => T::EventSynchronize,
            SyncType::StreamWaitEvent => T::StreamWaitEvent,
            SyncType::StreamSynchronize => T::StreamSynchronize,
            SyncType::ContextSynchronize => T::ContextSynchronize,
            SyncType::Unknown(0) => T::Unknown,
            SyncType::Unknown(c) => T::Other(u8::try_from(c).unwrap_or(u8::MAX)),
            // A type the library names after this table (none today): "other", without its code.
            _ => T::Other(u8::MAX),
        },
        context: s.context_id(),
        stream: s.stream_id().unwrap_or(u32::MAX),
        event: s.cuda_event_id().unwrap_or(u32::MAX),
        correlation: s.correlation_id(),
    }
}

fn overhead(o: &Overhead<'_>) -> trace::OverheadRecord {
    let t = o.time();
    // Object kinds as CUPTI numbers them (`CUpti_ActivityObjectKind`); the id packs what identifies the object.
    let (object_kind, object_id) = match o.object() {
        ActivityObject::Process { pid } => (1, u64::from(pid)),
        ActivityObject::Thread { pid, tid } => (2, (u64::from(pid) << 32) | u64::from(tid)),
        ActivityObject::Device { device } => (3, u64::from(device)),
        ActivityObject::Context { device, context } => {
            (4, (u64::from(device) << 32) | u64::from(context))
        }
        ActivityObject::Stream {
            context, stream, ..
        } => (5, (u64::from(context) << 32) | u64::from(stream)),
        ActivityObject::Unknown(k) => (k, 0),
        // An object the library names after this table (none today): its kind, without its id.
        _ => (o.raw().objectKind, 0),
    };
    trace::OverheadRecord {
        start: t.start,
        end: t.end,
        kind: o.raw().overheadKind,
        object_kind,
        object_id,
    }
}
