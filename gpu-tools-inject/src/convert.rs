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
///
/// [`convert_ref`](Self::convert_ref) is the writer's form: it keeps the last record of each kernel name and of
/// each API function, rewrites it in place and lends it, so a record touches no reference count (cloning and
/// dropping a shared name costs two atomic operations, a fifth of the record path before this form).
#[derive(Debug)]
pub struct TraceConverter {
    names: NameTable,
    /// The last record of each kernel, by the address of CUPTI's name string.
    kernels: KernelSlots,
    /// The last record of each API function, by (domain, callback id): driver ids at even slots, runtime ids at
    /// odd ones. Each keeps its function's name, so an API record needs no string lookup.
    functions: Vec<Option<Record>>,
    /// The last record of any other kind (or of a function past the table).
    other: Option<Record>,
}

impl Default for TraceConverter {
    fn default() -> Self {
        TraceConverter {
            names: NameTable::new(),
            kernels: KernelSlots {
                slots: std::iter::repeat_with(|| None)
                    .take(KernelSlots::SLOTS)
                    .collect(),
            },
            functions: Vec::new(),
            other: None,
        }
    }
}

/// Callback ids past this (both domains) are looked up by name each time; CUPTI 13.0's highest is under 1,000.
const FUNCTION_SLOTS: usize = 1 << 12;

impl TraceConverter {
    /// A converter with no names yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The owned record of `activity`, or `None` for kinds the trace format does not carry (contexts, streams,
    /// devices, names, external correlation, memory, and unknown kinds).
    pub fn convert(&mut self, activity: &Activity<'_>) -> Option<Record> {
        self.convert_ref(activity).cloned()
    }

    /// What [`convert`](Self::convert) returns, lent: valid until the next call.
    pub fn convert_ref(&mut self, activity: &Activity<'_>) -> Option<&Record> {
        let record = match activity {
            Activity::Kernel(k) => return Some(self.kernels.rewrite(&mut self.names, k)),
            Activity::Api(a) => return Some(self.api(a)),
            Activity::Memcpy(m) => Record::Memcpy(memcpy(m)),
            Activity::PeerCopy(p) => Record::Memcpy(peer_copy(p)),
            Activity::Memset(m) => Record::Memset(memset(m)),
            Activity::Synchronization(s) => Record::Synchronization(synchronization(s)),
            Activity::Overhead(o) => Record::Overhead(overhead(o)),
            Activity::GraphTrace(g) => Record::GraphLaunch(graph_launch(g)),
            Activity::Marker(m) => Record::Marker(self.marker(m)),
            Activity::MarkerData(d) => Record::MarkerData(marker_data(d)),
            _ => return None,
        };
        Some(self.other.insert(record))
    }

    /// The API record of `a`, rewritten in its function's slot.
    fn api(&mut self, a: &ApiCall<'_>) -> &Record {
        let at = a.cbid().id() as usize * 2 + usize::from(a.domain() == ApiDomain::Runtime);
        if at >= FUNCTION_SLOTS {
            let name = self.names.intern(a.function_name().unwrap_or(""));
            return self.other.insert(Record::Api(api(a, name)));
        }
        if at >= self.functions.len() {
            self.functions.resize(at + 1, None);
        }
        let slot = &mut self.functions[at];
        // A slot's function is its callback id's: its name stays, and the rest is written over in place (moving
        // the record out and back cost more than the rest of the conversion).
        match slot {
            Some(record @ Record::Api(_)) => {
                if let Record::Api(last) = record {
                    fill_api(last, a);
                }
                record
            }
            _ => {
                let name = self.names.intern(a.function_name().unwrap_or(""));
                slot.insert(Record::Api(api(a, name)))
            }
        }
    }
}

/// The last record of each kernel, by the address of the name string CUPTI points at. CUPTI shares one string
/// among the records of one kernel, so the address finds the record without hashing the name; the text is still
/// compared, so an address reused for another name (a module unloaded and another loaded) gets its own.
#[derive(Debug)]
struct KernelSlots {
    /// Direct-mapped by address: a collision costs a lookup by text and the slot.
    slots: Vec<Option<(usize, Record)>>,
}

impl KernelSlots {
    const SLOTS: usize = 256;

