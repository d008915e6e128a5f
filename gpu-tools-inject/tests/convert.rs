//! CUPTI activity records converted to owned trace records (`convert::TraceConverter`) and streamed in the trace
//! format, as the injection library does: the activity tracer runs against the CUPTI double, its closure
//! converts and encodes every batch, and the decoded stream must hold every field the double wrote.

mod common;

use std::sync::{Arc, Mutex};

use common::{double, serial};
use gpu_tools::cupti::activity::{ActivityKinds, ActivityTracer};
use gpu_tools::cupti::{DriverCbid, RuntimeCbid};
use gpu_tools::trace::*;
use gpu_tools_inject::convert::TraceConverter;

const CONCURRENT_KERNEL: u32 = 10;
const DRIVER: u32 = 4;
const RUNTIME: u32 = 5;

#[test]
fn every_record_kind_the_trace_carries_survives_conversion_and_the_wire() {
    let _serial = serial();
    let d = double();
    let wire = Arc::new(Mutex::new(Vec::<u8>::new()));
    let skipped = Arc::new(Mutex::new(0u64));
    let header = StreamHeader::new(4242, 130_001, TimestampClock::Monotonic);
    let mut encoder = Encoder::new(&header);
    wire.lock().unwrap().extend_from_slice(encoder.bytes());
    encoder.clear();
    let mut converter = TraceConverter::new();
    let (w, s) = (Arc::clone(&wire), Arc::clone(&skipped));
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::gpu_trace())
        .buffer_size(4096)
        .max_buffers(4)
        .start(move |batch| {
            for record in batch.records() {
                match record.ok().and_then(|a| converter.convert(&a)) {
                    Some(r) => encoder.push(&r),
                    None => *s.lock().unwrap() += 1,
                }
            }
            w.lock().unwrap().extend_from_slice(encoder.bytes());
            encoder.clear();
        })
        .expect("tracer on the double");
    let t0 = 1_000;
    for (i, name) in [c"_Z6kernelPfi", c"_Z6kernelPfi", c"other"]
        .iter()
        .enumerate()
    {
        let start = t0 + 1000 * i as u64;
        assert_eq!(
            d.kernel(
                CONCURRENT_KERNEL,
                start,
                start + 500,
                (0, 1, 7),
                11 + i as u32,
                name,
                (4, 2, 1),
                (128, 1, 1)
            ),
            1
        );
    }
    assert_eq!(d.memcpy(1, true, 4096, 5000, 5100, 7, 20), 1);
    assert_eq!(d.memcpy(2, false, 8192, 5200, 5300, 8, 21), 1);
    assert_eq!(d.memset(0xab, 1 << 20, 5400, 5500, 7, 22), 1);
    assert_eq!(
        d.api(DRIVER, DriverCbid::LAUNCH_KERNEL.id(), 900, 950, 77, 11, 0),
        1
    );
    assert_eq!(
        d.api(
            RUNTIME,
            RuntimeCbid::LAUNCH_KERNEL.id(),
            890,
            960,
            77,
            10,
            3
        ),
        1
    );
    assert_eq!(d.sync(4, 2000, 3000, 16, u32::MAX, u32::MAX), 1);
    assert_eq!(d.overhead(65536, 2, [4242, 77, 0], 5, 6, 0), 1);
    let report = tracer.stop().expect("stop");
    assert!(report.panic.is_none());
    assert_eq!(
        *skipped.lock().unwrap(),
        0,
        "every kind written here is carried"
    );

    let bytes = wire.lock().unwrap().clone();
    let mut reader = StreamReader::new(bytes.as_slice());
    let records: Vec<Record> = reader.by_ref().map(|r| r.expect("valid stream")).collect();
    assert_eq!(reader.header(), Some(&header));
    let kernels: Vec<&KernelRecord> = records
        .iter()
        .filter_map(|r| match r {
            Record::Kernel(k) => Some(k),
            _ => None,
        })
        .collect();
    assert_eq!(kernels.len(), 3);
    assert_eq!(
        *kernels[0],
        KernelRecord {
            start: t0,
            end: t0 + 500,
            device: 0,
            context: 1,
            stream: 7,
            correlation: 11,
            grid_id: kernels[0].grid_id,
            grid: [4, 2, 1],
            block: [128, 1, 1],
            static_shared: kernels[0].static_shared,
            dynamic_shared: kernels[0].dynamic_shared,
            registers: kernels[0].registers,
            graph_id: 0,
            graph_node_id: 0,
            name: Arc::from("_Z6kernelPfi"),
        }
    );
    assert!(
        Arc::ptr_eq(&kernels[0].name, &kernels[1].name),
        "a name decodes to one allocation"
    );
    assert_eq!(&*kernels[2].name, "other");
    let copies: Vec<(CopyKind, u64, bool, u32, MemoryKind, MemoryKind)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Memcpy(m) => Some((m.kind, m.bytes, m.is_async, m.stream, m.src, m.dst)),
            _ => None,
        })
        .collect();
    assert_eq!(
        copies,
        [
            (
                CopyKind::HtoD,
                4096,
                true,
                7,
                MemoryKind::Pinned,
                MemoryKind::Device
            ),
            (
                CopyKind::DtoH,
                8192,
                false,
                8,
                MemoryKind::Device,
                MemoryKind::Pageable
            ),
        ]
    );
    let set = records
        .iter()
        .find_map(|r| match r {
            Record::Memset(m) => Some(m),
            _ => None,
        })
        .expect("memset");
    assert_eq!(
        (set.value, set.bytes, set.stream, set.correlation),
        (0xab, 1 << 20, 7, 22)
    );
    let apis: Vec<(ApiDomain, &str, u32, u32, u32, u32)> = records
        .iter()
        .filter_map(|r| match r {
            Record::Api(a) => Some((
                a.domain,
                &*a.name,
                a.correlation,
                a.thread,
                a.process,
                a.return_value,
            )),
            _ => None,
        })
        .collect();
    assert_eq!(
        apis,
        [
            (ApiDomain::Driver, "cuLaunchKernel", 11, 77, 4242, 0),
            (ApiDomain::Runtime, "cudaLaunchKernel", 10, 77, 4242, 3),
        ]
    );
    let sync = records
        .iter()
        .find_map(|r| match r {
            Record::Synchronization(s) => Some(s),
            _ => None,
        })
        .expect("sync");
    assert_eq!(
        (
            sync.kind,
            sync.stream,
            sync.event,
            sync.correlation,
            sync.start,
            sync.end
        ),
        (
            SyncKind::ContextSynchronize,
            u32::MAX,
            u32::MAX,
            16,
            2000,
            3000
        )
    );
    let overhead = records
        .iter()
        .find_map(|r| match r {
            Record::Overhead(o) => Some(o),
            _ => None,
        })
        .expect("overhead");
    assert_eq!(
        (overhead.kind, overhead.object_kind, overhead.object_id),
        (65536, 2, (4242u64 << 32) | 77)
    );
}

#[test]
fn the_converter_is_send_and_sync() {
    fn both<T: Send + Sync>() {}
    both::<TraceConverter>();
}
