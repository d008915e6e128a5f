//! A record written as the tracer stops: CUPTI took a buffer for it before the tracer's kinds went off, and wrote it
//! after the stop's forced flush had found no buffer to return.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use super::{Seen, builder, kernel, start_with};
use crate::common::{double, serial};
use gpu_tools::cupti::activity::ActivityKinds;

/// The double's flush count when the writer took its buffer; whether it has taken one.
static FLUSHES_BEFORE: AtomicU64 = AtomicU64::new(0);
static TOOK_A_BUFFER: AtomicBool = AtomicBool::new(false);

/// The writing thread, holding the buffer CUPTI was lent for its record: it waits (2 s at most) until a flush came
/// after, as the stop's forced flush does, then writes.
extern "C" fn write_after_the_next_flush() {
    FLUSHES_BEFORE.store(double().stats().flushes, Ordering::SeqCst);
    TOOK_A_BUFFER.store(true, Ordering::SeqCst);
    let deadline = Instant::now() + Duration::from_secs(2);
    while double().stats().flushes == FLUSHES_BEFORE.load(Ordering::SeqCst)
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_micros(50));
    }
}

#[test]
fn a_record_written_after_the_stops_flush_into_a_buffer_taken_before_is_delivered_and_no_buffer_stays_lent()
 {
    let _serial = serial();
    let (tracer, sink) = start_with(builder(ActivityKinds::CONCURRENT_KERNEL));
    assert_eq!(kernel(1, 1_000), 1);
    // CUPTI holds no buffer now: the next record asks for one.
    assert_eq!(double().flush_forced(), 0);
    TOOK_A_BUFFER.store(false, Ordering::SeqCst);
    double().set_after_request(Some(write_after_the_next_flush));
    let writer = std::thread::spawn(|| kernel(2, 2_000));
    let deadline = Instant::now() + Duration::from_secs(10);
    while !TOOK_A_BUFFER.load(Ordering::SeqCst) {
        assert!(Instant::now() < deadline, "the writer took a buffer");
        std::thread::sleep(Duration::from_micros(50));
    }
    let report = tracer.stop().expect("the tracer stops");
    double().set_after_request(None);
    assert_eq!(writer.join().unwrap(), 1, "the record was written");
    let kernels: Vec<u32> = sink
        .lock()
        .unwrap()
        .records
        .iter()
        .filter_map(|r| match r {
            Seen::Kernel { corr, .. } => Some(*corr),
            _ => None,
        })
        .collect();
    assert_eq!(
        kernels,
        vec![1, 2],
        "each kernel delivered once, the late one too"
    );
    assert_eq!(
        report.stats.buffers_in_use, 0,
        "no buffer of the tracer's left with CUPTI (it would be completed to the next consumer's callbacks)"
    );
}
