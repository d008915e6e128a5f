//! The activity tracer against the CUPTI double (`gpu-tools-testing/doubles/cupti_activity.c`), whose records are written
//! from the header's layouts by C code: decoding of every kind the double writes, both layouts, the buffer pool,
//! dropped records, unknown kinds, panics in the closure, delivery at stop, the one-tracer rule, the clock.
#![cfg(feature = "cupti")]

use crate::common;

use std::ffi::CString;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{double, serial};
use gpu_tools::Error;
use gpu_tools::cupti::activity::{
    Activity, ActivityBatch, ActivityKind, ActivityKinds, ActivityObject, ActivityTracer,
    ActivityTracerBuilder, Clock, CopyKind, FlushMode, MemoryKind, OverheadKind, RecordError,
    RecordLayout, SyncType, TracerReport,
};
use gpu_tools::cupti::{ApiCbid, ApiDomain, DriverCbid, RuntimeCbid, TracingError};

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

#[test]
fn every_kind_the_double_writes_decodes_with_its_fields() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::gpu_trace());
    assert_eq!(tracer.layout(), RecordLayout::Cupti13_0);
    assert_eq!(tracer.cupti_version(), 130_001);
    let launch = DriverCbid::LAUNCH_KERNEL.id();
    let t0 = 1_000;
    assert_eq!(
        d.kernel(
            CONCURRENT_KERNEL,
            t0,
            t0 + 500,
            (0, 1, 7),
            11,
            c"_Z6kernelPfi",
            (4, 2, 1),
            (128, 1, 1)
        ),
        1
    );
    assert_eq!(d.memcpy(1, true, 4096, t0 + 600, t0 + 700, 7, 12), 1);
    assert_eq!(d.memcpy(2, false, 8192, t0 + 800, t0 + 900, 8, 13), 1);
    assert_eq!(d.memset(0xab, 1 << 20, t0 + 950, t0 + 990, 7, 14), 1);
    assert_eq!(d.api(DRIVER, launch, 900, 950, 77, 11, 0), 1);
    assert_eq!(
        d.api(
            RUNTIME,
            RuntimeCbid::LAUNCH_KERNEL.id(),
            890,
            960,
            77,
            10,
            0
        ),
        1
    );
    assert_eq!(d.sync(3, 1000, 2000, 15, 7, u32::MAX), 1);
    assert_eq!(d.sync(4, 2000, 3000, 16, u32::MAX, u32::MAX), 1);
    assert_eq!(d.overhead(65536, 2, [4242, 77, 0], 5, 6, 0), 1);
    tracer.flush_all(FlushMode::Completed).expect("flush");
    let got = records(&sink);
    assert_eq!(
        got,
        vec![
            Seen::Kernel {
                name: "_Z6kernelPfi".into(),
                start: t0,
                end: t0 + 500,
                ids: (0, 1, 7),
                corr: 11,
                grid: (4, 2, 1),
                block: (128, 1, 1),
                device_launched: Some(true),
            },
            Seen::Memcpy {
                kind: CopyKind::HtoD,
                bytes: 4096,
                is_async: true,
                stream: 7,
                corr: 12,
                src: MemoryKind::Pinned,
                dst: MemoryKind::Device,
                device_launched: Some(false),
            },
            Seen::Memcpy {
                kind: CopyKind::DtoH,
                bytes: 8192,
                is_async: false,
                stream: 8,
                corr: 13,
                src: MemoryKind::Device,
                dst: MemoryKind::Pageable,
                device_launched: Some(false),
            },
            Seen::Memset {
                value: 0xab,
                bytes: 1 << 20,
                stream: 7,
                corr: 14,
            },
            Seen::Api {
                cbid: ApiCbid::Driver(DriverCbid::LAUNCH_KERNEL),
                thread: 77,
                corr: 11,
                ret: 0,
            },
            Seen::Api {
                cbid: ApiCbid::Runtime(RuntimeCbid::LAUNCH_KERNEL),
                thread: 77,
                corr: 10,
                ret: 0,
            },
            Seen::Sync {
                ty: SyncType::StreamSynchronize,
                stream: Some(7),
                event: None,
                corr: 15,
            },
            Seen::Sync {
                ty: SyncType::ContextSynchronize,
                stream: None,
                event: None,
                corr: 16,
            },
            Seen::Overhead {
                kind: OverheadKind::CuptiBufferFlush,
                object: ActivityObject::Thread { pid: 4242, tid: 77 },
            },
        ]
    );
    // The API record names its function from the header.
    if let Seen::Api { cbid, .. } = &got[4] {
        assert_eq!(cbid.function_name(), Some("cuLaunchKernel"));
        assert_eq!(cbid.domain(), ApiDomain::Driver);
    }
    let report = tracer.stop().expect("stop");
    assert_eq!(report.stats.records, 9);
    assert!(report.dropped.is_empty());
    assert_eq!(report.panic, None);
}

