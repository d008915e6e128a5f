//! The buffer pool and delivery: reuse, completion on a worker thread, a full pool's drops, a panicking closure,
//! delivery at stop and drop, drops from before the tracer started.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{CONCURRENT_KERNEL, Seen, Sink, collector, records, seen, start};
use crate::common::{double, serial};
use gpu_tools::Error;
use gpu_tools::cupti::TracingError;
use gpu_tools::cupti::activity::{ActivityKinds, ActivityTracer, FlushMode, TracerReport};

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
