//! The stop that keeps the program's kinds enabled for another consumer: no buffer lent after its flush, the empty
//! buffer CUPTI held, kernels still running, the hand-back.

use std::time::Duration;

use super::{Seen, Sink, kernel, leave_nothing_enabled, records, start};
use crate::common::{double, serial};
use gpu_tools::cupti::activity::ActivityKinds;

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