#[test]
fn kinds_are_enabled_and_disabled_with_the_tracer() {
    let _serial = serial();
    let d = double();
    let kinds = ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMSET;
    let (tracer, _sink) = start(kinds);
    assert_eq!(d.stats().enabled_mask, kinds.bits());
    assert_eq!(tracer.kinds(), kinds);
    // A kind not enabled is not recorded.
    assert_eq!(d.memcpy(1, false, 1, 1, 2, 0, 1), -1);
    tracer.stop().unwrap();
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn stop_keeping_leaves_the_kept_kinds_enabled_and_lends_no_buffer_after_the_flush() {
    let _serial = serial();
    let d = double();
    let kinds = ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMSET;
    let (tracer, sink) = start(kinds);
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    let report = tracer.stop_keeping(ActivityKinds::MEMSET).unwrap();
    assert_eq!(d.stats().enabled_mask, ActivityKinds::MEMSET.bits());
    assert_eq!(
        report.stats.buffers_in_use, 0,
        "every lent buffer came back"
    );
    assert_eq!(report.stats.dropped_records, 0);
    assert_eq!(report.dropped_after_stop, 0);
    assert_eq!(
        records(&sink).len(),
        1,
        "the record before the stop was delivered"
    );
    // The kept kind still records, but the tracer lends no buffer any more: CUPTI drops and counts.
    let dropped_before = d.stats().dropped_total;
    assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 0);
    assert_eq!(d.stats().dropped_total, dropped_before + 1);
    assert_eq!(records(&sink).len(), 1);
    leave_nothing_enabled(ActivityKinds::MEMSET);
}

/// CUPTI asks for a buffer right after a flush completes one, and keeps it across forced flushes while it is empty
/// (CUPTI 13.0): a stop that keeps kinds waits for a kept kind to write into it, flushes it back, and lends none
/// after (left lent, it went to the other consumer, which passed over it and, as Kineto, stopped flushing).
#[test]
fn a_stop_keeping_kinds_takes_back_the_empty_buffer_cupti_held_once_it_fills() {
    let _serial = serial();
    let d = double();
    d.set_empty_buffer_kept(true);
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    // The kept kind records again once the stop waits for the buffer CUPTI holds: after its final flush and the
    // first of those it makes while it waits (2 ms apart, 50 ms at most). Started by the flushes, not by a sleep,
    // which under valgrind on a loaded machine could outlast the wait.
    let before = d.stats().flushes;
    let later = std::thread::spawn(move || {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while double().stats().flushes < before + 2 && std::time::Instant::now() < deadline {
            std::thread::yield_now();
        }
        double().memset(2, 1, 1, 2, 0, 2)
    });
    let report = tracer.stop_keeping(ActivityKinds::MEMSET);
    let written = later.join().unwrap();
    d.set_empty_buffer_kept(false);
    let report = report.unwrap();
    assert_eq!(written, 1, "written into the buffer CUPTI held");
    assert_eq!(report.stats.buffers_in_use, 0, "the buffer came back");
    assert_eq!(records(&sink).len(), 2, "both records delivered");
    leave_nothing_enabled(ActivityKinds::MEMSET);
}

/// The kernel records the sink holds, as (correlation id, start).
fn kernel_starts(sink: &Sink) -> Vec<(u32, u64)> {
    records(sink)
        .iter()
        .filter_map(|r| match r {
            Seen::Kernel { corr, start, .. } => Some((*corr, *start)),
            _ => None,
        })
        .collect()
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

/// A stop that keeps kinds for another consumer lets kernels still running end, within its bound, before it forces
/// CUPTI's buffers out: forced at once, CUPTI hands their records out incomplete and never completes them (on an
/// H200, 44 kernels of a torch.profiler cycle so lost at a window's end).
#[test]
fn a_stop_keeping_kinds_lets_running_kernels_end_before_it_forces_the_buffers_out() {
    let _serial = serial();
    let d = double();
    let kinds = ActivityKinds::CONCURRENT_KERNEL;
    // Kernel 2 still runs at the stop, and ends 5 ms into it.
    let (tracer, sink) = start(kinds);
    assert_eq!(kernel(1, 1_000), 1);
    d.set_in_flight(true);
    assert_eq!(kernel(2, 2_000), 1);
    d.set_in_flight(false);
    let lands = std::thread::spawn(|| {
        std::thread::sleep(Duration::from_millis(5));
        double().land();
    });
    let report = tracer.stop_keeping(kinds).unwrap();
    lands.join().unwrap();
    assert_eq!(report.stats.buffers_in_use, 0);
    assert_eq!(
        kernel_starts(&sink),
        vec![(1, 1_000), (2, 2_000)],
        "both complete"
    );
    // Kernel 3 runs past the stop's bound: forced out, incomplete, as before.
    let (tracer, sink) = start(kinds);
    d.set_in_flight(true);
    assert_eq!(kernel(3, 3_000), 1);
    d.set_in_flight(false);
    let report = tracer.stop_keeping(kinds).unwrap();
    assert_eq!(report.stats.buffers_in_use, 0);
    assert_eq!(kernel_starts(&sink), vec![(3, 0)], "forced out incomplete");
    // A stop that keeps nothing forces at once: nobody else is to get those records.
    let (tracer, sink) = start(kinds);
    d.set_in_flight(true);
    assert_eq!(kernel(4, 4_000), 1);
    d.set_in_flight(false);
    tracer.stop().unwrap();
    assert_eq!(kernel_starts(&sink), vec![(4, 0)]);
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn hand_back_comes_after_the_last_flush_and_drops_until_then_are_after_the_stop() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    let mut seen_at_hand_back = None;
    let report = tracer
        .stop_keeping_then(ActivityKinds::MEMSET, || {
            // Every record made before the stop is delivered by now, and no buffer is lent.
            seen_at_hand_back = Some(records(&sink).len());
            // A record made before the other consumer's callbacks are in finds no buffer.
            assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 0);
        })
        .unwrap();
    assert_eq!(seen_at_hand_back, Some(1), "hand_back ran after the flush");
    assert_eq!(report.stats.buffers_in_use, 0);
    assert_eq!(report.stats.dropped_records, 0, "not the tracer's");
    assert_eq!(report.dropped_after_stop, 1, "counted as after the stop");
    leave_nothing_enabled(ActivityKinds::MEMSET);
}