    fn rewrite(&mut self, names: &mut NameTable, k: &Kernel<'_>) -> &Record {
        let (address, bytes) = match k.name() {
            Some(name) => (name.as_ptr() as usize, name.to_bytes()),
            None => (0, &b""[..]),
        };
        // Fibonacci hashing: the top byte of the product depends on every bit of the address.
        let at = (address as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 56;
        let slot = &mut self.slots[at as usize % Self::SLOTS];
        let known = matches!(slot, Some((a, Record::Kernel(last)))
            if *a == address && last.name.as_bytes() == bytes);
        if !known {
            *slot = None;
        }
        let (_, record) = slot.get_or_insert_with(|| {
            (
                address,
                Record::Kernel(kernel(k, names.intern_bytes(bytes))),
            )
        });
        // A new record is written twice, to the same values.
        if let Record::Kernel(last) = record {
            fill_kernel(last, k);
        }
        record
    }
}

fn kernel(k: &Kernel<'_>, name: Arc<str>) -> trace::KernelRecord {
    let mut record = trace::KernelRecord {
        start: 0,
        end: 0,
        device: 0,
        context: 0,
        stream: 0,
        correlation: 0,
        grid_id: 0,
        grid: [0; 3],
        block: [0; 3],
        static_shared: 0,
        dynamic_shared: 0,
        registers: 0,
        graph_id: 0,
        graph_node_id: 0,
        name,
    };
    fill_kernel(&mut record, k);
    record
}

/// Writes every field of `record` but its name from `k`. The pattern names every field, so a field added to the
/// record does not compile until it is written here.
fn fill_kernel(record: &mut trace::KernelRecord, k: &Kernel<'_>) {
    let trace::KernelRecord {
        start,
        end,
        device,
        context,
        stream,
        correlation,
        grid_id,
        grid,
        block,
        static_shared,
        dynamic_shared,
        registers,
        graph_id,
        graph_node_id,
        name: _,
    } = record;
    let t = k.time();
    let (g, b) = (k.grid(), k.block());
    (*start, *end) = (t.start, t.end);
    *device = k.device_id();
    *context = k.context_id();
    *stream = k.stream_id();
    *correlation = k.correlation_id();
    *grid_id = u64::try_from(k.grid_id()).unwrap_or(0);
    *grid = [g.x, g.y, g.z];
    *block = [b.x, b.y, b.z];
    *static_shared = k.static_shared_memory();
    *dynamic_shared = k.dynamic_shared_memory();
    *registers = k.registers_per_thread();
    *graph_id = k.graph_id();
    *graph_node_id = k.graph_node_id();
}

fn api(a: &ApiCall<'_>, name: Arc<str>) -> trace::ApiRecord {
    let mut record = trace::ApiRecord {
        start: 0,
        end: 0,
        domain: trace::ApiDomain::Driver,
        cbid: 0,
        name,
        correlation: 0,
        process: 0,
        thread: 0,
        return_value: 0,
    };
    fill_api(&mut record, a);
    record
}

/// Writes every field of `record` but its name from `a` (every field named, as in [`fill_kernel`]).
fn fill_api(record: &mut trace::ApiRecord, a: &ApiCall<'_>) {
    let trace::ApiRecord {
        start,
        end,
        domain,
        cbid,
        name: _,
        correlation,
        process,
        thread,
        return_value,
    } = record;
    let t = a.time();
    (*start, *end) = (t.start, t.end);
    *domain = match a.domain() {
        ApiDomain::Driver => trace::ApiDomain::Driver,
        ApiDomain::Runtime => trace::ApiDomain::Runtime,
    };
    *cbid = a.cbid().id();
    *correlation = a.correlation_id();
    *process = a.process_id();
    *thread = a.thread_id();
    *return_value = a.return_value();
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

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_tools::cupti::activity::{ActivityBatch, RecordLayout};
    use gpu_tools::sys::cupti as sys;

    /// CUPTI 13.0 records as CUPTI lays them out, 8-byte aligned.
    #[derive(Default)]
    struct Buffer {
        words: Vec<u64>,
        /// Where each record starts, in words.
        starts: Vec<usize>,
    }

    impl Buffer {
        fn push<T>(&mut self, record: T) {
            let size = std::mem::size_of::<T>();
            assert_eq!(size % 8, 0);
            let at = self.words.len();
            self.starts.push(at);
            self.words.resize(at + size / 8, 0);
            // SAFETY: `size` bytes were just added at word `at`; written unaligned-safe.
            unsafe {
                self.words
                    .as_mut_ptr()
                    .add(at)
                    .cast::<T>()
                    .write_unaligned(record)
            };
        }

        fn kernel(&mut self, name: *const std::ffi::c_char, correlation: u32) {
            let mut k = sys::CUpti_ActivityKernel10 {
                kind: sys::CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
                start: 100 * u64::from(correlation),
                end: 100 * u64::from(correlation) + 7,
                deviceId: correlation % 2,
                contextId: 1,
                streamId: 7 + correlation,
                correlationId: correlation,
                gridX: correlation as i32,
                gridY: 2,
                gridZ: 1,
                blockX: 128,
                blockY: 1,
                blockZ: 1,
                registersPerThread: 16 + correlation as u16,
                graphId: correlation % 3,
                graphNodeId: u64::from(correlation) << 8,
                ..Default::default()
            };
            k.name = name;
            self.push(k);
        }

        fn call(&mut self, kind: u32, cbid: u32, correlation: u32) {
            self.push(sys::CUpti_ActivityAPI {
                kind,
                cbid,
                start: 100 * u64::from(correlation) + 1,
                end: 100 * u64::from(correlation) + 3,
                processId: 4242,
                threadId: 77 + correlation,
                correlationId: correlation,
                returnValue: correlation % 2,
            });
        }

        /// Each record converted by `converter`, owned.
        fn convert_each(&self, converter: &mut TraceConverter) -> Vec<Record> {
            // SAFETY: the words are whole records; their name pointers point at strings that outlive the call.
            let batch = unsafe {
                ActivityBatch::from_raw(
                    self.words.as_ptr().cast(),
                    self.words.len() * 8,
                    RecordLayout::Cupti13_0,
                )
            };
            batch
                .records()
                .map(|r| {
                    let activity = r.expect("a whole record");
                    converter.convert_ref(&activity).cloned().expect("carried")
                })
                .collect()
        }
    }

    fn name(record: &Record) -> &str {
        match record {
            Record::Kernel(k) => &k.name,
            Record::Api(a) => &a.name,
            _ => "",
        }
    }

    #[test]
    fn records_rewritten_in_place_equal_those_converted_afresh() {
        let (a, b) = (c"_Z6kernelPfi", c"other_kernel");
        let mut buffer = Buffer::default();
        let launch = sys::CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000;
        let copy = sys::CUPTI_RUNTIME_TRACE_CBID_cudaMemcpyAsync_v3020;
        let (runtime, driver) = (
            sys::CUPTI_ACTIVITY_KIND_RUNTIME,
            sys::CUPTI_ACTIVITY_KIND_DRIVER,
        );
        buffer.kernel(a.as_ptr(), 1);
        buffer.call(runtime, launch, 2);
        buffer.call(driver, sys::CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, 3);
        buffer.kernel(b.as_ptr(), 4);
        buffer.kernel(a.as_ptr(), 5);
        buffer.call(runtime, copy, 6);
        buffer.call(runtime, launch, 7);
        buffer.kernel(std::ptr::null(), 8);
        buffer.kernel(a.as_ptr(), 9);
        let lent = buffer.convert_each(&mut TraceConverter::new());
        let names: Vec<&str> = lent.iter().map(name).collect();
        assert_eq!(
            names,
            [
                "_Z6kernelPfi",
                "cudaLaunchKernel",
                "cuLaunchKernel",
                "other_kernel",
                "_Z6kernelPfi",
                "cudaMemcpyAsync",
                "cudaLaunchKernel",
                "",
                "_Z6kernelPfi"
            ]
        );
        // Every field is the record's own (the buffer derives each from its correlation id).
        for (i, record) in lent.iter().enumerate() {
            let c = i as u32 + 1;
            match record {
                Record::Kernel(k) => assert_eq!(
                    (k.start, k.end, k.device, k.context, k.stream, k.correlation),
                    (
                        100 * u64::from(c),
                        100 * u64::from(c) + 7,
                        c % 2,
                        1,
                        7 + c,
                        c
                    ),
                    "kernel {i}"
                ),
                Record::Api(a) => assert_eq!(
                    (
                        a.start,
                        a.end,
                        a.correlation,
                        a.process,
                        a.thread,
                        a.return_value
                    ),
                    (
                        100 * u64::from(c) + 1,
                        100 * u64::from(c) + 3,
                        c,
                        4242,
                        77 + c,
                        c % 2
                    ),
                    "call {i}"
                ),
                other => panic!("{other:?}"),
            }
            if let Record::Kernel(k) = record {
                assert_eq!(
                    (k.grid, k.block, k.registers, k.graph_id, k.graph_node_id),
                    (
                        [c, 2, 1],
                        [128, 1, 1],
                        16 + c as u16,
                        c % 3,
                        u64::from(c) << 8
                    ),
                    "kernel {i}"
                );
            }
        }
        // Each record alone, through a converter that never saw another: every field equal, so no field of an
        // earlier record in the same slot survives the rewrite.
        let ends = buffer
            .starts
            .iter()
            .skip(1)
            .copied()
            .chain([buffer.words.len()]);
        for (i, (record, (&start, end))) in
            lent.iter().zip(buffer.starts.iter().zip(ends)).enumerate()
        {
            let one = Buffer {
                words: buffer.words[start..end].to_vec(),
                starts: vec![0],
            };
            let fresh = one.convert_each(&mut TraceConverter::new());
            assert_eq!(fresh, std::slice::from_ref(record), "record {i}");
        }
    }

    #[test]
    fn a_name_string_reused_for_another_kernel_gives_that_kernel_its_name() {
        // CUPTI's string at one address, freed with its module and the address reused for another kernel's name.
        let mut text = *b"first_kernel\0";
        let mut buffer = Buffer::default();
        buffer.kernel(text.as_ptr().cast(), 1);
        let mut converter = TraceConverter::new();
        assert_eq!(
            name(&buffer.convert_each(&mut converter)[0]),
            "first_kernel"
        );
        text[..6].copy_from_slice(b"second");
        assert_eq!(
            name(&buffer.convert_each(&mut converter)[0]),
            "secondkernel"
        );
    }
}
