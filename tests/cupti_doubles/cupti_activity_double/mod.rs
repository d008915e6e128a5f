//! The activity tracer against the CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`), whose records are written
//! from the header's layouts by C code: decoding of every kind the double writes, both layouts, the buffer pool,
//! dropped records, unknown kinds, panics in the closure, delivery at stop, the one-tracer rule, the clock.
#![cfg(feature = "cupti")]

mod completing;
mod contract;
mod decoding;
mod keeping;
mod lender;
mod pool;
mod stopping;

use crate::common;

use std::sync::{Arc, Mutex};

use common::double;
use gpu_tools::cupti::ApiCbid;
use gpu_tools::cupti::activity::{
    Activity, ActivityBatch, ActivityKinds, ActivityObject, ActivityTracer, ActivityTracerBuilder,
    CopyKind, MemoryKind, OverheadKind, RecordError, SyncType,
};

const KERNEL: u32 = 3;
const CONCURRENT_KERNEL: u32 = 10;
const DRIVER: u32 = 4;
const RUNTIME: u32 = 5;

/// A record as the tests compare it, copied out of the batch.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Kernel {
        name: String,
        start: u64,
        end: u64,
        ids: (u32, u32, u32),
        corr: u32,
        grid: (u32, u32, u32),
        block: (u32, u32, u32),
        device_launched: Option<bool>,
    },
    Memcpy {
        kind: CopyKind,
        bytes: u64,
        is_async: bool,
        stream: u32,
        corr: u32,
        src: MemoryKind,
        dst: MemoryKind,
        device_launched: Option<bool>,
    },
    Memset {
        value: u32,
        bytes: u64,
        stream: u32,
        corr: u32,
    },
    Api {
        cbid: ApiCbid,
        thread: u32,
        corr: u32,
        ret: u32,
    },
    Sync {
        ty: SyncType,
        stream: Option<u32>,
        event: Option<u32>,
        corr: u32,
    },
    Overhead {
        kind: OverheadKind,
        object: ActivityObject,
    },
    Unknown {
        kind: u32,
        len: usize,
    },
    Error(RecordError),
}

fn seen(r: Result<Activity<'_>, RecordError>) -> Seen {
    match r {
        Err(e) => Seen::Error(e),
        Ok(Activity::Kernel(k)) => Seen::Kernel {
            name: k
                .name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
            start: k.time().start,
            end: k.time().end,
            ids: (k.device_id(), k.context_id(), k.stream_id()),
            corr: k.correlation_id(),
            grid: (k.grid().x, k.grid().y, k.grid().z),
            block: (k.block().x, k.block().y, k.block().z),
            device_launched: k.is_device_launched(),
        },
        Ok(Activity::Memcpy(m)) => Seen::Memcpy {
            kind: m.copy_kind(),
            bytes: m.bytes(),
            is_async: m.is_async(),
            stream: m.stream_id(),
            corr: m.correlation_id(),
            src: m.src_kind(),
            dst: m.dst_kind(),
            device_launched: m.is_device_launched(),
        },
        Ok(Activity::Memset(m)) => Seen::Memset {
            value: m.value(),
            bytes: m.bytes(),
            stream: m.stream_id(),
            corr: m.correlation_id(),
        },
        Ok(Activity::Api(a)) => Seen::Api {
            cbid: a.cbid(),
            thread: a.thread_id(),
            corr: a.correlation_id(),
            ret: a.return_value(),
        },
        Ok(Activity::Synchronization(s)) => Seen::Sync {
            ty: s.sync_type(),
            stream: s.stream_id(),
            event: s.cuda_event_id(),
            corr: s.correlation_id(),
        },
        Ok(Activity::Overhead(o)) => Seen::Overhead {
            kind: o.overhead_kind(),
            object: o.object(),
        },
        Ok(Activity::Unknown { kind, bytes }) => Seen::Unknown {
            kind: kind.0,
            len: bytes.len(),
        },
        Ok(other) => panic!("the double writes no {other:?}"),
    }
}

/// Every record the tracer delivered, with the drop flags of the batches.
#[derive(Default)]
struct Collected {
    records: Vec<Seen>,
    batches: usize,
    batch_drops: u64,
    threads: Vec<std::thread::ThreadId>,
}

type Sink = Arc<Mutex<Collected>>;

fn collector() -> (
    Sink,
    impl for<'b> FnMut(&ActivityBatch<'b>) + Send + 'static,
) {
    let sink: Sink = Arc::default();
    let s = Arc::clone(&sink);
    (sink, move |batch: &ActivityBatch<'_>| {
        let mut c = s.lock().unwrap();
        c.batches += 1;
        c.batch_drops += batch.dropped_records();
        c.threads.push(std::thread::current().id());
        c.records.extend(batch.records().map(seen));
    })
}

/// Leaves the double as the other tests expect it: a tracer of `kinds` started and stopped, nothing enabled after.
fn leave_nothing_enabled(kinds: ActivityKinds) {
    let (tracer, _sink) = start(kinds);
    tracer.stop().unwrap();
    assert_eq!(double().stats().enabled_mask, 0);
}

fn start(kinds: ActivityKinds) -> (ActivityTracer, Sink) {
    start_with(builder(kinds))
}

/// The tests' tracer: small buffers, few of them.
fn builder(kinds: ActivityKinds) -> ActivityTracerBuilder {
    ActivityTracer::builder()
        .kinds(kinds)
        .buffer_size(4096)
        .max_buffers(4)
}

fn start_with(builder: ActivityTracerBuilder) -> (ActivityTracer, Sink) {
    let (sink, f) = collector();
    let tracer = builder.start(f).expect("tracer starts on the double");
    (tracer, sink)
}

fn records(sink: &Sink) -> Vec<Seen> {
    sink.lock().unwrap().records.clone()
}

/// A kernel record of CONCURRENT_KERNEL, 100 ns long, as the double writes it: 1 written, 0 dropped, -1 not enabled.
fn kernel(corr: u32, start: u64) -> i32 {
    double().kernel(
        CONCURRENT_KERNEL,
        start,
        start + 100,
        (0, 1, 7),
        corr,
        c"_Z1kv",
        (1, 1, 1),
        (32, 1, 1),
    )
}