/// Buffers the stand-in lender lent (address, size), and those that came back to the stand-in handler of unlent
/// buffers (address, valid bytes).
static LENT: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());
static CAME_BACK: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

/// A consumer's request callback: 64 KiB, 8-byte aligned.
unsafe extern "C" fn stand_in_lender(buffer: *mut *mut u8, size: *mut usize, max: *mut usize) {
    let block: &'static mut [u64] = Box::leak(vec![0u64; 8192].into_boxed_slice());
    let ptr = block.as_mut_ptr().cast::<u8>();
    LENT.lock().unwrap().push((ptr as usize, 65536));
    // SAFETY: CUPTI's request callback is given valid out-pointers for the buffer, its size and its record limit.
    unsafe {
        *buffer = ptr;
        *size = 65536;
        *max = 0;
    }
}

unsafe extern "C" fn stand_in_unlent(
    _ctx: gpu_tools::sys::cupti::CUcontext,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    CAME_BACK.lock().unwrap().push((buffer as usize, valid));
}

/// The stand-in lender and handler of unlent buffers, set while it lives (cleared however the test ends).
struct StandInLender;

impl StandInLender {
    fn set() -> Self {
        // SAFETY: both stand-ins may be called from any thread with CUPTI's arguments and never unwind; the handler
        // takes every buffer the lender lends.
        unsafe {
            gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(stand_in_unlent));
            gpu_tools::cupti::activity::set_keeping_lender(Some(stand_in_lender));
        }
        StandInLender
    }
}

impl Drop for StandInLender {
    fn drop(&mut self) {
        // SAFETY: clearing has no precondition.
        unsafe {
            gpu_tools::cupti::activity::set_unlent_buffer_handler(None);
            gpu_tools::cupti::activity::set_keeping_lender(None);
        }
    }
}

#[test]
fn a_stop_keeping_kinds_with_a_lender_drops_nothing_before_the_hand_back() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    let lender = StandInLender::set();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    assert!(
        LENT.lock().unwrap().is_empty(),
        "nothing lent while the pool serves"
    );
    let report = tracer
        .stop_keeping_then(ActivityKinds::MEMSET, || {
            // A record made before the other consumer's callbacks are in goes into a buffer of its own.
            assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 1);
            // Completed while the tracer's callbacks are still in: it comes to the handler of unlent buffers.
            assert_eq!(d.flush_forced(), 0);
        })
        .unwrap();
    drop(lender);
    assert_eq!(report.dropped_after_stop, 0, "CUPTI had a buffer");
    assert_eq!(
        records(&sink).len(),
        1,
        "the window's record is the trace's"
    );
    let lent = LENT.lock().unwrap().clone();
    let came_back = CAME_BACK.lock().unwrap().clone();
    assert_eq!(lent.len(), 1, "one buffer lent: {lent:?}");
    assert_eq!(came_back.len(), 1, "and it came back: {came_back:?}");
    assert_eq!(came_back[0].0, lent[0].0);
    assert!(came_back[0].1 > 0, "holding the record");
    leave_nothing_enabled(ActivityKinds::MEMSET);
}

/// A buffer the keeping lender gave CUPTI during a stop is counted as held, up to a mark taken before, until CUPTI
/// completes it: a kernel still running keeps it in CUPTI through flushes without force (so whoever gives the other
/// consumer its callbacks back can wait for its records to be whole), and the next buffer, lent after the mark, is
/// not counted against it.
#[test]
fn buffers_of_the_keeping_lender_are_held_until_cupti_completes_them() {
    use gpu_tools::cupti::activity::{held_for_keeping, keeping_mark};
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    let lender = StandInLender::set();
    let kinds = ActivityKinds::CONCURRENT_KERNEL;
    let (tracer, _sink) = start(kinds);
    assert_eq!(kernel(1, 1_000), 1);
    let mut seen = Vec::new();
    tracer
        .stop_keeping_then(kinds, || {
            // The pool is closed: the kernel still running goes into a buffer of the lender's.
            d.set_in_flight(true);
            assert_eq!(kernel(2, 2_000), 1);
            d.set_in_flight(false);
            let mark = keeping_mark();
            seen.push(held_for_keeping(mark));
            assert_eq!(d.flush_completed(), 0);
            seen.push(held_for_keeping(mark));
            d.land();
            assert_eq!(d.flush_completed(), 0);
            seen.push(held_for_keeping(mark));
            // The next kernel takes a new buffer, lent after the mark.
            assert_eq!(kernel(3, 3_000), 1);
            seen.push(held_for_keeping(mark));
            seen.push(held_for_keeping(keeping_mark()));
            assert_eq!(d.flush_forced(), 0);
            seen.push(held_for_keeping(keeping_mark()));
            // One more, which CUPTI still holds when the other consumer's callbacks go back: completed to them
            // directly later, it never comes back here.
            assert_eq!(kernel(4, 4_000), 1);
            seen.push(held_for_keeping(keeping_mark()));
            OTHERS.lock().unwrap().clear();
            assert_eq!(
                d.record_as_another_consumer(
                    CONCURRENT_KERNEL,
                    stand_in_lender,
                    other_consumer_complete
                ),
                (0, 0)
            );
        })
        .unwrap();
    assert_eq!(
        held_for_keeping(keeping_mark()),
        0,
        "not waited for once the lending ended"
    );
    drop(lender);
    assert_eq!(
        seen,
        vec![1, 1, 0, 0, 1, 0, 1],
        "held through the default flush while its kernel ran, back once it ended; the next one after the mark"
    );
    let lent = LENT.lock().unwrap().clone();
    let came_back = CAME_BACK.lock().unwrap().clone();
    assert_eq!(lent.len(), 3, "{lent:?}");
    assert_eq!(came_back.len(), 2, "{came_back:?}");
    // The third goes to the other consumer at its flush.
    assert_eq!(d.flush_forced(), 0);
    let others = OTHERS.lock().unwrap().clone();
    assert_eq!(others.len(), 1, "{others:?}");
    assert_eq!(others[0].0, lent[2].0);
    leave_nothing_enabled(kinds);
}

/// CUPTI reads its request callback, then calls it without its lock: a request that reached the tracer's callback
/// after the other consumer's callbacks went in (the stop's end) still gets a buffer, from the lender, as long as
/// the lender is set; refused, CUPTI dropped the record (seen with the double's launching thread beside a stop).
#[test]
fn a_request_that_reaches_the_tracer_after_a_keeping_stop_gets_a_buffer_of_the_lender() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    let lender = StandInLender::set();
    let kinds = ActivityKinds::CONCURRENT_KERNEL;
    let (tracer, _sink) = start(kinds);
    let late = d.current_request().expect("the tracer's request callback");
    tracer
        .stop_keeping_then(kinds, || {
            assert_eq!(
                d.record_as_another_consumer(
                    CONCURRENT_KERNEL,
                    stand_in_lender,
                    other_consumer_complete
                ),
                (0, 0)
            );
        })
        .unwrap();
    let ask = || {
        let (mut buffer, mut size, mut max) = (std::ptr::null_mut::<u8>(), 0usize, 0usize);
        // SAFETY: the tracer's request callback, called as CUPTI calls it, with valid out-pointers.
        unsafe { late(&mut buffer, &mut size, &mut max) };
        (buffer as usize, size)
    };
    let (buffer, size) = ask();
    assert!(
        buffer != 0 && size == 65536,
        "lent by the lender: {buffer:#x} {size}"
    );
    assert_eq!(LENT.lock().unwrap().last().map(|l| l.0), Some(buffer));
    drop(lender);
    assert_eq!(ask(), (0, 0), "none once the lender is cleared");
    leave_nothing_enabled(kinds);
}

/// Buffers another consumer got back through its own completion callback (address, valid bytes).
static OTHERS: Mutex<Vec<(usize, usize)>> = Mutex::new(Vec::new());

unsafe extern "C" fn other_consumer_complete(
    _ctx: *mut std::ffi::c_void,
    _stream: u32,
    buffer: *mut u8,
    _size: usize,
    valid: usize,
) {
    OTHERS.lock().unwrap().push((buffer as usize, valid));
}

#[test]
fn a_tracer_told_to_flush_first_gives_another_consumer_what_cupti_holds_for_it_first() {
    let _serial = serial();
    let d = double();
    LENT.lock().unwrap().clear();
    CAME_BACK.lock().unwrap().clear();
    OTHERS.lock().unwrap().clear();
    // Another consumer records sets into a buffer of its own, which CUPTI holds.
    assert_eq!(
        d.record_as_another_consumer(2, stand_in_lender, other_consumer_complete),
        (0, 0)
    );
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 1);
    assert!(OTHERS.lock().unwrap().is_empty());
    // SAFETY: the stand-in may be called from any thread with CUPTI's arguments and never unwinds.
    unsafe { gpu_tools::cupti::activity::set_unlent_buffer_handler(Some(stand_in_unlent)) };
    let (tracer, sink) = start_with(builder(ActivityKinds::MEMSET).flush_before_start(true));
    // Its buffer went back to it through its own callback, before the tracer's callbacks and clock went in.
    let others = OTHERS.lock().unwrap().clone();
    assert_eq!(others.len(), 1, "{others:?}");
    assert!(others[0].1 > 0, "with its record");
    assert!(
        CAME_BACK.lock().unwrap().is_empty(),
        "not through the tracer"
    );
    assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 1);
    tracer.stop().unwrap();
    // SAFETY: clearing has no precondition.
    unsafe { gpu_tools::cupti::activity::set_unlent_buffer_handler(None) };
    assert_eq!(records(&sink).len(), 1, "the trace has its own record only");
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn drops_before_a_tracer_starts_are_not_reported_as_its_own() {
    let _serial = serial();
    let d = double();
    // A first tracer stops leaving MEMSET enabled, and nobody lends CUPTI a buffer: CUPTI drops and counts.
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop_keeping(ActivityKinds::MEMSET).unwrap();
    assert_eq!(d.memset(1, 1, 1, 2, 0, 1), 0);
    assert_eq!(d.memset(2, 1, 1, 2, 0, 2), 0);
    // The next tracer reads those drops as it starts, apart from its own.
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    assert_eq!(tracer.dropped_before_start(), 2);
    assert_eq!(d.memset(3, 1, 1, 2, 0, 3), 1);
    let report = tracer.stop().unwrap();
    assert_eq!(report.dropped_before_start, 2);
    assert_eq!(report.stats.dropped_records, 0);
    assert!(report.dropped.is_empty());
    assert_eq!(records(&sink).len(), 1);
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn cupti_12_9_buffers_use_kernel9_and_no_device_launch_flag() {
    let _serial = serial();
    let d = double();
    d.set_version(28);
    let (tracer, sink) = start(ActivityKinds::CONCURRENT_KERNEL | ActivityKinds::MEMCPY);
    assert_eq!(tracer.layout(), RecordLayout::Cupti12_9);
    for i in 0..3 {
        d.kernel(
            CONCURRENT_KERNEL,
            10 * i,
            10 * i + 5,
            (0, 1, 2),
            100 + i as u32,
            c"k9",
            (1, 1, 1),
            (32, 1, 1),
        );
    }
    d.memcpy(8, true, 64, 50, 60, 2, 200);
    let report = tracer.stop().unwrap();
    let got = records(&sink);
    assert_eq!(got.len(), 4, "{got:?}");
    // Three 208-byte kernels and a 96-byte memcpy: the walk stepped by the 12.9 sizes.
    assert_eq!(report.stats.bytes, 3 * 208 + 96);
    for (i, r) in got[..3].iter().enumerate() {
        match r {
            Seen::Kernel {
                corr,
                device_launched,
                name,
                ..
            } => {
                assert_eq!(*corr, 100 + i as u32);
                assert_eq!(*device_launched, None, "12.9 kernels have no such field");
                assert_eq!(name, "k9");
            }
            other => panic!("{other:?}"),
        }
    }
    assert!(matches!(
        got[3],
        Seen::Memcpy {
            kind: CopyKind::DtoD,
            device_launched: None,
            ..
        }
    ));
}

#[test]
fn the_pool_reuses_buffers_and_every_record_arrives_once() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    let before = d.stats();
    // 4096-byte buffers hold 46 memsets of 88 bytes; 1000 records fill about 22 buffers.
    for i in 0..1000u32 {
        assert_eq!(d.memset(i, u64::from(i), 1, 2, 0, i), 1);
    }
    let report = tracer.stop().unwrap();
    let after = d.stats();
    let got = records(&sink);
    assert_eq!(got.len(), 1000);
    // Each record once, in order.
    for (i, r) in got.iter().enumerate() {
        assert_eq!(
            *r,
            Seen::Memset {
                value: i as u32,
                bytes: i as u64,
                stream: 0,
                corr: i as u32
            }
        );
    }
    assert_eq!(report.stats.records, 1000);
    assert_eq!(report.stats.bytes, 1000 * 88);
    assert!(report.stats.batches >= 21, "{report:?}");
    // Buffers came back and were lent again: far fewer allocated than handed over.
    assert!(report.stats.buffers_made <= 2, "{report:?}");
    assert_eq!(report.stats.buffers_refused, 0);
    assert_eq!(report.stats.buffers_in_use, 0, "every buffer came back");
    assert_eq!(after.dropped_total, before.dropped_total);
    assert_eq!(after.records - before.records, 1000);
}

#[test]
fn buffers_completed_on_a_worker_thread_reach_the_closure_there() {
    let _serial = serial();
    let d = double();
    d.set_async(true);
    let (sink, f) = collector();
    // Enough buffers for all 500 records (11 buffers), however slowly the worker hands them back.
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .buffer_size(4096)
        .max_buffers(16)
        .start(f)
        .unwrap();
    for i in 0..500u32 {
        assert_eq!(d.memset(i, 8, 1, 2, 0, i), 1);
    }
    let report = tracer.stop().unwrap();
    d.set_async(false);
    let c = sink.lock().unwrap();
    assert_eq!(c.records.len(), 500);
    let here = std::thread::current().id();
    assert!(
        c.threads.iter().any(|t| *t != here),
        "some batches came from the worker"
    );
    assert_eq!(
        *c.threads.last().unwrap(),
        here,
        "the last partial buffer came with the forced flush, on the stopping thread"
    );
    assert_eq!(report.stats.buffers_in_use, 0);
}

#[test]
fn a_full_pool_drops_records_and_the_drops_are_reported() {
    let _serial = serial();
    let d = double();
    d.set_async(true);
    let (release_tx, release_rx) = mpsc::channel::<()>();
    let release_rx = Mutex::new(release_rx);
    let sink: Sink = Arc::default();
    let s = Arc::clone(&sink);
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .buffer_size(1024)
        .max_buffers(1)
        .start(move |batch| {
            // The first batch holds the worker until the test lets it go: the one buffer stays lent.
            let mut c = s.lock().unwrap();
            if c.batches == 0 {
                drop(c);
                let _ = release_rx
                    .lock()
                    .unwrap()
                    .recv_timeout(Duration::from_secs(10));
                c = s.lock().unwrap();
            }
            c.batches += 1;
            c.batch_drops += batch.dropped_records();
            c.records.extend(batch.records().map(seen));
        })
        .unwrap();
    let before = d.stats();
    // 11 memsets fill the 1024-byte buffer; the 12th completes it (to the held worker) and needs another.
    let written: Vec<i32> = (0..40).map(|i| d.memset(i, 1, 1, 2, 0, i)).collect();
    let dropped = written.iter().filter(|w| **w == 0).count() as u64;
    assert_eq!(written[..11], [1; 11]);
    assert!(dropped >= 28, "{written:?}");
    release_tx.send(()).unwrap();
    // The next record gets a buffer again.
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(d.memset(99, 1, 1, 2, 0, 99), 1);
    let report: TracerReport = tracer.stop().unwrap();
    d.set_async(false);
    let after = d.stats();
    assert_eq!(after.dropped_total - before.dropped_total, dropped);
    assert_eq!(report.stats.dropped_records, dropped);
    assert_eq!(report.dropped.len(), 1);
    assert_eq!(report.dropped[0].count, dropped);
    assert_eq!(report.dropped[0].context_id, None, "the global queue");
    assert_eq!(report.dropped[0].stream_id, 0);
    assert!(report.stats.buffers_refused >= 1);
    let c = sink.lock().unwrap();
    assert_eq!(c.batch_drops, dropped, "the drops reached a batch's flag");
    assert_eq!(c.records.len() as u64, 41 - dropped);
}

#[test]
fn unknown_kinds_keep_their_bytes() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    d.memset(1, 1, 1, 2, 0, 1);
    // A kind no header defines: the walk cannot size it, so it hands over the rest of the buffer and stops.
    let mut rec = [0u64; 4];
    rec[0] = 200;
    rec[1] = 0xfeed;
    assert_eq!(d.raw(&rec), 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    assert_eq!(
        records(&sink),
        vec![
            Seen::Memset {
                value: 1,
                bytes: 1,
                stream: 0,
                corr: 1
            },
            Seen::Unknown { kind: 200, len: 32 }
        ]
    );
    tracer.stop().unwrap();
}

#[test]
fn a_newer_release_is_walked_by_the_vendor_and_unexpected_sizes_are_errors() {
    let _serial = serial();
    let d = double();
    // 13.1 is not known exactly: the tracer steps with cuptiActivityGetNextRecord and checks each size.
    d.set_version(130_100);
    // A kind above 63 bypasses the double's enable mask, as a kind newer than the header would.
    d.set_private_kind(70, 48);
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    d.memset(1, 1, 1, 2, 0, 1);
    let mut private = [0u64; 6];
    private[0] = 70;
    assert_eq!(d.raw(&private), 1);
    d.memset(2, 2, 1, 2, 0, 2);
    tracer.flush_all(FlushMode::Forced).unwrap();
    let got = records(&sink);
    assert_eq!(
        got,
        vec![
            Seen::Memset {
                value: 1,
                bytes: 1,
                stream: 0,
                corr: 1
            },
            // The vendor knows kind 70's size, so the record is handed over exactly and the walk goes on.
            Seen::Unknown { kind: 70, len: 48 },
            Seen::Memset {
                value: 2,
                bytes: 2,
                stream: 0,
                corr: 2
            },
        ]
    );
    // Now the release writes 96-byte memsets: each is an error for that record, and the walk goes on.
    d.set_private_kind(2, 96);
    let mut grown = [0u64; 12];
    grown[0] = 2;
    assert_eq!(d.raw(&grown), 1);
    assert_eq!(d.raw(&grown), 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    let got = records(&sink);
    let expected = Seen::Error(RecordError::UnexpectedSize {
        offset: 0,
        kind: ActivityKind::MEMSET,
        size: 96,
        expected: 88,
    });
    assert_eq!(got[3], expected);
    assert_eq!(
        got[4],
        Seen::Error(RecordError::UnexpectedSize {
            offset: 96,
            kind: ActivityKind::MEMSET,
            size: 96,
            expected: 88,
        })
    );
    assert_eq!(got.len(), 5);
    d.set_private_kind(0, 0);
    tracer.stop().unwrap();
}

#[test]
fn a_panicking_closure_is_reported_and_its_buffer_still_comes_back() {
    let _serial = serial();
    let d = double();
    let calls = Arc::new(Mutex::new(0u32));
    let c = Arc::clone(&calls);
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .buffer_size(1024)
        .max_buffers(1)
        .start(move |batch| {
            let mut n = c.lock().unwrap();
            *n += 1;
            if *n == 1 {
                drop(n);
                panic!("closure failed on {} records", batch.count());
            }
        })
        .unwrap();
    for i in 0..30 {
        assert_eq!(d.memset(i, 1, 1, 2, 0, i), 1, "record {i} had a buffer");
    }
    let err = tracer.flush_all(FlushMode::Forced).unwrap_err();
    assert!(
        matches!(&err, Error::Tracing(TracingError::CallbackPanicked(m)) if m == "closure failed on 11 records"),
        "{err:?}"
    );
    // Reported once.
    tracer.flush_all(FlushMode::Forced).unwrap();
    let stats = tracer.stats();
    assert_eq!(stats.callback_panics, 1);
    assert_eq!(stats.batches, 3);
    assert_eq!(
        stats.buffers_made, 1,
        "the one buffer was reused after the panic"
    );
    assert_eq!(stats.dropped_records, 0);
    let report = tracer.stop().unwrap();
    assert_eq!(report.panic, None);
    assert_eq!(*calls.lock().unwrap(), 3);
}

#[test]
fn stop_delivers_what_was_never_flushed() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::CONCURRENT_KERNEL);
    for i in 0..7 {
        d.kernel(
            CONCURRENT_KERNEL,
            i,
            i + 1,
            (0, 1, 1),
            i as u32,
            c"last",
            (1, 1, 1),
            (1, 1, 1),
        );
    }
    assert!(records(&sink).is_empty(), "nothing flushed yet");
    let report = tracer.stop().unwrap();
    assert_eq!(records(&sink).len(), 7);
    assert_eq!(report.stats.records, 7);
    assert_eq!(report.stats.buffers_in_use, 0);
    assert_eq!(ActivityTracer::orphans(), (0, 0));
}

#[test]
fn dropping_the_tracer_delivers_too() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::MEMSET);
    d.memset(5, 5, 1, 2, 0, 5);
    drop(tracer);
    assert_eq!(records(&sink).len(), 1);
    assert_eq!(d.stats().enabled_mask, 0);
}

#[test]
fn one_tracer_per_process() {
    let _serial = serial();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    let second = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .start(|_| {});
    assert!(
        matches!(second, Err(Error::Tracing(TracingError::TracerActive))),
        "{second:?}"
    );
    tracer.stop().unwrap();
    // Free again after the stop.
    let (again, _sink) = start(ActivityKinds::MEMSET);
    again.stop().unwrap();
}

#[test]
fn options_are_checked_before_cupti_is_called() {
    let _serial = serial();
    let d = double();
    let before = d.stats();
    let no_kinds = ActivityTracer::builder()
        .kinds(ActivityKinds::empty())
        .start(|_| {});
    assert!(matches!(
        no_kinds,
        Err(Error::Tracing(TracingError::NoKinds))
    ));
    let no_buffers = ActivityTracer::builder().max_buffers(0).start(|_| {});
    assert!(matches!(
        no_buffers,
        Err(Error::Tracing(TracingError::NoBuffers))
    ));
    for size in [64, 4097] {
        let bad = ActivityTracer::builder().buffer_size(size).start(|_| {});
        assert!(
            matches!(
                bad,
                Err(Error::Tracing(TracingError::BufferSize { min: 216, .. }))
            ),
            "{size}: {bad:?}"
        );
    }
    assert_eq!(d.stats().enabled_mask, before.enabled_mask);
    // None of these held the tracer slot.
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

#[test]
fn a_refused_kind_names_itself_and_undoes_the_start() {
    let _serial = serial();
    let d = double();
    d.fail_next(c"cuptiActivityEnable", 27);
    let err = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET | ActivityKinds::MEMCPY)
        .start(|_| {})
        .unwrap_err();
    match &err {
        Error::Tracing(TracingError::EnableKind { kind, error }) => {
            // Kinds are enabled in value order: MEMCPY (1) first.
            assert_eq!(*kind, ActivityKind::MEMCPY);
            assert_eq!(error.code(), 27);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        err.to_string()
            .starts_with("cuptiActivityEnable(MEMCPY) failed: CUPTI_ERROR_NOT_SUPPORTED"),
        "{err}"
    );
    assert_eq!(d.stats().enabled_mask, 0);
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

#[test]
fn a_failed_flush_names_the_call() {
    let _serial = serial();
    let d = double();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    d.fail_next(c"cuptiActivityFlushAll", 999);
    let err = tracer.flush_all(FlushMode::Completed).unwrap_err();
    assert!(
        matches!(&err, Error::Tracing(TracingError::Vendor { call: "cuptiActivityFlushAll", error }) if error.code() == 999),
        "{err:?}"
    );
    tracer.stop().unwrap();
}

#[test]
fn flushing_or_stopping_inside_the_closure_is_refused() {
    let _serial = serial();
    let d = double();
    let seen_err = Arc::new(Mutex::new(None));
    let e = Arc::clone(&seen_err);
    let inner = Arc::new(Mutex::new(None::<ActivityTracer>));
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .buffer_size(1024)
        .start(move |_batch| {
            // No tracer handle is reachable here, but a second start is: it must not reach CUPTI.
            let r = ActivityTracer::builder().start(|_| {});
            *e.lock().unwrap() = Some(format!("{:?}", r.err()));
        })
        .unwrap();
    d.memset(1, 1, 1, 2, 0, 1);
    tracer.flush_all(FlushMode::Forced).unwrap();
    assert_eq!(
        seen_err.lock().unwrap().as_deref(),
        Some("Some(Tracing(InsideCallback))")
    );
    drop(inner);
    tracer.stop().unwrap();
}

#[test]
fn timestamps_are_on_the_monotonic_clock_unless_realtime_is_asked() {
    let _serial = serial();
    let d = double();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    assert!(d.stats().timestamp_callback >= 1);
    let (before, t, after) = (
        Clock::Monotonic.now_ns(),
        d.now(),
        Clock::Monotonic.now_ns(),
    );
    assert!(before <= t && t <= after, "{before} {t} {after}");
    let own = tracer.timestamp();
    assert!(own >= t && own <= Clock::Monotonic.now_ns());
    assert_eq!(tracer.clock(), Clock::Monotonic);
    tracer.stop().unwrap();
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .clock(Clock::Realtime)
        .start(|_| {})
        .unwrap();
    let (before, t) = (Clock::Realtime.now_ns(), d.now());
    assert!(t >= before && t - before < 1_000_000_000, "{before} {t}");
    tracer.stop().unwrap();
}

#[test]
fn a_flush_period_reaches_cupti() {
    let _serial = serial();
    let d = double();
    let tracer = ActivityTracer::builder()
        .kinds(ActivityKinds::MEMSET)
        .flush_period(Duration::from_millis(250))
        .start(|_| {})
        .unwrap();
    assert_eq!(d.stats().flush_period_ms, 250);
    tracer.stop().unwrap();
}

#[test]
fn the_library_path_option_must_match_the_loaded_library() {
    let _serial = serial();
    double();
    let err = ActivityTracer::builder()
        .library_path("/nonexistent/libcupti.so.13")
        .start(|_| {})
        .unwrap_err();
    assert!(matches!(err, Error::Load(_)), "{err:?}");
    // The slot was released.
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    tracer.stop().unwrap();
}

#[test]
fn kernel_names_are_nul_terminated_strings_of_the_vendor() {
    let _serial = serial();
    let d = double();
    let (tracer, sink) = start(ActivityKinds::KERNEL);
    let long: &'static CString = Box::leak(Box::new(CString::new("x".repeat(5000)).unwrap()));
    d.kernel(
        KERNEL,
        1,
        2,
        (0, 0, 0),
        1,
        long.as_c_str(),
        (1, 1, 1),
        (1, 1, 1),
    );
    tracer.stop().unwrap();
    match &records(&sink)[0] {
        Seen::Kernel { name, .. } => assert_eq!(name.len(), 5000),
        other => panic!("{other:?}"),
    }
}

fn assert_send_sync<T: Send + Sync>() {}

#[test]
fn send_and_sync_are_decided() {
    use gpu_tools::cupti::activity::*;
    assert_send_sync::<ActivityTracer>();
    assert_send_sync::<ActivityTracerBuilder>();
    assert_send_sync::<TracerStats>();
    assert_send_sync::<TracerReport>();
    assert_send_sync::<DroppedRecords>();
    assert_send_sync::<ActivityKinds>();
    assert_send_sync::<Clock>();
    assert_send_sync::<RecordError>();
    assert_send_sync::<TracingError>();
    // Record views are read-only views of memory valid for their lifetime: shareable within the callback.
    assert_send_sync::<Activity<'static>>();
    assert_send_sync::<Kernel<'static>>();
    assert_send_sync::<Memcpy<'static>>();
    assert_send_sync::<Memset<'static>>();
    assert_send_sync::<ApiCall<'static>>();
    assert_send_sync::<Synchronization<'static>>();
    assert_send_sync::<Overhead<'static>>();
    assert_send_sync::<PeerCopy<'static>>();
    assert_send_sync::<ContextRecord<'static>>();
    assert_send_sync::<StreamRecord<'static>>();
    assert_send_sync::<DeviceRecord<'static>>();
    assert_send_sync::<NameRecord<'static>>();
    assert_send_sync::<Marker<'static>>();
    assert_send_sync::<ExternalCorrelation<'static>>();
    assert_send_sync::<MemoryRecord<'static>>();
    // Plain values.
    assert_send_sync::<ActivityKind>();
    assert_send_sync::<RecordLayout>();
    assert_send_sync::<LayoutMatch>();
    assert_send_sync::<FlushMode>();
    assert_send_sync::<TimeRange>();
    assert_send_sync::<Dim3>();
    assert_send_sync::<ActivityObject>();
    assert_send_sync::<CopyKind>();
    assert_send_sync::<MemoryKind>();
    assert_send_sync::<SyncType>();
    assert_send_sync::<OverheadKind>();
    assert_send_sync::<LaunchType>();
    assert_send_sync::<StreamFlag>();
    assert_send_sync::<MemoryOperation>();
    assert_send_sync::<gpu_tools::cupti::DriverCbid>();
    assert_send_sync::<gpu_tools::cupti::RuntimeCbid>();
    assert_send_sync::<gpu_tools::cupti::ApiCbid>();
    assert_send_sync::<gpu_tools::cupti::CuptiLibrary>();
    assert_send_sync::<gpu_tools::cupti::TracingSymbols>();
    // ActivityBatch and Records are neither (compile_fail doctests on ActivityBatch show it).
}

#[test]
fn the_tracer_says_when_its_clock_went_in_on_that_clock() {
    let _serial = serial();
    let d = double();
    let before = gpu_tools::cupti::activity::Clock::Monotonic.now_ns();
    let (tracer, _sink) = start(ActivityKinds::MEMSET);
    let after = gpu_tools::cupti::activity::Clock::Monotonic.now_ns();
    let at = tracer.clock_in_at();
    assert!(before <= at && at <= after, "{before} <= {at} <= {after}");
    // CUPTI's clock is the tracer's from that moment: a record made now is stamped after it.
    assert!(d.now() >= at, "the double reads the registered clock");
    tracer.stop().unwrap();
}
